"""The public checker: feed text, ask whether the program can still be, or now is, complete."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, NamedTuple

from . import lexer
from .automata.grammar import Grammar, load_builtin, load_file
from .errors import GrammarError, InputError, UncompletableError
from .finishing.finish_search import prepare_finish_search, shortest_finish
from .layers.base_layer import PlainLayer
from .layers.layer_protocol import Branch, Layer, LayoutT
from .layers.python_layer import PythonLayer
from .prefix_cache import LRU, PrefixCache
from .quotients.right_quotient import PlanKey, SuffixPlan, plan_suffix
from .rejection import first_error_offset
from .versions import PythonVersion, VersionLike, parse_python_version

#: a layer class, or any callable that builds a layer: called as ``layer_class(grammar)``, or
#: ``layer_class(grammar, version)`` for a language with versions
LayerClass = Callable[..., Layer[Any]]


class Language(NamedTuple):
    """How to build a language: a grammar and a layer."""

    #: a built-in grammar's name (``grammars/NAME.lark``), or the path of a ``.lark`` file
    grammar: str | Path
    #: the grammar's start rule
    start: str
    layer_class: LayerClass
    #: whether the language has (Python) versions: version gates in the grammar, and the
    #: version passed to the layer class
    versioned: bool


#: language name -> how to build it (see :func:`register_language`)
LANGUAGES: dict[str, Language] = {
    "python": Language("python", "file_input", PythonLayer, True),
    "json": Language("json", "value", PlainLayer, False),
}


def register_language(
    name: str,
    grammar: str | os.PathLike[str],
    start: str,
    layer_class: LayerClass = PlainLayer,
    versioned: bool = False,
) -> None:
    """Add a language (or replace one): a Lark grammar (a built-in grammar's name, or the
    path of a ``.lark`` file) with its start rule, and the layer that reads it
    (:class:`~.base_layer.PlainLayer` for a grammar whose tokens go straight to the parser).
    Afterwards ``fim_checker(prefix, suffix, language=name)`` checks it."""
    LANGUAGES[name] = Language(
        grammar if isinstance(grammar, str) else Path(grammar), start, layer_class, versioned
    )
    for cache in (_LAYERS, _CONTEXTS):
        for key in [key for key in cache if key[0] == name]:
            del cache[key]


def get_layer(language: str, python_version: VersionLike | None = None) -> Layer[Any]:
    """The (shared, cached) language layer for ``language`` at a target Python version
    (default: the newest; ignored by languages without versions)."""
    return _layer(language, parse_python_version(python_version))


def prepare(language: str = "python", python_version: VersionLike | None = None) -> None:
    """Build now what the first middles of ``language`` at ``python_version`` would otherwise
    pay for, once per process: the layer (grammar, lexer automaton) and the finish search's
    tables (about 0.3 s compiled for Python, met mid-generation otherwise, where no time limit
    cuts them short). A server calls it at load."""
    prepare_finish_search(get_layer(language, python_version))


_LAYERS: dict[tuple[str, PythonVersion], Layer[Any]] = {}


#: one layer per language and version, also where a decoder's thread prepares it at load while
#: a first request asks for it (a mask store is for one layer object)
_LAYERS_LOCK = threading.Lock()


def _layer(language: str, version: PythonVersion) -> Layer[Any]:
    layer = _LAYERS.get((language, version))
    if layer is None:
        with _LAYERS_LOCK:
            layer = _LAYERS.get((language, version))
            if layer is None:
                layer = _LAYERS[language, version] = _build_layer(language, version)
    return layer


def _build_layer(language: str, version: PythonVersion) -> Layer[Any]:
    try:
        grammar_source, start, layer_class, versioned = LANGUAGES[language]
    except KeyError:
        raise GrammarError(f"unknown language {language!r}; known: {', '.join(sorted(LANGUAGES))}") from None
    gates = version if versioned else None
    grammar: Grammar = (
        load_builtin(grammar_source, start, gates)
        if isinstance(grammar_source, str)
        else load_file(grammar_source, start, gates)
    )
    return layer_class(grammar, version) if versioned else layer_class(grammar)


def _clean(text: str, ending: str) -> tuple[str, str]:
    """Translate ``\\r\\n`` and lone ``\\r`` to ``\\n`` as CPython does, across chunk borders.
    ``ending`` is how the raw text read before ends (``"\\r"``, ``"\\r\\n"`` or ``""``); returns
    the translated text and how the raw text ends after it."""
    if not text or (not ending and "\r" not in text):
        return text, ending  # (no line break to translate: the common case)
    raw = text
    if ending == "\r" and text.startswith("\n"):
        text = text[1:]
    ending = (
        "\r\n"
        if raw.endswith("\r\n") or (ending == "\r" and raw == "\n")
        else "\r"
        if raw.endswith("\r")
        else ""
    )
    return translate_line_breaks(text), ending


def translate_line_breaks(text: str) -> str:
    """``text`` with each ``\\r\\n`` and lone ``\\r`` as ``\\n``, as CPython reads source: what
    a checker with no ``\\r`` pending reads of it."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


#: the byte order mark CPython drops from the start of a source file (and only there)
BOM = "\ufeff"


def _invalid_character_at(text: str) -> int | None:
    """The offset of the first character no source file may contain, or None: NUL and lone
    surrogates, which CPython rejects before tokenizing (every other character is the
    grammar's business: U+0001 is fine in a string and an error in code)."""
    if "\0" not in text and text.isascii():  # (the common case: no search, no encoding)
        return None
    nul = text.find("\0")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start if nul < 0 else min(nul, error.start)
    return None if nul < 0 else nul


def is_valid_source_text(text: str) -> bool:
    """Whether ``text`` holds no character CPython refuses before tokenizing (a NUL, a lone
    surrogate): a text with one is never fed."""
    return _invalid_character_at(text) is None


class Checker(Generic[LayoutT]):
    """An immutable constraint state: the text read so far keeps the program completable.

    ``feed`` never changes the checker it is called on, so one checker can be fed many
    candidate continuations (top-k checking forks for free).
    """

    __slots__ = ("_at_file_start", "_branches", "_ending", "_layer", "_plan")

    def __init__(
        self,
        layer: Layer[LayoutT],
        branches: list[Branch[LayoutT]],
        ending: str = "",
        plan: SuffixPlan[LayoutT] | None = None,
        at_file_start: bool = False,
    ) -> None:
        self._layer = layer
        self._branches = branches
        self._ending = ending  # how the raw text read so far ends: "\r", "\r\n" or ""
        self._plan = plan
        self._at_file_start = at_file_start  # nothing read yet (a byte order mark may come)

    @property
    def layer(self) -> Layer[LayoutT]:
        """The language layer this checker reads with."""
        return self._layer

    @property
    def branches(self) -> list[Branch[LayoutT]]:
        """The lexer branches alive after the text read so far (see :mod:`.lexer`)."""
        return self._branches

    @property
    def pending_cr(self) -> bool:
        """Whether the text read so far ends in a carriage return that a line feed may join."""
        return self._ending == "\r"

    def feed(self, text: object) -> Checker[LayoutT] | None:
        """The checker after ``text``, or None if no continuation can make a valid program.
        ``text`` is typed ``object`` so that a compiled engine raises :class:`InputError` for a
        non-str too (mypyc checks an argument's declared type before the body runs)."""
        if not isinstance(text, str):
            raise InputError(f"feed() takes str, not {type(text).__name__}")
        if not text:
            return self
        plain = text.isascii() and "\0" not in text and "\r" not in text
        if plain and not (self._ending or self._at_file_start):
            # (the common case, a decoding step's token: no character to refuse, no byte order
            # mark to drop, no line break to translate)
            branches = lexer.advance(self._layer, self._branches, text)
            return Checker(self._layer, branches, "", self._plan) if branches else None
        if not is_valid_source_text(text):
            return None
        if self._at_file_start and text.startswith(BOM):
            text = text[1:]  # CPython drops a byte order mark from the start of a file
        text, ending = _clean(text, self._ending)
        if not text:
            return Checker(self._layer, self._branches, ending, self._plan)
        branches = lexer.advance(self._layer, self._branches, text)
        if not branches:
            return None
        return Checker(self._layer, branches, ending, self._plan)

    def with_suffix(self, plan: SuffixPlan[LayoutT] | None) -> Checker[LayoutT]:
        """This checker with another suffix (the same text read so far)."""
        return Checker(self._layer, self._branches, self._ending, plan, self._at_file_start)

    def is_complete(self) -> bool:
        """Whether everything fed so far, followed by the suffix, is a complete valid program."""
        plan, layer = self._plan, self._layer
        if plan is None:
            return self._complete_at_end(self._branches, self._ending)
        if self._at_file_start and plan.head.startswith(BOM):  # an empty middle: the suffix starts the file
            rest = Checker(layer, self._branches).feed(plan.head[1:] + plan.tail)
            return rest is not None and rest.is_complete()
        head, at = plan.head, 0
        if self._ending == "\r" and head.startswith("\n"):  # the middle ended in \r, the suffix opens with \n
            if head == "\n" and not plan.split:  # ... and that \r\n ends the file
                return self._complete_at_end(self._branches, "\r\n")
            at = 1
        branches = self._branches
        visited: list[tuple[PlanKey[LayoutT], list[Branch[LayoutT]]]] = []
        result: bool | None = None
        for stop in plan.checkpoints:
            if stop <= at:
                continue
            branches = lexer.advance(layer, branches, head[at:stop])
            at = stop
            if not branches:
                result = False
                break
            if stop == len(head):
                break
            key = (stop, tuple(map(lexer.branch_key, branches)))
            known = plan.memo.get(key)
            if known is not None:
                result = known[0]
                break
            visited.append((key, branches))
        if result is None:
            result = self._finish(plan, branches)
        for key, kept in visited:  # kept: holds the origin sets whose ids are in the key
            plan.memo.put(key, (result, kept))
        return result

    def _complete_at_end(self, branches: list[Branch[LayoutT]], ending: str) -> bool:
        """Whether the file ends here, its raw text ending in ``ending``: before 3.12 CPython
        reads a final ``\\r\\n`` as two line breaks (see ``PythonLayer.crlf_end_adds_newline``)."""
        layer = self._layer
        if ending == "\r\n" and layer.crlf_end_adds_newline:
            branches = lexer.advance(layer, branches, "\n")
        return lexer.complete(layer, branches)

    def shortest_finish(self, seconds: float | None = None) -> str | None:
        """A short text that completes the program from here (suffix included), checked
        with ``is_complete``; None if the search finds none (within ``seconds``, if given).
        For ending inside a budget."""
        head = None if self._plan is None else self._plan.head
        return shortest_finish(self, head, seconds=seconds)

    def _finish(self, plan: SuffixPlan[LayoutT], branches: list[Branch[LayoutT]]) -> bool:
        """Complete after the whole head: use the tail's verdict where the head ends a file."""
        layer = self._layer
        if not plan.split:
            return lexer.complete(layer, branches)
        # A branch that ends a complete file before the tail's first line needs nothing but a
        # valid tail; any other branch (a decorator waiting for its def, an open string, a
        # middle gone wrong) is followed through the tail for real and usually dies at once.
        # One that lives on (a middle inside a bracket the tail closes) is read through the
        # whole tail: its verdict is remembered by the branches' keys, which later middles
        # that end inside the same bracket share.
        slow = []
        for branch in branches:
            parser, layout, lexeme_state, lexeme, _ = branch
            if layer.at_statement_boundary(branch) and layer.end_of_input(
                parser, layout, lexeme_state, lexeme
            ):
                if plan.tail_valid:
                    return True
            else:
                slow.append(branch)
        if not slow:
            return False
        key = (len(plan.head), tuple(map(lexer.branch_key, slow)))
        known = plan.memo.get(key)
        if known is not None:
            return known[0]
        result = lexer.complete(layer, lexer.advance(layer, slow, plan.tail))
        plan.memo.put(key, (result, slow))  # slow: holds the origin sets whose ids are in the key
        return result


class _Context:
    """Per-language (and version) state shared by all checkers: the empty-file checker and
    the caches."""

    def __init__(self, language: str, version: PythonVersion) -> None:
        self.layer = _layer(language, version)
        self.start: Checker[Any] = Checker(self.layer, [self.layer.initial_branch()], at_file_start=True)
        #: an empty file's checker for a suffix's tail, which never starts the file (no BOM there,
        #: and past the module's leading statements: see PythonLayer.at_statement_boundary)
        self.tail_start: Checker[Any] = Checker(self.layer, [self.layer.initial_branch(file_start=False)])
        self.prefixes: PrefixCache[Checker[Any]] = PrefixCache()
        self.suffixes: LRU[str, SuffixPlan[Any]] = LRU(64)
        #: checkers along recent suffix tails read from ``tail_start`` (an edit below the
        #: cursor re-reads the tail only from the edit on)
        self.tails: PrefixCache[Checker[Any]] = PrefixCache()

    def plan(self, suffix: str) -> SuffixPlan[Any] | None:
        if not suffix:
            return None
        suffix, ending = _clean(suffix, "")
        if ending == "\r\n" and self.layer.crlf_end_adds_newline:
            suffix += "\n"  # the suffix ends the file (see Checker._complete_at_end)
        plan = self.suffixes.get(suffix)
        if plan is None:
            if self.layer.splits_at_top_level:
                plan = plan_suffix(self.tail_start, suffix)
            else:
                plan = SuffixPlan(self.tail_start, suffix)
            self.suffixes.put(suffix, plan)
        return plan


_CONTEXTS: dict[tuple[str, PythonVersion], _Context] = {}


def _context(language: str, python_version: VersionLike | None = None) -> _Context:
    version = parse_python_version(python_version)
    if language in LANGUAGES and not LANGUAGES[language].versioned:
        version = parse_python_version(None)  # one context for a language without versions
    context = _CONTEXTS.get((language, version))
    if context is None:
        context = _CONTEXTS[language, version] = _Context(language, version)
    return context


def fim_checker(
    prefix: object,
    suffix: object = "",
    language: str = "python",
    python_version: VersionLike | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Checker[Any]:
    """A checker for middles between ``prefix`` and ``suffix``, for the syntax of
    ``python_version`` (``"3.12"`` or ``(3, 12)``; 3.8 to 3.14, default the newest, so that
    valid code of any version is accepted).

    A byte order mark at the start of the prefix is dropped, as CPython drops it from a file.
    Raises :class:`InputError` for non-text input or a character no source file may contain
    (NUL, a lone surrogate) and :class:`UncompletableError` when the
    prefix already rules out every program, or when the suffix does (a part of it that must be
    valid on its own is not); ``offset`` says where in prefix + suffix it went wrong. Work on the
    far parts of the file is cached between calls, so a request after a small edit near the
    cursor is cheap.

    With a non-empty suffix the middle is checked against the prefix as it is generated and
    against the suffix when the program is ended (``is_complete``).

    ``should_stop`` (optional) is asked now and then while a long prefix, or the long tail of
    a suffix, is read; when it says so, :class:`~.errors.Interrupted` is raised and the work so
    far is kept, so that a server can put a large file aside for other requests and resume it
    later.
    """
    if not isinstance(prefix, str):  # ``object`` parameters: see Checker.feed
        raise InputError(f"prefix must be str, not {type(prefix).__name__}")
    if not isinstance(suffix, str):
        raise InputError(f"suffix must be str, not {type(suffix).__name__}")
    context = _context(language, python_version)
    check_characters(prefix, suffix)
    checker = context.prefixes.checker_for(context.start, prefix, should_stop)
    if checker is None:
        raise UncompletableError(
            "the prefix cannot be completed to a valid program",
            offset=first_error_offset(context.start, prefix),
        )
    plan = context.plan(suffix)
    if plan is not None:
        plan.check_tail(lambda tail: context.tails.checker_for(context.tail_start, tail, should_stop))
        broken = plan.unjoinable()
        if broken is not None:
            offset, reason = broken
            raise UncompletableError(reason, offset=len(prefix) + offset)
    return checker.with_suffix(plan)


def check_characters(prefix: str, suffix: str) -> None:
    """Raise :class:`InputError` at the first character of ``prefix + suffix`` that no source
    file may contain (NUL, a lone surrogate), naming its offset and line."""
    for name, text, base in (("prefix", prefix, 0), ("suffix", suffix, len(prefix))):
        bad = _invalid_character_at(text)
        if bad is not None:
            line = (prefix + suffix).count("\n", 0, base + bad)
            raise InputError(
                f"the {name} contains {text[bad]!r} at offset {base + bad} (line {line + 1}), "
                "which no source file may contain",
                offset=base + bad,
            )


def clear_caches() -> None:
    """Forget cached prefixes and suffixes (grammar-level tables stay): the next request
    for any file is a cold build. Benchmarks use it; editors never need to."""
    for context in _CONTEXTS.values():
        context.prefixes.clear()
        context.suffixes.clear()
        context.tails.clear()
