#!/usr/bin/env python3
"""vLLM throughput: tokens per second of a real vLLM engine serving the shipped model, with and
without the FIM constraint plugin, and the constraint's share of the step.

One vLLM OpenAI-compatible server (``vllm_server.VllmServer``, started from
the vLLM environment of ``bash scripts/vllm_toolchain.sh``, whose engine loads the plugin through
its entry point) serves every measurement. Requests are held-out editor cursors
(``editor_quality.py``'s files and cuts): the prompt is the model's PSM FIM prompt around the
cursor, cut to fit the model's window (``--prompt-prefix-chars`` before, ``--prompt-suffix-chars``
after, shrunk further when ``/tokenize`` says it does not fit), and a constrained request carries
the whole file's prefix and suffix in ``vllm_xargs`` (docs/serving.md); an unconstrained one
carries none. Both are greedy with ``ignore_eos`` and the same ``max_tokens``, so that both
generate the same number of tokens (counted from the answers' ``usage``); with ``--until-stop``
each ends at its stop token instead (tokens per request then tell where the budget end ended a
constrained one).

A batch of B is B concurrent HTTP requests; each round takes B new cursors and runs them in
both modes, the order of the modes alternating from round to round so that drift falls on
both. A warm-up round at the largest batch comes first (not timed); prefix caching is off (a
prompt served in one mode would otherwise be cached for the other). Reported per batch and
mode: requests, tokens generated, wall seconds (from the batch's first request sent to its last
answer: prompt pass, decoding, HTTP; for a constrained request also building its checker over
the whole file), tokens per second, ms per token-step (wall time per decoding step of the
batch) and the constraint's share of the step, (constrained - unconstrained seconds per
token) / constrained seconds per token, from the same run.

    python benchmarks/vllm_throughput.py                                    # 2-core CPU
    python benchmarks/vllm_throughput.py --device cuda                      # a GPU machine
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C
import editor_quality as EQ
from vllm_server import VllmServer, vllm_python

from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR

MODES = ("unconstrained", "constrained")
NAME = "fim"
VERSION = "3.12"
#: what the plugin logs when it could not be built and the engine serves unconstrained
NOT_CONSTRAINED = "will NOT be constrained"


@dataclass
class Cursor:
    file: str
    kind: str
    prefix: str  # the whole file's text before the cursor
    suffix: str  # and after it
    prompt: str = ""


def post(url: str, body: dict, timeout: float) -> dict:
    """POST ``body`` as JSON; the answer's JSON, or a RuntimeError with the server's message."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace")[:500]
        raise RuntimeError(f"{url}: HTTP {error.code}: {detail}") from None


def fim_prompt(prefix: str, suffix: str) -> str:
    return f"<fim_prefix>{prefix}<fim_suffix>{suffix}<fim_middle>"


def fit_prompt(url: str, cursor: Cursor, before: int, after: int, room: int, timeout: float) -> str:
    """The FIM prompt around the cursor, at most ``before``/``after`` characters of the file on
    each side, shrunk by a quarter until the server counts at most ``room`` tokens."""
    while True:
        prompt = fim_prompt(cursor.prefix[max(0, len(cursor.prefix) - before) :], cursor.suffix[:after])
        count = int(post(f"{url}/tokenize", {"model": NAME, "prompt": prompt}, timeout)["count"])
        if count <= room or before + after == 0:
            return prompt
        before, after = before * 3 // 4, after * 3 // 4


def body(cursor: Cursor, mode: str, tokens: int, until_stop: bool = False) -> dict:
    request = {
        "model": NAME,
        "prompt": cursor.prompt,
        "max_tokens": tokens,
        "temperature": 0,
        "ignore_eos": not until_stop,
    }
    if mode == "constrained":
        request["vllm_xargs"] = {
            "fim_prefix": cursor.prefix,
            "fim_suffix": cursor.suffix,
            "fim_python_version": VERSION,
        }
    return request


def run_batch(
    url, executor, cursors, mode, tokens, timeout, bar, until_stop=False
) -> tuple[float, list[dict]]:
    """The cursors' requests in ``mode``, all at once: the wall seconds and each answer's
    ``completion_tokens`` and text."""

    def one(cursor: Cursor) -> dict:
        answer = post(f"{url}/v1/completions", body(cursor, mode, tokens, until_stop), timeout)
        bar.update(1)
        return {
            "completion_tokens": int(answer["usage"]["completion_tokens"]),
            "text": answer["choices"][0]["text"],
        }

    start = time.perf_counter()
    futures = [executor.submit(one, c) for c in cursors]
    results = [f.result() for f in futures]
    return time.perf_counter() - start, results


def pick_cursors(args) -> list[Cursor]:
    rng = random.Random(args.seed)
    out = []
    for index, path in enumerate(EQ.held_out_files(args.root, args.limit, args.seed)):
        text = path.read_text("utf-8", errors="replace")
        if EQ.parses(text):
            for kind, prefix, suffix, _truth in EQ.cursors(text, rng, args.per_file, index % len(EQ.KINDS)):
                out.append(Cursor(str(path), kind, prefix, suffix))
    return out


def markdown(rows: list[dict]) -> str:
    lines = [
        "| batch | mode | requests | tokens generated | tokens per request | wall s | tokens/s "
        "| ms per token-step | constraint share |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        share = "–" if r["constraint_share"] is None else f"{r['constraint_share']:.1%}"
        lines.append(
            f"| {r['batch']} | {r['mode']} | {r['requests']} | {r['tokens']} "
            f"| {r['tokens'] / max(1, r['requests']):.1f} | {r['wall_s']:.2f} "
            f"| {r['tokens_per_s']:.1f} | {r['ms_per_step']:.2f} | {share} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--model", type=Path, default=DEFAULT_MODEL_DIR, help="model directory vLLM serves")
    p.add_argument("--device", default="cpu", help="vLLM's device: cpu (its CPU backend) or cuda")
    p.add_argument("--dtype", default=None, help="default: float32 on cpu, bfloat16 otherwise")
    p.add_argument(
        "--python",
        type=Path,
        default=None,
        help="the vLLM environment's python (default: FIMCONSTRAIN_VLLM_PYTHON, else the one "
        "bash scripts/vllm_toolchain.sh builds)",
    )
    p.add_argument("--batches", type=int, nargs="+", default=[1, 16], help="concurrent requests")
    p.add_argument("--tokens", type=int, default=64, help="max_tokens of every request (ignore_eos)")
    p.add_argument(
        "--until-stop",
        action="store_true",
        help="no ignore_eos: each request ends at its stop token or max_tokens (a constrained one "
        "inside max_tokens where its budget end finishes the file), so modes differ in tokens",
    )
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per batch, each mode each round")
    p.add_argument("--max-model-len", type=int, default=1024, help="the server's window (prompt + middle)")
    p.add_argument("--prompt-prefix-chars", type=int, default=1500, help="file characters before the cursor")
    p.add_argument("--prompt-suffix-chars", type=int, default=500, help="file characters after the cursor")
    p.add_argument("--root", type=Path, default=None, help="held-out .py files (default: editor_quality's)")
    p.add_argument("--limit", type=int, default=20, help="held-out files")
    p.add_argument("--per-file", type=int, default=4, help="cursors per file")
    p.add_argument("--seed", type=int, default=0, help="file sampling and cuts")
    p.add_argument("--server-args", default="", help="more of vLLM's options, one shell-quoted string")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per HTTP request")
    p.add_argument("--log", type=Path, default=None, help="the server's log (default: a temporary file)")
    p.add_argument("--json", "--out", dest="out", type=Path, default=None, help="write the rows as JSON")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = p.parse_args(argv)

    python = args.python or vllm_python()
    if python is None or not Path(python).is_file():
        p.error(
            f"no vLLM environment ({python or 'none found'}): build it with "
            "`bash scripts/vllm_toolchain.sh`, or name its python with --python"
        )
    dtype = args.dtype or ("float32" if args.device == "cpu" else "bfloat16")
    batches = sorted(set(args.batches))
    pool = pick_cursors(args)
    if not pool:
        p.error("no held-out cursors (see --root, --limit)")

    with tempfile.TemporaryDirectory() as scratch:
        log = args.log or Path(scratch) / "vllm.log"
        server_args = ["--no-enable-prefix-caching", *shlex.split(args.server_args)]
        print(f"starting vLLM ({python}) on {args.device}, {dtype}: {args.model}", file=sys.stderr)
        with VllmServer(
            python,
            args.model,
            name=NAME,
            device=args.device,
            dtype=dtype,
            max_model_len=args.max_model_len,
            args=server_args,
            log=log,
        ) as server:
            print(f"vLLM answered after {server.startup_seconds:.1f} s at {server.url}", file=sys.stderr)
            room = args.max_model_len - args.tokens
            for cursor in pool:
                cursor.prompt = fit_prompt(
                    server.url, cursor, args.prompt_prefix_chars, args.prompt_suffix_chars, room, args.timeout
                )
            # every batch's rounds take the next cursors of the pool (cycled when it runs out)
            position = 0

            def take(n: int) -> list[Cursor]:
                nonlocal position
                chosen = [pool[(position + i) % len(pool)] for i in range(n)]
                position += n
                return chosen

            total = 2 * (batches[-1] + args.rounds * sum(batches))
            bar = C.progress(None, total=total, desc="requests", disable=args.no_progress, unit="request")
            executor = ThreadPoolExecutor(max_workers=batches[-1])
            wall = {(b, m): 0.0 for b in batches for m in MODES}
            generated = {(b, m): 0 for b in batches for m in MODES}
            requests = {(b, m): 0 for b in batches for m in MODES}
            short, changed, compared, turn = 0, 0, 0, 0
            try:
                warm = take(batches[-1])
                for mode in MODES:
                    run_batch(
                        server.url, executor, warm, mode, args.tokens, args.timeout, bar, args.until_stop
                    )
                for batch in batches:
                    for _ in range(args.rounds):
                        chosen = take(batch)
                        order = MODES if turn % 2 == 0 else MODES[::-1]
                        turn += 1
                        texts = {}
                        for mode in order:
                            seconds, results = run_batch(
                                server.url,
                                executor,
                                chosen,
                                mode,
                                args.tokens,
                                args.timeout,
                                bar,
                                args.until_stop,
                            )
                            wall[batch, mode] += seconds
                            requests[batch, mode] += len(results)
                            generated[batch, mode] += sum(r["completion_tokens"] for r in results)
                            if not args.until_stop:
                                short += sum(r["completion_tokens"] != args.tokens for r in results)
                            texts[mode] = [r["text"] for r in results]
                        compared += batch
                        changed += sum(a != b for a, b in zip(texts["unconstrained"], texts["constrained"]))
            finally:
                executor.shutdown(wait=False, cancel_futures=True)
                bar.close()
            startup = server.startup_seconds
        unbuilt = NOT_CONSTRAINED in log.read_text(errors="replace") if log.exists() else False

    rows = []
    for batch in batches:
        per_token = {m: wall[batch, m] / max(1, generated[batch, m]) for m in MODES}
        for mode in MODES:
            tokens, seconds, n = generated[batch, mode], wall[batch, mode], requests[batch, mode]
            share = None
            if mode == "constrained" and per_token[mode] > 0:
                share = (per_token["constrained"] - per_token["unconstrained"]) / per_token["constrained"]
            rows.append(
                {
                    "batch": batch,
                    "mode": mode,
                    "requests": n,
                    "tokens": tokens,
                    "wall_s": seconds,
                    "tokens_per_s": tokens / seconds if seconds else 0.0,
                    "ms_per_step": 1000 * seconds / (tokens / batch) if tokens else 0.0,  # steps of the batch
                    "constraint_share": share,
                }
            )
    print(markdown(rows))
    print(
        f"\n{args.model.name} on vLLM ({args.device}, {dtype}), max_tokens {args.tokens} "
        f"{'until the stop token' if args.until_stop else 'with ignore_eos'}, "
        f"{args.rounds} round(s) per batch, server start-up {startup:.1f} s; constrained middles "
        f"that differ from the unconstrained ones: {changed} of {compared}"
    )
    if short:
        print(f"warning: {short} request(s) generated other than {args.tokens} tokens (see usage)")
    if unbuilt:
        print("warning: the server logged that FIM requests were NOT constrained (see --log)")
    if args.out:
        out = C.write_results(
            "vllm_throughput",
            args,
            {
                "rows": rows,
                "startup_seconds": startup,
                "changed": changed,
                "compared": compared,
                "short": short,
                "not_constrained_logged": unbuilt,
            },
        )
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
