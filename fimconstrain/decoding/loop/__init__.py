"""The constrained decode loop (paper 004 §VII): options, the constraint, one run's steps,
ranking, the end of the middle, the names guide, and the editor's policy over it."""
