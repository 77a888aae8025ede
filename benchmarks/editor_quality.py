#!/usr/bin/env python3
"""Editor quality: would a person accept what the language server shows?

Held-out real files (default: pure-Python packages installed beside fimconstrain, none of them
in the shipped model's training set, which is CPython's standard library) are cut where an
editor asks for a completion:

* ``mid-line``: the cursor inside a line of code, the rest of the line not yet typed (the
  middle is the rest of the line);
* ``new-line``: an empty line after its indentation (the middle is the line);
* ``block``: the line after a block header, indented (the middle is the block's body).

Each request goes through the editor's policy, the path the language server runs
(``fimconstrain.decoding.editor.policy.complete_at_cursor``, with its one-line/block decision
``wants_multiline``), in the server's modes ``fim`` and ``prefix``; ``off`` is the same model
decoding unconstrained (the first line for a one-line request). Reported per mode and cursor
kind: the share of requests that show an item, first-line exact match and edit similarity
(CrossCodeEval's: rapidfuzz ``fuzz.ratio``/100, 0 for a request with no item), the share of
shown items that parse once accepted and that are "good" (edit similarity >= 0.7), latency
p50/p95, and the time per generated token of the model and of the constraint (candidate and stop
checks, the end of the middle; pooled over the requests, and the constraint's median share of
the model's per request), and the constraint's time per decoding step (median, p95, p99, max over
every step of every request: a model that steps in a millisecond waits on its tail). With
``--runtimes transformers,llama`` (the default when llama-cpp-python is installed) the same
requests run on both runtimes in one run, the shipped model as its checkpoint and as its GGUF;
the runtime ``server`` (with ``--server URL``) sends them to a model server that serves the same
model (``vllm serve`` with fimconstrain installed: docs/serving.md).
A bar chart is written beside the JSON.

    python benchmarks/editor_quality.py --limit 20 --per-file 3
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import time
from pathlib import Path

import _common as C

KINDS = ("mid-line", "new-line", "block")
MODES = ("off", "prefix", "fim")
GOOD = 0.7
DEFAULT_PACKAGES = ("click", "jinja2", "attr", "anyio", "h11", "idna", "packaging", "pygls", "markdown_it")
_HEADER = re.compile(r"^([ \t]*)(?:def|class|if|elif|else|for|while|with|try|except|finally)\b.*:[ \t]*$")


def held_out_files(root: Path | None, limit: int, seed: int) -> list[Path]:
    """Python files of 1-30 k characters under ``root`` (default: a few installed packages)."""
    import sysconfig

    roots = [root] if root else [Path(sysconfig.get_paths()["purelib"]) / p for p in DEFAULT_PACKAGES]
    files = sorted(
        f for r in roots if r.is_dir() for f in r.rglob("*.py") if 1_000 <= f.stat().st_size <= 30_000
    )
    random.Random(seed).shuffle(files)
    return files[:limit]


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its break) for each line."""
    out, at = [], 0
    for line in text.split("\n"):
        out.append((at, line))
        at += len(line) + 1
    return out


def cursors(text: str, rng: random.Random, n: int, first_kind: int = 0) -> list[tuple[str, str, str, str]]:
    """Up to ``n`` requests ``(kind, prefix, suffix, truth)`` cut from ``text``, the kinds in turn
    from ``KINDS[first_kind]`` (so that every kind comes up over several files)."""
    lines = _lines(text)
    code = [
        i for i, (_, s) in enumerate(lines) if s.strip() and not s.strip().startswith(("#", '"', "'", "@"))
    ]
    out: list[tuple[str, str, str, str]] = []
    for _ in range(n * 4):
        if len(out) == n or not code:
            break
        kind = KINDS[(first_kind + len(out)) % len(KINDS)]
        i = rng.choice(code)
        at, line = lines[i]
        indent = len(line) - len(line.lstrip())
        end = at + len(line)
        if kind == "mid-line":
            body = line.rstrip()
            if len(body) - indent < 6:
                continue
            col = rng.randint(indent + 2, len(body) - 2)
            out.append((kind, text[: at + col], text[end:], body[col:]))
        elif kind == "new-line":
            out.append((kind, text[: at + indent], text[end:], line[indent:].rstrip()))
        else:
            m = _HEADER.match(line)
            if not m or i + 1 >= len(lines):
                continue
            b_at, b_line = lines[i + 1]
            b_indent = len(b_line) - len(b_line.lstrip())
            if b_indent <= indent or not b_line.strip():
                continue
            j = i + 1
            while j + 1 < len(lines) and (
                not lines[j + 1][1].strip() or _indent(lines[j + 1][1]) >= b_indent
            ):
                j += 1
            while j > i + 1 and not lines[j][1].strip():
                j -= 1
            b_end = lines[j][0] + len(lines[j][1])
            out.append((kind, text[: b_at + b_indent], text[b_end:], text[b_at + b_indent : b_end]))
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def edit_similarity(a: str, b: str) -> float:
    """CrossCodeEval's edit similarity: rapidfuzz ``fuzz.ratio`` / 100."""
    from rapidfuzz import fuzz

    return fuzz.ratio(a, b) / 100


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


class Completer:
    """The library's editor policy (what the language server runs) with the server's default
    settings; ``off`` decodes the same model unconstrained."""

    def __init__(
        self,
        model: str | None,
        deadline_ms: int,
        max_tokens: int,
        runtime: str = "auto",
        server: str | None = None,
        window: int | None = None,
        suffix_tokens: int | None = None,
        threads: int | None = None,
        order: str | None = None,
    ):
        from fimconstrain.decoding.editor.policy import ShownItems
        from fimconstrain.decoding.loop.generate import FimDecoder
        from fimconstrain.decoding.model_choice import ModelChoice, ModelServer
        from fimconstrain.decoding.models.confidence import ConfidenceGate
        from fimconstrain.decoding.models.loading import DEFAULT_MODEL_DIR, load_model
        from fimconstrain.decoding.tokens.fim_formats import PromptCut

        # the server's prompt window (lsp_server.completer.apply_window) when given
        cut = PromptCut(suffix_tokens) if window or suffix_tokens is not None else None
        self.decoder: FimDecoder
        if runtime == "server":  # the same model behind a server: the same gate
            if server is None:
                raise SystemExit("--runtimes server needs --server URL")
            served = ModelChoice(model, server=ModelServer(server))
            self.decoder = served.open(order=order, window=window, cut=cut).decoder
            self.gate = ConfidenceGate.for_model(model or DEFAULT_MODEL_DIR)
        else:
            backend = load_model(model, runtime=runtime, threads=threads, progress=False)
            self.decoder = FimDecoder(backend, order=order, window=window, cut=cut)
            self.gate = ConfidenceGate.for_model(backend.name)
        self.deadline_ms, self.max_tokens = deadline_ms, max_tokens
        self.shown = ShownItems()  # (as the server: typing what an item begins with gets its rest)
        self.complete(
            "fim", "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"
        )  # warm up, as the server

    def complete(self, mode: str, prefix: str, suffix: str) -> tuple[str | None, dict]:
        """The first item the editor would show, or None; and the generations' time (tokens,
        model seconds, constraint seconds)."""
        from fimconstrain.decoding.editor.policy import wants_multiline

        single = not wants_multiline(prefix, suffix)
        if mode == "off":
            result = self.decoder.generate(
                prefix, suffix, mode="unconstrained", max_new_tokens=self.max_tokens
            )
            middle = result.middle.split("\n", 1)[0] if single else result.middle.rstrip()
            spent = {
                "tokens": result.generated,
                "model_s": result.model_seconds,
                "prefill_s": result.prefill_seconds,
                "constraint_s": 0.0,
                "step_constraint_s": [],
            }
            return (middle if middle.strip() else None), spent
        done = self.completion(mode, prefix, suffix)
        spent = {
            "tokens": sum(r.generated for r in done.results),
            "model_s": sum(r.model_seconds for r in done.results),
            "prefill_s": sum(r.prefill_seconds for r in done.results),
            "constraint_s": sum(r.checker_seconds for r in done.results),
            "names_wait_s": sum(r.semantic.get("jedi-wait-ms", 0) for r in done.results) / 1000,
            "step_constraint_s": [s for r in done.results for s in r.step_checker_seconds],
            "recalled": done.recalled,
            "mean_logprob": done.items[0].mean_logprob if done.items else None,
        }
        return (done.items[0].middle if done.items else None), spent

    def completion(self, mode: str, prefix: str, suffix: str):
        """What the editor's policy makes at the cursor in ``mode`` ("fim" or "prefix"), within
        the server's deadline: :class:`fimconstrain.decoding.editor.policy.Completion`."""
        from fimconstrain.decoding.editor.policy import Deadline, complete_at_cursor, wants_multiline
        from fimconstrain.decoding.loop.options import DecodeOptions

        options = DecodeOptions.editor(not wants_multiline(prefix, suffix), max_new_tokens=self.max_tokens)
        return complete_at_cursor(
            self.decoder,
            prefix,
            suffix if mode == "fim" else "",
            options,
            gate=self.gate,
            request=Deadline(self.deadline_ms / 1000),
            shown=self.shown,
        )


def typed_chars(truth: str, rng: random.Random) -> str:
    """The next 1-3 characters of the true middle (on its first line, leaving at least one), or
    "" when its first line is too short."""
    line = truth.split("\n", 1)[0]
    if len(line) < 2:
        return ""
    return line[: rng.randint(1, min(3, len(line) - 1))]


def ask(
    completer: Completer, collector, mode: str, name: str, kind: str, prefix: str, suffix: str, truth: str
) -> dict:
    """One timed request and how it scored against ``truth``; with the prompt tokens the model read
    and reused (llama.cpp's counters) when the backend keeps them."""
    backend = getattr(completer.decoder, "backend", None)
    read, reused = getattr(backend, "prompt_read", 0), getattr(backend, "prompt_reused", 0)
    start = time.perf_counter()
    item, spent = completer.complete(mode, prefix, suffix)
    seconds = time.perf_counter() - start
    collector.when_idle()
    es = edit_similarity(item, truth) if item is not None else 0.0
    return {
        "file": name,
        "kind": kind,
        "truth": truth,
        "item": item,
        "seconds": seconds,
        "es": es,
        "exact": item is not None and _first_line(item) == _first_line(truth),
        "parses": item is not None and parses(prefix + item + suffix),
        "prompt_read": getattr(backend, "prompt_read", 0) - read,
        "prompt_reused": getattr(backend, "prompt_reused", 0) - reused,
        **spent,
    }


def prefill_times(model: str | None, lengths: list[int], threads: int | None) -> int:
    """Print llama.cpp's prefill time per prompt length (what the prompt window is chosen from)."""
    from fimconstrain.decoding.models.loading import load_model

    backend = load_model(model, runtime="llama", threads=threads, progress=False)
    rng = random.Random(0)
    print(f"{backend.name}: threads {getattr(backend, 'threads', '?')}")
    for n in lengths:
        ids = [rng.randrange(backend.vocab_size // 8, backend.vocab_size) for _ in range(n)]
        backend.llama.n_tokens = 0  # type: ignore[attr-defined]  # nothing reused
        start = time.perf_counter()
        backend.start().prefill(ids)
        whole = time.perf_counter() - start
        session = backend.start()
        start = time.perf_counter()
        session.prefill(
            ids[:-64] + [rng.randrange(backend.vocab_size // 8, backend.vocab_size) for _ in range(64)]
        )
        tail = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(8):
            session.step(1000)
        step = (time.perf_counter() - start) / 8
        print(
            f"{n:6d} tokens: prefill {whole:7.2f} s ({n / whole:5.0f} tokens/s); its last 64 changed "
            f"{1000 * tail:6.0f} ms; a step {1000 * step:5.1f} ms",
            flush=True,
        )
    return 0


def default_runtimes() -> str:
    """Both runtimes when llama-cpp-python is installed, else transformers alone."""
    from fimconstrain.decoding.runtimes.llama_backend import llama_cpp_available

    return "transformers,llama" if llama_cpp_available() else "transformers"


def parses(text: str) -> bool:
    from fimconstrain.decoding.loop.oracle import ast_parses

    return ast_parses(text)


def summarise(rows: list[dict]) -> dict:
    n = len(rows)
    shown = [r for r in rows if r["item"] is not None]
    lat = sorted(r["seconds"] for r in rows)
    tokens = sum(r["tokens"] for r in rows)
    shares = [r["constraint_s"] / r["model_s"] for r in rows if r["tokens"] and r["model_s"]]
    steps = sorted(s for r in rows for s in r["step_constraint_s"])
    return {
        "requests": n,
        "shown": len(shown) / n if n else 0.0,
        "exact_first_line": sum(r["exact"] for r in rows) / n if n else 0.0,
        "edit_similarity": sum(r["es"] for r in rows) / n if n else 0.0,
        "edit_similarity_shown": statistics.mean(r["es"] for r in shown) if shown else 0.0,
        "shown_parse": sum(r["parses"] for r in shown) / len(shown) if shown else 0.0,
        "shown_good": sum(r["es"] >= GOOD for r in shown) / len(shown) if shown else 0.0,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else 0.0,
        "p95_ms": 1000 * lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else 0.0,
        "model_ms_per_token": 1000 * sum(r["model_s"] for r in rows) / tokens if tokens else 0.0,
        "constraint_ms_per_token": 1000 * sum(r["constraint_s"] for r in rows) / tokens if tokens else 0.0,
        "constraint_share_median": statistics.median(shares) if shares else 0.0,
        # of the constraint: the names guide waiting for jedi's attribute names (another process)
        "names_wait_ms_per_token": 1000 * sum(r.get("names_wait_s", 0.0) for r in rows) / tokens
        if tokens
        else 0.0,
        "steps": len(steps),
        **{f"step_constraint_{name}_ms": 1000 * _quantile(steps, q) for name, q in STEP_QUANTILES.items()},
        "step_constraint_mean_ms": 1000 * statistics.mean(steps) if steps else 0.0,
        "prompt_read_mean": statistics.mean(r.get("prompt_read", 0) for r in rows) if rows else 0.0,
        "prompt_reused_mean": statistics.mean(r.get("prompt_reused", 0) for r in rows) if rows else 0.0,
        "prefill_ms_p50": 1000 * _quantile(sorted(r.get("prefill_s", 0.0) for r in rows), 0.5),
        "recalled": sum(r.get("recalled", False) for r in rows) / n if n else 0.0,
    }


#: the quantiles of the constraint's per-step time that are reported
STEP_QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99, "max": 1.0}


def _quantile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile of a sorted list (nearest rank; 0 for an empty one)."""
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def plot(summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ("shown", "exact_first_line", "edit_similarity", "shown_parse", "shown_good")
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(summary)
    for k, (mode, row) in enumerate(summary.items()):
        xs = [i + k * width for i in range(len(metrics))]
        ax.bar(xs, [row["all"][m] for m in metrics], width, label=mode)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(metrics))], metrics)
    ax.set_ylim(0, 1)
    ax.set_title("editor quality by mode (all cursor kinds)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=20, workers=False)
    p.add_argument("--per-file", type=int, default=3, help="requests per file")
    p.add_argument("--modes", default=",".join(MODES), help="comma-separated: off, prefix, fim")
    p.add_argument("--model", help="model directory or .gguf file (default: the shipped model)")
    p.add_argument(
        "--runtimes",
        default=None,
        help="comma-separated runtimes to run the same requests on, each a label of the results "
        "(default: transformers,llama when llama-cpp-python is installed, else transformers)",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="a model server serving --model (e.g. vllm serve with fimconstrain): the runtime 'server' "
        "of --runtimes sends the editor's requests there",
    )
    p.add_argument("--deadline-ms", type=int, default=3000, help="the server's deadline per request")
    p.add_argument("--max-tokens", type=int, default=64, help="the server's max new tokens")
    p.add_argument(
        "--window",
        type=int,
        default=None,
        help="tokens of prompt and middle (the server's promptWindow; default: the model's context)",
    )
    p.add_argument(
        "--suffix-tokens",
        type=int,
        default=None,
        help="the suffix's share of the window at most (the server's suffixTokens; default: half)",
    )
    p.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: every core)")
    p.add_argument(
        "--order",
        choices=("psm", "spm"),
        default=None,
        help="the prompt's order: prefix-suffix-middle, or suffix first (typing then changes only the "
        "prompt's end) (default: the FIM format's)",
    )
    p.add_argument(
        "--no-gate",
        action="store_true",
        help="show every item, the model's confidence gate off (each shown item's mean token "
        "log-probability is recorded, so any threshold's figures can be read from one run)",
    )
    p.add_argument(
        "--no-edits",
        action="store_true",
        help="skip the request after a small edit (1-3 characters of the true middle typed at the cursor)",
    )
    p.add_argument(
        "--prefill",
        metavar="N,N,...",
        help="only measure the model's prefill of prompts of these lengths (random token ids, the "
        "cache emptied first), then of their last 64 tokens changed, and a decode step (llama.cpp)",
    )
    args = p.parse_args(argv)
    if args.prefill:
        return prefill_times(args.model, [int(n) for n in args.prefill.split(",")], args.threads)
    modes = [m for m in args.modes.split(",") if m]
    rng = random.Random(args.seed)
    requests = []
    for index, path in enumerate(held_out_files(args.root, args.limit, args.seed)):
        text = path.read_text("utf-8", errors="replace")
        if not parses(text):
            continue
        requests += [(str(path), *r) for r in cursors(text, rng, args.per_file, index % len(KINDS))]
    runtimes = (args.runtimes or default_runtimes()).split(",")
    rows: dict[str, list[dict]] = {}
    edits: dict[str, list[dict]] = {}
    # the server's garbage-collection policy: no full pass while a request works, one between
    # requests (without it a full pass lands inside some decoding step, as it never does there)
    from fimconstrain.collector import Collector
    from fimconstrain.decoding.models.confidence import ConfidenceGate

    collector = Collector()
    collector.install()
    for runtime in runtimes:
        completer = Completer(
            args.model,
            args.deadline_ms,
            args.max_tokens,
            runtime,
            args.server,
            window=args.window,
            suffix_tokens=args.suffix_tokens,
            threads=args.threads,
            order=args.order,
        )
        if args.no_gate:
            completer.gate = ConfidenceGate()
        for mode in modes:
            label = mode if len(runtimes) == 1 else f"{mode} {runtime}"
            rows[label], edits[label] = [], []
            typing = random.Random(args.seed)
            for name, kind, prefix, suffix, truth in C.progress(
                requests, desc=label, disable=args.no_progress, unit="request"
            ):
                rows[label].append(ask(completer, collector, mode, name, kind, prefix, suffix, truth))
                typed = typed_chars(truth, typing)
                if typed and not args.no_edits:  # what typing sends: the same document, a few characters on
                    edits[label].append(
                        ask(
                            completer,
                            collector,
                            mode,
                            name,
                            kind,
                            prefix + typed,
                            suffix,
                            truth[len(typed) :],
                        )
                    )
    summary = {
        mode: {"all": summarise(r), **{k: summarise([x for x in r if x["kind"] == k]) for k in KINDS}}
        for mode, r in rows.items()
    }
    latency = {mode: {"first": summarise(rows[mode]), "edit": summarise(edits[mode])} for mode in rows}
    width = max(6, *map(len, summary))
    header = f"{'mode':{width}} {'kind':9} {'n':>4} {'shown':>6} {'exact':>6} {'ES':>5} {'ES|sh':>6} "
    print(
        header
        + f"{'parse':>6} {'good':>5} {'p50 ms':>7} {'p95 ms':>7} {'model/t':>7} {'cons/t':>6} {'share':>6}"
    )
    for mode, by_kind in summary.items():
        for kind, s in by_kind.items():
            print(
                f"{mode:{width}} {kind:9} {s['requests']:4d} {s['shown']:6.1%} {s['exact_first_line']:6.1%} "
                f"{s['edit_similarity']:5.2f} {s['edit_similarity_shown']:6.2f} {s['shown_parse']:6.1%} "
                f"{s['shown_good']:5.1%} {s['p50_ms']:7.0f} {s['p95_ms']:7.0f} "
                f"{s['model_ms_per_token']:7.2f} {s['constraint_ms_per_token']:6.2f} "
                f"{s['constraint_share_median']:6.1%}"
            )
    print(
        "model/t, cons/t: ms per generated token (pooled); share: the constraint's median share per request"
    )
    for mode, by_kind in summary.items():
        if "all" in by_kind and by_kind["all"]["names_wait_ms_per_token"]:
            print(
                f"{mode}: of cons/t, {by_kind['all']['names_wait_ms_per_token']:.2f} ms per token waited "
                "for jedi's attribute names (the names guide's other process)"
            )
    print(
        f"\n{'constraint per step, ms':{width + 10}} {'steps':>6} "
        f"{'p50':>6} {'p95':>6} {'p99':>6} {'max':>7} {'mean':>6}"
    )
    for mode, by_kind in summary.items():
        s = by_kind["all"]
        if s["steps"]:
            print(
                f"{mode:{width + 10}} {s['steps']:6d} {s['step_constraint_p50_ms']:6.2f} "
                f"{s['step_constraint_p95_ms']:6.2f} {s['step_constraint_p99_ms']:6.2f} "
                f"{s['step_constraint_max_ms']:7.1f} {s['step_constraint_mean_ms']:6.2f}"
            )
    print(
        f"\n{'latency':{width}} {'request':8} {'n':>4} {'shown':>6} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'read':>6} {'reused':>7} {'prefill':>8} {'recalled':>8}"
    )
    for mode, by_phase in latency.items():
        for phase, s in by_phase.items():
            if s["requests"]:
                print(
                    f"{mode:{width}} {phase:8} {s['requests']:4d} {s['shown']:6.1%} {s['p50_ms']:7.0f} "
                    f"{s['p95_ms']:7.0f} {s['prompt_read_mean']:6.0f} {s['prompt_reused_mean']:7.0f} "
                    f"{s['prefill_ms_p50']:8.0f} {s['recalled']:8.1%}"
                )
    print(
        "first: a document's first request; edit: the same document with the next 1-3 characters of the "
        "true middle typed at the cursor; read, reused: prompt tokens evaluated and taken from the "
        "cache (mean per request, llama.cpp); prefill: the prompt's time (p50); recalled: answered with the "
        "rest of the item shown before, whose start was typed (no model)"
    )
    out = C.write_results(
        "editor_quality",
        args,
        {"summary": summary, "latency": latency, "rows": rows, "edits": edits},
    )
    plot(summary, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
