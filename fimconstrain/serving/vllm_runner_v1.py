"""The FIM constraint under vLLM's Model Runner V1 (its interface:
``vllm/v1/sample/logits_processor/interface.py``), which vLLM runs wherever V2 is not supported
(on a CPU, for one); :mod:`.vllm_processor` builds this class when a V1 runner loads the plugin.

How the runner drives it, and what this class does at each call:

* ``update_state(batch_update)`` before each step: requests are removed, added and moved
  between batch rows (in that order, vLLM's ``process_dict_updates``).  An added request's
  output token list is vLLM's own running list, so the committed middle is read from it at
  each step (only the tokens added since the last one).  Each request gets a key of its own for
  the checker, kept when its row moves; a removed request's constraint is dropped.
* ``apply(logits)``: row ``i`` is the request in batch row ``i``; each constrained row keeps only
  the tokens :meth:`.requests.RequestConstraint.allowed` passes, as under V2
  (:func:`.batch.constrain`; checked only as far as the request's sampler reaches).  V1 runs no
  custom processor with speculative decoding, so a row has no draft tokens.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor
from vllm.v1.sample.logits_processor.builtin import process_dict_updates

from .batch import RowQuery, constrain
from .requests import FimArgs
from .support import SamplerSupport
from .vllm_setup import Slot, load_tokenizer, make_checker

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.sampling_params import SamplingParams


@dataclass
class _Row:
    """A constrained request in a batch row: its checker key, its slot state and vLLM's running
    list of its output tokens."""

    key: int
    slot: Slot
    output: list[int]


class FimProcessorV1(LogitsProcessor):
    """Model Runner V1 logits processor for FIM requests (see the module's notes)."""

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        self.checker = make_checker(vllm_config, load_tokenizer(vllm_config))
        self.rows: dict[int, _Row] = {}
        self._keys = itertools.count()

    def is_argmax_invariant(self) -> bool:
        return False  # a mask moves the argmax

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        if batch_update is None:
            return
        before = {row.key for row in self.rows.values()}
        process_dict_updates(self.rows, batch_update, self._new_row)
        for key in before - {row.key for row in self.rows.values()}:
            self.checker.remove(key)

    def _new_row(self, params: SamplingParams, prompt: list[int] | None, output: list[int]) -> _Row | None:
        args = FimArgs.of_request(params)
        if args is None:
            return None
        key, sampler = next(self._keys), SamplerSupport.of(params)
        self.checker.add(key, args, params.all_stop_token_ids, sampler)
        return _Row(key, Slot(args.top_k, sampler), output)

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self.rows:
            return logits
        indices = sorted(i for i in self.rows if i < logits.shape[0])
        queries = []
        for i in indices:
            row = self.rows[i]
            committed = len(row.output)
            keep = min(row.slot.seen, committed)
            queries.append(RowQuery(row.key, keep, tuple(row.output[keep:committed]), (), ()))
            row.slot.seen = committed
        slots = [self.rows[i].slot for i in indices]
        index = torch.tensor(indices, device=logits.device)
        top_ks, samplers = [s.top_k for s in slots], [s.sampler for s in slots]
        logits[index] = constrain(self.checker, logits[index], queries, top_ks, samplers)
        return logits
