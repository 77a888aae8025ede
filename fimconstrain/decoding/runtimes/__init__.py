"""What runs a model: the backend seam (:mod:`.backend`) and its transformers, llama.cpp, bigram
and model-server implementations."""
