"""What both of vLLM's model runners' FIM processors share: the served model's tokenizer, the
checker of the batch (this process or a worker pool) and the state of one constrained request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .batch import BatchChecker, InlineChecker
from .pool import ConstraintPool
from .requests import TokenTable
from .support import SamplerSupport

if TYPE_CHECKING:
    from vllm.config import VllmConfig

#: the key of vLLM's ``additional_config`` that holds this processor's options
CONFIG_KEY = "fimconstrain"


@dataclass
class Slot:
    """A constrained request: its candidate count, its sampler's bound and how many committed
    tokens the checker has seen."""

    top_k: int
    sampler: SamplerSupport | None = None
    seen: int = 0


def load_tokenizer(vllm_config: VllmConfig):
    """The served model's tokenizer, as vLLM's model config names it (local files or cache)."""
    from transformers import AutoTokenizer

    model = vllm_config.model_config
    return AutoTokenizer.from_pretrained(
        model.tokenizer,
        revision=getattr(model, "tokenizer_revision", None),
        trust_remote_code=bool(getattr(model, "trust_remote_code", False)),
    )


def make_checker(vllm_config: VllmConfig, tokenizer) -> BatchChecker:
    """In this process, or a :class:`.pool.ConstraintPool` of ``workers`` processes."""
    options = (getattr(vllm_config, "additional_config", None) or {}).get(CONFIG_KEY, {})
    workers = int(options.get("workers", 0))
    return (
        ConstraintPool(tokenizer, workers)
        if workers > 0
        else InlineChecker(TokenTable.from_tokenizer(tokenizer))
    )
