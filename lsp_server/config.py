"""Server settings: defaults, and how client settings (camelCase or snake_case) update them.

Settings come from ``initializationOptions``, then from ``workspace/configuration``
(section ``fimconstrain``) and ``workspace/didChangeConfiguration``.  A client may
send them bare (``{"mode": "fim"}``) or under the section name
(``{"fimconstrain": {"mode": "fim"}}``).  A bad value is reported and ignored; the
previous value stays, so a typo in a settings file never takes the server down.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any

from fimconstrain.decoding.loop.options import EDITOR_SUFFIX_TOKENS, EDITOR_WINDOW, SEMANTIC_DEFAULT
from fimconstrain.decoding.model_choice import ModelChoice
from fimconstrain.decoding.models.known_models import AUTO
from fimconstrain.decoding.models.loading import RUNTIMES

SECTION = "fimconstrain"
MODES = ("fim", "prefix", "off")
MULTILINE = ("auto", "always", "never")


@dataclass(frozen=True)
class Settings:
    """Everything a user can configure; the field docs are the reference (see docs/lsp.md)."""

    # model directory, cached Hugging Face id, .gguf file, a known model's name once fetched
    # (`fimconstrain model get qwen2.5-coder-0.5b`), or auto: the first known model fetched, else
    # the shipped one; None: the shipped model
    model: str | None = AUTO
    # what runs the model: auto (llama.cpp for a .gguf file, and for the shipped model when
    # llama-cpp-python is installed; transformers otherwise), transformers, or llama
    runtime: str = "auto"
    fim_format: str | None = None  # santacoder, starcoder, codellama, ...; None: detected from the tokenizer
    device: str = "cpu"  # torch device for a transformers model (llama.cpp runs on the CPU)
    threads: int | None = None  # the model's CPU threads; None: every core (llama.cpp), torch's default
    context: int | None = None  # llama.cpp's window in tokens; None: the model's, at most 8192
    # tokens of prompt and middle together: a longer document is cut around the cursor (the
    # constraint still sees all of it). On a 2-core CPU every prompt token costs ~25 ms on one
    # thread (docs/lsp.md, "Prompt window"); None: the model's whole window
    prompt_window: int | None = EDITOR_WINDOW
    # the suffix keeps at most this many tokens of the window (the prefix the rest): in PSM order
    # a keystroke at the cursor reads the suffix again; None: half the window
    suffix_tokens: int | None = EDITOR_SUFFIX_TOKENS
    trust_remote_code: bool = False
    # an OpenAI-compatible completions server (http://host:port) runs the model above instead of
    # this process (only its tokenizer is read here): each token is constrained here from the
    # server's likeliest ones; vLLM with fimconstrain installed constrains the middle itself; a
    # server that tells no log-probabilities is checked (cut to the longest valid prefix)
    server: str | None = None
    server_model: str | None = None  # the server's model; None: the first it serves
    mode: str = "fim"  # fim: prefix+middle+suffix valid; prefix: left context only; off: no completions
    max_tokens: int = 64  # new tokens per completion
    deadline_ms: int = 3000  # after this, return the best valid completion so far (or nothing)
    multiline: str = "auto"  # auto: decided from the cursor's context; always; never
    invoked_items: int = 3  # items for an explicit (Invoked) request; Automatic requests get one
    temperature: float = 0.8  # sampling temperature of the extra items of an Invoked request
    top_k: int = 64  # candidates checked against the constraint before scanning the whole vocabulary
    # whether a middle cut short may be completed by the checker's finish search (off: an item
    # that only the search made valid is not shown; a random or tiny model then shows little)
    finish_search: bool = False
    # names that exist (paper 003): the file's scopes and, with jedi installed, attributes guide
    # the choice among valid tokens; soft and fail-open (docs/lsp.md, "Names that exist")
    semantic: bool = SEMANTIC_DEFAULT
    max_file_chars: int = 200_000  # larger documents get no completions (and a log message)
    languages: tuple[str, ...] = ("python",)  # languageIds served
    # "auto": the lower bound of requires-python in the nearest pyproject.toml, else the newest;
    # or "3.8" .. "3.14". A document that parses only at a newer version is checked as that one
    python_version: str = "auto"

    def model_choice(self) -> ModelChoice:
        """The model these settings choose (the server reloads it when this changes)."""
        return ModelChoice.of(self)

    def to_dict(self) -> dict[str, Any]:
        return {
            _camel(f.name): (list(v) if isinstance(v, tuple) else v)
            for f in fields(self)
            for v in [getattr(self, f.name)]
        }


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("-", "_")


_FIELDS = {f.name: f for f in fields(Settings)}
_ALIASES = {
    "format": "fim_format",
    "max_new_tokens": "max_tokens",
    "deadline": "deadline_ms",
    "model_path": "model",
    "max_file_size": "max_file_chars",
}


def _optional_str(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError("expected a string or null")
    return value


def _int(lo: int, hi: int, optional: bool = False):
    def check(value: Any) -> int | None:
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise ValueError("expected an integer")
        if not lo <= int(value) <= hi:
            raise ValueError(f"expected {lo}..{hi}")
        return int(value)

    return check


def _choice(options: tuple[str, ...]):
    def check(value: Any) -> str:
        if not isinstance(value, str) or value.lower() not in options:
            raise ValueError(f"expected one of {', '.join(options)}")
        return value.lower()

    return check


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("expected true or false")
    return value


def _float(lo: float, hi: float):
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
            raise ValueError(f"expected a number in {lo}..{hi}")
        return float(value)

    return check


def _languages(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError("expected a list of languageIds")
    return tuple(value)


def _python_version(value: Any) -> str:
    from fimconstrain.decoding.editor.python_version import normalize_setting

    return normalize_setting(value)


def _device(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps|xpu(:\d+)?", value):
        raise ValueError("expected cpu, cuda, cuda:N, mps or xpu")
    return value


def _server_url(value: Any) -> str | None:
    url = _optional_str(value)
    if url is not None and not re.fullmatch(r"https?://[^\s/]+(/[^\s]*)?", url):
        raise ValueError("expected an http:// or https:// URL, or null")
    return url


_CHECKS = {
    "model": _optional_str,
    "fim_format": _optional_str,
    "device": _device,
    "runtime": _choice(RUNTIMES),
    "threads": _int(1, 256, True),
    "context": _int(64, 1 << 20, True),
    "prompt_window": _int(64, 1 << 20, True),
    "suffix_tokens": _int(0, 1 << 20, True),
    "trust_remote_code": _bool,
    "server": _server_url,
    "server_model": _optional_str,
    "mode": _choice(MODES),
    "max_tokens": _int(1, 4096),
    "deadline_ms": _int(50, 600_000),
    "multiline": _choice(MULTILINE),
    "invoked_items": _int(1, 10),
    "temperature": _float(0.0, 5.0),
    "top_k": _int(1, 100_000),
    "finish_search": _bool,
    "semantic": _bool,
    "max_file_chars": _int(1, 50_000_000),
    "languages": _languages,
    "python_version": _python_version,
}
assert set(_CHECKS) == set(_FIELDS)


def section(raw: Any) -> dict[str, Any] | None:
    """The fimconstrain settings inside what a client sent (bare or under the section), or None."""
    if not isinstance(raw, dict):
        return None
    inner = raw.get(SECTION)
    if isinstance(inner, dict):
        return inner
    return raw


def update(settings: Settings, raw: Any) -> tuple[Settings, list[str]]:
    """``settings`` with the values in ``raw`` applied; and a message for each value that was ignored."""
    values = section(raw)
    if values is None:
        return settings, ([] if raw is None else [f"settings must be an object, not {type(raw).__name__}"])
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in values.items():
        name = _snake(str(key))
        name = _ALIASES.get(name, name)
        if name not in _CHECKS:
            problems.append(f"unknown setting {key!r} ignored")
            continue
        try:
            changes[name] = _CHECKS[name](value)
        except (ValueError, TypeError) as error:
            problems.append(f"setting {key!r} = {value!r} ignored: {error}")
    return replace(settings, **changes), problems
