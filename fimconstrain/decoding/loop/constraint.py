"""The constraint on a middle, token by token: which next tokens keep ``prefix + middle +
suffix`` completable (paper 004 §IV-§V's checker, fed the text each token adds).

It reads the model's vocabulary only through a :class:`..tokens.fim_formats.TextCodec`, and logits not
at all: any model backend (:mod:`..runtimes.backend`) is constrained the same way. Token healing (the
prefix's last token written again, :func:`healed_tail`) and UTF-8 characters split across
tokens are handled here, where the text is.

A state may carry the token-mask store of its checker's grammar (:mod:`..masks.store`): then it
is the pre-filter of every walk over candidates, in every backend. A state feeds its first
candidate to the checker as it is (a step whose favourite passes needs no mask); from the
second on, a token the store rules out is rejected without a check (:meth:`ConstraintState.child`),
and a scan of the whole vocabulary reads only the tokens the store allows
(:meth:`ConstraintState.narrow`, :meth:`ConstraintState.admitted`). The store is sound (a
superset of the tokens the checker accepts), so the same tokens pass as without it.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import TYPE_CHECKING

from ...engine.checker import Checker
from ..tokens.fim_formats import REPLACEMENT, TextCodec

if TYPE_CHECKING:  # numpy and the store load with a store, not with this module (`--help` stays light)
    import numpy as np

    from ..masks.store import MaskStore
    from ..masks.vocab_walk import TokenTexts

#: candidates a state feeds to the checker before the token-mask store screens the rest
SCREEN_AFTER = 1
_DECODE_WINDOW = 8  # tokens of context when decoding a candidate's text
#: candidates from which a screened walk after whole characters takes its verdicts in numpy
#: steps (:meth:`ConstraintState._passing_whole`) rather than one by one
VECTORISED_FROM = 256
#: ... and from which share (1 / this) of the tokens the store admits the C vocabulary walk
#: decides them (it reads the trie below every admitted token: about 1.6 ms at 8k tokens and 6 ms
#: at 49k where most are, against about 0.7 us a candidate one by one)
WALK_FROM_SHARE = 4


class ConstraintState:
    """The FIM checker after the middle's tokens so far; which next tokens keep the file completable.

    Text is the tokenizer's own decoding; the checker is fed the difference that
    a candidate token makes to it.  The difference is taken over the last few
    tokens (decoding is local for byte-level BPE and SentencePiece), with the
    whole middle as the fallback.  A token that ends inside a UTF-8 character
    has that character held back (it decodes to U+FFFD for now) until it is
    whole, and passes only if some character it could become is acceptable
    next; bytes that can never be a character stay U+FFFD and are checked as such.
    """

    def __init__(
        self,
        checker: Checker,
        codec: TextCodec,
        ids: tuple[int, ...] = (),
        held: int = 0,
        healing: str = "",
        word_suffix: bool = False,
        ends_in_word: bool = False,
        store: MaskStore | None = None,
    ):
        self.checker = checker
        self.codec = codec
        self.ids = ids
        self.held = held  # trailing U+FFFD characters of the decoded middle that the checker has not seen
        #: text taken off the prompt's end (token healing) that the tokens must write again first;
        #: the checker, built after the whole prefix, sees only what comes after it
        self.healing = healing
        #: token healing at the right edge: when the suffix starts with a name character, a
        #: middle may not end in one (the two would fuse into a name nobody wrote)
        self.word_suffix = word_suffix
        self.ends_in_word = ends_in_word
        self._children: dict[int, ConstraintState | None] = {}
        #: the checker after each first character a candidate's text has had (see _feed)
        self._after_first: dict[str, Checker | None] = {}
        #: per first character shared by two candidates' texts: the store's vouched tokens
        #: after it (:meth:`_rest_vouched`; b"" once it has been asked for once)
        self._sure_after_first: dict[str, bytes] = {}
        self._can_end: bool | None = None
        self._window_text: str | None = None
        #: the decoded middle ends on a whole character (or on bytes that never become one), so
        #: a token's text can be read from its bytes alone (:meth:`.TextCodec.piece`)
        self._ends_whole: bool | None = None
        #: the token-mask store of the checker's grammar and version: the pre-filter of the checks
        self.store = store
        self._words: np.ndarray | None = None  # the store's mask after this state (computed once)
        self._bits = b""  # the same as bytes (token t: bit t % 8 of byte t // 8), for one-token tests
        self._sure_bits = b""  # the store's tokens that certainly pass (MaskStore.sure), as bytes
        self.fed = 0  # candidates fed to the checker after this state
        self.vouched = 0  # candidates passed on the store's word (whole, or all but their first character)
        self.walked = 0  # candidates a whole mask's native walk decided (vocab_walk.py)

    def child(self, token: int) -> ConstraintState | None:
        """The state after ``token``, or None when no continuation can make a valid file (cached)."""
        children = self._children
        if token in children:
            return children[token]
        self.fed += 1
        nxt = children[token] = self._advance(token)
        return nxt

    def candidate(self, token: int) -> ConstraintState | None:
        """:meth:`child` for a candidate of a walk: with a store, once this state has fed
        :data:`SCREEN_AFTER` candidates, a token the store rules out is None at once, never
        fed to the checker (nor cached). The walks that end sooner (most steps: the favourite
        passes) pay for no mask, which costs about as much as a few checks."""
        if token not in self._children and self._screened_out(token):
            return None
        return self.child(token)

    def _screened_out(self, token: int) -> bool:
        """Whether the store rules ``token`` out unchecked (only past :data:`SCREEN_AFTER`
        candidates fed)."""
        return self.fed >= SCREEN_AFTER and self.store is not None and not self.admits(token)

    def passes(self, token: int) -> bool:
        """Whether :meth:`candidate` would give a state for ``token``, told without building
        that state where the token's text is whole characters after whole characters (a mask
        needs only the verdicts; the committed token's state is built when it is committed)."""
        children = self._children
        if token in children:
            return children[token] is not None
        if self._screened_out(token):
            return False
        return self._verdict(token)

    def _verdict(self, token: int) -> bool:
        """:meth:`passes` for a token the store has not ruled out."""
        piece = None if self.healing else self._piece(token)
        if piece is None:
            return self.child(token) is not None
        if self._certain(token):
            self.vouched += 1
            return True
        self.fed += 1
        return not piece or self._passes_piece(token, piece)

    def _certain(self, token: int) -> bool:
        """Whether the store vouches that ``token``'s bytes, read as they are, pass
        (:meth:`.MaskStore.sure`; asked once the mask is asked for, past :data:`SCREEN_AFTER`)."""
        if self.fed < SCREEN_AFTER or self.store is None:
            return False
        return _has(self._sure_bytes(), token)

    def _sure_bytes(self) -> bytes:
        """:meth:`.MaskStore.sure` after this state as bytes (computed once; empty without a store)."""
        bits = self._sure_bits
        if not bits and self.store is not None:
            bits = self._sure_bits = _as_bytes(self.store.sure(self.checker))
        return bits

    def passing(
        self, ranked: Iterable[int], stop_ids: set[int], banned_ids: set[int], whole: bool = False
    ) -> Iterator[int]:
        """The tokens of ``ranked``, in order, that pass (:func:`passing_tokens`). Once the
        store screens the walk, the tokens it rules out or vouches for cost a bit test each,
        read here rather than through :meth:`passes` (a whole mask is mostly such tokens).
        ``whole``: the walk goes to the end of ``ranked``. After whole characters, fewer than
        :data:`VECTORISED_FROM` tokens (a top-k row) are then told by one native walk asked
        about them by id (:meth:`_passing_walked`), where it is built; otherwise the store
        screens them from the first token (else from past :data:`SCREEN_AFTER` fed), and from
        :data:`VECTORISED_FROM` on the verdicts are taken at once (:meth:`_passing_whole`)."""
        if whole and not self.healing and self.ends_whole():
            tokens = list(ranked)
            few = len(tokens) < VECTORISED_FROM
            walked = self._passing_walked(tokens, stop_ids, banned_ids) if few else None
            if walked is not None:
                return iter(walked)
            if not few and self.mask() is not None:
                return iter(self._passing_whole(tokens, stop_ids, banned_ids))
            ranked = tokens
        return self._passing_lazily(ranked, stop_ids, banned_ids, whole)

    def _passing_walked(
        self, tokens: list[int], stop_ids: set[int], banned_ids: set[int]
    ) -> list[int] | None:
        """:meth:`passing` over a few ``tokens`` after whole characters: the C vocabulary walk
        reads the trie's paths to their texts alone (:mod:`..masks.vocab_walk`, asked by id),
        sharing each lexeme end among the tokens that reach it, and needs no store; its
        ``verdicts`` read the row off the walk's bitsets in one call, the state's own verdicts
        (stop, banned and known tokens) told first. Where the walk leaves a token undecided,
        the row goes a token at a time (:meth:`_verdicts_each`). None where the walk is not
        built or cannot read on (after a ``\\r``)."""
        from ..masks.vocab_walk import native_walk, vocab_walk

        module = native_walk()
        if module is None or self.checker.pending_cr:
            return None
        import numpy as np

        texts = _walk_table(self.codec).texts
        own = {
            token: self._own_verdict(token, stop_ids, banned_ids)
            for token in (self._children.keys() | stop_ids | banned_ids).intersection(tokens)
        }
        # (the walk skips ids without a text; an own token walked costs a path, not a verdict)
        asked = np.array(tokens, dtype=np.int32)
        passing, undecided = vocab_walk(self.checker.layer, texts).walk(self.checker, module, asked=asked)
        told = module.verdicts(tokens, own, passing, undecided)
        if told is None:
            return self._verdicts_each(tokens, own, passing, undecided, stop_ids, banned_ids)
        out, walked = told
        self.walked += walked
        return out

    def _verdicts_each(
        self,
        tokens: list[int],
        own: dict[int, bool],
        passing: bytes,
        undecided: bytes,
        stop_ids: set[int],
        banned_ids: set[int],
    ) -> list[int]:
        """:meth:`_passing_walked`'s row a token at a time: a token the walk left undecided (or
        outside its bitsets) by the state's verdict, the rest as the walk's ``verdicts`` read them."""
        out, bits = [], 8 * len(passing)
        for token in tokens:
            if token in own:
                verdict = own[token]
            elif not 0 <= token < bits or undecided[token >> 3] >> (token & 7) & 1:
                verdict = self._own_verdict(token, stop_ids, banned_ids)
            else:
                self.walked += 1
                verdict = bool(passing[token >> 3] >> (token & 7) & 1)
            if verdict:
                out.append(token)
        return out

    def _own_verdict(self, token: int, stop_ids: set[int], banned_ids: set[int]) -> bool:
        """Whether ``token`` passes, told by this state alone (:meth:`passes`): a stop token
        where the file may end, a banned one never."""
        if token in stop_ids:
            return self.can_end()
        return token not in banned_ids and self.passes(token)

    def _passing_lazily(
        self, ranked: Iterable[int], stop_ids: set[int], banned_ids: set[int], whole: bool
    ) -> Iterator[int]:
        """:meth:`passing`, a verdict at a time."""
        tokens = iter(ranked)
        if not whole or self.mask() is None:
            for token in tokens:
                if self._own_verdict(token, stop_ids, banned_ids):
                    yield token
                if self.fed >= SCREEN_AFTER and self.mask() is not None:
                    break
            else:
                return
        # a token's text is read from its bytes (and the store's vouch holds for it) only after
        # whole characters, not while healing: else each token goes the way of :meth:`passes`
        allowed = self._admitted_bytes()
        if not self.healing and self.ends_whole():
            rest = list(tokens)
            if len(rest) >= VECTORISED_FROM:
                yield from self._passing_whole(rest, stop_ids, banned_ids)
            else:  # a few candidates (a top-k row): a bit test each costs less than numpy's steps
                sure, pieces = self._sure_bytes(), self.codec.pieces()
                yield from self._passing_each(rest, stop_ids, banned_ids, allowed, sure, pieces)
            return
        yield from self._passing_each(tokens, stop_ids, banned_ids, allowed, b"", [])

    def _passing_whole(self, tokens: list[int], stop_ids: set[int], banned_ids: set[int]) -> list[int]:
        """:meth:`passing` over a whole vocabulary after whole characters: the verdicts of
        :meth:`_decided`, the walk's where ``tokens`` are a good part of what the store admits;
        the rest of ``tokens`` go the way of :meth:`_passing_each`, and the passing tokens come
        out in ``tokens``' order (a list: no generator's step per token)."""
        import numpy as np

        ranked = np.array(tokens, dtype=np.int64)
        n = len(_walk_table(self.codec).pieces)
        wide = len(tokens) * WALK_FROM_SHARE >= _count(np.frombuffer(self._admitted_bytes(), dtype=np.uint8))
        passed_bits, decided_bits = self._decided(n, self._own_verdicts(n, stop_ids, banned_ids), walk=wide)
        passed_at, decided_at = _unpacked(passed_bits, n), _unpacked(decided_bits, n)
        inside = (ranked >= 0) & (ranked < n)
        at = np.where(inside, ranked, 0)
        passed, decided = inside & passed_at[at], inside & decided_at[at]
        rest = np.flatnonzero(~decided)
        fed = self._fed(ranked[rest].tolist(), stop_ids, banned_ids)
        if fed:
            passed[rest[np.isin(ranked[rest], np.fromiter(fed, dtype=np.int64))]] = True
        return ranked[passed].tolist()

    def whole_mask(self, size: int, stop_ids: set[int], banned_ids: set[int]) -> np.ndarray | None:
        """The tokens below ``size`` that pass, as a bool vector by id: :meth:`passing` over
        every id (stop tokens pass when the file may end, banned ones never) without a list of
        ids, for serving's full mask. None where :meth:`passing` reads tokens one by one: without
        a store, while healing, or inside a character."""
        if self.mask() is None or self.healing or not self.ends_whole():
            return None
        own = self._own_verdicts(size, stop_ids, banned_ids)
        passed_bits, decided = self._decided(size, own, walk=True)
        undecided = _ids(~decided & _packed(self._admitted_bytes(), size))
        passed = _unpacked(passed_bits, size)
        for token in self._fed({*undecided, *own}, stop_ids, banned_ids):
            passed[token] = True
        return passed

    def _decided(self, size: int, own: list[int], walk: bool) -> tuple[np.ndarray, np.ndarray]:
        """The verdicts on the ids below ``size`` that need no feed, as bitsets (passed,
        decided; :func:`_packed`'s bytes): those the store admits and vouches for
        (:meth:`.MaskStore.sure`), and where ``walk`` and the C vocabulary walk is built, the
        other admitted ones but those it leaves undecided (:mod:`..masks.vocab_walk`). The ids
        of ``own`` (:meth:`_own_verdicts`) are left undecided, and so is every id the store
        rules out. Packed, a step over a 151,936-token vocabulary reads 19 KB, not 152 KB."""
        import numpy as np

        from ..masks.vocab_walk import native_walk, vocab_walk

        allowed, sure = self._admitted_bytes(), self._sure_bytes()
        table = _walk_table(self.codec)
        plain = np.zeros((size + 7) // 8, dtype=np.uint8)
        for token in own:
            plain[token >> 3] |= 1 << (token & 7)
        admitted = _packed(allowed, size) & ~plain
        vouched = _packed(sure, size) & _packed(table.piece_bits, size)
        passed = admitted & vouched
        self.vouched += _count(passed)
        decided = passed.copy()
        module = native_walk() if walk and not self.checker.pending_cr else None
        if module is not None:  # the walk reads the trie below every token it is asked about
            asked = admitted & ~vouched
            walk_of = vocab_walk(self.checker.layer, table.texts)
            passing, undecided = walk_of.walk(self.checker, module, only=asked.tobytes())
            walked = asked & _packed(table.text_bits, size) & ~_packed(undecided, size)
            self.walked += _count(walked)
            passed |= walked & _packed(passing, size)
            decided |= walked
        return passed, decided

    def _own_verdicts(self, size: int, stop_ids: set[int], banned_ids: set[int]) -> list[int]:
        """The ids below ``size`` whose verdict is this state's own, not the store's or the
        walk's: stops, banned ids and the children already known."""
        return [t for t in (*stop_ids, *banned_ids, *self._children) if 0 <= t < size]

    def _fed(self, tokens: Iterable[int], stop_ids: set[int], banned_ids: set[int]) -> set[int]:
        """Those of ``tokens`` that pass, each the way of :meth:`_passing_each`."""
        pieces = _walk_table(self.codec).pieces
        allowed, sure = self._admitted_bytes(), self._sure_bytes()
        return set(self._passing_each(tokens, stop_ids, banned_ids, allowed, sure, pieces))

    def _passing_each(
        self,
        tokens: Iterable[int],
        stop_ids: set[int],
        banned_ids: set[int],
        allowed: bytes,
        sure: bytes,
        pieces: list[str | None],
    ) -> Iterator[int]:
        """:meth:`passing` token by token once the store screens: ``allowed`` the store's
        admitted tokens, ``sure`` those it vouches for and ``pieces`` the tokens' texts read
        from their bytes (empty where they cannot be)."""
        size, children, n_pieces = len(allowed) * 8, self._children, len(pieces)
        for token in tokens:
            if token in stop_ids:
                if self.can_end():
                    yield token
            elif not (0 <= token < size and allowed[token >> 3] >> (token & 7) & 1) or token in banned_ids:
                continue
            elif token in children:
                if children[token] is not None:
                    yield token
            else:
                text = pieces[token] if token < n_pieces else None
                if text is None:
                    if self._verdict(token):
                        yield token
                elif sure[token >> 3] >> (token & 7) & 1:
                    self.vouched += 1
                    yield token
                else:
                    self.fed += 1
                    if not text or self._passes_piece(token, text):
                        yield token

    def _passes_piece(self, token: int, piece: str) -> bool:
        """Whether the checker takes ``piece`` (``token``'s text): its first character is fed
        once per character (:meth:`_after`); the rest is vouched for by the store when it is
        itself a token's text (:meth:`.TextCodec.tail`), else fed."""
        after = self._after(piece[0])
        if after is None or len(piece) == 1:
            return after is not None
        if self._rest_vouched(piece[0], after, self.codec.tail(token)):
            self.vouched += 1
            return True
        return after.feed(piece[1:]) is not None

    def _rest_vouched(self, first: str, after: Checker, rest: int) -> bool:
        """Whether the store vouches for token ``rest`` after ``after`` (the checker after
        ``first``): then the checker takes ``first`` and ``rest``'s text, the token's whole text.
        The store is asked from the second candidate starting with ``first`` on: one ask costs
        a few checks, and tokens that start with a blank (``" name"``), most of a step's checks,
        share it."""
        if rest < 0 or self.store is None:
            return False
        bits = self._sure_after_first.get(first)
        if bits is None:
            self._sure_after_first[first] = b""
            return False
        if not bits:
            bits = self._sure_after_first[first] = _as_bytes(self.store.sure(after))
        return _has(bits, rest)

    def mask(self) -> np.ndarray | None:
        """The store's bitset of the tokens that may pass after this state (``uint64`` words,
        computed once); None without a store, or while healing (the tokens then write prefix
        text again, a state the store does not know)."""
        if self._words is None and self.store is not None and not self.healing:
            self._words = self.store.mask(self.checker, self.held)
        return self._words

    def admits(self, token: int) -> bool:
        """Whether the store lets ``token`` through to the exact check (True without a mask);
        ids outside the store's vocabulary are never text."""
        bits = self._admitted_bytes()
        return _has(bits, token) if bits else True

    def _admitted_bytes(self) -> bytes:
        """:meth:`mask` as bytes (empty without a mask)."""
        bits = self._bits
        if not bits:
            words = self.mask()
            if words is not None:
                bits = self._bits = _as_bytes(words)
        return bits

    def narrow(self, keys: np.ndarray, also: Iterable[int] = ()) -> np.ndarray:
        """``keys`` (a logits row) with the tokens the store rules out at -inf, those of ``also``
        (stop tokens) kept; ``keys`` themselves without a mask."""
        words = self.mask()
        if words is None or self.store is None:
            return keys
        from ..masks.store import mask_logits, unpack

        return mask_logits(keys, unpack(words, self.store.vocab_size), also)

    def admitted(self, size: int) -> Iterable[int]:
        """The token ids below ``size`` that the store lets through (all of them without a mask),
        ascending: what a scan of the whole vocabulary checks."""
        words = self.mask()
        if words is None or self.store is None:
            return range(size)
        import numpy as np

        from ..masks.store import unpack

        return np.flatnonzero(unpack(words, self.store.vocab_size)[:size]).tolist()

    def _seen(self, ids: tuple[int, ...]) -> str:
        """The decoding of ``ids`` (a tail of the middle) without the held-back characters."""
        text = self.codec.decode(list(ids))
        return text[: len(text) - self.held] if self.held else text

    def ends_whole(self) -> bool:
        """Whether the middle's bytes so far end where no later byte changes their text (cached)."""
        if self._ends_whole is None:
            self._ends_whole = not self.held and not self.codec.unfinished_char(list(self.ids[-4:]))
        return self._ends_whole

    def _piece(self, token: int) -> str | None:
        """The text ``token`` adds, read from its bytes (:meth:`.TextCodec.piece`) when the
        middle ends whole; None when only the decoder can tell."""
        return self.codec.piece(token) if self.ends_whole() else None

    def added_text(self, token: int) -> str | None:
        """The text ``token`` adds to the middle (None if the decoder rewrote earlier text)."""
        piece = self._piece(token)
        return piece if piece is not None else self._decoded_text(token)

    def _decoded_text(self, token: int) -> str | None:
        """:meth:`added_text` by the tokenizer's decoder: the window's decoding with and
        without ``token``, the whole middle's where the window's is rewritten."""
        window = self.ids[-_DECODE_WINDOW:]
        if self._window_text is None:
            self._window_text = self._seen(window)
        text = self.codec.decode(list(window) + [token])
        if text.startswith(self._window_text):
            return text[len(self._window_text) :]
        base, text = self._seen(self.ids), self.codec.decode(list(self.ids) + [token])
        return text[len(base) :] if text.startswith(base) else None

    def _advance(self, token: int) -> ConstraintState | None:
        piece = self._piece(token)
        #: the common case: whole characters after whole characters, nothing to hold back
        whole = piece is not None
        new = piece if whole else self._decoded_text(token)
        if new is None:
            return None
        ids = self.ids + (token,)
        if self.healing:
            healing = rest_of_healing(self.healing, new)
            if healing is None:
                return None
            if healing:
                return ConstraintState(
                    self.checker, self.codec, ids, 0, healing, self.word_suffix, store=self.store
                )
            new = new[len(self.healing) :]
        unfinished = b"" if whole else self.codec.unfinished_char(list(ids[-4:]))
        held = _held_back(self.codec, unfinished, new)
        if held:
            new = new[:-held]
        nxt = self._feed(new) if new else self.checker
        if nxt is None or (held and not any(nxt.feed(ch) for ch in utf8_completions(unfinished))):
            return None
        ends_in_word = is_word_char(new[-1]) if new else self.ends_in_word
        state = ConstraintState(nxt, self.codec, ids, held, "", self.word_suffix, ends_in_word, self.store)
        if whole:
            state._ends_whole = True
        return state

    def _feed(self, text: str) -> Checker | None:
        """The checker after ``text``.  The candidates of one step that start with the same
        character share the checker after it: that character usually ends the symbol in
        progress (``foo`` then ``(``, ``.``, `` ``), and the parser's step for the ended symbol
        is the dear part of a candidate's check, the same for all of them."""
        after = self._after(text[0])
        if after is None or len(text) == 1:
            return after
        return after.feed(text[1:])

    def _after(self, first: str) -> Checker | None:
        """The checker after the character ``first`` (cached per state, see :meth:`_feed`)."""
        if first in self._after_first:
            return self._after_first[first]
        after = self._after_first[first] = self.checker.feed(first)
        return after

    def end_inside(self, token: int, suffix: str) -> str | None:
        """The start of ``token``'s text (maybe empty) that completes the file when the rest of
        the token is the suffix's own beginning, not only blanks: the model has written past
        the end of the middle and into the suffix. None if there is no such cut."""
        new = self.added_text(token)
        if not new or self.held or self.healing or not suffix:
            return None
        for cut in range(len(new) - 1, -1, -1):
            rest = new[cut:]
            if rest.strip() and suffix.startswith(rest):
                if self.word_suffix and (is_word_char(new[cut - 1]) if cut else self.ends_in_word):
                    continue  # the middle's last name would run into the suffix's first
                if not cut:  # (the middle ends here: the verdict a stop token reads too, cached)
                    return "" if self.can_end() else None
                end = self.checker.feed(new[:cut])
                if end is not None and end.is_complete():
                    return new[:cut]
        return None

    def final_checker(self) -> Checker | None:
        """The checker with the held-back characters fed as U+FFFD, as they stay in the final text."""
        return self.checker.feed(REPLACEMENT * self.held) if self.held else self.checker

    def can_end(self) -> bool:
        """Whether prefix + middle + suffix is a complete program now (cached)."""
        if self._can_end is None:
            fused = self.word_suffix and self.ends_in_word
            final = None if self.healing or fused else self.final_checker()
            self._can_end = final is not None and final.is_complete()
        return self._can_end


def _as_bytes(words: np.ndarray) -> bytes:
    """A store's bitset (``uint64`` words) as bytes, token t at bit t % 8 of byte t // 8: a
    one-token test on bytes is cheaper than on the array."""
    return words.view("u1").tobytes()


def _packed(bits: bytes | np.ndarray, size: int) -> np.ndarray:
    """A bitset (bytes, or packed ``uint8``) as ``uint8`` bytes for ``size`` ids exactly: cut or
    padded with zero bytes, and the bits past ``size`` in its last byte cleared. A view of
    ``bits`` where they hold no id past ``size`` (read-only for bytes: no copy of 19 KB)."""
    import numpy as np

    nbytes = (size + 7) // 8
    have = np.frombuffer(bits, dtype=np.uint8) if isinstance(bits, bytes) else bits
    spare = size % 8  # (unused bits of the last byte)
    clean = nbytes and (len(have) == nbytes or (len(have) > nbytes and not have[nbytes:].any()))
    if clean and not (spare and have[nbytes - 1] >> spare):
        return have[:nbytes]
    out = np.zeros(nbytes, dtype=np.uint8)
    n = min(len(out), len(have))
    out[:n] = have[:n]
    if spare:
        out[-1] &= (1 << spare) - 1
    return out


def _unpacked(bits: np.ndarray, size: int) -> np.ndarray:
    """:func:`_packed` bytes as a (writable) bool vector of ``size`` ids."""
    import numpy as np

    return np.unpackbits(bits, count=size, bitorder="little").view(bool)


def _count(bits: np.ndarray) -> int:
    """How many ids a packed bitset holds (numpy 2's ``bitwise_count`` where there is one)."""
    import numpy as np

    bitwise_count = getattr(np, "bitwise_count", None)
    if bitwise_count is not None:
        return int(bitwise_count(bits).sum())
    return int(np.count_nonzero(np.unpackbits(bits)))


def _ids(bits: np.ndarray) -> list[int]:
    """The ids a packed bitset holds, ascending, read off its nonzero bytes alone (a whole
    mask's undecided ids are a few dozen of 151,936)."""
    import numpy as np

    at = np.flatnonzero(bits)
    byte, bit = np.nonzero(np.unpackbits(bits[at], bitorder="little").reshape(-1, 8))
    return (at[byte] * 8 + bit).tolist()


@dataclass(frozen=True)
class _WalkTable:
    """A codec's tokens as a whole mask reads them (made once per codec and pieces table)."""

    pieces: list[str | None]
    #: which ids have a :meth:`.TextCodec.piece` (packed as a bitset's bytes)
    piece_bits: np.ndarray
    #: :func:`walk_texts`, and which ids have some (packed)
    texts: list[TokenTexts]
    text_bits: np.ndarray


_WALK_TABLES: weakref.WeakKeyDictionary[TextCodec, _WalkTable] = weakref.WeakKeyDictionary()


def _walk_table(codec: TextCodec) -> _WalkTable:
    """:class:`_WalkTable` of ``codec`` (made on the first whole mask, again if its pieces change)."""
    pieces = codec.pieces()
    known = _WALK_TABLES.get(codec)
    if known is None or known.pieces is not pieces:
        import numpy as np

        texts = walk_texts(codec)
        known = _WALK_TABLES[codec] = _WalkTable(
            pieces,
            np.packbits([p is not None for p in pieces], bitorder="little"),
            texts,
            np.packbits([t is not None for t in texts], bitorder="little"),
        )
    return known


def _held_back(codec: TextCodec, unfinished: bytes, text: str) -> int:
    """How many of ``text``'s trailing U+FFFD stand for the character that ``unfinished`` (the
    bytes the text ends inside of) begins: the decoder's count, at most the ones there are."""
    return min(codec.held_replacements(unfinished), len(text) - len(text.rstrip(REPLACEMENT)))


def walk_texts(codec: TextCodec) -> list[TokenTexts]:
    """Each id's text after whole characters as the vocabulary walk reads it
    (:mod:`..masks.vocab_walk`): its piece; for a token whose bytes are not whole characters,
    the texts one of which it must pass as: its whole characters (:meth:`.TextCodec.raw_text`)
    followed by each character the character it ends inside of may become
    (:func:`utf8_completions`), as :meth:`ConstraintState._advance` checks it; else None."""
    texts: list[TokenTexts] = []
    for token, piece in enumerate(codec.pieces()):
        raw = None if piece is not None else codec.raw_text(token)
        if raw is None:
            texts.append(piece)
            continue
        unfinished = codec.unfinished_char([token])
        held = _held_back(codec, unfinished, raw)
        if held:
            texts.append(tuple(raw[:-held] + ch for ch in utf8_completions(unfinished)))
        else:
            texts.append(raw or None)
    return texts


def _has(bits: bytes, token: int) -> bool:
    """Whether ``token`` is in a bitset read as bytes (token t: bit t % 8 of byte t // 8)."""
    return 0 <= token < len(bits) * 8 and bool(bits[token >> 3] >> (token & 7) & 1)


def is_word_char(ch: str) -> bool:
    """Whether ``ch`` can continue a name: a middle ending in one fuses with a suffix starting in one."""
    return ("a" + ch).isidentifier()


def rest_of_healing(healing: str, new: str) -> str | None:
    """What is left to write of the healed text ``healing`` after a token that writes ``new``:
    ``""`` once it is all written (``new`` may go on past it), None when ``new`` strays from it."""
    if healing.startswith(new):
        return healing[len(new) :]
    return "" if new.startswith(healing) else None


def healed_tail(codec: TextCodec, prefix: str, limit: int = 16) -> str:
    """Token healing (the left edge): the text of the prefix's last token when the cursor may
    split a token there (``retu|``, ``self.na|``, ``x =|``): the prompt ends before it, and the
    first generated tokens must write it again, so the model continues from a boundary it was
    trained on instead of one the cursor made. Empty when nothing should be healed (no token,
    or one that holds a line break: where a tokenizer joins the break and the indentation after
    it into one token, rewriting the break lets a model server, which tells only its likeliest
    tokens, rank the many blank tokens otherwise than the loop does in process). Blanks are
    healed, after code on the line (``for x in |``) and a line's indentation (``if x:\n    |``,
    where an editor puts the cursor after Enter): byte-level tokenizers attach a space to the
    word after it, and a model shown the blanks alone writes one of its own (``in  values``;
    Qwen2.5-Coder-0.5B began 11 of 20 items at held-out new-line cursors with a blank)."""
    ids = codec.encode(prefix[-4 * limit :]) if prefix else []
    if not ids:
        return ""
    tail = codec.decode(ids[-1:])
    if len(tail) > limit or REPLACEMENT in tail or not prefix.endswith(tail) or "\n" in tail or "\r" in tail:
        return ""
    return tail


@lru_cache(maxsize=4096)
def utf8_completions(unfinished: bytes) -> tuple[str, ...]:
    """Characters whose UTF-8 starts with ``unfinished``: the first that can start a name,
    continue one, or be any.

    Python accepts a non-ASCII character only in a name (identifier characters) or
    in a string or comment (any character), so these three stand for all of them.
    """
    size = 2 if unfinished[0] < 0xE0 else 3 if unfinished[0] < 0xF0 else 4
    found: dict[str, str] = {}
    for rest in product(range(0x80, 0xC0), repeat=size - len(unfinished)):
        try:
            ch = (unfinished + bytes(rest)).decode("utf-8")
        except UnicodeDecodeError:
            continue
        found.setdefault("any", ch)
        if ch.isidentifier():
            found.setdefault("start", ch)
        if ("a" + ch).isidentifier():
            found.setdefault("continue", ch)
        if len(found) == 3:
            break
    return tuple(dict.fromkeys(found.values()))


def passing_tokens(
    state: ConstraintState,
    ranked: Iterable[int],
    stop_ids: set[int],
    banned_ids: set[int],
    whole: bool = False,
) -> Iterator[int]:
    """The tokens of ``ranked``, in order, that pass: :func:`passing_candidates` without the
    states after them (:meth:`ConstraintState.passing`; ``whole``: all of ``ranked`` is
    walked), for the walks that build a mask."""
    return state.passing(ranked, stop_ids, banned_ids, whole)


def passing_candidates(
    state: ConstraintState, ranked: Iterable[int], stop_ids: set[int], banned_ids: set[int]
) -> Iterator[tuple[int, ConstraintState]]:
    """The tokens of ``ranked``, in order, that pass.

    A stop token passes when the file is complete; any other when it keeps the file completable.
    With a store on ``state``, every candidate after the first checked is screened by it first
    (:meth:`ConstraintState.child`): the same tokens pass, fewer are fed to the checker.
    """
    for token in ranked:
        if token in stop_ids:
            if state.can_end():
                yield token, state
        elif token not in banned_ids:
            nxt = state.candidate(token)
            if nxt is not None:
                yield token, nxt
