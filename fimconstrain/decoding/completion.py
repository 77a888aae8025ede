"""Complete a Python text at a cursor as the editor would: the library behind ``fimconstrain
complete`` (:mod:`fimconstrain.command_line.complete`).

``complete_text(text, offset, model)`` opens the model (a :class:`.model_choice.ModelChoice`, a
loaded backend, or the shipped default model, always offline), splits the text at the cursor and
fills the middle under the editor's policy (:mod:`.editor.policy`), saying where its time went
(imports, model load, generation).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.versions import PythonVersion
from .editor.policy import complete_at_cursor, shows, wants_multiline
from .editor.python_version import AUTO, Chooser, normalize_setting
from .loop.options import EDITOR_SUFFIX_TOKENS, EDITOR_WINDOW, DecodeOptions
from .loop.result import FimResult
from .model_choice import ModelChoice
from .tokens.fim_formats import PromptCut

if TYPE_CHECKING:
    from .runtimes.backend import ModelBackend


@dataclass
class CursorCompletion:
    """The middle at a cursor, whether the editor would show it, and the version it was checked as."""

    result: FimResult
    #: the editor shows it: valid, not blank, confident enough (:func:`.editor.policy.shows`)
    shown: bool
    version: PythonVersion
    #: why that version: the setting, requires-python of a pyproject.toml, or a newer version
    #: the file parses at
    version_source: str
    #: what ran the model ("transformers", "llama", "server")
    runtime: str = ""
    #: how a model server made the middle where the loop did not choose its every token ("": it did)
    note: str = ""


def complete_text(
    text: str,
    offset: int,
    model: ModelChoice | ModelBackend | None = None,
    *,
    path: Path | None = None,
    python_version: str = AUTO,
    multiline: str = "auto",
    order: str | None = None,
    progress: bool = True,
    timings: dict[str, float] | None = None,
    **changes,
) -> CursorCompletion:
    """Fill the middle of ``text`` at character ``offset`` as the editor would.

    ``model``: which model (:class:`.model_choice.ModelChoice`; None: the shipped one) or a
    model backend already loaded (:mod:`.runtimes.backend`). ``python_version``: ``"auto"``
    (requires-python of the nearest pyproject.toml above ``path``, else the newest) or
    ``"3.12"``; ``multiline``: ``auto`` (from the cursor's context), ``always`` or ``never``;
    ``order``: the prompt's (default: the FIM format's). ``changes``: fields of
    :class:`.loop.options.DecodeOptions` that differ from the editor's preset
    (:meth:`.loop.options.DecodeOptions.editor`). ``timings``, if given, gets the seconds spent
    importing the model stack, loading the model (or connecting) and generating.
    """
    setting = normalize_setting(python_version)  # a bad version fails before the model loads
    prefix, suffix = text[:offset], text[offset:]
    target = Chooser().choose(setting, path, named="--python-version")
    options = replace(
        DecodeOptions.editor(single_line=not wants_multiline(prefix, suffix, multiline)),
        python_version=target.version,
        **changes,
    )
    spent = {} if timings is None else timings
    model_choice, backend = (model, None) if isinstance(model, ModelChoice) else (ModelChoice(), model)
    # the editor's prompt: its window, and a cut that typing keeps (:class:`.tokens.fim_formats.PromptCut`)
    decoder, gate = model_choice.open(
        backend,
        progress=progress,
        timings=spent,
        order=order,
        window=EDITOR_WINDOW,
        cut=PromptCut(EDITOR_SUFFIX_TOKENS),
    )
    start = time.perf_counter()
    completion = complete_at_cursor(
        decoder, prefix, suffix, options, gate=gate, verify_text=text, progress=progress
    )
    spent["generate"] = time.perf_counter() - start
    result = completion.results[0]
    version = completion.version or target.version
    source = target.source if version == target.version else f"the file does not parse as {target.label}"
    runtime = decoder.backend.runtime
    return CursorCompletion(
        result, shows(result, gate), version, source, runtime, decoder.mode_note(options.mode)
    )
