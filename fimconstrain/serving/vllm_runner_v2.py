"""The FIM constraint under vLLM's Model Runner V2 (its interface:
``vllm/v1/worker/gpu/sample/logits_processor/interface.py``); :mod:`.vllm_processor` says what a
request carries and builds this class when a V2 runner loads the plugin.

How the worker drives it, and what this class does at each call:

* ``validate_params`` (frontend, at admission): the plugin class checks the arguments
  (:class:`.vllm_processor.VllmFimProcessor`, the class the runner loaded); a bad one fails
  the request.
* ``add_request(slot, params)``: the request enters a slot (slots are recycled: whatever the
  slot held is dropped); its checker is built in the process that owns it.  There is no remove
  call in this interface: a finished or preempted request's slot is simply reused, and a
  resumed one is added again and reads its partial output back from the token history.
* ``apply(logits, ctx)``: rows are reordered every step, so each row's request is found through
  ``ctx.expanded_idx_mapping``; the committed middle is ``all_token_ids[slot, prompt_len:
  total_len]`` (only the tokens added since the last step are read), a speculative row's draft
  tokens come from ``ctx.input_ids``, and a row that is still prefilling a chunk is skipped.
  Each row keeps only the tokens :meth:`.requests.RequestConstraint.allowed` passes (top ``k``
  candidates, else the full mask; a stop token only when the file is complete); everything else
  becomes ``-inf`` (never raised, so grammar or bad-words masks stay).  Candidates are checked
  best first only until the request's sampler (greedy, ``top_k``, ``min_p``) could
  pick none of the rest (:mod:`.support`): the sampled distribution is the whole mask's, and a
  greedy row usually costs one check.  A request that asks for log-probabilities gets the
  whole top-``k`` mask.

Checking runs in this process, or with ``--additional-config '{"fimconstrain": {"workers": N}}'``
in ``N`` worker processes that own the requests (:mod:`.pool`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from vllm.v1.worker.gpu.sample.logits_processor.interface import (
    LogitsContext,
    LogitsProcessor,
    LogitsProcRequestState,
)

from .batch import RowQuery, constrain
from .requests import FimArgs
from .support import SamplerSupport
from .vllm_setup import Slot, load_tokenizer, make_checker

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.sampling_params import SamplingParams


class FimProcessorV2(LogitsProcessor):
    """Model Runner V2 logits processor for FIM requests (see the module's notes)."""

    def __init__(self, vllm_config: VllmConfig, req_states: LogitsProcRequestState):
        super().__init__(vllm_config, req_states)
        self.req_states = req_states
        self.checker = make_checker(vllm_config, load_tokenizer(vllm_config))
        self.slots: dict[int, Slot] = {}

    def add_request(self, req_idx: int, sampling_params: SamplingParams) -> bool:
        args = FimArgs.of_request(sampling_params)
        self.slots.pop(req_idx, None)
        self.checker.remove(req_idx)
        if args is None:
            return False
        sampler = SamplerSupport.of(sampling_params)
        self.checker.add(req_idx, args, sampling_params.all_stop_token_ids, sampler)
        self.slots[req_idx] = Slot(args.top_k, sampler)
        return True

    def apply(self, logits: torch.Tensor, ctx: LogitsContext) -> torch.Tensor:
        if not self.slots:
            return logits
        layout = torch.stack(
            [t.long() for t in (ctx.expanded_idx_mapping, ctx.expanded_local_pos, ctx.pos, ctx.input_ids)]
        ).cpu()
        slot_of, local, pos, input_ids = (row.tolist() for row in layout)
        rows = [r for r, slot in enumerate(slot_of) if slot in self.slots]
        if not rows:
            return logits
        totals = self._total_lens(sorted({slot_of[r] for r in rows}))
        queries, kept = self._queries(rows, slot_of, local, pos, input_ids, totals)
        if not queries:
            return logits
        index = torch.tensor(kept, device=logits.device)
        slots = [self.slots[q.key] for q in queries]
        top_ks, samplers = [slot.top_k for slot in slots], [slot.sampler for slot in slots]
        logits[index] = constrain(self.checker, logits[index], queries, top_ks, samplers)
        return logits

    def _total_lens(self, slots: list[int]) -> dict[int, int]:
        """Each slot's committed length (prompt and output), read from the device once a step."""
        lens = self.req_states.total_len.gpu[torch.tensor(slots, device=self.req_states.device)]
        return dict(zip(slots, lens.tolist()))

    def _queries(
        self,
        rows: list[int],
        slot_of: list[int],
        local: list[int],
        pos: list[int],
        input_ids: list[int],
        totals: dict[int, int],
    ) -> tuple[list[RowQuery], list[int]]:
        """A query (without candidates yet) for each row that samples a token, and those rows."""
        queries, kept = [], []
        for r in rows:
            slot, total = slot_of[r], totals[slot_of[r]]
            if pos[r] + 1 - local[r] < total:
                continue  # a chunk of a prefill: its sample is thrown away
            state = self.slots[slot]
            prompt = int(self.req_states.prompt_len.np[slot])
            output = total - prompt
            keep, new = min(state.seen, output), ()
            if output > state.seen:
                history = self.req_states.all_token_ids.gpu[slot, prompt + state.seen : total]
                new = tuple(history.tolist())
            state.seen = output
            drafts = tuple(input_ids[r - local[r] + 1 : r + 1])
            queries.append(RowQuery(slot, keep, new, drafts, ()))
            kept.append(r)
        return queries, kept
