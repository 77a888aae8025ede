"""A GGUF model run by llama.cpp (llama-cpp-python) behind the model-backend seam (:mod:`.backend`).

What people run on a laptop: on a 2-core CPU the shipped model steps in 0.5 ms per token
here against 3.4 ms under transformers (``benchmarks/editor_quality.py``). The constraint
reads the vocabulary through a Hugging Face tokenizer rebuilt from the GGUF's own metadata
(transformers' GGUF tokenizer builders), checked at load against llama.cpp's tokenization of
a probe text. The FIM markers come from the file's ``tokenizer.ggml.fim_*_token_id`` keys,
matched against the project's format table (:mod:`..tokens.fim_formats`); a file without them has
its format detected from the vocabulary.

One llama.cpp context serves the backend's sessions, one llama.cpp call at a time (a lock): a
session's prefill keeps the key/value cache of the longest prompt prefix it shares with the
tokens the context holds (an editor's successive requests share most of their prompt). Sessions
may overlap (a server pauses one request for another at a decode step): when a session takes the
context while the one whose tokens it holds may still step, that one's key/value cache is copied
out (``llama_state_seq_get_data``) and copied back at its next call, so it goes on with the logits
it would have had, to the last digit; past :data:`SAVED_STATE_BYTES` of such copies, it reads its
tokens again instead (a prefill, past the prefix it shares with the context). Qwen2.5-Coder-0.5B
here: 3.5 MiB for 300 tokens, copied out in 12 ms and back in 2 ms (2,000 tokens: 24 MiB, 53 and
18 ms), against seconds to read them again (a 300-token prefill took 5 to 17 s on these 2
shared, busy cores). A session whose tokens the context holds is its *owner*; a session that is gone
(garbage) needs nothing kept.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ...engine.errors import FimConstrainError
from ..tokens.fim_formats import FORMATS, PSM, FimFormat, resolve_format, special_token_ids
from .backend import GenerationRequest
from .prompt_lookup import draft

log = logging.getLogger(__name__)

#: prompt tokens per llama.cpp call when a prefill may be stopped between pieces, until the
#: backend has timed its reading (then: what it reads in :data:`PREFILL_SLICE_SECONDS`)
PREFILL_CHUNK = 128
#: seconds of prompt per piece when a prefill may be stopped: how late a deadline is seen (a
#: piece of 32 tokens reads 3-5% slower than one of 128 on 2 cores; of 16, 15%)
PREFILL_SLICE_SECONDS = 0.25
#: the fewest and the most prompt tokens per piece
PREFILL_CHUNK_RANGE = (32, 512)
#: the largest window opened by default (a long-context model's full window costs memory for nothing)
DEFAULT_CONTEXT_CAP = 8192
#: tokens drafted from the prompt (:mod:`.prompt_lookup`) and verified in the call of each step,
#: by default none: on this project's 2-core machines a portable build's call costs nearly its
#: tokens' worth (Qwen2.5-Coder-0.5B: 1 token 33 ms, 2 58 ms, 5 102 ms, 9 148 ms), so drafts of 4
#: taken 52% of the time made a token 7% slower (32.7 against 30.5 ms, 29 editor cursors, the same
#: middles; docs/optimizations.md); ``LlamaCppBackend(draft_tokens=4)`` where calls are cheaper
DRAFT_TOKENS = 0
#: the longest draft a backend's batch holds
MAX_DRAFT_TOKENS = 16
#: key/value cache copied out for displaced sessions, in all (Qwen2.5-Coder-0.5B: 12 KiB a token)
SAVED_STATE_BYTES = 256 * 2**20
#: what the tokenizer rebuilt from the file must tokenize as llama.cpp does
TOKENIZER_PROBE = (
    "def mean(values: list[float]) -> float:\n"
    '    """Average of 12 numbers; ÿ café 😀."""\n'
    "    if not values:\n\t\treturn 0.0  # nothing\n"
    "    return sum(values) / len(values)\n"
)
_FIM_KEYS = {
    "PRE": "tokenizer.ggml.fim_pre_token_id",
    "SUF": "tokenizer.ggml.fim_suf_token_id",
    "MID": "tokenizer.ggml.fim_mid_token_id",
}
_STOP_KEYS = ("tokenizer.ggml.eot_token_id", "tokenizer.ggml.eos_token_id")


class LlamaCppMissingError(FimConstrainError):
    """A GGUF model was asked for, and llama-cpp-python is not installed."""


class ModelFileError(FimConstrainError):
    """A model file that cannot be a model: not a GGUF, cut short, damaged, or of an architecture
    llama.cpp does not know."""


def llama_cpp_available() -> bool:
    """Whether llama-cpp-python can be imported (without importing it: that loads the library)."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def _import_llama():
    try:
        import llama_cpp
    except ImportError as error:
        raise LlamaCppMissingError(
            "GGUF models run on llama.cpp: install it with `pip install 'fimconstrain[llama]'` "
            "(llama-cpp-python builds from source; `bash scripts/llama_toolchain.sh` builds a portable "
            f"wheel once and caches it) ({error})"
        ) from error
    return llama_cpp


def gguf_tokenizer(path: str | Path) -> Any:
    """The Hugging Face tokenizer a GGUF file's metadata describes (vocabulary, merges, special
    and control tokens), built by transformers' GGUF tokenizer builders (2-3 s at 152k tokens,
    with the imports) and cached on disk: ``<cache root>/tokenizers/gguf-<key>.json`` (the
    rebuilt ``tokenizer.json``) and ``.settings.json`` beside it (its special tokens), keyed by
    the file's identity (:func:`gguf_identity`); read back in about 0.6 s. A cache file that
    cannot be read is built again."""
    from transformers import PreTrainedTokenizerFast

    from ...cache_folder import cache_root

    key = gguf_identity(path)
    stem = cache_root() / "tokenizers" / f"gguf-{key}" if key is not None else None
    if stem is not None and stem.with_suffix(".settings.json").exists():
        try:
            settings = json.loads(stem.with_suffix(".settings.json").read_text("utf-8"))
            return PreTrainedTokenizerFast(tokenizer_file=str(stem.with_suffix(".json")), **settings)
        except Exception as error:  # (a cut or damaged file: the tokenizers library says what)
            log.info("cached tokenizer %s not used (%s): rebuilding it", stem, error)
    from transformers.integrations.gguf.gguf_tokenizer_mapping import (
        convert_gguf_tokenizer,
        get_gguf_tokenizer,
    )

    try:
        architecture, described, config = get_gguf_tokenizer(str(path))
        backend, _ = convert_gguf_tokenizer(architecture, described)
    except (KeyError, ValueError) as error:
        raise FimConstrainError(
            f"{path}: its tokenizer cannot be rebuilt from the GGUF metadata ({error})"
        ) from error
    settings = {k: v for k, v in config.items() if v is not None}
    if stem is not None:
        _cache_tokenizer(stem, backend, settings)
    return PreTrainedTokenizerFast(tokenizer_object=backend, **settings)


def _cache_tokenizer(stem: Path, backend: Any, settings: dict[str, Any]) -> None:
    """Write the rebuilt tokenizer at ``stem``: its JSON, then its settings (each atomically;
    the settings file last, so that it stands for a whole pair). Failures are logged."""
    try:
        text = json.dumps(settings)
        stem.parent.mkdir(parents=True, exist_ok=True)
        for suffix, write in (
            (".json", lambda tmp: backend.save(str(tmp), pretty=False)),
            (".settings.json", lambda tmp: tmp.write_text(text, "utf-8")),
        ):
            tmp = stem.with_name(f"{stem.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            write(tmp)
            os.replace(tmp, stem.with_suffix(suffix))
    except (OSError, TypeError, ValueError) as error:
        log.warning("rebuilt tokenizer not cached at %s (%s)", stem, error)


#: GGUF metadata value types (gguf's GGUFValueType), the bytes of each scalar type and the
#: struct format of each integer type
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_INTEGERS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 10: "<Q", 11: "<q"}
#: what a cached tokenizer's key covers besides the file (a change rebuilds every cached one)
_TOKENIZER_CACHE_FORMAT = 1


def _gguf_metadata(data: Any) -> tuple[dict[str, int | str], int] | None:
    """The integer values of a GGUF file's metadata by key (and the strings of its ``general.``
    keys), and where the metadata ends (the header and every key and value, tokens and merges
    included); None when ``data`` is not a GGUF this can read. Raises ``struct.error`` or
    ``KeyError`` on a cut or unknown file."""
    import struct

    if data[:4] != b"GGUF" or struct.unpack_from("<I", data, 4)[0] < 2:
        return None
    count = struct.unpack_from("<Q", data, 16)[0]
    u64, u32 = struct.Struct("<Q").unpack_from, struct.Struct("<I").unpack_from
    integers: dict[str, int | str] = {}
    at = 24
    for _ in range(count):  # key, type, value
        size = u64(data, at)[0]
        key = bytes(data[at + 8 : at + 8 + size]).decode("utf-8", "replace")
        at += 8 + size
        kind = u32(data, at)[0]
        at += 4
        if kind == _GGUF_STRING:
            size = u64(data, at)[0]
            if key.startswith("general."):
                integers[key] = bytes(data[at + 8 : at + 8 + size]).decode("utf-8", "replace")
            at += 8 + size
        elif kind == _GGUF_ARRAY:
            item, n = u32(data, at)[0], u64(data, at + 4)[0]
            at += 12
            if item == _GGUF_STRING:
                for _ in range(n):
                    at += 8 + u64(data, at)[0]
            else:
                at += _GGUF_SCALAR_BYTES[item] * n
        else:
            if kind in _GGUF_INTEGERS:
                integers[key] = struct.unpack_from(_GGUF_INTEGERS[kind], data, at)[0]
            at += _GGUF_SCALAR_BYTES[kind]
        if at > len(data):
            return None
    return integers, at


def gguf_identity(path: str | Path) -> str | None:
    """A key for a GGUF file's tokenizer: a hash of its size, modification time and metadata
    (:func:`_gguf_metadata`: a few MB read, never the tensors), with the versions of the
    libraries that rebuild it. None when the file is not a GGUF this can read (then nothing is
    cached)."""
    import hashlib
    import mmap
    import struct
    from importlib.metadata import version

    try:
        stat = Path(path).stat()
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            metadata = _gguf_metadata(data)
            if metadata is None:
                return None
            digest = hashlib.sha256(data[: metadata[1]])
        libraries = [version(name) for name in ("transformers", "tokenizers")]
    except (OSError, ValueError, KeyError, OverflowError, struct.error):
        return None
    digest.update(json.dumps([_TOKENIZER_CACHE_FORMAT, stat.st_size, stat.st_mtime_ns, libraries]).encode())
    return digest.hexdigest()[:24]


#: a GGUF file's metadata: its integer values, and the strings of its ``general.`` keys
GgufMetadata = dict[str, int | str]


def read_gguf_metadata(path: str | Path) -> GgufMetadata | str:
    """A GGUF file's metadata (:func:`_gguf_metadata`'s values), read once before llama.cpp sees
    the file, or what is wrong with it as a GGUF (llama.cpp would say only that loading failed)."""
    import mmap
    import struct

    try:
        with open(path, "rb") as f:
            if f.read(4) != b"GGUF":
                return "not a GGUF file (it does not begin with the bytes GGUF)"
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                metadata = _gguf_metadata(data)
    except OSError as error:
        return f"it cannot be read ({error.strerror or error})"
    except (ValueError, KeyError, IndexError, OverflowError, struct.error):
        metadata = None
    if metadata is None:
        return "a cut or damaged GGUF file (its header and metadata do not read whole)"
    return metadata[0]


def training_window(metadata: GgufMetadata) -> int | None:
    """The context length a GGUF file's model was trained with (its ``<architecture>.context_length``,
    from :func:`read_gguf_metadata`, without loading the model); None when it does not say."""
    values = metadata.items()
    lengths = [value for key, value in values if key.endswith(".context_length") and isinstance(value, int)]
    return lengths[0] if len(lengths) == 1 and lengths[0] > 0 else None


def _load_failure(metadata: GgufMetadata) -> str:
    """Why llama.cpp could not load a GGUF whose metadata reads whole, as far as the file says."""
    return (
        f"llama.cpp could not load it: its tensors are cut short or damaged, or this llama.cpp "
        f"does not know its architecture ({metadata.get('general.architecture') or 'none named'})"
    )


def _in_background(function: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    """Start ``function(*args)`` in a thread; the returned callable waits for its result (or
    raises its exception)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, function(*args)))
        except BaseException as error:  # (handed to the caller)
            outcome.append((False, error))

    thread = threading.Thread(target=run, name="fimconstrain-tokenizer", daemon=True)
    thread.start()

    def result() -> Any:
        thread.join()
        ok, value = outcome[0]
        if not ok:
            raise value
        return value

    return result


def gguf_fim_format(tokenizer: Any, metadata: dict[str, str], name: str | None = None) -> FimFormat:
    """The FIM format of a GGUF model: ``name`` when given; else the format of the table whose
    markers are the file's FIM token ids; else one made of those markers (PSM, ending at the
    file's end-of-turn or end-of-text token); else the format detected from the vocabulary."""
    if name:
        return resolve_format(tokenizer, name)
    if not all(key in metadata for key in _FIM_KEYS.values()):
        return resolve_format(tokenizer)
    markers = {role: tokenizer.convert_ids_to_tokens(int(metadata[key])) for role, key in _FIM_KEYS.items()}
    for fmt in FORMATS.values():
        if all(markers[role] in spellings for role, spellings in fmt.markers.items()):
            return fmt
    stops = tuple(
        tokenizer.convert_ids_to_tokens(int(metadata[key])) for key in _STOP_KEYS if key in metadata
    )
    fmt = FimFormat("gguf", {role: (token,) for role, token in markers.items()}, stops, {"psm": PSM})
    log.info("FIM format from the GGUF metadata: %s", fmt)
    return fmt


class LlamaCppBackend:
    """A GGUF model file under llama.cpp: ``threads`` (default: every core) and ``context``
    (default: the model's training window, at most :data:`DEFAULT_CONTEXT_CAP`) are its settings;
    ``fim_format`` overrides the format the file implies; ``tokenizer`` (a Hugging Face tokenizer)
    replaces the one rebuilt from the file."""

    runtime = "llama"

    def __init__(
        self,
        path: str | Path,
        *,
        fim_format: str | None = None,
        threads: int | None = None,
        context: int | None = None,
        tokenizer: Any = None,
        name: str = "",
        draft_tokens: int | None = None,
    ):
        llama_cpp = _import_llama()
        path = Path(path).expanduser()
        if not path.is_file():
            raise FimConstrainError(f"GGUF model file {str(path)!r} does not exist")
        metadata = read_gguf_metadata(path)
        if isinstance(metadata, str):
            raise ModelFileError(f"{path}: {metadata}")
        self.name = name or str(path)
        # the tokenizer is read (or rebuilt) while llama.cpp loads the weights, which frees the GIL
        pending = _in_background(gguf_tokenizer, path) if tokenizer is None else None
        self.threads = threads or os.cpu_count() or 1
        if not context:  # the training window, capped; read from the metadata so that one load does
            trained = training_window(metadata)
            context = min(trained, DEFAULT_CONTEXT_CAP) if trained is not None else None
        self.llama = self._open(llama_cpp, path, context or 0, metadata)  # 0: the training window
        if not context and self.llama.n_ctx() > DEFAULT_CONTEXT_CAP:
            self.llama.close()
            self.llama = self._open(llama_cpp, path, DEFAULT_CONTEXT_CAP, metadata)
        self.tokenizer = pending() if pending is not None else tokenizer
        self._logits_of = llama_cpp.llama_get_logits_ith
        self.fim_format = gguf_fim_format(self.tokenizer, self.llama.metadata, fim_format)
        self.vocab_size = int(self.llama.n_vocab())
        self.context_window = int(self.llama.n_ctx())
        self.special_ids = frozenset(special_token_ids(self.tokenizer))
        #: one llama.cpp call at a time (a context is not thread-safe)
        self.lock = threading.RLock()
        self._owner: weakref.ref[LlamaCppSession] | None = None
        #: the key/value cache of displaced sessions that may still step, until their next call
        self._saved: weakref.WeakKeyDictionary[LlamaCppSession, ctypes.Array[ctypes.c_uint8]] = (
            weakref.WeakKeyDictionary()
        )
        #: prompt tokens over every prefill: read (evaluated) and reused from the cache
        self.prompt_read = 0
        self.prompt_reused = 0
        #: prompt tokens read per second, from the last piece of at least the smallest size
        self.read_rate: float | None = None
        #: tokens drafted from the prompt and verified with each step (:mod:`.prompt_lookup`; 0: none)
        self.draft_tokens = DRAFT_TOKENS if draft_tokens is None else draft_tokens
        #: drafted tokens verified, and those the middle then took
        self.drafted = 0
        self.accepted = 0
        self._batch = llama_cpp.llama_batch_init(1 + MAX_DRAFT_TOKENS, 0, 1)
        self._check_tokenizer()

    def _open(self, llama_cpp, path: Path, window: int, metadata: GgufMetadata):
        try:
            return llama_cpp.Llama(
                model_path=str(path),
                n_ctx=window,
                n_batch=512,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                verbose=False,
            )
        except ValueError as error:  # (llama-cpp-python's "Failed to load model from file")
            raise ModelFileError(f"{path}: {_load_failure(metadata)}") from error

    def start(self, request: GenerationRequest | None = None) -> LlamaCppSession:
        return LlamaCppSession(self)

    def prefill_chunk(self) -> int:
        """Prompt tokens per piece of a prefill that may be stopped: about
        :data:`PREFILL_SLICE_SECONDS` of reading at the rate measured last."""
        if self.read_rate is None:
            return PREFILL_CHUNK
        low, high = PREFILL_CHUNK_RANGE
        return max(low, min(high, int(self.read_rate * PREFILL_SLICE_SECONDS)))

    @property
    def owner(self) -> LlamaCppSession | None:
        """The session whose tokens the context holds (None: none, or it is gone)."""
        return self._owner() if self._owner is not None else None

    @property
    def saved_bytes(self) -> int:
        return sum(len(state) for state in self._saved.values())

    def _claim(self, session: LlamaCppSession) -> None:
        """(Lock held.) ``session``'s tokens are about to replace the context's: keep the
        key/value cache of the session that held them, when it may still step."""
        previous = self.owner
        if previous is not None and previous is not session:
            self._save(previous)
        self._owner = weakref.ref(session)

    def _save(self, session: LlamaCppSession) -> None:
        import llama_cpp

        ctx = self.llama.ctx
        session._drop_draft()
        if not session.ids or int(self.llama.n_tokens) != len(session.ids):
            return
        size = int(llama_cpp.llama_state_seq_get_size(ctx, 0))
        if self.saved_bytes + size > SAVED_STATE_BYTES:
            log.debug(
                "%s: not keeping a displaced session's cache (%d bytes): it reads again", self.name, size
            )
            return
        state = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(ctx, state, size, 0))
        if 0 < written <= size:
            self._saved[session] = state if written == size else (ctypes.c_uint8 * written).from_buffer(state)

    def _restore(self, session: LlamaCppSession, state: ctypes.Array[ctypes.c_uint8]) -> bool:
        """(Lock held.) Put ``session``'s kept key/value cache back; False when llama.cpp refused
        it (the context then holds no tokens)."""
        import llama_cpp

        llama = self.llama
        if int(llama_cpp.llama_state_seq_set_data(llama.ctx, state, len(state), 0)) == 0:
            llama.n_tokens = 0  # whatever the cache holds now, the next call clears it
            return False
        count = len(session.ids)
        llama.input_ids[:count] = session.ids
        llama.n_tokens = count
        return True

    def _check_tokenizer(self) -> None:
        """Warn when the rebuilt tokenizer splits the probe text otherwise than llama.cpp: the
        prompt would then not be the tokens the model was trained on."""
        ours = self.tokenizer.encode(TOKENIZER_PROBE, add_special_tokens=False)
        theirs = self.llama.tokenize(TOKENIZER_PROBE.encode(), add_bos=False, special=False)
        if ours != theirs:
            log.warning(
                "%s: the tokenizer rebuilt from the GGUF metadata splits text otherwise than llama.cpp "
                "(pre-tokenizer %r); pass the model's own Hugging Face tokenizer "
                "(LlamaCppBackend(tokenizer=...)) for exact prompts",
                self.name,
                self.llama.metadata.get("tokenizer.ggml.pre"),
            )

    def scored_eval(self, ids: list[int]) -> list[np.ndarray]:
        """(Lock held.) Feed ``ids`` (at most ``1 +`` :data:`MAX_DRAFT_TOKENS`) after the context's
        tokens in one llama.cpp call, with the next-token logits after each of them: a step and
        the draft it verifies (a call of 4 tokens took 62 ms here against 42 ms for one)."""
        import llama_cpp

        llama, batch = self.llama, self._batch
        start = int(llama.n_tokens)
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llama.ctx), -1, start, -1)
        batch.n_tokens = len(ids)
        for i, token in enumerate(ids):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, start + i, 1, True
            batch.seq_id[i][0] = 0
        if int(llama_cpp.llama_decode(llama.ctx, batch)) != 0:
            raise FimConstrainError(f"llama.cpp could not evaluate {len(ids)} tokens")
        llama.input_ids[start : start + len(ids)] = ids
        llama.n_tokens = start + len(ids)
        shape = (self.vocab_size,)
        return [
            np.ctypeslib.as_array(self._logits_of(llama.ctx, i), shape=shape).copy() for i in range(len(ids))
        ]

    def next_logits(self) -> np.ndarray:
        """The next-token logits after the last token fed (a float32 copy)."""
        pointer = self._logits_of(self.llama.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.vocab_size,)).copy()


class LlamaCppSession:
    """One generation on the backend's context; :attr:`seconds` counts llama.cpp's calls,
    :attr:`reused` the prompt tokens whose key/value cache a previous session left, and
    :attr:`resumed` how often it got the context back after another session had used it."""

    partial = False  # (a whole row of logits)
    invented_end = False  # (the model writes every token)

    def __init__(self, backend: LlamaCppBackend):
        self.backend = backend
        self.seconds = 0.0
        self.reused = 0
        self.resumed = 0
        #: the tokens whose key/value cache this session's next call extends
        self.ids: list[int] = []
        #: drafted tokens after them, in the context too, with the logits after each
        self.ahead: list[tuple[int, np.ndarray]] = []

    def prefill(self, ids: list[int], should_stop: Callable[[], bool] | None = None) -> np.ndarray | None:
        """The prompt's next-token logits, reading only what follows the prefix it shares with
        the context's tokens (at least its last token, whose logits are wanted); with
        ``should_stop`` the rest is fed in pieces (:meth:`LlamaCppBackend.prefill_chunk`), asked between
        them; None when it said stop."""
        if not ids:
            raise ValueError("an empty prompt has no next-token logits")
        if len(ids) > self.backend.context_window:
            raise FimConstrainError(
                f"prompt of {len(ids)} tokens exceeds the llama.cpp context of {self.backend.context_window}"
            )
        backend = self.backend
        with backend.lock:
            backend._saved.pop(self, None)
            backend._claim(self)
            llama = backend.llama
            shared = int(llama.longest_token_prefix(llama.input_ids[: llama.n_tokens].tolist(), ids[:-1]))
            llama.n_tokens = shared
            self.ids = list(ids[:shared])
            self.reused = shared
            backend.prompt_reused += shared
            backend.prompt_read += len(ids) - shared
        rest = ids[shared:]
        chunk = backend.prefill_chunk() if should_stop is not None else len(rest)
        logits = None
        for start in range(0, len(rest), chunk):
            if start and should_stop is not None and should_stop():
                return None
            logits = self._feed(rest[start : start + chunk])
        return logits

    def step(self, token: int) -> np.ndarray:
        """The logits after ``token``: those its draft already holds when it is the token drafted
        next (no llama.cpp call), else one call that feeds it with a new draft behind it."""
        backend = self.backend
        if len(self.ids) >= backend.context_window:
            raise FimConstrainError(f"the llama.cpp context of {backend.context_window} tokens is full")
        with backend.lock:
            if self.ahead and self.ahead[0][0] == token and backend.owner is self:
                self.ids.append(token)
                backend.accepted += 1
                return self.ahead.pop(0)[1]
            length = min(backend.draft_tokens, MAX_DRAFT_TOKENS, backend.context_window - len(self.ids) - 1)
            drafted = draft([*self.ids, token], length) if length > 0 else []
            if not drafted:  # (no call of several tokens where nothing is drafted)
                return self._feed([token])
            start = time.perf_counter()
            again = self._resume()
            self._drop_draft()
            if again:  # (another session used the context: read its tokens back first)
                backend.llama.eval(again)
            logits = backend.scored_eval([token, *drafted])
            self.ids.append(token)
            self.ahead = list(zip(drafted, logits[1:]))
            backend.drafted += len(drafted)
            self.seconds += time.perf_counter() - start
            return logits[0]

    def _drop_draft(self) -> None:
        """(Lock held, the context this session's.) Forget the tokens drafted ahead, in the
        context too (the next call writes over their key/value cache)."""
        if self.ahead:
            self.ahead = []
            self.backend.llama.n_tokens = len(self.ids)

    def reveal(self, allowed: np.ndarray | None) -> None:
        return None  # (its logits are a whole row)

    def close(self) -> None:
        pass

    def _feed(self, ids: list[int]) -> np.ndarray:
        backend = self.backend
        with backend.lock:
            start = time.perf_counter()
            again = self._resume()
            self._drop_draft()
            backend.llama.eval(again + ids)
            self.ids.extend(ids)
            logits = backend.next_logits()
            spent = time.perf_counter() - start
            self.seconds += spent
            if len(again) + len(ids) >= PREFILL_CHUNK_RANGE[0]:
                backend.read_rate = (len(again) + len(ids)) / max(spent, 1e-6)
        return logits

    def _resume(self) -> list[int]:
        """(Lock held.) Make the context hold this session's tokens again after another session
        used it: its kept cache back, or the tokens to read again past the prefix the context
        shares with them (returned)."""
        backend = self.backend
        if backend.owner is self:
            return []
        self.resumed += 1
        self.ahead = []  # (the context is another's now: its draft is not kept)
        state = backend._saved.pop(self, None)
        backend._claim(self)
        if state is not None and backend._restore(self, state):
            return []
        llama = backend.llama
        shared = int(llama.longest_token_prefix(llama.input_ids[: llama.n_tokens].tolist(), self.ids))
        llama.n_tokens = shared
        return self.ids[shared:]
