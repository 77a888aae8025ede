"""The step's last stage: a batch's logits kept only at each row's allowed tokens."""

from __future__ import annotations

import torch

from fimconstrain.serving.batch import keep_only


def test_keep_only_keeps_each_rows_allowed_logits_and_nothing_else():
    logits = torch.arange(24, dtype=torch.float32).reshape(3, 8)
    answers = [[7, 0], [], [3]]
    out = keep_only(logits, answers)
    expected = torch.full((3, 8), float("-inf"))
    expected[0, 7], expected[0, 0], expected[2, 3] = 7.0, 0.0, 19.0
    assert torch.equal(out, expected)
    assert torch.equal(logits, torch.arange(24, dtype=torch.float32).reshape(3, 8))  # untouched


def test_keep_only_keeps_the_logits_dtype():
    logits = torch.zeros(2, 5, dtype=torch.float16)
    out = keep_only(logits, [[1], [4, 2]])
    assert out.dtype == torch.float16
    assert torch.isfinite(out).nonzero().tolist() == [[0, 1], [1, 2], [1, 4]]
