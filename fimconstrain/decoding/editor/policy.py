"""What an editor shows at a cursor: the one policy behind the language server, ``fimconstrain
complete`` and the editor-quality benchmarks.

The cursor's context says whether a line or a block is wanted (:func:`wants_multiline`); the
middle is constrained at the file's Python version (:mod:`.python_version`; a file that parses
only at a newer version is completed as that one, never refused), ended by the one end-of-middle
policy (:meth:`..loop.options.DecodeOptions.editor`), and shown only when it is valid, not blank, and
the model's confidence in it passes the model's fitted threshold (:mod:`..models.confidence`): valid and
likely, or nothing.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ...engine.errors import FimConstrainError, Interrupted
from ...engine.positions import NEWLINE, last_line
from ...engine.versions import PythonVersion
from ..loop.options import Controls, DecodeOptions
from ..loop.result import FimResult, StopReason
from ..models.confidence import ConfidenceGate
from .python_version import accepts, newest_accepting

if TYPE_CHECKING:
    from typing import Any

#: the sampling temperature of the items after the first (the first is greedy)
MORE_ITEMS_TEMPERATURE = 0.8
#: seconds before a deadline at which generation stops, so that ending the middle (a decode
#: step, the end-of-middle policy, the validity check) is done by the deadline
ENDING_RESERVE_SECONDS = 0.1


def wants_multiline(prefix: str, suffix: str, policy: str = "auto") -> bool:
    """Whether to offer a block (True) or one line (False) at the cursor between ``prefix`` and ``suffix``.

    ``auto``: text after the cursor on its line -> one line (an edit inside a line);
    an empty or indentation-only line, or a line that opens a block (ends in ``:``)
    -> a block; otherwise (finishing a line) -> one line. ``always`` / ``never``: as they say.
    """
    if policy == "always":
        return True
    if policy == "never":
        return False
    rest = NEWLINE.split(suffix, maxsplit=1)[0]
    if rest.strip():
        return False
    line = last_line(prefix)
    if not line.strip():
        return True
    code = re.sub(r"\s*#[^'\"]*$", "", line).rstrip()  # drop a trailing comment (not one inside a string)
    return code.endswith(":")


class Decoder(Protocol):
    """What makes the middles: the decode loop over a model backend (:class:`..loop.generate.FimDecoder`,
    a model server's too), or anything that answers as it does (tests' doubles)."""

    @property
    def python_version(self) -> PythonVersion:
        """The syntax a middle is checked as unless the options say."""
        ...

    def generate(
        self,
        prefix: str,
        suffix: str,
        options: DecodeOptions | None = None,
        controls: Controls | None = None,
        **changes: Any,
    ) -> FimResult: ...


class Request(Protocol):
    """The caller's view of a request in progress (the language server's job; nothing for the CLI)."""

    @property
    def cancelled(self) -> bool:
        """The items are no longer wanted (a newer request, the client cancelled)."""
        ...

    def expired(self) -> bool:
        """No time is left for another item."""
        ...

    def should_stop(self) -> bool:
        """Polled once per decode step and while the file is read: stop now."""
        ...

    def on_token(self, token: int) -> None:
        """Called for each token the decode loop chooses."""
        ...

    def on_middle(self, middle: str) -> None:
        """Called after each token with the middle the generation has written so far."""
        ...


class Deadline:
    """A request nobody cancels that must end ``seconds`` from now (never, by default: the
    command line's; a benchmark's time limit)."""

    cancelled = False

    def __init__(self, seconds: float = math.inf):
        self.at = time.monotonic() + seconds

    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def should_stop(self) -> bool:
        return time.monotonic() >= self.at - ENDING_RESERVE_SECONDS

    def on_token(self, token: int) -> None:
        pass

    def on_middle(self, middle: str) -> None:
        pass


@dataclass(frozen=True)
class Item:
    """A middle worth showing, with the model's mean token log-probability of it."""

    middle: str
    mean_logprob: float


@dataclass
class Completion:
    """The items at a cursor, most confident first, and how they were made."""

    items: list[Item] = field(default_factory=list)
    #: the version the middles were constrained by (None: stopped before any generation)
    version: PythonVersion | None = None
    #: every generation, shown or not (the first is greedy): timings and stop reasons
    results: list[FimResult] = field(default_factory=list)
    #: the items are what was shown before, less what has been typed since (:class:`ShownItems`)
    recalled: bool = False


class ShownItems:
    """The items made at the cursors seen last (an LRU of :attr:`size` entries keyed by the text
    before and after the cursor), so that a request after typing what an item begins with is
    answered with the rest of it at once, without the model, as is a request at a cursor already
    completed (moving back to it): what llama.vim, Tabby and Continue do with the answers they
    keep. The file is then the same text an item made, so it is exactly as valid. Items a
    request made that nobody was shown (its client cancelled it while it ran on, or the server
    worked ahead of the request) are kept too, and so is a cursor where the model's answer,
    run to its end, was nothing to show (asked there again, greedy decoding would say the same)."""

    def __init__(self, size: int = 64):
        self.size = size
        self._items: OrderedDict[tuple[str, str], list[Item]] = OrderedDict()  # (prefix, suffix) -> items

    def remember(self, prefix: str, suffix: str, items: list[Item], final: bool = False) -> None:
        """Keep the ``items`` made between ``prefix`` and ``suffix``; none: forget there, or
        with ``final`` (the generations ran to their end) keep that there is nothing to show."""
        key = (prefix, suffix)
        self._items.pop(key, None)
        if items or final:
            self._items[key] = items
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def knows(self, prefix: str, suffix: str) -> bool:
        """Whether this cursor's answer is kept (items, or that there are none)."""
        return (prefix, suffix) in self._items

    def recall(self, prefix: str, suffix: str, here: bool = True) -> list[Item] | None:
        """The items kept at this cursor (with ``here``; [] when it is known that there are none),
        or what is left of those kept at an earlier cursor of this text when ``prefix`` is that
        cursor's prefix with the start of an item typed after it (the nearest such cursor
        first); None otherwise."""
        exact = self._items.get((prefix, suffix)) if here else None
        if exact is not None:
            self._items.move_to_end((prefix, suffix))
            return exact
        earlier = [
            (before, items)
            for (before, after), items in self._items.items()
            if after == suffix and len(before) < len(prefix) and prefix.startswith(before)
        ]
        for before, items in sorted(earlier, key=lambda entry: -len(entry[0])):
            typed = prefix[len(before) :]
            rest = [
                Item(item.middle[len(typed) :], item.mean_logprob)
                for item in items
                if item.middle.startswith(typed) and item.middle[len(typed) :].strip()
            ]
            if rest:
                return rest
        return None


def shows(result: FimResult, gate: ConfidenceGate) -> bool:
    """Whether an editor shows ``result``'s middle: valid, not blank, the model's own text (not
    the finish search's), and confident enough."""
    score = result.mean_logprob
    if not result.valid or not result.middle.strip() or result.unshowable:
        return False
    return score is not None and gate.shows(score)


def complete_at_cursor(
    decoder: Decoder,
    prefix: str,
    suffix: str,
    options: DecodeOptions,
    items: int = 1,
    gate: ConfidenceGate | None = None,
    request: Request | None = None,
    verify_text: str | None = None,
    more_temperature: float = MORE_ITEMS_TEMPERATURE,
    progress: bool = False,
    shown: ShownItems | None = None,
    asked_again: bool = False,
) -> Completion:
    """Up to ``items`` distinct middles an editor shows between ``prefix`` and ``suffix``: the
    first greedy, the others sampled at ``more_temperature`` (seeds 1, 2, ...); [] when the
    request is cancelled. ``progress``: a bar over the tokens on a terminal. ``shown``: the items
    made before (:class:`ShownItems`): a request that typed the start of one gets its rest, and
    one at a cursor already completed its items, unless ``asked_again`` (an explicit request
    there wants the model's items, not the ones it has).

    The syntax is ``options.python_version``'s (None: the decoder's), or the newest version's
    when the file (``verify_text``, checked first when given) or the text around the cursor
    does not parse at it but does at the newest (never refused for its version).
    Raises :class:`~fimconstrain.engine.errors.Interrupted` when stopped while the file is read,
    and the engine's :class:`~fimconstrain.engine.errors.FimConstrainError` when no middle can
    join ``prefix`` and ``suffix`` at any version.
    """
    request = request or Deadline()
    gate = gate or ConfidenceGate()
    controls = Controls(
        should_stop=request.should_stop,
        on_token=request.on_token,
        on_middle=request.on_middle,
        interrupt_setup=request.should_stop,
        progress=progress,
    )
    if request.cancelled or request.expired():
        return Completion()
    version = options.python_version or decoder.python_version
    if shown is not None and (recalled := shown.recall(prefix, suffix, here=not asked_again)) is not None:
        shown.remember(prefix, suffix, recalled, final=True)
        return Completion(items=recalled, version=version, recalled=True)
    if verify_text is not None and not accepts(verify_text, "", version, request.should_stop):
        version = newest_accepting(verify_text, "", version) or version
    done = Completion(version=version)
    found: dict[str, float] = {}
    for i in range(items):
        if request.cancelled or (i and request.expired()):
            break
        sampled = {} if i == 0 else dict(temperature=more_temperature, seed=i)
        try:
            result = decoder.generate(prefix, suffix, options, controls, python_version=version, **sampled)
        except Interrupted:
            raise
        except FimConstrainError:  # a syntax error before the cursor, NUL characters...
            newer = newest_accepting(prefix, suffix, version)
            if newer is None:
                raise
            version = done.version = newer
            result = decoder.generate(prefix, suffix, options, controls, python_version=version, **sampled)
        done.results.append(result)
        if request.cancelled:
            break
        if shows(result, gate):
            assert result.mean_logprob is not None  # a shown middle has tokens
            found.setdefault(result.middle, result.mean_logprob)
    if request.cancelled:
        return Completion(version=done.version, results=done.results)
    ranked = sorted(found.items(), key=lambda item: -item[1])
    done.items = [Item(middle, score) for middle, score in ranked]
    if shown is not None:
        final = bool(done.results) and all(result.stopped != StopReason.CANCELLED for result in done.results)
        shown.remember(prefix, suffix, done.items, final=final)
    return done
