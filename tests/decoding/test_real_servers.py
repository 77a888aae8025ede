"""The one decode loop over a real model server: llama-cpp-python's own server (``python -m
llama_cpp.server``, its ``server`` extra, which the ``test`` extra installs) serving the shipped
model's GGUF and the real model (Qwen2.5-Coder-0.5B), against the same file in process.

At held-out cursors (stdlib files the shipped model never trained on), greedy, the editor's
options: every middle through the server parses, and the middles are the ones made in process,
but for what this server cannot reproduce (docs/serving.md): it writes a token that ends text
as empty text, so where the loop must weigh the stop token's probability without it being the
server's own pick (best-stop at the budget's end), the middle may end elsewhere, with the same
tokens up to the shorter one's end; and it reads the tokens chosen so far again from their text,
so a spelling that is not the tokenizer's own (after healing) reads otherwise there. And the
loop's time-bounded searches (whether a line can still end validly: 0.05 s) may decide otherwise
while the server computes on the same two cores: at the 3 of 8 real-model middles that part here
(measured 2026-11-28), the loop in process had taken a token the model rated far lower than the
server's (log-probabilities -2.6, -4.6, -0.24 against -0.11, -0.06, 0), the mark of a line end
refused in one run and not the other (not proven). At most 3 of 16 (shipped model) and half of
the 8 (real model: time-bounded decisions under a varying load) may part; the editor's cursors of
``benchmarks/server_agreement.py`` measure it more widely (docs/serving.md: 37 of 41 the same, 4
cut elsewhere, none parted). The vLLM engine (token ids, so nothing of this) is in
``tests/serving/test_vllm_engine.py``. Without llama-cpp-python, its server extra or the real
model these tests skip, except under CI (the ``CI`` variable set), where they fail.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from conftest import missing, require_llama_cpp
from stdlib_cursors import stdlib_cursors

from fimconstrain.decoding.editor.policy import wants_multiline
from fimconstrain.decoding.loop.generate import FimDecoder
from fimconstrain.decoding.loop.options import DecodeOptions
from fimconstrain.decoding.loop.result import FimResult
from fimconstrain.decoding.loop.validity import parses
from fimconstrain.decoding.model_choice import ModelChoice, ModelServer
from fimconstrain.decoding.models.known_models import QWEN_0_5B, cached_path, is_fetched
from fimconstrain.decoding.tokens.fim_formats import PromptCut

pytestmark = [pytest.mark.slow, pytest.mark.time_limit(900)]
#: the editor's fitted prompt window on a slow machine, and the suffix's share of it
SETTINGS = {"window": 256, "cut": PromptCut(32)}


def serve(gguf: Path, threads: int) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free port, until the test module is done."""
    require_llama_cpp()
    try:
        import fastapi  # noqa: F401
        import sse_starlette  # noqa: F401
        import starlette_context  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        missing(f"llama-cpp-python's server extra is not installed ({error.name}): pip install -e '.[test]'")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
               "--port", str(port), "--n_threads", str(threads), "--n_ctx", "2048"]  # fmt: skip
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 (a pipe nobody reads would fill and stop the server)
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as answer:
                    json.load(answer)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"llama_cpp.server did not start: {log.read()[-2000:]}") from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(30)
        log.close()


def cursors(count: int, seed: int = 0) -> list[tuple[str, str]]:
    """Cursors in stdlib files the model never read (:func:`stdlib_cursors`)."""
    return stdlib_cursors(("shlex.py", "fnmatch.py", "colorsys.py", "textwrap.py"), count, seed)


def agree(here: FimResult, there: FimResult) -> bool:
    """The same middle; or, where either was cut at its best stop, the same tokens up to the
    shorter one's end (see the module)."""
    if here.middle == there.middle:
        return True
    if "best-stop" not in (here.stopped, there.stopped):
        return False
    shorter = min(len(here.token_ids), len(there.token_ids))
    return here.token_ids[:shorter] == there.token_ids[:shorter]


#: seconds the comparison waits for a server's next token
SERVER_WAIT = 60.0


def compare(model, url: str, cuts: list[tuple[str, str]]) -> list[tuple[FimResult, FimResult]]:
    here = FimDecoder(model, **SETTINGS)
    # (a prompt's prefill on the 2 CPU cores, shared with this process, may pass the default
    # wait for the next token under load: this test asks for the middles, not their latency)
    there = ModelChoice(server=ModelServer(url, timeout=SERVER_WAIT)).open(model, **SETTINGS).decoder
    assert there.backend.steered and not there.backend.info.by_id  # (text prompts, tokens named by text)
    pairs = []
    for prefix, suffix in cuts:
        options = DecodeOptions.editor(not wants_multiline(prefix, suffix), max_new_tokens=48, semantic=False)
        pairs.append((here.generate(prefix, suffix, options), there.generate(prefix, suffix, options)))
        assert parses(prefix + pairs[-1][1].middle + suffix), pairs[-1][1].middle
    return pairs


@pytest.fixture(scope="module")
def shipped():
    require_llama_cpp()
    from fimconstrain.decoding.models.loading import default_gguf, load_model

    model = load_model(None, runtime="llama", threads=1, progress=False)
    for url in serve(default_gguf(), threads=1):  # (stopped when the module is done)
        yield model, url


@pytest.fixture(scope="module")
def qwen():
    require_llama_cpp()
    if not is_fetched(QWEN_0_5B):
        missing(f"{QWEN_0_5B.name} is not fetched: fimconstrain model get {QWEN_0_5B.name}")
    from fimconstrain.decoding.models.loading import load_model

    model = load_model(QWEN_0_5B.name, runtime="llama", threads=2, progress=False)
    for url in serve(cached_path(QWEN_0_5B), threads=2):
        yield model, url


def test_the_shipped_models_middles_through_llama_cpp_python_are_the_ones_made_here(shipped):
    model, url = shipped
    pairs = compare(model, url, cursors(4, seed=1))
    assert sum(agree(a, b) for a, b in pairs) >= len(pairs) - 3, [(a.middle, b.middle) for a, b in pairs]


def test_the_real_models_middles_through_llama_cpp_python_are_the_ones_made_here(qwen):
    model, url = qwen
    pairs = compare(model, url, cursors(2, seed=2))
    assert sum(agree(a, b) for a, b in pairs) >= len(pairs) // 2, [(a.middle, b.middle) for a, b in pairs]
