"""Semantic decoding (paper 003) in the decode loop: a candidate naming nothing known is excluded
where the provider is confident and the position a plain read, demoted elsewhere, and never blocks
(fail-open); jedi's attributes with their time budget; the switches (API, CLI, server setting)."""

from __future__ import annotations

import pickle
import subprocess
import sys
from concurrent.futures import Future
from dataclasses import replace
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
import numpy as np  # noqa: E402

pytest.importorskip("transformers")

from fimconstrain.decoding.loop import jedi_attributes  # noqa: E402
from fimconstrain.decoding.loop.constraint import ConstraintState  # noqa: E402
from fimconstrain.decoding.loop.generate import FimDecoder  # noqa: E402
from fimconstrain.decoding.loop.options import SEMANTIC_DEFAULT  # noqa: E402
from fimconstrain.decoding.loop.ranking import ranked_tokens  # noqa: E402
from fimconstrain.decoding.loop.semantic import SemanticGuide, SemanticOptions  # noqa: E402
from fimconstrain.decoding.models.loading import load_model  # noqa: E402
from fimconstrain.decoding.tokens.fim_formats import TextCodec  # noqa: E402
from fimconstrain.engine.checker import fim_checker  # noqa: E402
from fimconstrain.engine.names.name_check import NameCheck  # noqa: E402
from fimconstrain.engine.names.provider import UNKNOWN, NamePoint, NameSet  # noqa: E402
from fimconstrain.engine.names.scopes import FileScopes  # noqa: E402

HARD = "def wrap(text):\n    return"  # `return |`: only a known name fits
SOFT = "def wrap(text):\n    return len(1 +"  # inside parentheses: maybe a comprehension's variable
UNSURE = "from os import *\n\ndef wrap(text):\n    return"  # a star import: the scope may be incomplete


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from tiny_model import build_tiny_model

    return load_model(build_tiny_model(tmp_path_factory.mktemp("tiny_model"), context=256))


@pytest.fixture(scope="module")
def codec(tiny):
    return TextCodec(tiny.tokenizer)


def token_of(codec, text: str) -> int:
    ids = codec.encode(text)
    assert len(ids) == 1 and codec.decode(ids) == text, f"{text!r} is not one token here"
    return ids[0]


def pick(tiny, codec, prefix: str, suffix: str, preferences: dict[str, float], healing: str = ""):
    """The guide's choice when only the tokens in ``preferences`` (text: key) are possible;
    ``healing``: the prefix's end the tokens must write again first."""
    stop_ids = tiny.fim_format.stop_ids(tiny.tokenizer)
    keys = np.full(len(tiny.tokenizer), -np.inf)
    for text, key in preferences.items():
        keys[token_of(codec, text)] = key
    state = ConstraintState(fim_checker(prefix, suffix), codec, healing=healing)
    check = NameCheck(prefix, suffix, FileScopes.read(prefix, suffix))
    guide = SemanticGuide(check, stop_ids, set(), SemanticOptions(attributes=False))
    chosen = [codec.decode([token]) for token, _ in guide.choose(state, ranked_tokens(keys, 8), keys)]
    return chosen, guide


def test_where_sure_an_unknown_name_is_excluded_however_likely(tiny, codec):
    chosen, guide = pick(tiny, codec, HARD, "\n", {" width": 10.0, " text": 2.0})
    assert chosen == [" text"] and guide.stats["restricted"] == 1
    assert "text" in guide.check.text[-5:]  # the guide moved on with its choice


@pytest.mark.parametrize("prefix", [SOFT, UNSURE], ids=["may-be-bound-later", "unsure-engine"])
def test_elsewhere_an_unknown_name_is_only_demoted(tiny, codec, prefix):
    close, _ = pick(tiny, codec, prefix, ")\n" if prefix is SOFT else "\n", {" width": 10.0, " text": 9.0})
    far, guide = pick(tiny, codec, prefix, ")\n" if prefix is SOFT else "\n", {" width": 10.0, " text": 2.0})
    assert close == [" text"]  # within the penalty: reranked
    assert far == [" width"] and guide.stats["demoted"] == 1  # the model is sure: kept


def test_when_every_candidate_is_excluded_the_loop_goes_on_fail_open(tiny, codec):
    chosen, guide = pick(tiny, codec, HARD, "\n", {" width": 10.0, " chunk": 9.0})
    assert chosen == [" width"] and guide.stats["fail-open"] == 1


def test_a_favourite_that_resolves_is_chosen_without_reading_the_next_token(tiny, codec):
    """Keys descend, so once the favourite resolves no later token can win: the guide reads no
    second token of the ranking (whose every token may cost a line's or a block's check)."""
    prefix = "def wrap(text):\n    return"
    stop_ids = tiny.fim_format.stop_ids(tiny.tokenizer)
    keys = np.full(len(tiny.tokenizer), -np.inf)
    keys[token_of(codec, " text")], keys[token_of(codec, " width")] = 10.0, 9.0
    state = ConstraintState(fim_checker(prefix, "\n"), codec)
    guide = SemanticGuide(NameCheck(prefix, "\n", FileScopes.read(prefix, "\n")), stop_ids, set())
    read: list[int] = []

    def ranked():
        for token in ranked_tokens(keys, 8):
            read.append(token)
            yield token

    assert [token for token, _ in guide.choose(state, ranked(), keys)] == [token_of(codec, " text")]
    assert read == [token_of(codec, " text")]


def test_a_name_the_user_is_typing_is_not_judged_when_healed(tiny, codec):
    """``return wid|`` with token healing: the first token writes `` wid`` again and goes on;
    the user's partial name is theirs (only what comes after it is the middle's)."""
    chosen, guide = pick(tiny, codec, HARD + " wid", "\n", {" width": 10.0}, healing=" wid")
    assert chosen == [" width"] and not guide.stats["excluded"] and not guide.stats["fail-open"]


def test_a_binding_position_is_never_constrained(tiny, codec):
    chosen, guide = pick(tiny, codec, "def wrap(text):\n    for", "\n", {" width": 10.0, " text": 9.0})
    assert chosen == [" width"] and not guide.stats["demoted"] and not guide.stats["excluded"]


class _Steered(torch.nn.Module):
    """The model, with the first token's favourites forced (the prompt's pass), then stopping."""

    def __init__(self, model, first: dict[int, float], stop: int):
        super().__init__()
        self.inner, self.config, self.calls = model, model.config, 0
        self.first, self.stop = first, stop

    @property
    def device(self):
        return self.inner.device

    def forward(self, **kwargs):
        out = self.inner(**kwargs)
        top = float(out.logits.max())
        for token, boost in self.first.items() if self.calls == 0 else [(self.stop, 100.0)]:
            out.logits[..., token] = top + boost
        self.calls += 1
        return out


@pytest.mark.parametrize("semantic", [False, True])
def test_the_api_switch(tiny, codec, semantic):
    stop = next(iter(tiny.fim_format.stop_ids(tiny.tokenizer)))
    model = _Steered(tiny.model, {token_of(codec, " width"): 100.0, token_of(codec, " text"): 95.0}, stop)
    decoder = FimDecoder.from_model(model, tiny.tokenizer, tiny.fim_format)
    options = SemanticOptions(attributes=False) if semantic else False
    result = decoder.generate(HARD, "\n", max_new_tokens=4, heal=False, semantic=options)
    assert result.middle == (" text" if semantic else " width") and result.valid
    assert bool(result.semantic) is semantic


class _NeverAnswers:
    """A jedi stand-in whose answers never arrive."""

    def query(self, key, text, suffix) -> Future:
        return Future()


def test_a_late_attribute_engine_is_unknown_and_never_blocks():
    attributes = jedi_attributes.FileAttributes(_NeverAnswers(), (0, 0), budget=0.0)  # type: ignore[arg-type]
    point = NamePoint("import os\nos.", "\n", "os")
    assert attributes.names(point) is UNKNOWN and attributes.timeouts == 1
    check = NameCheck("import os\n", "\n", FileScopes.read("import os\n", "\n"), attributes)
    assert not check.verdict("x = os.nothing_here").fails


def test_the_time_waited_for_jedi_is_counted_answered_or_not():
    """FileAttributes.waited_total: what the decode loop spent waiting (the guide's
    ``jedi-wait-ms``), for a receiver whose answer never comes and for one answered at once."""
    late = jedi_attributes.FileAttributes(_NeverAnswers(), (0, 0), budget=0.05)  # type: ignore[arg-type]
    assert late.names(NamePoint("import os\nos.", "\n", "os")) is UNKNOWN
    assert late.waited_total >= 0.05 and late.timeouts == 1

    class Answers:
        def query(self, key, text, suffix) -> Future:
            future: Future = Future()
            future.set_result(UNKNOWN)
            return future

    prompt = jedi_attributes.FileAttributes(Answers(), (0, 0), budget=0.05)  # type: ignore[arg-type]
    assert prompt.names(NamePoint("import os\nos.", "\n", "os")) is UNKNOWN and prompt.timeouts == 0
    assert prompt.answers == {"os": UNKNOWN}  # kept: asked again, nothing is waited for
    waited = prompt.waited_total
    prompt.names(NamePoint("import os\nos.", "\n", "os"))
    assert prompt.waited_total == waited


def test_nothing_is_waited_for_once_jedi_is_slow_on_the_file():
    """An answer asked ahead that has taken longer than the budget says jedi is slow here: a
    question asked where the receiver is written is then asked but not waited for, and its
    answer is taken at a later step once it is in."""
    slow = jedi_attributes.FileAttributes(_NeverAnswers(), (0, 0), budget=0.05)  # type: ignore[arg-type]
    slow.ahead["self"] = Future()  # asked ahead, still unanswered ...
    slow.asked_at -= 1.0  # ... a second after it was asked
    assert slow.jedi_is_slow()
    assert slow.names(NamePoint("import os\nos.", "\n", "os")) is UNKNOWN
    assert slow.waited_total < 0.05 and slow.not_waited == 1 and slow.timeouts == 0

    answer = NameSet(frozenset({"path"}), True)
    pending: Future = Future()

    class Later:
        def query(self, key, text, suffix) -> Future:
            return pending

    later = jedi_attributes.FileAttributes(Later(), (0, 0), budget=0.05)  # type: ignore[arg-type]
    ahead: Future = Future()
    later.ahead["self"] = ahead
    ahead.add_done_callback(later.note_ahead_answer)
    assert not later.jedi_is_slow()  # (young: it may still come within the budget)
    later.asked_at -= 1.0
    ahead.set_result(UNKNOWN)  # answered, but a second late
    assert later.jedi_is_slow()
    assert later.names(NamePoint("import os\nos.", "\n", "os")) is UNKNOWN and later.not_waited == 1
    pending.set_result(answer)
    assert later.names(NamePoint("import os\nos.", "\n", "os")) is answer  # a later step takes it


def test_a_cursor_at_a_line_start_asks_ahead_inside_the_block_above():
    """The middle writes the line's indentation, so the question goes where the code above leaves
    off (deeper after a ``:``): a function's locals are in scope there, not at column 0."""
    ahead = jedi_attributes.ahead_text
    assert ahead("def f(x):\n    result = []\n", "result") == "def f(x):\n    result = []\n    result."
    assert ahead("def f(x):\n", "x") == "def f(x):\n    x."
    assert ahead("def f(x):\n\tif x:  # why\n\n", "x") == "def f(x):\n\tif x:  # why\n\n\t\tx."
    assert ahead("import os\n", "os") == "import os\nos."
    answer = jedi_attributes.attributes_at(ahead("def f(numbers):\n    result = []\n", "result"), "\n")
    assert answer.names is not None and "append" in answer.names


def test_a_failing_jedi_is_unknown(monkeypatch):
    def broken(text, suffix):
        raise RuntimeError("jedi fell over")

    monkeypatch.setattr(jedi_attributes, "attributes_at", broken)
    assert jedi_attributes._safe("import os\nos.", "\n") is UNKNOWN  # what the worker process answers


def test_the_worker_process_answers_and_a_closed_one_is_unknown():
    shared = jedi_attributes.JediAttributes()
    answer = shared.query((1, 2, "os", False), "import os\nos.", "\n").result(timeout=60)
    assert answer.names is not None and "path" in answer.names and answer.confident
    shared.close()
    late = shared.query((1, 2, "sys", False), "import sys\nsys.", "\n")
    assert late.result(timeout=10) is UNKNOWN


def test_a_worker_whose_parent_left_ends_quietly():
    """The worker answers a job after its parent exited (``fimconstrain complete`` ends while
    jedi still works on a query asked ahead): it ends with status 0 and writes no traceback."""
    worker = subprocess.Popen(
        [sys.executable, "-m", jedi_attributes.__name__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    worker.stdout.close()  # the parent is gone before the answer is written
    pickle.dump(("import os\nos.", "\n"), worker.stdin)
    worker.stdin.close()
    assert worker.wait(timeout=60) == 0
    assert worker.stderr.read() == b""


NEAR_PREFIX = "import os\nclass Box:\n    def grow(self):\n        path = os.sep\n        x = "
NEAR_SUFFIX = "\n        self.size += 1\n"


def test_receivers_near_the_cursor_are_asked_for_ahead():
    assert jedi_attributes.nearby_receivers(NEAR_PREFIX, NEAR_SUFFIX) == ["self", "os"]  # nearest first
    assert jedi_attributes.nearby_receivers("a.b.c(d.e)", "", limit=1) == ["d"]
    assert jedi_attributes.ahead_text(NEAR_PREFIX, "self").endswith("\n        self.")
    attributes = jedi_attributes.shared().for_file(NEAR_PREFIX, NEAR_SUFFIX, budget=60.0)
    assert set(attributes.ahead) == {"os", "self"}
    answer = attributes.names(NamePoint(NEAR_PREFIX + "self.", NEAR_SUFFIX, "self"))
    assert answer.names is not None and {"grow", "size"} <= answer.names and not answer.confident


def test_an_unknown_answer_ahead_asks_again_where_the_receiver_is_written():
    prefix = 'import os\ns = """\n'  # the cursor's line is inside a string: asked ahead, jedi lists nothing
    attributes = jedi_attributes.shared().for_file(prefix, '"""\n', budget=60.0)
    attributes.ahead["os"] = attributes.shared.query((0, 0, "os", True), prefix + "os.", '"""\n')
    assert attributes.ahead["os"].result(timeout=60) is UNKNOWN
    answer = attributes.names(NamePoint("import os\nos.", "\n", "os"))
    assert answer.names is not None and "path" in answer.names


def test_jedi_knows_modules_for_sure_and_instances_only_roughly():
    module = jedi_attributes.attributes_at("import os\nos.", "\n")
    assert module.names is not None and "path" in module.names and module.confident
    text = "class Box:\n    def __init__(self):\n        self.size = 1\n    def grow(self):\n        self."
    instance = jedi_attributes.attributes_at(text, "\n    def later(self):\n        pass\n")
    assert instance.names is not None and {"size", "grow", "later"} <= instance.names
    assert not instance.confident
    assert jedi_attributes.attributes_at("x = undefined_thing.", "\n") is UNKNOWN


def test_the_command_line_switch():
    from fimconstrain.command_line.complete import build_parser

    parse = build_parser().parse_args
    assert parse(["f.py", "--cursor", "1:1"]).semantic is SEMANTIC_DEFAULT
    assert parse(["f.py", "--cursor", "1:1", "--semantic"]).semantic is True
    assert parse(["f.py", "--cursor", "1:1", "--no-semantic"]).semantic is False


def test_the_server_setting_reaches_the_decoder():
    from lsp_server import config
    from lsp_server.completer import Completer, Job, Loaded

    settings, problems = config.update(config.Settings(), {"semantic": not SEMANTIC_DEFAULT})
    assert settings.semantic is (not SEMANTIC_DEFAULT) and not problems
    assert config.update(settings, {"semantic": "yes"})[1]  # a bad value is reported, ignored
    asked = []

    def generate(prefix, suffix, options, controls, **changes):
        asked.append(options.semantic)
        return SimpleNamespace(
            valid=True,
            middle="x",
            mode="constrained",
            stopped="eos",
            mean_logprob=0.0,
            model_seconds=0.0,
            checker_seconds=0.0,
            unshowable=False,
        )

    completer = Completer()
    gate = SimpleNamespace(shows=lambda score: True)
    decoder = SimpleNamespace(generate=generate, python_version=(3, 14))
    completer.loaded = Loaded("fake", decoder, "fake", 0.0, gate)  # type: ignore[arg-type]
    for semantic in (True, False):
        job = Job("file:///a.py", float("inf"), True)
        assert completer.complete(job, "x = ", "\n", replace(settings, semantic=semantic), 1) == ["x"]
    assert asked == [True, False]
