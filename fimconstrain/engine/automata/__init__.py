"""The language's machines: the grammar's integer tables, the lexer's DFA over every terminal,
and the Earley recognizer over persistent charts (paper 004 §IV, §V).
"""
