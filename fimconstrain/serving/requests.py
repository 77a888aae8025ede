"""One serving request's FIM constraint: its arguments, its state after the committed tokens,
and the tokens it allows next.

A request carries its prefix, suffix and Python version in ``SamplingParams.extra_args`` (flat
keys, so that the OpenAI-compatible server's ``vllm_xargs`` can carry them).  The allowed set is
paper 004 §VII-B's check made into a mask: the passing tokens among the request's top ``k``
candidates; when none of them passes, every passing token of the vocabulary (the full mask); a
stop token passes only when ``prefix + middle + suffix`` is a complete program; near the end of
the request's ``max_tokens`` only tokens after which the file can still be finished in time
(:mod:`.budget`); a request that names a ``fim_invented_stop`` (one of its ``stop_token_ids``) ends
with that token exactly where that finish wrote text nobody typed, so that vLLM answers it as the
``stop_reason`` (docs/serving.md). The token-mask
store of the request's version screens every check past the first candidate, and the full mask
checks only the tokens it lets through (:mod:`fimconstrain.decoding.loop.constraint`): the same
tokens pass, fewer are fed to the checker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ..decoding.loop.constraint import ConstraintState, passing_tokens
from ..decoding.masks.store import MaskStores
from ..decoding.tokens.fim_formats import TextCodec, resolve_format, special_token_ids
from ..engine.checker import fim_checker
from ..engine.errors import FimConstrainError
from ..engine.versions import format_version, parse_python_version
from .budget import BudgetEnd
from .support import SamplerSupport

if TYPE_CHECKING:
    from vllm.sampling_params import SamplingParams

#: the keys of ``SamplingParams.extra_args`` (``vllm_xargs``) that this constraint reads
PREFIX, SUFFIX, VERSION, TOP_K = "fim_prefix", "fim_suffix", "fim_python_version", "fim_top_k"
INVENTED_STOP = "fim_invented_stop"
#: candidates checked before the full mask (FimDecoder's default)
DEFAULT_TOP_K = 64


@dataclass(frozen=True)
class FimArgs:
    """A request's FIM arguments: the text around the cursor, the syntax it is checked as, and
    its ``max_tokens`` (the tokens it may generate, its stop token included; None: unbounded);
    ``invented_stop``: the stop token that ends a middle whose budget finish invented text (None:
    the usual stop tokens end every middle)."""

    prefix: str
    suffix: str
    python_version: str
    top_k: int = DEFAULT_TOP_K
    budget: int | None = None
    invented_stop: int | None = None

    @classmethod
    def of_request(cls, params: SamplingParams) -> FimArgs | None:
        """The arguments of a request (None: not constrained), with its ``max_tokens``; an
        ``invented_stop`` must be one of its ``stop_token_ids``, so that vLLM reports it."""
        args = cls.from_extra_args(params.extra_args)
        if args is None:
            return None
        if args.invented_stop is not None and args.invented_stop not in (params.stop_token_ids or ()):
            raise ValueError(
                f"{INVENTED_STOP} {args.invented_stop} must be one of the request's stop_token_ids, "
                "so that the answer names it as its stop_reason"
            )
        return replace(args, budget=params.max_tokens)

    @classmethod
    def from_extra_args(cls, extra: Mapping[str, object] | None) -> FimArgs | None:
        """The arguments in ``extra`` (None when it has no ``fim_prefix``: the request is not
        constrained); a wrong type or value is a ``ValueError`` naming the key, which vLLM turns
        into a failed request at admission."""
        if not extra or PREFIX not in extra:
            return None
        prefix, suffix = extra[PREFIX], extra.get(SUFFIX, "")
        if not isinstance(prefix, str) or not isinstance(suffix, str):
            raise ValueError(f"{PREFIX} and {SUFFIX} must be strings")
        top_k = extra.get(TOP_K, DEFAULT_TOP_K)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1:
            raise ValueError(f"{TOP_K} must be a positive integer, not {top_k!r}")
        version = extra.get(VERSION)
        if version is not None and not isinstance(version, str):
            raise ValueError(f"{VERSION} must be a string such as '3.12', not {version!r}")
        try:
            parsed = parse_python_version(version)
        except FimConstrainError as error:
            raise ValueError(f"{VERSION}: {error}") from None
        marker = extra.get(INVENTED_STOP)
        if marker is not None and (not isinstance(marker, int) or isinstance(marker, bool) or marker < 0):
            raise ValueError(f"{INVENTED_STOP} must be a token id, not {marker!r}")
        return cls(prefix, suffix, format_version(parsed), top_k, invented_stop=marker)


@dataclass(frozen=True)
class TokenTable:
    """What every request of one tokenizer shares: the codec, the FIM format's stop tokens and
    eos, the special tokens (never part of a middle), how many token ids have text, and the
    token-mask stores (per Python version) that screen the checks; None: unscreened."""

    codec: TextCodec
    stop_ids: frozenset[int]
    special_ids: frozenset[int]
    size: int
    stores: MaskStores | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_tokenizer(cls, tokenizer, screened: bool = True) -> TokenTable:
        """The table of ``tokenizer``; ``screened``: with its token-mask stores, the newest
        version's loaded now (built and cached on disk the first time), the others on first use."""
        stops = resolve_format(tokenizer).stop_ids(tokenizer)
        stores = MaskStores(tokenizer) if screened else None
        if stores is not None:
            stores.get()
        return cls(
            TextCodec(tokenizer),
            frozenset(stops),
            frozenset(special_token_ids(tokenizer)),
            len(tokenizer),
            stores,
        )


class RequestConstraint:
    """The constraint of one request: a state per committed token (rewinding is a list cut) and
    the allowed next tokens.

    ``extra_stops`` are the request's own stop tokens (vLLM's ``all_stop_token_ids``), which end
    the middle like the format's; with a ``sampler`` the check of a row's candidates stops where
    its sampler could pick nothing further down (:mod:`.support`); with a budget, near its end
    only tokens that leave room to finish (:mod:`.budget`).  A request whose prefix/suffix
    no middle can join (or whose text the engine refuses) gets a dead constraint: only stop
    tokens, so it ends at once.
    """

    def __init__(
        self,
        args: FimArgs,
        table: TokenTable,
        extra_stops: Iterable[int] = (),
        sampler: SamplerSupport | None = None,
    ):
        self.args, self.table, self.sampler = args, table, sampler
        marker = set() if args.invented_stop is None else {args.invented_stop}
        self.stop_ids = (set(table.stop_ids) | set(extra_stops)) - marker  # (the marker ends only
        self.banned_ids = (set(table.special_ids) | marker) - self.stop_ids  # an invented finish)
        self.ids: list[int] = []
        self.budget_end = BudgetEnd(table.codec, self.stop_ids)
        try:
            checker = fim_checker(args.prefix, args.suffix, python_version=args.python_version)
        except FimConstrainError:
            self.states: list[ConstraintState | None] = [None]
            return
        word_suffix = bool(args.suffix) and ("a" + args.suffix[0]).isidentifier()
        store = table.stores.get(args.python_version) if table.stores is not None else None
        self.states = [ConstraintState(checker, table.codec, word_suffix=word_suffix, store=store)]

    def sync(self, keep: int, new: Sequence[int]) -> None:
        """The committed middle becomes its first ``keep`` tokens followed by ``new``."""
        del self.ids[keep:], self.states[keep + 1 :]
        for token in new:
            self.ids.append(token)
            self.states.append(self._after(self.states[-1], token))

    def _after(self, state: ConstraintState | None, token: int) -> ConstraintState | None:
        """The state after ``token`` (a stop token, or one that only a later stage forced, leaves
        the state as it is or dead)."""
        if state is None or token in self.stop_ids:
            return state
        return state.child(token) if token < self.table.size else None

    def allowed(
        self, candidates: Sequence[int], drafts: Sequence[int] = (), scores: Sequence[float] = ()
    ) -> list[int]:
        """The tokens allowed after the committed middle and ``drafts`` (speculative tokens not
        committed): the passing ones among ``candidates`` (best first; ``scores`` their logits
        at the sampler's temperature when the request has a bounded sampler), else the full
        mask, else the stop tokens alone (so that the middle ends); near the end of the budget,
        only those that leave room to finish (:meth:`.budget.BudgetEnd.within`)."""
        state = self.states[-1]
        for token in drafts:
            state = self._after(state, token)
        if state is None:
            return self._stops_marked(sorted(self.stop_ids), ())
        if self.sampler is None:
            ranked = [t for t in candidates if t < self.table.size]
            passing = list(passing_tokens(state, ranked, self.stop_ids, self.banned_ids, whole=True))
        else:
            passing = self._sampled_passing(state, candidates, scores, self.sampler)
        if not passing:
            passing = self._full_mask(state)
        if not passing:
            return self._stops_marked(sorted(self.stop_ids), state.ids)
        if self.args.budget is None:
            return self._stops_marked(passing, state.ids)
        left = self.args.budget - len(self.ids) - len(drafts)
        return self._stops_marked(self.budget_end.within(state, passing, left), state.ids)

    def _full_mask(self, state: ConstraintState) -> list[int]:
        """Every token that passes after ``state`` (the store's admitted ones and the stops,
        checked): as one bool vector where the state gives one, else a walk over their ids."""
        size = self.table.size
        bits = state.whole_mask(size, self.stop_ids, self.banned_ids)
        if bits is not None:
            return np.flatnonzero(bits).tolist()
        every = sorted({*state.admitted(size), *(t for t in self.stop_ids if t < size)})
        return list(passing_tokens(state, every, self.stop_ids, self.banned_ids, whole=True))

    def _stops_marked(self, allowed: list[int], ids: tuple[int, ...]) -> list[int]:
        """``allowed`` with its stop tokens as the request's ``invented_stop`` alone where the
        budget end forced a finish that invents into the middle ``ids`` (elsewhere that token is
        banned, as any special token)."""
        marker = self.args.invented_stop
        if marker is None or not self.budget_end.invented(ids) or not self.stop_ids & set(allowed):
            return allowed
        return [*(t for t in allowed if t not in self.stop_ids), marker]

    def _sampled_passing(
        self,
        state: ConstraintState,
        candidates: Sequence[int],
        scores: Sequence[float],
        sampler: SamplerSupport,
    ) -> list[int]:
        """The passing candidates, best first, checked only until ``sampler`` could pick none
        of the rest."""
        if len(scores) != len(candidates):
            raise ValueError("a bounded sampler needs each candidate's score")
        passing: list[int] = []
        passing_scores: list[float] = []
        for rank, token in enumerate(candidates):
            if token < self.table.size and any(
                passing_tokens(state, (token,), self.stop_ids, self.banned_ids)
            ):
                passing.append(token)
                passing_scores.append(scores[rank])
            if sampler.settled(passing_scores, scores[min(rank + 1, len(scores) - 1)]):
                break
        return passing
