"""The right quotient by the suffix: the suffix's plan (head and tail) and the refutation that
proves a suffix can join no middle (paper 004 §IV-B, §V-B, §VI-A).
"""
