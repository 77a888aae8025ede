"""Local byte-level BPE tokenizers for tests, benchmarks and scripts (trained here, no hub).

Not part of the library: nothing in ``fimconstrain`` trains a tokenizer, so these helpers live
with the scripts that do. Tests and benchmarks import them as ``tokenizer_training``
(``tests/conftest.py`` and ``benchmarks/_common.py`` put ``scripts/`` on ``sys.path``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from fimconstrain.cache_folder import cache_root

#: StarCoder's special tokens (its FIM markers use underscores)
SPECIAL_TOKENS = ["<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>"]
#: SantaCoder's special tokens (its FIM markers use hyphens)
SANTACODER_TOKENS = ["<|endoftext|>", "<fim-prefix>", "<fim-middle>", "<fim-suffix>", "<fim-pad>"]


def train_byte_level_bpe(
    texts: Iterable[str],
    vocab_size: int,
    path: Path | str | None = None,
    special_tokens: list[str] = SPECIAL_TOKENS,
    min_frequency: int = 2,
):
    """A byte-level BPE ``tokenizers.Tokenizer`` (GPT-2 pre-tokenisation without an added prefix
    space; StarCoder's FIM tokens unless told otherwise) trained on ``texts``; cached at
    ``path`` (a tokenizer.json) when given."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if path is not None and Path(path).exists():
        return Tokenizer.from_file(str(path))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        tok.save(tmp)
        os.replace(tmp, path)
    return tok


def stdlib_texts(limit: int | None = None) -> list[str]:
    """The standard library's ``.py`` files as text (sorted, site-packages skipped): training data."""
    import sysconfig

    root = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__")
        )
        for name in sorted(filenames):
            if name.endswith(".py"):
                try:
                    texts.append((Path(dirpath) / name).read_text("utf-8"))
                except (OSError, UnicodeDecodeError):
                    continue
                if limit is not None and len(texts) >= limit:
                    return texts
    return texts


def stdlib_tokenizer(vocab_size: int):
    """A byte-level BPE of ``vocab_size`` tokens trained on the standard library (cached under
    :func:`cache_root`; training takes seconds to a minute)."""
    path = cache_root() / "tokenizers" / f"stdlib-bpe-{vocab_size}.json"
    return train_byte_level_bpe(stdlib_texts() if not path.exists() else (), vocab_size, path)
