"""Which model: the known models and their fetching, loading a model onto a runtime, the GGUF
copy of the shipped model, and each model's confidence gate."""
