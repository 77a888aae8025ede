"""Decoding: tokenizer vocabularies, FIM prompt formats, model loading, the token-mask store,
and the constrained decode loop over the engine's checker."""
