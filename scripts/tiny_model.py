"""A tiny randomly initialised FIM model for tests and smoke runs (no download, a few seconds on a CPU).

``build_tiny_model(directory)`` writes a 2-layer GPTBigCode (SantaCoder's
architecture and FIM tokens) and a byte-level BPE tokenizer trained on a few
standard-library files; load it with ``fimconstrain.decoding.models.loading.load_model(directory)``
or point the language server at it with ``{"model": directory}``. Its completions
are random but still valid: the constraint does that.
``python scripts/tiny_model.py DIR`` builds one from the command line. Not part of the library:
tests import it as ``tiny_model`` (``tests/conftest.py`` puts ``scripts/`` on ``sys.path``).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from tokenizer_training import SANTACODER_TOKENS, train_byte_level_bpe

_TEXTS = ("textwrap.py", "string.py", "json/decoder.py")


def build_tiny_model(
    directory: str | Path,
    vocab_size: int = 600,
    seed: int = 0,
    layers: int = 2,
    dim: int = 32,
    heads: int = 2,
    context: int = 4096,
) -> Path:
    """Write the tiny model and its tokenizer into ``directory`` (created) and return it.

    The sizes can be raised to those of the shipped model (8192 tokens, 6 layers, d=320,
    5 heads, context 1024) to time the server with a model of realistic cost.
    """
    import torch
    from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM, PreTrainedTokenizerFast

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = list(_TEXTS)
    if vocab_size > 1000:  # enough text for the merges
        names += sorted(str(p.relative_to(stdlib)) for p in stdlib.glob("*.py"))[:60]
    texts = [(stdlib / name).read_text(encoding="utf-8", errors="replace") for name in names]
    tok = train_byte_level_bpe(texts, vocab_size, special_tokens=SANTACODER_TOKENS, min_frequency=0)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>", pad_token="<fim-pad>"
    )
    torch.manual_seed(seed)
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert isinstance(eos, int)  # one token in, one id out
    config = GPTBigCodeConfig(
        vocab_size=len(tokenizer),
        n_positions=context,
        n_embd=dim,
        n_layer=layers,
        n_head=heads,
        multi_query=True,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    GPTBigCodeForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python scripts/tiny_model.py", description="Build a random FIM model.")
    ap.add_argument("directory")
    ap.add_argument(
        "--shipped-size",
        action="store_true",
        help="the shipped model's sizes (8192 tokens, 6 layers, d=320, context 1024) instead of tiny ones",
    )
    args = ap.parse_args()
    sizes = dict(vocab_size=8192, layers=6, dim=320, heads=5, context=1024) if args.shipped_size else {}
    print(build_tiny_model(args.directory, **sizes))
