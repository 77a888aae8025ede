"""One generation in progress: the tokens chosen, the constraint state after them, the timings,
and how the middle ends (paper 004 §VII-B's best stop, then the one end-of-middle policy).

The decode loop (:mod:`.generate`) owns the model; this owns everything a step decides from a
step's logits (numpy arrays), so it is the same for every model backend.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator

import numpy as np

from ...engine.checker import fim_checker
from ...engine.names.name_check import NameMark
from ...engine.positions import NEWLINE, last_line
from ...engine.versions import PythonVersion
from ..masks.store import MaskStore
from .constraint import ConstraintState, is_word_char, passing_candidates, rest_of_healing
from .decode_vocabulary import DecodeVocabulary
from .end_of_middle import (
    block_ends_in,
    drop_repetition,
    finish_middle,
    hides_rest_of_line,
    keeps_line_break,
    line_end_in,
    rescue_middle,
    says_nothing,
    single_line_end,
)
from .options import DecodeOptions
from .ranking import ranked_tokens, top_ids
from .result import FimResult, StopReason
from .semantic import SemanticGuide, SemanticOptions
from .validity import longest_valid_prefix, middle_of, parses

#: steps on which the model's favourite valid token would end a one-line middle where the file
#: does not parse (or with a line that says nothing), before the middle may span lines: until
#: then such tokens give way to the next candidate, and an invalid end keeps giving way while
#: the finish search still reaches a valid end within the line
LINE_PATIENCE = 3
#: seconds the finish search may take to tell whether a valid end is still within the line
LINE_FINISH_SECONDS = 0.05
#: the most likely alternatives of each step a whole-line middle may go back to
ALTERNATIVES = 8
#: states a validity check looks back over for the one to read on from (:meth:`Run.valid`)
LOOK_BACK = 4
#: middles kept by their tokens (:meth:`Run.middle_text`): a step reads the middle so far and the
#: middles of a few candidates, and the next step's middle so far is one of them
KEPT_MIDDLES = 32


class Run:
    """The mutable state of one generation: tokens chosen, constraint state, timings."""

    def __init__(
        self,
        vocabulary: DecodeVocabulary,
        prefix: str,
        suffix: str,
        options: DecodeOptions,
        prompt_tokens: int,
        version: PythonVersion,
        healing: str = "",
    ):
        self.vocabulary = vocabulary
        self.options = options
        self.healing = healing  # the prefix's end, taken off the prompt, that the tokens write again
        self.version = version
        self.prefix, self.suffix, self.mode = prefix, suffix, options.mode
        self.ids: list[int] = []
        self.state: ConstraintState | None = None
        self.extra = ""  # the end of a token that runs into the suffix (see split_end)
        self.ended_as: str | None = None  # the middle as the end-of-middle policy ended it
        self.cut_to_valid = False  # no finish found: fall back to the longest valid prefix
        self.states: list[ConstraintState] = []
        self.logprobs: list[float] = []  # the model's log-probability of each token in ``ids``
        #: (weighted stop probability, tokens, state) of each point where the middle could stop
        self.stop_points: list[tuple[float, int, ConstraintState]] = []
        self.result = FimResult("", options.mode, False, StopReason.EOS, 0, prompt_tokens)
        self.stop_list = sorted(vocabulary.stop_ids)
        self.middles: dict[tuple[int, ...], str] = {}  # (see middle_text)
        self.semantic: SemanticGuide | None = None
        #: constrained one-line middles: where the line ends (:func:`.end_of_middle.keeps_line_break`),
        #: the middle at the valid end of its line once a token reaches it, and the steps on which
        #: the favourite token was refused for breaking the line where the file does not parse
        self.keeps_break = options.single_line and keeps_line_break(prefix, suffix)
        self.line_end: str | None = None
        self.line_refusals = 0
        self.refusal_counted_at = -1  # the position whose refusal was counted last
        #: the middle may span lines (decided once the patience has run out)
        self.spans_lines: bool | None = None
        #: a whole line may go back to an earlier token when it ends where the file does not
        #: parse (:meth:`_rewind`): the tries left; per position of the middle, the
        #: log-probability of the tokens before it and the step's likeliest tokens (log-probability,
        #: id), the names guide as it was there, the tokens already tried there and left, and
        #: the line breaks refused there
        self.retries = options.line_retries if self.keeps_break and self.mode == "constrained" else 0
        self.frontier: list[tuple[float, list[tuple[float, int]]]] = []
        self.guides: list[NameMark | None] = []
        self.tried: dict[int, set[int]] = {}
        self.refused: dict[int, set[int]] = {}
        #: set by :meth:`choose` when it went back: the loop reads the prompt and ``ids`` again
        self.rewound = False

    def start_semantic(self, options: bool | SemanticOptions) -> None:
        """Start the names guide (:mod:`.semantic`) for this middle (its setup is setup time)."""
        start = time.perf_counter()
        vocabulary = self.vocabulary
        chosen = options if isinstance(options, SemanticOptions) else SemanticOptions()
        self.semantic = SemanticGuide.start(
            self.prefix, self.suffix, vocabulary.stop_ids, vocabulary.banned_ids, chosen
        )
        self.result.semantic = self.semantic.stats
        self.result.setup_seconds += time.perf_counter() - start

    def start_constraint(
        self,
        suffix: str,
        should_stop: Callable[[], bool] | None = None,
        store: MaskStore | None = None,
        since: float | None = None,
    ) -> None:
        """Build the checker (the one-time cost): for the whole file, or the prefix only.
        ``store``: the token-mask store of the run's version, the pre-filter of every check past
        a step's first candidate and of every scan; ``since``: when the setup began (the store's
        loading is setup too; default: now)."""
        start = time.perf_counter() if since is None else since
        checker = fim_checker(self.prefix, suffix, python_version=self.version, should_stop=should_stop)
        word_suffix = bool(suffix) and is_word_char(suffix[0])
        self.state = ConstraintState(
            checker, self.vocabulary.codec, healing=self.healing, word_suffix=word_suffix, store=store
        )
        self.states = [self.state]  # the state after each token of the middle
        self.result.setup_seconds = time.perf_counter() - start

    def note_stop_point(self, logits: np.ndarray, normaliser: float) -> None:
        """Remember this point as a place to stop, scored by the probability of a stop token
        here times the middle's length in tokens (checked only if it is needed, at the end);
        ``normaliser``: :func:`.ranking.log_normaliser` of ``logits``."""
        assert self.state is not None  # called only under a constraint
        if self.ids:
            stop = [float(logits[token]) for token in self.stop_list]  # (a few: no numpy step)
            if not any(map(math.isfinite, stop)):  # (a server tells it only among its likeliest)
                return
            p_stop = sum(math.exp(logit - normaliser) for logit in stop)
            self.stop_points.append((p_stop * len(self.ids), len(self.ids), self.state))

    def note_alternatives(self, logits: np.ndarray, normaliser: float) -> np.ndarray | None:
        """Remember this step's likeliest tokens (and the names guide here), so that a whole line
        that ends where the file does not parse can come back and take another one; the top of
        ``logits`` read for them (as long as :meth:`choose`'s walk reads), or None (no retries)."""
        if not self.retries:
            return None
        at = len(self.ids)
        # (from a sampled bar: 0.1 ms at 151,936 tokens, against 1.6 ms for a partial sort of all)
        top = top_ids(logits, min(max(ALTERNATIVES, self.options.top_k), len(logits)))
        ranked = sorted(((float(logits[t]) - normaliser, int(t)) for t in top[:ALTERNATIVES]), reverse=True)
        del self.frontier[at:], self.guides[at:]
        self.frontier.append((sum(self.logprobs[:at]), ranked))
        self.guides.append(None if self.semantic is None else self.semantic.mark())
        return top

    def cut_at_best_stop(self, seconds: float = 1.0) -> bool:
        """Cut the middle at the best-scored stop point where the file is complete (§VII-B) and
        the code after the cursor is not commented out (:meth:`hides_rest`)."""
        start = time.perf_counter()
        found = False
        for _, n, state in sorted(self.stop_points, key=lambda point: -point[0]):
            if time.perf_counter() - start > seconds:
                break
            if state.can_end() and not self.hides_rest(self.middle_text(self.ids[:n])):
                del self.ids[n:], self.logprobs[n:]
                self.state, self.result.stopped, found = state, StopReason.BEST_STOP, True
                break
        self._ending(start)
        return found

    def choose(self, keys: np.ndarray, whole: bool = True, top: np.ndarray | None = None) -> int | None:
        """The next token (recorded unless it ends the middle; a stop token when the middle
        ends inside the model's favourite token), or None when no candidate passes. ``whole``:
        every token has its key; else only the likeliest do (the rest at -inf: a server's), and
        the names guide chooses nothing where a token not told yet might have been its choice.
        ``top``: :func:`.ranking.top_ids` of ``keys``, when the step has read it already."""
        vocabulary, options = self.vocabulary, self.options
        if self.state is None:
            token = self.unconstrained_choice(keys)
            if token is not None and not vocabulary.ends(token):
                self.ids.append(token)
            return token
        start = time.perf_counter()
        choice = None
        favourite = None  # the argmax of ``keys`` while they are the step's own
        if self.mode == "constrained" and options.split_ending:
            # (the top, when the step has read it, starts with the argmax: ties by id, as argmax)
            favourite = int(top[0]) if top is not None and len(top) else int(np.argmax(keys))
            if (split := self.split_end(favourite)) is not None:
                self.extra, self.result.stopped = split, StopReason.SPLIT
                self.result.checker_seconds += time.perf_counter() - start
                return next(iter(vocabulary.stop_ids))
        if self.state.healing and options.vocabulary_fallback:
            # only tokens that can write the healed text come into the walk: the same first
            # passing token as the walk over the whole vocabulary, without checking the others
            # (the names guide's look-ahead, 64 ranked tokens, now counts only such tokens)
            healable = vocabulary.healing_index(keys.shape[-1]).mask(self.state.healing)
            keys, top, favourite = np.where(healable, keys, -np.inf), None, None
        tried = self.tried.get(len(self.ids))
        if tried:
            keys, top, favourite = keys.copy(), None, None
            keys[list(tried)] = -np.inf
        state = self.state
        fed = state.fed
        narrow = self._narrowing(state) if state.store is not None else None
        walk = ranked_tokens(keys, options.top_k, options.vocabulary_fallback, narrow, top, favourite)
        ranked = self._counted(walk)
        line_ends: dict[int, str] = {}
        single_line = options.single_line and self.mode == "constrained"
        if single_line:
            ranked = self._within_line(ranked, line_ends)
        block = not single_line and options.end_of_block and self.mode == "constrained"
        candidates = (
            passing_candidates(self.state, ranked, vocabulary.stop_ids, vocabulary.banned_ids)
            if self.semantic is None
            else self.semantic.choose(self.state, ranked, keys, whole)
        )
        for token, nxt in candidates:
            choice = token
            self.line_end = self._block_end(token) if block else line_ends.get(token)
            if token not in vocabulary.stop_ids:
                self.ids.append(token)
                self.state = nxt
                self.states.append(nxt)
            break
        self.result.candidates_checked += state.fed - fed
        self.result.checker_seconds += time.perf_counter() - start
        if choice is None and not self.rewound:
            self.result.stopped = StopReason.STUCK
        return choice

    def _within_line(self, ranked: Iterator[int], line_ends: dict[int, str]) -> Iterator[int]:
        """``ranked`` for a one-line middle: a token that breaks the line comes through only where
        the middle, ended there (:func:`.end_of_middle.line_end_in`), completes the file (that end
        goes into ``line_ends``), so the line runs on to its nearest valid end. A refusal of the
        step's favourite valid token counts (a whole line that says nothing, blank or only a
        comment, is refused as well); after :data:`LINE_PATIENCE` of them the middle may span
        lines (:meth:`_may_span_lines`)."""
        state = self.state
        assert state is not None  # called only under a constraint
        stops = self.vocabulary.stop_ids
        before: str | None = None
        seen: list[int] = []
        refused = False  # a line break was refused here: a comment cannot make the line valid
        for token in ranked:
            if token in stops and self._empty_or_hiding(self.middle_text(self.ids)):
                continue
            added = "" if token in stops else self.state_text(token)
            if refused and _starts_comment(added) and self._plain_line():
                continue
            if ("\n" in added or "\r" in added) and state.passes(token):
                before = self.middle_text(self.ids) if before is None else before
                end = line_end_in(self.middle_text([*self.ids, token]), len(before), self.keeps_break)
                empty = self.keeps_break and says_nothing(end or "")
                if end is not None and not empty and self._completes(end):
                    line_ends[token] = end
                elif end is not None and not self._may_span_lines(end, empty):
                    refused = True
                    self.refused.setdefault(len(self.ids), set()).add(token)
                    favourite = not any(state.can_end() if t in stops else state.passes(t) for t in seen)
                    if favourite and self.refusal_counted_at != len(self.ids):
                        self.line_refusals += 1  # (once a step: a row told in parts is walked again)
                        self.refusal_counted_at = len(self.ids)
                        if self._rewind(token):
                            return
                    continue
            seen.append(token)
            yield token

    def _plain_line(self) -> bool:
        """Whether the whole line written so far has no quote, so a ``#`` after it starts a
        comment (which leaves the line's code, and its verdict, as they are)."""
        line = self.middle_text(self.ids)
        return self.keeps_break and "'" not in line and '"' not in line

    def _rewind(self, refused: int) -> bool:
        """Go back to the earlier token whose next-likeliest alternative makes the likeliest line
        not yet tried (best first over the steps' :data:`ALTERNATIVES`), when that line is likelier
        than writing on after the ``refused`` line break here; False where it is not, or no tries
        are left. The alternatives' validity is checked when the step is taken again."""
        at = len(self.ids)
        if not self.retries or len(self.frontier) <= at:
            return False
        plain = self._plain_line()
        going_on = max(
            (
                self.frontier[at][0] + logprob
                for logprob, token in self.frontier[at][1]
                if token != refused and not (plain and _starts_comment(self.state_text(token)))
            ),
            default=-np.inf,
        )
        target, best = None, going_on
        for position in range(at):
            before, ranked = self.frontier[position]
            left = self.tried.get(position, set()) | self.refused.get(position, set()) | {self.ids[position]}
            logprob = next((lp for lp, token in ranked if token not in left), None)
            if logprob is not None and before + logprob > best:
                target, best = position, before + logprob
        if target is None:
            return False
        self.tried = {p: t for p, t in self.tried.items() if p <= target}
        self.refused = {p: t for p, t in self.refused.items() if p <= target}
        self.tried.setdefault(target, set()).add(self.ids[target])
        del self.ids[target:], self.logprobs[target:], self.states[target + 1 :]
        self.state = self.states[target]
        self.stop_points = [point for point in self.stop_points if point[1] <= target]
        mark = self.guides[target]
        if self.semantic is not None and mark is not None:
            self.semantic.go_back(mark)
        self.line_end, self.spans_lines, self.line_refusals = None, None, 0
        self.refusal_counted_at = -1
        self.retries -= 1
        self.result.rewinds += 1
        self.rewound = True
        return True

    def _block_end(self, token: int) -> str | None:
        """Where a block middle ends when ``token``, the step's choice, starts a line indented
        less than the block's first line (:func:`.end_of_middle.block_ends_in`) and the file is
        complete without that line: without its last line break when the suffix begins with one
        (else the file gains a blank line); None where the middle goes on. Asked of the choice
        alone (it never changes which token is chosen)."""
        added = "" if token in self.vocabulary.stop_ids else self.state_text(token)
        if not added.strip():
            return None
        before = self.middle_text(self.ids)
        if last_line(last_line(self.prefix) + before).strip() and "\n" not in added and "\r" not in added:
            return None  # (not at a line's start, and no line break)
        ends = block_ends_in(self.prefix, self.middle_text([*self.ids, token]), len(before))
        suffix_breaks = NEWLINE.match(self.suffix) is not None
        return next(
            (end for end in (reversed(ends) if suffix_breaks else ends) if self._completes(end)), None
        )

    def _may_span_lines(self, end: str, says_nothing: bool) -> bool:
        """Whether a line break that does not end the one-line middle validly (at ``end``) may
        pass: once the patience has run out, when the line says nothing (it stays a comment), or
        when the finish search finds no valid end within the line from here (no one line
        completes the file; decided once per run), an end that comments out the code after the
        cursor counting as none (no line end is taken there). Never after a backslash: a
        continuation line only hides the break."""
        if self.line_refusals < LINE_PATIENCE or end.rstrip(" \t").endswith("\\"):
            return False
        if says_nothing:
            return True
        if self.spans_lines is None:
            assert self.state is not None  # called only under a constraint
            finish = self.state.checker.shortest_finish(seconds=LINE_FINISH_SECONDS)
            within = (
                finish is not None
                and not NEWLINE.search(finish.rstrip("\r\n") if self.keeps_break else finish)
                and not self.hides_rest(self.middle_text(self.ids) + finish)
            )
            self.spans_lines = not within
        return self.spans_lines

    def state_text(self, token: int) -> str:
        """The text ``token`` adds after the current state (the whole middle's decoding where
        the tokenizer rewrites earlier text)."""
        assert self.state is not None  # called only under a constraint
        added = self.state.added_text(token)
        return added if added is not None else self.middle_text([*self.ids, token])

    def line_ended(self) -> bool:
        """Whether a one-line middle has reached the end of its line: constrained, a valid end
        (:meth:`_within_line`); otherwise its first line break."""
        options = self.options
        if (
            self.state is not None
            and self.mode == "constrained"
            and (options.single_line or options.end_of_block)
        ):
            return self.line_end is not None
        if not options.single_line:
            return False
        return single_line_end(self.vocabulary.codec.decode(self.ids[-48:])) is not None

    def _empty_or_hiding(self, middle: str) -> bool:
        """Whether a stop here leaves a whole line that says nothing, or hides the code after the cursor."""
        return (self.keeps_break and says_nothing(middle)) or self.hides_rest(middle)

    def _completes(self, middle: str) -> bool:
        """Whether the file is complete with ``middle``, its last name not fused with the suffix's
        first and the code after the cursor not swallowed by its comment."""
        state = self.states[0]
        fused = state.word_suffix and bool(middle) and is_word_char(middle[-1])
        return not fused and not self.hides_rest(middle) and self.valid(middle)

    def hides_rest(self, middle: str) -> bool:
        """Whether ``middle`` comments out the code after the cursor on its line
        (:func:`.end_of_middle.hides_rest_of_line`)."""
        return hides_rest_of_line(self.prefix, middle, self.suffix)

    def _narrowing(self, state: ConstraintState) -> Callable[[np.ndarray], np.ndarray]:
        """What narrows a scan of the whole vocabulary to the tokens the token-mask store allows
        after ``state`` (every token that keeps the file completable keeps its prefix
        completable, so none is lost); the keys unchanged while healing (the tokens then write
        prefix text again, a state the store does not know)."""
        stops = self.vocabulary.stop_ids
        return lambda keys: state.narrow(keys, stops)

    def _counted(self, tokens: Iterator[int]) -> Iterator[int]:
        """Pass ``tokens`` through, counting the stop tokens among them as checked candidates
        (the others count when they are fed to the checker: :attr:`ConstraintState.fed`)."""
        stops = self.vocabulary.stop_ids
        for token in tokens:
            if token in stops:
                self.result.candidates_checked += 1
            yield token

    def allowed(self, width: int) -> np.ndarray | None:
        """The ids the middle may take next, as a mask over ``width`` ids (None: any): while the
        healed text is not yet written again, those that can write it (and pass the constraint);
        else under the constraint, those the token-mask store lets through, and the stop tokens
        where the file may end.
        What a runtime that tells only its likeliest tokens is asked for next."""
        state = self.state
        if state is not None:
            pending = state.healing
        else:
            written = self.vocabulary.codec.decode(self.ids)
            pending = self.healing[len(written) :] if len(written) < len(self.healing) else ""
        if pending:  # (a few hundred tokens at most: checked here, so that one ask finds the choice)
            mask = self.vocabulary.healing_index(width).mask(pending).copy()
            if state is not None:
                mask[[t for t in np.flatnonzero(mask).tolist() if not state.passes(t)]] = False
            return mask
        if state is None or state.store is None:
            return None
        zeros = np.zeros(width, dtype=np.float32)
        opened = state.narrow(zeros)
        if opened is zeros:  # (no mask here)
            return None
        mask = np.isfinite(opened)
        if state.can_end():
            mask[[t for t in self.vocabulary.stop_ids if t < width]] = True
        return mask

    def unconstrained_choice(self, keys: np.ndarray) -> int | None:
        """The model's favourite token; while the healed text is not yet written again, the
        favourite of those that write it (the only constraint in the unconstrained modes)."""
        codec = self.vocabulary.codec
        written = codec.decode(self.ids)
        if len(written) >= len(self.healing):
            return int(np.argmax(keys))
        pending = self.healing[len(written) :]
        for token in ranked_tokens(keys, self.options.top_k):
            if self.vocabulary.ends(token):
                continue
            text = codec.decode([*self.ids, token])[len(written) :]
            if rest_of_healing(pending, text) is not None:
                return token
        return None

    def middle_text(self, ids: list[int]) -> str:
        """The middle the tokens ``ids`` write (after the healed text); the last
        :data:`KEPT_MIDDLES` are kept, since each step reads the middle so far again. A new one
        is read on from the current state's (:meth:`_extended`) where its bytes are its text,
        else decoded whole (the tokenizer may rewrite earlier text)."""
        key = tuple(ids)
        text = self.middles.get(key)
        if text is None:
            text = self._extended(key)
            if text is None:
                text = middle_of(self.vocabulary.codec, ids, self.healing)
            if len(self.middles) >= KEPT_MIDDLES:
                self.middles.clear()
            self.middles[key] = text
        return text

    def _extended(self, ids: tuple[int, ...]) -> str | None:
        """The middle of ``ids`` as the kept middle of the current state's tokens and the text
        the last token adds, where that state has written the healed text and ends on whole
        characters (a token's bytes are then its text, as the checker reads it), and the token
        neither stops nor is banned; else None."""
        state = self.state
        if state is None or not ids or ids[:-1] != state.ids or self.vocabulary.ends(ids[-1]):
            return None
        if state.healing or not state.ends_whole():
            return None
        before = self.middles.get(state.ids)
        added = state.added_text(ids[-1])
        return None if before is None or added is None else before + added

    def split_end(self, token: int) -> str | None:
        """When the model's favourite token writes on into the suffix (``'a')`` before a
        suffix that begins with ``)``), the part of it that ends the middle, if that is valid
        and does not comment out the code after the cursor (:meth:`hides_rest`)."""
        if self.vocabulary.ends(token):
            return None
        assert self.state is not None  # called only under a constraint
        split = self.state.end_inside(token, self.suffix)
        if split is not None and self.hides_rest(self.middle_text(self.ids) + split):
            return None
        return split

    def finish(self) -> None:
        """End the middle by the one end-of-middle policy (:mod:`.end_of_middle`): kept when the
        file is complete with it, else cut and completed; with nothing found, the middle is cut
        back to its longest valid prefix (in :meth:`close`)."""
        start = time.perf_counter()
        options = self.options
        middle = self.middle_text(self.ids) + self.extra
        if self.line_end is not None:  # (a valid end already: only a repeated tail may go)
            ended: str | None = (
                drop_repetition(self.states[0].checker, self.line_end, self.suffix)
                if options.drop_repeats
                else self.line_end
            )
        else:
            ended = self._ended(middle, finish=options.finish_search)
            if ended is None and not options.finish_search and self.mode == "constrained":
                # a stop that leaves the file invalid is never the answer: the finish search as the
                # last resort, its middle marked as the search's (an editor does not show it)
                ended = self._ended(middle, finish=True)
                self.result.unshowable = ended is not None
        if ended is None:
            self.cut_to_valid = True
        elif ended != middle:
            self.ended_as = ended
            if self.result.stopped not in (StopReason.LINE, StopReason.BLOCK, StopReason.CANCELLED):
                self.result.stopped = StopReason.FINISHED
        self._ending(start)

    def _ended(self, middle: str, finish: bool) -> str | None:
        """``middle`` ended by :func:`.end_of_middle.finish_middle` (with the finish search or not),
        in the run's line shape, never commenting out the code after the cursor; None if no end."""
        options = self.options
        return finish_middle(
            self.states[0].checker,
            middle,
            options.single_line and self.line_refusals < LINE_PATIENCE,
            self.suffix if self.mode == "constrained" else "",
            seconds=options.finish_seconds,
            drop_repeats=options.drop_repeats,
            finish=finish,
            acceptable=lambda ended: not self.hides_rest(ended),
        )

    def _ending(self, start: float) -> None:
        """Count the time since ``start`` as constraint work done once, at the end."""
        elapsed = time.perf_counter() - start
        self.result.checker_seconds += elapsed
        self.result.ending_seconds += elapsed

    def close(self) -> FimResult:
        """Fill in the middle text and its validity (checked mode: cut to the longest valid prefix)."""
        res = self.result
        res.tokens = len(self.ids)
        res.healed = self.healing
        res.logprobs = self.logprobs[: len(self.ids)]
        res.token_ids = list(self.ids)
        ended = self.ended_as if self.ended_as is not None else self.line_end
        res.middle = self.middle_text(self.ids) + self.extra if ended is None else ended
        constrained = self.mode == "constrained"
        if self.mode == "checked" or self.cut_to_valid:
            start = time.perf_counter()
            res.raw_middle = res.middle
            res.middle = longest_valid_prefix(
                self.prefix,
                self.vocabulary.codec,
                self.ids,
                self.suffix,
                self.version,
                self.healing,
                self.valid if constrained else None,
            )
            if constrained and not self.valid(res.middle):
                # no prefix of what the model wrote is valid: the rescue cuts it at a line and
                # finishes it whatever the finish writes (never shown in an editor)
                rescued = rescue_middle(self.states[0].checker, res.raw_middle, self.options.finish_seconds)
                if rescued is not None:
                    res.middle, res.unshowable = rescued, True
            self._ending(start)
            if constrained and self.hides_rest(res.middle):
                res.unshowable = True
        res.valid = (
            self.valid(res.middle)
            if constrained and self.version != sys.version_info[:2]
            else parses(self.prefix + res.middle + self.suffix, self.version)
        )
        return res

    def valid(self, middle: str) -> bool:
        """Whether ``prefix + middle + suffix`` is valid at this run's version, read on from the
        checker after the prefix (constrained mode: built with the whole suffix): the engine's
        verdict, as :func:`.validity.parses` gives it for another version than the running one,
        without reading the prefix and the suffix again for each middle: read on from the
        latest of the last :data:`LOOK_BACK` states whose text begins ``middle`` (a line's end is
        checked on most steps of a block), else from the start of the middle."""
        checker, rest = self.states[0].checker, middle
        for state in self.states[-1 : -1 - LOOK_BACK : -1]:
            written = self.middle_text(list(state.ids))
            if not state.held and not state.healing and middle.startswith(written):
                checker, rest = state.checker, middle[len(written) :]
                break
        after = checker.feed(rest) if rest else checker
        return after is not None and after.is_complete()


def _starts_comment(text: str) -> bool:
    """Whether ``text`` begins a comment (after blanks), read where no string is open."""
    return text.lstrip(" \t").startswith("#")
