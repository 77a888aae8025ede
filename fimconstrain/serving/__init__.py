"""Serving: the FIM constraint inside a continuously batched engine (vLLM's Model Runner V2).

:mod:`.requests` holds one request's arguments and constraint state, :mod:`.batch` checks a
batch's candidates in this process and :mod:`.pool` in worker processes that own the requests;
:mod:`.vllm_processor` is the vLLM plugin, which builds the processor of the model runner that
loads it (:mod:`.vllm_runner_v1`, :mod:`.vllm_runner_v2`) over either. Only those three import
vLLM, so the rest runs (and is benchmarked) without it (``benchmarks/vllm_server.py`` starts a
vLLM server from its own environment for the tests and benchmarks).
"""
