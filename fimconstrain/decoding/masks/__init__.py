"""The token-mask store (paper 004 §VI): built per vocabulary and grammar, cached on disk, read per step."""
