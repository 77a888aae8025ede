"""The token-mask store's file on disk (paper 000's DFA mask store, cached by grammar hash, Python
version and vocabulary fingerprint: docs/references.md [S7], docs/mask-store.md): its name, format
version and checked reading, in one place apart from the building and the runtime store.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...cache_folder import cache_root
from ...engine.layers.layer_protocol import Layer
from ...engine.versions import VersionLike, format_version, parse_python_version
from ..tokens.token_bytes import TokenBytes

STORE_VERSION = 3
FILE_KEYS = ("rows", "cont", "zero", "dead", "fresh", "ext", "nl_groups")


def grammar_key(layer: Layer[Any]) -> str:
    """A hash of what the store depends on: the terminals (patterns, flags, ignored, literal),
    the layer's class and the store format's version. Rules do not matter (they are read at run time)."""
    terms = [(t.name, t.pattern, t.flags, t.ignored, t.literal) for t in layer.grammar.terminals]
    spec = json.dumps([STORE_VERSION, type(layer).__name__, terms, layer.grammar.n_terminals])
    return hashlib.sha256(spec.encode()).hexdigest()[:24]


def store_version_tag(language: str, python_version: VersionLike | None = None) -> str | None:
    """The target Python version a store for ``language`` is built for, as ``"3.12"`` (default:
    the newest), or None for a language without versions (JSON). Stores are per version: the
    parser states they are read with, and the keywords they split tokens at, differ."""
    from ...engine.checker import LANGUAGES

    if language in LANGUAGES and not LANGUAGES[language][3]:
        return None
    return format_version(parse_python_version(python_version))


def store_layer(language: str, tag: str | None) -> Layer[Any]:
    from ...engine.checker import get_layer

    return get_layer(language, tag)


@dataclass(frozen=True)
class SavedStore:
    """A store's arrays and header as read from its file (:meth:`MaskStore.last_used`), not yet
    bound to the layer the checkers share (:meth:`MaskStore.attach`)."""

    path: Path
    data: dict
    meta: dict


def store_file(
    cache_dir: Path | str | None, language: str, tag: str | None, key: str, vocab: TokenBytes
) -> Path:
    """``<cache>/<language>-<version>-<grammar key>-<vocabulary fingerprint>.npz``."""
    folder = Path(cache_dir) if cache_dir is not None else cache_root() / "masks"
    name = f"{language}-{tag}-{key}" if tag is not None else f"{language}-{key}"
    return folder / f"{name}-{vocab.fingerprint()}.npz"


def read_store(
    path: Path, language: str, tag: str | None, key: str | None, vocab: TokenBytes | None
) -> SavedStore:
    """The arrays and header of a saved store, checked: ValueError if it was built for another
    language, Python version, store format, grammar (``key``, when given) or vocabulary
    (``vocab``, when given), or its arrays do not fit its header. Reading it touches the file
    (:meth:`MaskStore.last_used`)."""
    with np.load(path, allow_pickle=False) as f:
        meta = json.loads(str(f["meta"]))
        data = {k: f[k] for k in FILE_KEYS}
    if meta.get("language") != language:
        raise ValueError(f"{path}: mask store for {meta.get('language')!r}, not {language!r}")
    stored = meta.get("python_version")
    if stored != tag:  # a store from before stores were per version has none: built again
        raise ValueError(f"{path}: mask store for Python {stored}, not {tag}")
    if meta.get("version") != STORE_VERSION or (key is not None and meta.get("grammar") != key):
        raise ValueError(f"{path}: mask store for another grammar or store version")
    if vocab is not None and meta.get("vocab") != vocab.fingerprint():
        raise ValueError(f"{path}: mask store for another vocabulary")
    rows = data["rows"]
    if rows.ndim != 2 or rows.shape[1] != (int(meta["vocab_size"]) + 63) // 64:
        raise ValueError(f"{path}: mask store rows that do not fit its vocabulary")
    try:
        os.utime(path)
    except OSError:
        pass
    return SavedStore(path, data, meta)
