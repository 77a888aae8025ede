"""A pool worker's loop (fimconstrain/serving/pool.py ``serve``), run on a thread here: it
answers as the in-process checker does, and keeps Python's full garbage collections short by
freezing what it built and what survives each (fimconstrain/collector.py)."""

from __future__ import annotations

import gc
import threading
from multiprocessing import Pipe

import pytest

pytest.importorskip("transformers")

from fimconstrain.serving.batch import InlineChecker, RowQuery
from fimconstrain.serving.pool import serve
from fimconstrain.serving.requests import FimArgs, TokenTable

ARGS = FimArgs("import os\nfor name in os.listdir('.'):\n    if name.", ":\n        print(name)\n", "3.11", 8)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from tiny_model import build_tiny_model
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(build_tiny_model(tmp_path_factory.mktemp("tiny"), context=256))


@pytest.fixture
def worker(tokenizer):
    """A worker's loop on a thread, and the parent's end of its pipe; the collector as it was after."""
    callbacks = list(gc.callbacks)
    parent, child = Pipe()
    thread = threading.Thread(target=serve, args=(child, tokenizer), daemon=True)
    thread.start()
    try:
        assert parent.recv() == ("ready", None)
        yield parent
    finally:
        parent.send(("stop",))
        thread.join(timeout=60)
        gc.callbacks[:] = callbacks
        gc.unfreeze()
        gc.collect()


def test_a_worker_answers_as_the_checker_in_this_process(worker, tokenizer):
    inline = InlineChecker(TokenTable.from_tokenizer(tokenizer))
    worker.send(("add", 1, ARGS, (), None))
    inline.add(1, ARGS)
    first = RowQuery(1, 0, (), (), tuple(range(64)))
    worker.send(("check", [first]))
    expected = inline.check([first])
    assert worker.recv() == ("ok", expected)
    allowed = expected[0]
    assert allowed, "the row should allow some token"
    later = RowQuery(1, 0, (allowed[0],), (), tuple(range(64)))
    worker.send(("check", [later]))
    assert worker.recv() == ("ok", inline.check([later]))


def test_a_worker_freezes_what_it_built_and_what_survives_each_full_pass(worker):
    assert gc.get_freeze_count() > 0  # its tables and imports: out of the collector's sight
    before = gc.get_freeze_count()
    kept = [[] for _ in range(1000)]  # tracked objects that outlive a full pass
    gc.collect()
    assert gc.get_freeze_count() >= before + len(kept)
    gc.unfreeze()
    gc.collect(1)  # a young pass freezes nothing
    assert gc.get_freeze_count() == 0
