"""Which model runs a decoder, and where: one frozen value built by every front end (the command
lines' options, the language server's settings, an evaluation's), opened in one place.

A :class:`ModelChoice` names a model (a directory, cached hub id, ``.gguf`` file, a known model's
name, or None for the shipped one; the front ends' ``auto`` is resolved when the choice is made,
:func:`.models.known_models.auto_model`) and either how to run it here (runtime, threads, context,
device) or the model server that runs it (:class:`ModelServer`: only its tokenizer and FIM format
are read here). :meth:`ModelChoice.open` loads or connects and returns the decode loop over it
with the model's confidence gate; the heavy stack is imported there, not when a choice is made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .runtimes.server_api import DEFAULT_TIMEOUT

if TYPE_CHECKING:
    from .loop.generate import FimDecoder
    from .models.confidence import ConfidenceGate
    from .runtimes.backend import ModelBackend


@dataclass(frozen=True)
class ModelServer:
    """An OpenAI-compatible completions server that runs the model (docs/serving.md)."""

    url: str
    #: the server's name for the model; None: the first it serves
    model: str | None = None
    #: seconds to wait for the server's next token
    timeout: float = DEFAULT_TIMEOUT
    #: whether a vLLM with this package's plugin may constrain the middle itself
    plugin: bool = True


@dataclass(frozen=True)
class ModelChoice:
    """A model and where it runs; equal choices open the same decoder (the language server
    reloads only when its choice changes)."""

    #: a model directory, cached Hugging Face id, ``.gguf`` file or known model's name; None: the
    #: shipped model
    model: str | None = None
    #: the FIM format's name; None: detected from the tokenizer
    fim_format: str | None = None
    trust_remote_code: bool = False
    #: what runs the model here: ``auto``, ``transformers`` or ``llama`` (:func:`.models.loading.runtime_for`)
    runtime: str = "auto"
    #: the model's CPU threads; None: every core under llama.cpp, torch's default under transformers
    threads: int | None = None
    #: llama.cpp's window in tokens; None: the model's, at most 8192
    context: int | None = None
    #: the torch device of a transformers model
    device: str = "cpu"
    #: the server that runs the model instead of this process; None: loaded here
    server: ModelServer | None = None

    @classmethod
    def of(cls, settings: Any) -> ModelChoice:
        """The choice that ``settings`` spell by these fields' names: the command lines' options
        (:func:`fimconstrain.command_line.arguments.add_model_options`), the language server's
        settings. A field they lack keeps its default; the model ``auto`` is the best fetched one
        (or None: the shipped one); ``server`` (a URL), ``server_model`` and ``server_timeout``
        spell the :class:`ModelServer`."""
        from .models.known_models import AUTO, auto_model

        local = ("model", "fim_format", "trust_remote_code", "runtime", "threads", "context", "device")
        given = {name: getattr(settings, name) for name in local if hasattr(settings, name)}
        url = getattr(settings, "server", None)
        if given.get("model") == AUTO:  # (with a server: the tokenizer it names, the shipped one)
            given["model"] = auto_model() if url is None else None
        if url is not None:
            timeout = getattr(settings, "server_timeout", DEFAULT_TIMEOUT)
            given["server"] = ModelServer(url, getattr(settings, "server_model", None), timeout)
        return cls(**given)

    def open(
        self,
        backend: ModelBackend | None = None,
        *,
        progress: bool = True,
        timings: dict[str, float] | None = None,
        **settings: Any,
    ) -> OpenedModel:
        """The decode loop over this model and the model's confidence gate. ``backend``: the
        model already loaded (its tokenizer and format serve a server's model); ``settings``:
        the loop's (:class:`.loop.generate.FimDecoder`); ``timings``, if given, gets the seconds
        spent importing the model stack and loading the model (or connecting)."""
        spent = {} if timings is None else timings
        start = time.perf_counter()
        from .loop.generate import FimDecoder
        from .models.confidence import ConfidenceGate
        from .models.loading import load_model, load_tokenizer

        spent["import"] = time.perf_counter() - start
        start = time.perf_counter()
        opened: OpenedModel
        if self.server is not None:
            from .loop.server_decoder import ServerDecoder
            from .runtimes.server_backend import ServerBackend

            tokenizer, fim_format = (
                (backend.tokenizer, backend.fim_format)
                if backend is not None
                else load_tokenizer(self.model, self.fim_format, self.trust_remote_code)
            )
            server = self.server
            served = ServerBackend(
                server.url,
                tokenizer,
                fim_format,
                model=server.model,
                timeout=server.timeout,
                plugin=server.plugin,
            )
            # no confidence threshold is fitted for a server's model
            opened = OpenedModel(ServerDecoder(served, **settings), ConfidenceGate())
        else:
            if backend is None:
                backend = load_model(
                    self.model,
                    runtime=self.runtime,
                    fim_format=self.fim_format,
                    trust_remote_code=self.trust_remote_code,
                    device=self.device,
                    threads=self.threads,
                    context=self.context,
                    progress=progress,
                )
            opened = OpenedModel(
                FimDecoder(backend, **settings), ConfidenceGate.for_model(backend.name or None)
            )
        spent["load"] = time.perf_counter() - start
        return opened


class OpenedModel(NamedTuple):
    """What :meth:`ModelChoice.open` returns."""

    decoder: FimDecoder
    #: the model's fitted threshold on an item's mean token log-probability
    gate: ConfidenceGate
