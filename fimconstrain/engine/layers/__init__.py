"""Language layers over the machines: the layer protocol, the base layer, Python's layout
(INDENT/DEDENT, brackets, f-string modes) and CPython's checks beyond the grammar (paper 004 §V, §VI).
"""
