"""Evaluation: the Stack-Boundary and Stack-RandSpan datasets, runs over decoding modes,
reports and plots (paper 004, section VII), and the tiny model the tests decode with."""
