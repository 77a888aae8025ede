"""A model's vocabulary as the decode loop sees it: its text codec, the tokens that end a middle,
the tokens that never write one, and the tables built once per vocabulary.

The tables: every token's bytes (:func:`..tokens.token_bytes.vocabulary`, padded to the logits width; their
fingerprint is the key of every cache of this vocabulary, the token-mask store's included), the
token-healing index's sorted texts and the codec's tails (:meth:`.TextCodec.tail`). The last two
are kept on disk, ``<cache root>/vocab/<fingerprint>.npz``, beside the mask stores: numpy arrays
and a JSON header, read back in tens of milliseconds where building them takes a second or so
at 152k tokens. A file that is unreadable, damaged or made for another decoder is built again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ...cache_folder import cache_root
from ..runtimes.backend import ModelBackend
from ..tokens.fim_formats import TextCodec
from ..tokens.healing_index import HealingIndex, HealingTable
from ..tokens.token_bytes import TokenBytes, vocabulary

log = logging.getLogger(__name__)

#: the layout of the cache file (a change builds every file again)
TABLES_FORMAT = 1


class DecodeVocabulary:
    """Read from a model backend once; shared by every generation of a decoder (and safe to
    prepare from a background thread while they run: each table is built once, under a lock)."""

    def __init__(self, backend: ModelBackend):
        self.codec = TextCodec(backend.tokenizer)
        #: the width of the model's logits (ids past the tokenizer's are never text)
        self.width = backend.vocab_size
        #: tokens that end the middle: the format's stop tokens and end of text
        self.stop_ids: set[int] = backend.fim_format.stop_ids(backend.tokenizer)
        #: the other special tokens: never part of a middle
        self.banned_ids: set[int] = set(backend.special_ids) - self.stop_ids
        self._healing_indexes: dict[int, HealingIndex] = {}
        self._token_bytes: TokenBytes | None = None
        self._healing_table: HealingTable | None = None
        self._lock = threading.RLock()

    def ends(self, token: int) -> bool:
        """Whether ``token`` ends the middle: a stop token, or (unconstrained) any other FIM marker."""
        return token in self.stop_ids or token in self.banned_ids

    def token_bytes(self) -> TokenBytes:
        """Every token's bytes over the logits' width (what the mask store reads; its
        fingerprint keys the caches), read from the tokenizer once (0.25 s at 152k tokens)."""
        found = self._token_bytes
        if found is None:
            with self._lock:
                if self._token_bytes is None:
                    self._token_bytes = vocabulary(self.codec.tokenizer, self.width)
                found = self._token_bytes
        return found

    def healing_index(self, width: int) -> HealingIndex:
        """The tokens that may write a healed text, over ``width`` logits (built once, from the
        cache on disk when it has this vocabulary's table)."""
        index = self._healing_indexes.get(width)
        if index is None:
            with self._lock:
                index = self._healing_indexes.get(width)
                if index is None:
                    table = self._tables()
                    index = self._healing_indexes[width] = HealingIndex(self.codec, width, table)
        return index

    def prepare(self) -> None:
        """Build or load every table now (what a decoder's background thread runs at load)."""
        self.codec.use_token_bytes(self.token_bytes().pieces)
        self.healing_index(self.width)

    def cache_path(self) -> Path:
        """``<cache root>/vocab/<fingerprint>.npz``: the fingerprint is the mask store's key."""
        return cache_root() / "vocab" / f"{self.token_bytes().fingerprint()}.npz"

    # -- the tables on disk

    def _tables(self) -> HealingTable:
        """The healing table, with the codec's tails handed over: read from the cache file, or
        built and saved there (once)."""
        with self._lock:
            if self._healing_table is None:
                path = self.cache_path()
                table = self._load_tables(path) if path.exists() else None
                if table is None:
                    table = HealingTable.build(self.codec)
                    self._save_tables(path, table, self.codec.tails())
                self._healing_table = table
            return self._healing_table

    def _header(self) -> dict:
        """What the tables depend on besides the tokens' bytes (checked when read back)."""
        codec = self.codec
        return {
            "format": TABLES_FORMAT,
            "vocab": self.token_bytes().fingerprint(),
            "known": len(codec.tokenizer),
            "decoder": codec.decoder_spec,
            "dummy_prefix": codec.dummy_prefix,
        }

    def _load_tables(self, path: Path) -> HealingTable | None:
        """The tables of the file at ``path``, the tails handed to the codec; None (logged) when
        the file cannot be read, is damaged or was written for another vocabulary or decoder."""
        try:
            with np.load(path, allow_pickle=False) as f:
                header = json.loads(str(f["meta"]))
                if header != json.loads(json.dumps(self._header())):
                    raise ValueError("written for another vocabulary, decoder or file format")
                known = int(header["known"])
                table = HealingTable.from_arrays(known, f)
                tails = f["tails"]
                if len(tails) != known or (known and (tails.min() < -1 or tails.max() >= known)):
                    raise ValueError("tails that do not fit the vocabulary")
            self.codec.use_tails(tails.tolist())
            return table
        except Exception as error:  # (a damaged zip, a missing array, another layout...)
            log.info("vocabulary tables %s not used (%s): building them again", path, error)
            return None

    def _save_tables(self, path: Path, table: HealingTable, tails: list[int]) -> None:
        """Write the tables as one uncompressed ``.npz`` (atomically; a cache that cannot be
        written is logged and skipped)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp.npz")
            arrays: dict[str, Any] = {"tails": np.array(tails, dtype=np.int32), **table.arrays()}
            np.savez(tmp, meta=np.array(json.dumps(self._header())), **arrays)
            os.replace(tmp, path)
        except OSError as error:
            log.warning("vocabulary tables not cached at %s (%s)", path, error)
