"""Tokens: FIM prompt formats and the text codec, every token's bytes, the token-healing index."""
