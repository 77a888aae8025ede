"""The default model's training examples: FIM in PSM and SPM order, cut from real files,
fitted to the context."""

import hashlib
import sysconfig
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["textwrap.py", "string.py", "json/decoder.py", "shlex.py"]


@pytest.fixture(scope="module")
def train(load_script):
    return load_script("train_default_model")


@pytest.fixture(scope="module")
def texts():
    return [(STDLIB / name).read_text(encoding="utf-8") for name in FILES]


@pytest.fixture(scope="module")
def tokenizer(train, texts):
    return train.train_tokenizer(texts, 700)


def _pieces(train, tokenizer, example: list[int]) -> tuple[str, str, str, str]:
    """(order, prefix, middle, suffix) read back from a FIM example's markers."""
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in train.SPECIAL_TOKENS}
    pre, suf, mid, eot = ids[train.PRE], ids[train.SUF], ids[train.MID], ids[train.EOT]
    assert example[0] == pre and example[-1] == eot
    at_suf, at_mid = example.index(suf), example.index(mid)
    if at_suf == 1:  # SPM: <pre> <suf> S <mid> P M <eot>; P and M run together, so P comes back inside M
        return "spm", "", tokenizer.decode(example[at_mid + 1 : -1]), tokenizer.decode(example[2:at_mid])
    return (
        "psm",
        tokenizer.decode(example[1:at_suf]),
        tokenizer.decode(example[at_mid + 1 : -1]),
        tokenizer.decode(example[at_suf + 1 : at_mid]),
    )


@pytest.mark.parametrize("spm_rate", [0.0, 1.0])
def test_fim_examples_are_pieces_of_one_file_in_order(train, tokenizer, texts, spm_rate):
    sampler = train.ExampleSampler(texts, tokenizer, context=1024, fim_rate=1.0, seed=3, spm_rate=spm_rate)
    source = "\n".join(texts)
    orders = []
    for _ in range(40):
        example = sampler.fim_example()
        assert len(example) <= 1024
        order, prefix, middle, suffix = _pieces(train, tokenizer, example)
        orders.append(order)
        # the prefix, the middle and the suffix are consecutive pieces of one file
        assert (prefix + middle + suffix) in source, (prefix[-40:], middle[:40], suffix[:40])
    if spm_rate:
        assert set(orders) == {"spm"}
    else:  # PSM reads like SPM only when no prefix is left (a middle at the start of a file)
        assert orders.count("psm") >= 30, orders


def test_batches_mix_fim_and_left_to_right(train, tokenizer, texts):
    sampler = train.ExampleSampler(texts, tokenizer, context=128, fim_rate=0.5, seed=0, spm_rate=0.5)
    ids, mask, labels = sampler.batch(32)
    pre = tokenizer.convert_tokens_to_ids(train.PRE)
    fim_rows = int((ids[:, 0] == pre).sum())
    assert 0 < fim_rows < 32
    assert bool(((labels == -100) == (mask == 0)).all())  # padding never counts in the loss


def test_code_selection_holds_out_by_hash_and_caps_each_distribution(train):
    files = [
        train.CodeFile(
            f"dist{i % 3}", "1.0", "MIT", f"m{i}.py", hashlib.sha256(str(i).encode()).hexdigest(), "x" * 100
        )
        for i in range(300)
    ]
    chosen, heldout = train.select_code(files, total_chars=20_000, per_distribution_chars=5_000)
    assert heldout and all(int(f.sha256, 16) % train.HOLDOUT_MODULUS == 0 for f in heldout)
    assert not {f.sha256 for f in chosen} & {f.sha256 for f in heldout}
    per_distribution = {
        name: sum(len(f.text) for f in chosen if f.distribution == name)
        for name in ("dist0", "dist1", "dist2")
    }
    assert per_distribution == {"dist0": 5_000, "dist1": 5_000, "dist2": 5_000}  # capped, not the total
    chosen, _ = train.select_code(files, total_chars=1_000, per_distribution_chars=5_000)
    assert sum(len(f.text) for f in chosen) == 1_000
