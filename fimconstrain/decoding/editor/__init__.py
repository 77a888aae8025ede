"""The editor's policy: what an editor shows at a cursor (:mod:`.policy`: one line or a block,
the items kept and typed through, the confidence gate) and the Python version a file is
completed as (:mod:`.python_version`). The language server, ``fimconstrain complete`` and the
editor benchmarks all run it, over the decode loop (:mod:`..loop`)."""
