"""The confidence gate: a threshold fitted on (score, good) pairs, stored beside a model."""

from __future__ import annotations

import json

from fimconstrain.decoding.models.confidence import FILE_NAME, ConfidenceGate, fit_threshold


def test_the_threshold_keeps_the_confident_good_items():
    scored = [(-0.1, True), (-0.2, True), (-0.5, False), (-0.6, True), (-1.0, False), (-2.0, False)]
    assert fit_threshold(scored) == -0.2  # -0.6 would add one good and one junk item: no gain


def test_no_threshold_is_worth_it_when_nothing_is_good():
    assert fit_threshold([(-0.1, False), (-0.4, False)]) == 0.0
    assert not ConfidenceGate(0.0).shows(-0.1)


def test_ties_show_together():
    assert fit_threshold([(-0.3, True), (-0.3, False), (-0.3, True), (-0.9, False)]) == -0.3


def test_the_gate_reads_the_model_s_file(tmp_path):
    assert ConfidenceGate.for_model(tmp_path).shows(-9.0)  # no file: everything shows
    (tmp_path / FILE_NAME).write_text(json.dumps({"min_mean_logprob": -1.5}))
    gate = ConfidenceGate.for_model(tmp_path)
    assert gate.shows(-1.0) and not gate.shows(-2.0) and not gate.shows(None)
