#!/usr/bin/env python3
"""Names that exist (paper 003): does the semantic guide help, what does it exclude, what does it cost?

Held-out files and editor cuts as in ``editor_quality.py`` (installed packages the shipped
model never saw; mid-line, new-line and block cursors). Each request is decoded by the same
model in one run, with the editor's decode settings (``DecodeOptions.editor``: constrained, one
line or a block as the cursor asks, no finish search), once without and once with
``semantic``. Reported per mode:

* parse+resolve@1: the middle is not blank, the file parses with it, pyflakes finds no
  undefined name inside the middle, and jedi lists no attribute of the middle as missing on a
  receiver it resolves (the file with the middle; ``__getattr__`` receivers and stores skipped);
  over all requests, and over the items the server's confidence gate would show;
* edit similarity and first-line exact match against what the author wrote (editor_quality's
  measures, 0 for a request with no shown item), and the share of requests with an item;
* latency per completion (the decode call, p50/p95), and through the editor's policy as the
  server runs it (:func:`fimconstrain.decoding.editor.policy.complete_at_cursor`) on the first
  ``--server-requests`` requests.

False exclusions: the author's own middle is fed token by token (the model's tokenizer)
through the guide's check, with jedi waited for as long as it takes; a middle is falsely
excluded when some step of it is ``excluded`` (goal < 1%). Demoted steps (soft) are counted too.

    python benchmarks/semantic_quality.py --limit 20 --per-file 3
"""

from __future__ import annotations

import ast
import random
import statistics
import sys
import time

import _common as C
import editor_quality as E


def undefined_in_middle(text: str, start: int, end: int) -> list[str]:
    """pyflakes' undefined names whose position lies in ``text[start:end]``."""
    from pyflakes.checker import Checker
    from pyflakes.messages import UndefinedName

    starts = _line_starts(text)
    out = []
    for message in Checker(ast.parse(text), "<middle>").messages:
        if isinstance(message, UndefinedName):
            at = starts[message.lineno - 1] + message.col
            if start <= at < end:
                out.append(str(message.message_args[0]))
    return out


def _line_starts(text: str) -> list[int]:
    return [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]


def first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def missing_attributes(text: str, start: int, end: int) -> list[str]:
    """Attributes read in ``text[start:end]`` that jedi resolves as missing on their receiver."""
    from fimconstrain.decoding.loop.jedi_attributes import attributes_at

    starts = _line_starts(text)
    out = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Attribute) or not isinstance(node.ctx, ast.Load):
            continue
        value_end = starts[node.value.end_lineno - 1] + node.value.end_col_offset  # type: ignore[operator]
        name_end = starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[operator]
        name_start = name_end - len(node.attr)
        if not start <= name_start < end:
            continue
        dot = text.index(".", value_end) + 1
        try:
            answer = attributes_at(text[:dot], text[dot:])
        except Exception:
            continue
        if answer.names is not None and "__getattr__" not in answer.names and node.attr not in answer.names:
            out.append(node.attr)
    return out


def judge(prefix: str, middle: str, suffix: str) -> dict:
    """Whether the middle parses and resolves (see the module's docstring)."""
    text = prefix + middle + suffix
    if not middle.strip() or not E.parses(text):
        return {"parses": False, "resolves": False, "undefined": [], "missing": []}
    undefined = undefined_in_middle(text, len(prefix), len(prefix) + len(middle))
    missing = missing_attributes(text, len(prefix), len(prefix) + len(middle))
    return {
        "parses": True,
        "resolves": not undefined and not missing,
        "undefined": undefined,
        "missing": missing,
    }


def false_exclusion(decoder, prefix: str, suffix: str, truth: str) -> dict:
    """The author's middle through the guide's check, token by token (jedi waited for)."""
    from fimconstrain.decoding.loop.semantic import SemanticOptions, name_providers
    from fimconstrain.engine.names.name_check import NameCheck

    start = time.perf_counter()
    names, attributes = name_providers(prefix, suffix, SemanticOptions(budget=10.0))
    check = NameCheck(prefix, suffix, names, attributes)
    setup_ms = 1000 * (time.perf_counter() - start)  # the file's scopes, read cold
    ids = decoder.codec.encode(truth)
    excluded, demoted, written = [], 0, ""
    for n in range(1, len(ids) + 1):
        text = decoder.codec.decode(ids[:n])
        added, written = text[len(written) :], text
        verdict = check.verdict(added)
        if verdict.excluded:
            excluded.append(verdict.name)
        elif verdict.fails:
            demoted += 1
        check.advance(added)
    return {"excluded": excluded, "demoted": demoted, "steps": len(ids), "setup_ms": setup_ms}


def decode(completer: E.Completer, prefix: str, suffix: str, single: bool, semantic: bool) -> dict:
    """One completion with the editor's settings and the server's deadline."""
    from fimconstrain.decoding.editor.policy import Deadline, shows
    from fimconstrain.decoding.loop.options import Controls, DecodeOptions

    start = time.perf_counter()
    deadline = Deadline(completer.deadline_ms / 1000)
    options = DecodeOptions.editor(single, max_new_tokens=completer.max_tokens, semantic=semantic)
    result = completer.decoder.generate(prefix, suffix, options, Controls(should_stop=deadline.should_stop))
    seconds = time.perf_counter() - start
    return {
        "middle": result.middle,
        "valid": result.valid,
        "shown": shows(result, completer.gate),
        "seconds": seconds,
        "stopped": result.stopped.value,
        "setup_ms": 1000 * result.setup_seconds,
        "checker_ms_per_token": result.checker_ms_per_token,
        "stats": dict(result.semantic),
    }


def summarise(rows: list[dict]) -> dict:
    n = len(rows) or 1
    shown = [r for r in rows if r["shown"]]
    lat = sorted(r["seconds"] for r in rows)
    return {
        "requests": len(rows),
        "parse_resolve_at1": sum(r["parses"] and r["resolves"] for r in rows) / n,
        "parses": sum(r["parses"] for r in rows) / n,
        "parse_resolve_shown": sum(r["parses"] and r["resolves"] for r in shown) / len(shown)
        if shown
        else 0.0,
        "shown": len(shown) / n,
        "edit_similarity": sum(r["es"] for r in rows) / n,
        "exact_first_line": sum(r["exact"] for r in rows) / n,
        "p50_ms": 1000 * lat[len(lat) // 2] if lat else 0.0,
        "p95_ms": 1000 * lat[min(len(lat) - 1, int(0.95 * len(lat)))] if lat else 0.0,
        "setup_ms": statistics.median(r["setup_ms"] for r in rows) if rows else 0.0,
        "checker_ms_per_token": statistics.median(r["checker_ms_per_token"] for r in rows) if rows else 0.0,
        "cancelled": sum(r["stopped"] == "cancelled" for r in rows) / n,
        "restricted_steps": sum(r["stats"].get("restricted", 0) for r in rows),
        "reranked_steps": sum(r["stats"].get("reranked", 0) for r in rows),
        "fail_open_steps": sum(r["stats"].get("fail-open", 0) for r in rows),
    }


def server_latency(completer: E.Completer, requests: list) -> dict:
    """Latency of the editor's policy as the server runs it (``complete_at_cursor``, one item)
    per request, off and on in turn (alternating which goes first, as the checker caches favour
    the second)."""
    from fimconstrain.decoding.editor.policy import Deadline, complete_at_cursor, wants_multiline
    from fimconstrain.decoding.loop.options import DecodeOptions

    seconds: dict[str, list[float]] = {"off": [], "semantic": []}
    for i, (_, _, prefix, suffix, _) in enumerate(requests):
        for mode in sorted(seconds, reverse=i % 2 == 0):
            single = not wants_multiline(prefix, suffix)
            options = DecodeOptions.editor(
                single, max_new_tokens=completer.max_tokens, semantic=mode == "semantic"
            )
            start = time.perf_counter()
            complete_at_cursor(
                completer.decoder,
                prefix,
                suffix,
                options,
                gate=completer.gate,
                request=Deadline(completer.deadline_ms / 1000),
            )
            seconds[mode].append(time.perf_counter() - start)
    out = {}
    for mode, times in seconds.items():
        times.sort()
        out[mode] = {
            "requests": len(times),
            "p50_ms": 1000 * times[len(times) // 2] if times else 0.0,
            "p95_ms": 1000 * times[min(len(times) - 1, int(0.95 * len(times)))] if times else 0.0,
        }
    return out


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=20, workers=False)
    p.add_argument("--per-file", type=int, default=3, help="requests per file")
    p.add_argument("--model", help="model directory (default: the shipped model)")
    p.add_argument("--max-tokens", type=int, default=64, help="the server's max new tokens")
    p.add_argument(
        "--server-requests", type=int, default=20, help="requests timed through the editor's policy"
    )
    args = p.parse_args(argv)
    from fimconstrain.decoding.editor.policy import wants_multiline

    rng = random.Random(args.seed)
    requests = []
    for path in E.held_out_files(args.root, args.limit, args.seed):
        text = path.read_text("utf-8", errors="replace")
        if E.parses(text):
            requests += [(str(path), *r) for r in E.cursors(text, rng, args.per_file)]
    completer = E.Completer(args.model, deadline_ms=3000, max_tokens=args.max_tokens)
    rows: dict[str, list[dict]] = {"off": [], "semantic": []}
    exclusions = []
    for name, kind, prefix, suffix, truth in C.progress(requests, desc="requests", disable=args.no_progress):
        exclusions.append(
            {"file": name, "kind": kind, **false_exclusion(completer.decoder, prefix, suffix, truth)}
        )
        single = not wants_multiline(prefix, suffix)
        for mode in sorted(rows, reverse=len(exclusions) % 2 == 0):  # alternate the order (caches)
            out = decode(completer, prefix, suffix, single, mode == "semantic")
            item = out["middle"] if out["shown"] else None
            rows[mode].append(
                {
                    "file": name,
                    "kind": kind,
                    "truth": truth,
                    **out,
                    **judge(prefix, out["middle"], suffix),
                    "es": E.edit_similarity(item, truth) if item is not None else 0.0,
                    "exact": item is not None and first_line(item) == first_line(truth),
                }
            )
    summary = {
        mode: {"all": summarise(r), **{k: summarise([x for x in r if x["kind"] == k]) for k in E.KINDS}}
        for mode, r in rows.items()
    }
    n = len(exclusions) or 1
    excluded = [e for e in exclusions if e["excluded"]]
    summary_excl = {
        "middles": len(exclusions),
        "falsely_excluded": len(excluded) / n,
        "with_demoted_step": sum(e["demoted"] > 0 for e in exclusions) / n,
        "names": [(e["file"], e["kind"], e["excluded"]) for e in excluded],
        "setup_ms_p50": sorted(e["setup_ms"] for e in exclusions)[len(exclusions) // 2] if exclusions else 0,
        "setup_ms_p95": sorted(e["setup_ms"] for e in exclusions)[int(0.95 * (len(exclusions) - 1))]
        if exclusions
        else 0,
    }
    server = server_latency(completer, requests[: args.server_requests])
    columns = [
        "p+r@1",
        "parse",
        "p+r|sh",
        "shown",
        "ES",
        "exact",
        "p50ms",
        "p95ms",
        "restr",
        "rerank",
        "setup",
        "chk/t",
    ]
    print(f"{'mode':9} {'kind':9} {'n':>4} " + " ".join(f"{c:>6}" for c in columns))
    for mode, by_kind in summary.items():
        for kind, s in by_kind.items():
            print(
                f"{mode:9} {kind:9} {s['requests']:4d} {s['parse_resolve_at1']:6.1%} {s['parses']:6.1%} "
                f"{s['parse_resolve_shown']:6.1%} {s['shown']:6.1%} {s['edit_similarity']:6.2f} "
                f"{s['exact_first_line']:6.1%} {s['p50_ms']:6.0f} {s['p95_ms']:6.0f} "
                f"{s['restricted_steps']:6d} {s['reranked_steps']:6d} {s['setup_ms']:6.1f} "
                f"{s['checker_ms_per_token']:6.2f}"
            )
    print(
        f"false exclusions: {summary_excl['falsely_excluded']:.1%} of {summary_excl['middles']} true middles "
        f"(a demoted step in {summary_excl['with_demoted_step']:.1%}); {summary_excl['names']}"
    )
    print(
        f"semantic setup (scopes read cold, NameCheck): p50 {summary_excl['setup_ms_p50']:.1f} ms, "
        f"p95 {summary_excl['setup_ms_p95']:.1f} ms"
    )
    for mode, s in server.items():
        print(f"editor policy {mode:9}: p50 {s['p50_ms']:.0f} ms, p95 {s['p95_ms']:.0f} ms", end="")
        print(f" over {s['requests']}")
    out = C.write_results(
        "semantic_quality",
        args,
        {
            "summary": summary,
            "false_exclusions": summary_excl,
            "server": server,
            "rows": rows,
            "exclusions": exclusions,
        },
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
