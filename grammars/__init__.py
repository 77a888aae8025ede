"""Lark grammars shipped with fimconstrain (installed as fimconstrain.grammars)."""
