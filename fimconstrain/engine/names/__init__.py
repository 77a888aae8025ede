"""The name providers (paper 003 §3.1): which names exist at a point of a file, for the names guide;
independent of the checker.
"""
