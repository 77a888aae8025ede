"""Serving: the FIM constraint inside a continuously batched engine (vLLM's Model Runner V2).

:mod:`.requests` holds one request's arguments and constraint state, :mod:`.batch` checks a
batch's candidates in this process and :mod:`.pool` in worker processes that own the requests;
:mod:`.vllm_processor` is the vLLM logits processor over either. Only ``vllm_processor`` imports
vLLM, so the rest runs (and is benchmarked) without it.
"""
