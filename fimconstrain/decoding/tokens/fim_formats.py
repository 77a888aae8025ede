"""FIM prompt formats of the common code models, detected from a tokenizer's vocabulary.

A format names the marker tokens that frame the prefix, the suffix and the
middle, the tokens that end the middle, and the layouts it supports: PSM
(prefix, suffix, middle) and SPM (suffix first).  Prompts are built as token
ids (markers by id, texts encoded on their own) so that a marker is never split
or merged with the code around it.  No torch import: the training script and the
decoder share this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...engine.errors import FimConstrainError

PSM = ("PRE", "prefix", "SUF", "suffix", "MID")
SPM = ("PRE", "SUF", "suffix", "MID", "prefix")
SUFFIX_FIRST = ("SUF", "suffix", "PRE", "prefix")

_SENTINEL = "\u263a"  # Meta's trick: encode/decode next to "☺" to drop SentencePiece's implicit leading space


class FimFormatError(FimConstrainError):
    """A FIM format that is unknown, or that the tokenizer lacks tokens for."""


@dataclass(frozen=True)
class FimFormat:
    """Marker tokens, stop tokens and layouts of one model family's FIM prompt."""

    name: str
    markers: dict[str, tuple[str, ...]]  # "PRE"/"SUF"/"MID" -> spellings to look up, first found wins
    stops: tuple[str, ...]  # tokens that end the middle (besides the tokenizer's eos token)
    layouts: dict[str, tuple[str, ...]]  # "psm"/"spm" -> sequence of marker names and "prefix"/"suffix"
    bos: bool = False  # prepend the tokenizer's bos token
    suffix_without_space: bool = False  # SentencePiece: encode the suffix without the implicit leading space
    #: the layout a model of this family is prompted in unless told (a key of ``layouts``)
    order: str = "psm"

    def marker_ids(self, tokenizer) -> dict[str, int]:
        """Ids of the marker tokens this format's layouts use, in this tokenizer's vocabulary
        (asked for every prompt: looked up token by token, not through ``get_vocab``, a dict of
        the whole vocabulary that takes 0.2 s to build at 152k tokens)."""
        token_id = token_lookup(tokenizer)
        ids = {}
        for role, spellings in self.markers.items():
            found = [i for i in map(token_id, spellings) if i is not None]
            if not found:
                raise FimFormatError(
                    f"tokenizer has no {role} token for FIM format {self.name!r} "
                    f"(looked for {', '.join(spellings)})"
                )
            ids[role] = found[0]
        return ids

    def stop_ids(self, tokenizer) -> set[int]:
        """Token ids that end the middle: the format's stop tokens present in the vocabulary, and eos."""
        ids = {i for i in map(token_lookup(tokenizer), self.stops) if i is not None}
        if tokenizer.eos_token_id is not None:
            ids.add(tokenizer.eos_token_id)
        return ids


FORMATS: dict[str, FimFormat] = {
    f.name: f
    for f in [
        FimFormat(
            "santacoder",
            {"PRE": ("<fim-prefix>",), "SUF": ("<fim-suffix>",), "MID": ("<fim-middle>",)},
            ("<|endoftext|>",),
            {"psm": PSM, "spm": SPM},
        ),
        FimFormat(
            "starcoder",
            {"PRE": ("<fim_prefix>",), "SUF": ("<fim_suffix>",), "MID": ("<fim_middle>",)},
            ("<|endoftext|>", "<file_sep>"),
            {"psm": PSM, "spm": SPM},
        ),
        FimFormat(
            "codellama",
            {"PRE": ("▁<PRE>", "<PRE>"), "SUF": ("▁<SUF>", "<SUF>"), "MID": ("▁<MID>", "<MID>")},
            ("▁<EOT>", "<EOT>", "</s>"),
            {"psm": PSM, "spm": SPM},
            bos=True,
            suffix_without_space=True,
        ),
        FimFormat(
            "deepseek",
            {"PRE": ("<｜fim▁begin｜>",), "SUF": ("<｜fim▁hole｜>",), "MID": ("<｜fim▁end｜>",)},
            ("<｜end▁of▁sentence｜>", "<|EOT|>"),
            {"psm": PSM},
            bos=True,
        ),
        FimFormat(
            "qwen",
            {"PRE": ("<|fim_prefix|>",), "SUF": ("<|fim_suffix|>",), "MID": ("<|fim_middle|>",)},
            ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|im_end|>"),
            {"psm": PSM, "spm": SPM},
            # suffix first: Qwen2.5-Coder-0.5B passes far more HumanEval single-line tasks so (in PSM
            # it often writes a blank middle), and typing at the cursor changes only the prompt's
            # end (docs/models.md, "Prompt order")
            order="spm",
        ),
        FimFormat(
            "codestral",
            {"PRE": ("[PREFIX]",), "SUF": ("[SUFFIX]",)},
            ("</s>",),
            {"psm": SUFFIX_FIRST, "spm": SUFFIX_FIRST},
            bos=True,
        ),
    ]
}

ALIASES = {
    "starcoder2": "starcoder",
    "code_llama": "codellama",
    "deepseek-coder": "deepseek",
    "qwen2.5-coder": "qwen",
    "qwen-coder": "qwen",
    "mistral": "codestral",
}


def get_format(name: str) -> FimFormat:
    """The format called ``name`` (case-insensitive; aliases such as ``starcoder2`` accepted)."""
    key = name.lower()
    key = ALIASES.get(key, key)
    if key not in FORMATS:
        raise FimFormatError(f"unknown FIM format {name!r}; known: {', '.join(sorted(FORMATS))}")
    return FORMATS[key]


def detect_format(tokenizer) -> FimFormat:
    """The format whose marker tokens are all in the tokenizer's vocabulary."""
    token_id = token_lookup(tokenizer)
    for fmt in FORMATS.values():
        if all(any(token_id(s) is not None for s in spellings) for spellings in fmt.markers.values()):
            return fmt
    raise FimFormatError(
        f"no known FIM marker tokens in its vocabulary (those of {', '.join(FORMATS)}): "
        f"not a fill-in-the-middle model"
    )


def resolve_format(tokenizer, name: str | None = None) -> FimFormat:
    """``name`` when given, else the format detected from the tokenizer; checked against the vocabulary."""
    fmt = get_format(name) if name else detect_format(tokenizer)
    fmt.marker_ids(tokenizer)
    return fmt


def token_lookup(tokenizer) -> Callable[[str], int | None]:
    """``token -> id or None`` over a tokenizer's vocabulary, added tokens included: the Rust
    tokenizer's own lookup when there is one (a ``tokenizers.Tokenizer``, or a transformers fast
    tokenizer's backend), else a dict of ``get_vocab()``."""
    backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
    lookup = getattr(backend, "token_to_id", None)
    return lookup if lookup is not None else tokenizer.get_vocab().get


@dataclass(frozen=True)
class PromptCut:
    """How a prompt longer than its window is cut, for an editor whose requests follow typing.

    ``suffix_tokens``: the suffix keeps at most this many tokens (from its start), the prefix
    the rest of the window. In PSM order the suffix follows the cursor in the prompt, so every
    keystroke at the cursor reads it again (the key/value cache is kept only up to the first
    changed token): a short suffix is a cheap keystroke. None: :func:`split_budget`'s halves.
    ``stride``: a prefix that does not fit loses whole strides of tokens from its start,
    counted from a character offset that moves in steps of many thousand characters, so that
    the prompt's start (and the cache of everything up to the cursor) survives a few characters
    typed at the cursor; the prefix then keeps between ``stride`` tokens fewer than its share
    and its share.
    """

    suffix_tokens: int | None = None
    stride: int = 64

    def __post_init__(self) -> None:
        if self.stride < 1 or (self.suffix_tokens is not None and self.suffix_tokens < 0):
            raise ValueError(f"bad prompt cut {self}")


def split_budget(n_prefix: int, n_suffix: int, budget: int) -> tuple[int, int]:
    """How many prefix tokens (kept from the end) and suffix tokens (kept from the start) fit in ``budget``.

    Each side gets half; a side that needs less leaves the rest to the other.
    Training and inference share this so the model sees prompts cut the same way.
    """
    budget = max(0, budget)
    if n_prefix + n_suffix <= budget:
        return n_prefix, n_suffix
    half = budget // 2
    if n_prefix <= half:
        return n_prefix, budget - n_prefix
    if n_suffix <= budget - half:
        return budget - n_suffix, n_suffix
    return half, budget - half


def special_token_ids(tokenizer) -> set[int]:
    """Ids of every special or added token (FIM markers, padding...): never part of a middle's text."""
    ids = set(tokenizer.all_special_ids)
    ids.update(getattr(tokenizer, "added_tokens_decoder", {}).keys())
    return ids


#: what a decoder writes for bytes that are not (yet) a whole UTF-8 character
REPLACEMENT = "\ufffd"


class TextCodec:
    """Exact text <-> token ids for a tokenizer, hiding SentencePiece's implicit leading space."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        first = tokenizer.convert_ids_to_tokens(tokenizer.encode("x", add_special_tokens=False))
        self.dummy_prefix = bool(first) and first[0].startswith("▁")
        self._sentinel_ids = tokenizer.encode(_SENTINEL, add_special_tokens=False)
        self._backend = getattr(tokenizer, "backend_tokenizer", None)
        decoder = _decoder_spec(self._backend)
        #: the tokenizer's decoder as its JSON (None without one)
        self.decoder_spec = decoder
        self._byte_scheme = _scheme_of(decoder)
        self._bytes_of: dict[int, bytes] = {}
        #: the decoder is GPT-2's byte-level mapping and nothing else: a token's text is its bytes
        #: read as UTF-8, so text that ends on a whole character decodes on its own
        self._bytes_only = not self.dummy_prefix and (decoder or {}).get("type") == "ByteLevel"
        self._added = special_token_ids(tokenizer)
        self._known = len(tokenizer)  # ids past it are padding of the model's logits: no token
        self._pieces: dict[int, str | None] = {}
        self._piece_table: list[str | None] | None = None
        self._tails: list[int] | None = None

    def encode(self, text: str, leading_space: bool = True) -> list[int]:
        """Token ids of ``text``; with ``leading_space=False`` a SentencePiece tokenizer adds no space."""
        if not text:
            return []
        if leading_space or not self.dummy_prefix:
            return self.tokenizer.encode(text, add_special_tokens=False)
        ids = self.tokenizer.encode(_SENTINEL + text, add_special_tokens=False)
        n = len(self._sentinel_ids)
        return ids[n:] if ids[:n] == self._sentinel_ids else ids

    def decode(self, ids: list[int]) -> str:
        """The text of generated ids exactly as the model wrote it (leading spaces kept)."""
        if not self.dummy_prefix:
            return self._decode(list(ids))
        anchored = self._decode(self._sentinel_ids + list(ids))
        return anchored[anchored.index(_SENTINEL) + 1 :] if _SENTINEL in anchored else anchored

    def piece(self, token: int) -> str | None:
        """The text ``token`` adds after text that ends on a whole character (or on bytes that
        can never become one), read from its bytes without the decoder; None when only the
        decoder can tell (not a byte-level-only decoder, an added token or an id the tokenizer
        does not have, or bytes that are not whole UTF-8 characters by themselves). Asked for
        every candidate of a step."""
        pieces = self._pieces
        if token in pieces:
            return pieces[token]
        text = None
        if self._bytes_only and 0 <= token < self._known and token not in self._added:
            try:
                text = self._token_bytes(token).decode("utf-8")
            except UnicodeDecodeError:
                pass
        pieces[token] = text
        return text

    def raw_text(self, token: int) -> str | None:
        """The text ``token`` adds after whole characters when :meth:`piece` has none because its
        bytes are not whole characters by themselves: the decoder's lossy reading of them (a
        character they end inside of, or bytes that never become one, read as U+FFFD). None
        where no piece could be (not a byte-level-only decoder, an added token, an id the
        tokenizer does not have)."""
        if not self._bytes_only or not 0 <= token < self._known or token in self._added:
            return None
        return self._decode([token])

    def pieces(self) -> list[str | None]:
        """:meth:`piece` of every id the tokenizer has, by id (built on the first call): a walk
        over a step's candidates reads a list rather than calling :meth:`piece` per token."""
        table = self._piece_table
        if table is None:
            table = self._piece_table = self._all_pieces()
        return table

    def _all_pieces(self) -> list[str | None]:
        """:meth:`piece` of every id, read from the Rust tokenizer's token strings in one pass
        (0.05 s at 152k tokens, against 0.6 s through the transformers tokenizer per token)."""
        if not self._bytes_only:
            return [None] * self._known
        to_token, added = self._backend.id_to_token, self._added
        strings = [to_token(token) for token in range(self._known)]
        missing = {token for token, piece in enumerate(strings) if piece is None} | added
        table: list[str | None] = []
        for token, data in enumerate(byte_level_all([piece or "" for piece in strings])):
            text = None
            if token not in missing:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    pass
            table.append(text)
        return table

    def use_token_bytes(self, token_bytes: Sequence[bytes | None]) -> None:
        """Make the :meth:`pieces` table from every token's bytes as :func:`.token_bytes.vocabulary`
        reads them (None for special tokens) when it is not made yet: the same texts, without
        reading the tokenizer again."""
        if self._piece_table is not None or not self._bytes_only or len(token_bytes) < self._known:
            return
        added = self._added
        table: list[str | None] = []
        for token, data in enumerate(token_bytes[: self._known]):
            text = None
            if data is not None and token not in added:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    pass
            table.append(text)
        self._piece_table = table

    def tail(self, token: int) -> int:
        """The token whose :meth:`piece` is ``token``'s without its first character (``" in"``
        -> ``"in"``), or -1 if no token is (the table is built on the first call)."""
        tails = self._tails
        if tails is None:
            tails = self.tails()
        return tails[token] if 0 <= token < len(tails) else -1

    def tails(self) -> list[int]:
        """:meth:`tail` of every id the tokenizer has (built here once; a vocabulary's cache on
        disk hands it over with :meth:`use_tails`)."""
        if self._tails is None:
            pieces = self.pieces()
            by_text = {text: t for t, text in enumerate(pieces) if text}
            self._tails = [by_text.get(text[1:], -1) if text and len(text) > 1 else -1 for text in pieces]
        return self._tails

    def use_tails(self, tails: list[int]) -> None:
        """Take :meth:`tails` as read back from a cache (one per id the tokenizer has)."""
        if len(tails) != self._known:
            raise ValueError(f"{len(tails)} tails for {self._known} tokens")
        self._tails = tails

    def unfinished_char(self, ids: list[int]) -> bytes:
        """The bytes of a UTF-8 character that the text of ``ids`` ends inside of (b"" if none or unknown).

        Only byte-level BPE and SentencePiece byte-fallback tokens can split a character;
        bytes that can never become a character are not unfinished (they decode to U+FFFD for good).
        """
        if self._byte_scheme is None or not ids:
            return b""
        last = self._token_bytes(ids[-1])
        if last and last[-1] < 0x80:
            return b""  # the usual case: the text ends in an ASCII character
        tail = b"".join(self._token_bytes(t) for t in ids[-4:])[-3:]
        for start in range(len(tail) - 1, -1, -1):
            if tail[start] & 0xC0 != 0x80:  # the last byte that starts a character
                try:
                    tail[start:].decode("utf-8")
                except UnicodeDecodeError as error:
                    return (
                        tail[start:] if error.reason == "unexpected end of data" and error.start == 0 else b""
                    )
                return b""
        return b""

    def held_replacements(self, unfinished: bytes) -> int:
        """How many U+FFFD the decoder writes for ``unfinished``, the start of a character at the
        end of the text: one under GPT-2's byte-level mapping (the bytes are decoded as lossy
        UTF-8, where an unfinished character is one ill-formed sequence), one per byte under
        SentencePiece's byte fallback. A U+FFFD before them is text (a byte that never becomes
        a character), not part of the held character."""
        if not unfinished:
            return 0
        return 1 if self._byte_scheme == "byte-level" else len(unfinished)

    def _token_bytes(self, token: int) -> bytes:
        """The raw bytes a token stands for, under this tokenizer's byte scheme (remembered:
        asked for every candidate token of every step)."""
        found = self._bytes_of.get(token)
        if found is None:
            piece = self.tokenizer.convert_ids_to_tokens(token)
            if self._byte_scheme == "byte-level":
                found = byte_level_bytes(piece)
            elif re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", piece):
                found = bytes([int(piece[3:5], 16)])
            else:
                found = piece.replace("▁", " ").encode("utf-8")
            self._bytes_of[token] = found
        return found

    def _decode(self, ids: list[int]) -> str:
        """The tokenizer's decoding with special tokens kept and no space clean-up (the Rust one
        when there is one)."""
        if self._backend is not None:
            return self._backend.decode(ids, skip_special_tokens=False)
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, reversed: the printable stand-in character of each byte value."""
    kept = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    stand_in = {b: chr(b) for b in kept}
    for n, b in enumerate(b for b in range(256) if b not in stand_in):
        stand_in[b] = chr(256 + n)
    return {ch: b for b, ch in stand_in.items()}


_UNICODE_TO_BYTE = _byte_level_alphabet()


_BYTE_TABLE = {**{cp: 0 for cp in range(256)}, **{ord(ch): b for ch, b in _UNICODE_TO_BYTE.items()}}


def byte_level_bytes(piece: str) -> bytes:
    """The bytes a byte-level BPE token string stands for (GPT-2's alphabet; a character outside
    it stands for a 0 byte), translated in one C call rather than character by character."""
    try:
        return piece.translate(_BYTE_TABLE).encode("latin-1")
    except UnicodeEncodeError:  # a character past the alphabet's stand-ins
        return bytes(_UNICODE_TO_BYTE.get(ch, 0) for ch in piece)


def byte_level_all(pieces: list[str]) -> list[bytes]:
    """:func:`byte_level_bytes` of every token string at once: one table lookup over all their
    characters with numpy (a vocabulary of 152k tokens in about 0.05 s)."""
    import numpy as np

    lut, known = _byte_arrays()
    units = np.frombuffer("".join(pieces).encode("utf-16-le", "surrogatepass"), dtype=np.uint16)
    lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    if len(units) != int(lengths.sum()) or not known[units].all():  # beyond the alphabet: one by one
        return [byte_level_bytes(piece) for piece in pieces]
    data = lut[units].tobytes()
    ends = np.cumsum(lengths).tolist()
    return [data[start:end] for start, end in zip([0, *ends], ends)]


_BYTE_ARRAYS: tuple = ()


def _byte_arrays():
    """(byte of each UTF-16 code unit, whether the alphabet or the first 256 code points hold it)."""
    global _BYTE_ARRAYS
    if not _BYTE_ARRAYS:
        import numpy as np

        lut, known = np.zeros(0x10000, dtype=np.uint8), np.zeros(0x10000, dtype=bool)
        known[:256] = True
        for ch, value in _UNICODE_TO_BYTE.items():
            lut[ord(ch)], known[ord(ch)] = value, True
        _BYTE_ARRAYS = (lut, known)
    return _BYTE_ARRAYS


def _decoder_spec(backend) -> dict | None:
    """The tokenizer's decoder as its JSON (``type``; a ``Sequence`` lists its ``decoders``),
    None without one. The decoder's own state, not the whole tokenizer's JSON (which is 4.5 MB
    and takes 0.5 s to write and read back at 152k tokens)."""
    if backend is None or backend.decoder is None:
        return None
    try:
        return json.loads(backend.decoder.__getstate__())
    except Exception:  # a decoder that does not say its state: the whole tokenizer's JSON
        return json.loads(backend.to_str()).get("decoder")


def byte_scheme(backend) -> str | None:
    """ "byte-level" (GPT-2 style BPE), "byte-fallback" (SentencePiece ``<0xNN>``), or None, from
    the decoder."""
    return _scheme_of(_decoder_spec(backend))


def _scheme_of(decoder: dict | None) -> str | None:
    """:func:`byte_scheme` of a decoder's JSON."""
    if decoder is None:
        return None
    spec = json.dumps(decoder)
    if '"ByteLevel"' in spec:
        return "byte-level"
    return "byte-fallback" if '"ByteFallback"' in spec else None


def build_prompt(
    fmt: FimFormat,
    codec: TextCodec,
    prefix: str,
    suffix: str,
    max_tokens: int | None = None,
    order: str = "psm",
    cut: PromptCut | None = None,
) -> list[int]:
    """Prompt ids for filling between ``prefix`` and ``suffix``; the texts are cut to fit ``max_tokens``.

    The prefix loses tokens from its start and the suffix from its end (see :func:`split_budget`);
    ``cut`` caps the suffix's share and makes the prefix's cut stable under typing (:class:`PromptCut`).
    """
    if order not in fmt.layouts:
        raise FimFormatError(
            f"FIM format {fmt.name!r} has no {order!r} order; it has {', '.join(fmt.layouts)}"
        )
    tok = codec.tokenizer
    layout = fmt.layouts[order]
    marker_ids = fmt.marker_ids(tok)
    head = [tok.bos_token_id] if fmt.bos and tok.bos_token_id is not None else []
    if max_tokens is not None:  # a token is a few characters: encode no more text than can fit
        reach = 32 * max_tokens
        if cut is not None:  # from a multiple of ``reach`` characters: typing keeps where it starts
            prefix = prefix[max(0, (len(prefix) - reach) // reach * reach) :]
        else:
            prefix = prefix[-reach:]
        suffix = suffix[:reach]
    pre = codec.encode(prefix)
    suf = codec.encode(suffix, leading_space=not fmt.suffix_without_space)
    if max_tokens is not None:
        n_markers = len(head) + sum(1 for item in layout if item in marker_ids)
        n_suf = len(suf) if cut is None or cut.suffix_tokens is None else min(len(suf), cut.suffix_tokens)
        keep_pre, keep_suf = split_budget(len(pre), n_suf, max_tokens - n_markers)
        if cut is not None and keep_pre < len(pre):  # drop whole strides from the start
            drop = -(-(len(pre) - keep_pre) // cut.stride) * cut.stride
            keep_pre = max(0, len(pre) - drop)
        pre, suf = pre[len(pre) - keep_pre :], suf[:keep_suf]
    texts = {"prefix": pre, "suffix": suf}
    ids = list(head)
    for item in layout:
        ids.extend(texts[item] if item in texts else [marker_ids[item]])
    return ids
