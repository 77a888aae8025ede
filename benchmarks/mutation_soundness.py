#!/usr/bin/env python3
"""Mutation soundness: random one-character edits of real files.

Each mutant is a valid file (``ast.parse`` accepts it) with one character
inserted, deleted or replaced; the new character is drawn half the time from
the file's own characters and half the time from common code characters.

* Mutants ``ast.parse`` rejects: a mutant is *caught* when feeding it returns
  None at some point or the end is not complete. Reports the catch rate
  (target ≥ 99 %), how far after the edit the engine noticed, and the misses
  broken down by ast.parse's SyntaxError message, by the edit's kind and by
  where the edit was (string, comment, indentation, name, operator, ...).
* Mutants ``ast.parse`` accepts must be accepted (completeness: 100 %).

The checker for the text before the edit is forked from one feed of the
original file (``feed`` is pure), so each mutant costs only its tail.

    python benchmarks/mutation_soundness.py --limit 100 --mutants 30 --seed 0
"""

from __future__ import annotations

import io
import random
import re
import sys
import time
import tokenize
from collections import Counter

import _common as C

CODE_CHARS = "()[]{}:;,.=+-*/%<>!&|^~@#'\"\\ \t\n_0123456789abcdefxyzNT"


# ---------------------------------------------------------------- where an edit lands


def char_classes(src: str) -> list[str]:
    """A class for each character of ``src``: string, comment, indentation, newline, ... ."""
    cls = ["whitespace"] * len(src)
    # leading whitespace of each line
    pos = 0
    for line in src.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        stripped = body.lstrip(" \t\f")
        kind = "indentation" if stripped and not stripped.startswith("#") else "blank-line"
        for i in range(pos, pos + len(body) - len(stripped)):
            cls[i] = kind
        for i in range(pos + len(body), pos + len(line)):
            cls[i] = "newline"
        pos += len(line)
    # token spans
    starts = [0]
    for line in src.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def off(rc):
        r, c = rc
        return starts[r - 1] + c if r - 1 < len(starts) else len(src)

    import keyword

    try:
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type in (
                tokenize.INDENT,
                tokenize.DEDENT,
                tokenize.NEWLINE,
                tokenize.NL,
                tokenize.ENDMARKER,
            ):
                continue
            a, b = off(tok.start), off(tok.end)
            if tok.type == tokenize.STRING:
                kind = "string"
            elif tok.type == tokenize.COMMENT:
                kind = "comment"
            elif tok.type == tokenize.NUMBER:
                kind = "number"
            elif tok.type == tokenize.NAME:
                kind = (
                    "keyword"
                    if keyword.iskeyword(tok.string)
                    else ("soft-keyword" if keyword.issoftkeyword(tok.string) else "name")
                )
            elif tok.type == tokenize.OP:
                kind = "bracket" if tok.string in "()[]{}" else "operator"
            else:
                kind = tokenize.tok_name[tok.type].lower()
            for i in range(a, min(b, len(src))):
                if kind == "string" and src[i] in "\r\n":
                    cls[i] = "string"  # newline inside a triple-quoted string
                else:
                    cls[i] = kind
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    # a backslash continuation
    for m in re.finditer(r"\\\r?\n", src):
        if cls[m.start()] != "string" and cls[m.start()] != "comment":
            for i in range(m.start(), m.end()):
                cls[i] = "continuation"
    return cls


def normalize_msg(msg: str | None) -> str:
    if not msg:
        return "?"
    msg = re.sub(r"line \d+", "line N", msg)
    msg = re.sub(r"position \d+(-\d+)?", "position N", msg)
    msg = re.sub(r"U\+[0-9A-F]{4,6}", "U+XXXX", msg)
    msg = re.sub(r"invalid character '.' ", "invalid character 'X' ", msg)
    return msg


# ---------------------------------------------------------------- per file


def make_mutants(src: str, rng: random.Random, n: int) -> list[dict]:
    out, seen = [], set()
    tries = 0
    while len(out) < n and tries < 20 * n and src:
        tries += 1
        kind = rng.choice(("insert", "delete", "replace"))
        p = rng.randrange(len(src) + (1 if kind == "insert" else 0))
        ch = rng.choice(src) if rng.random() < 0.5 else rng.choice(CODE_CHARS)
        if kind == "replace" and src[p] == ch:
            continue
        if kind == "delete":
            ch = ""
        key = (kind, p, ch)
        if key in seen:
            continue
        seen.add(key)
        old = src[p] if kind != "insert" and p < len(src) else ""
        out.append({"kind": kind, "pos": p, "new": ch, "old": old})
    out.sort(key=lambda m: m["pos"])
    return out


def run_file(task) -> dict:
    path, seed = task
    r: dict = {"file": C.rel(path, C.ROOT), "mutants": []}
    src = C.valid_source(path, r)
    if src is None:
        return r
    fc = C.engine_setup()
    rng = random.Random(seed)
    classes = char_classes(src)
    mutants = make_mutants(src, rng, C.OPTS["mutants"])
    t_start = time.perf_counter()
    try:
        with C.time_limit(C.OPTS["timeout"]):
            base, base_pos = fc.fim_checker("", ""), 0
            for m in mutants:
                p = m["pos"]
                if p > base_pos:
                    nxt = base.feed(src[base_pos:p])
                    if nxt is None:
                        dead, _ = C.first_dead_offset(base, src, base_pos)
                        r["status"] = "original-rejected"
                        r["dead_at"] = dead
                        r["line"], r["col"] = C.line_col(src, dead if dead is not None else p)
                        r["context"] = C.context_line(src, dead if dead is not None else p)
                        break
                    base, base_pos = nxt, p
                tail = m["new"] + src[p + (0 if m["kind"] == "insert" else 1) :]
                mutant = src[:p] + tail
                m_ok, msg, _msg_line = C.ast_verdict(mutant)
                m["ast_ok"] = m_ok
                m["ast_msg"] = normalize_msg(msg) if not m_ok else None
                m["where"] = classes[p] if p < len(src) else "eof"
                m["line"], m["col"] = C.line_col(src, p)
                t0 = time.perf_counter()
                dead, last = C.first_dead_offset(base, tail, 0, chunk=C.OPTS["chunk"])
                if dead is not None:
                    m["ours"] = "rejected"
                    m["distance"] = dead - len(m["new"]) if m["new"] else dead  # chars after the edit
                elif not last.is_complete():
                    m["ours"] = "not-complete"
                else:
                    m["ours"] = "complete"
                m["seconds"] = time.perf_counter() - t0
                m["context"] = C.context_line(mutant, p)
                if m_ok and m["ours"] != "complete":
                    m["dead_line"], m["dead_col"] = C.line_col(
                        mutant, p + (dead if dead is not None else len(tail))
                    )
                    m["dead_context"] = C.context_line(mutant, p + (dead if dead is not None else len(tail)))
                r["mutants"].append(m)
    except C.Timeout:
        r["status"] = "timeout"
    except Exception as e:
        r["status"] = "exception"
        r["error"] = C.describe_exc(e)
    r["seconds"] = time.perf_counter() - t_start
    return r


# ---------------------------------------------------------------- report


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=100)
    p.add_argument("--mutants", type=int, default=30, help="mutants per file")
    p.add_argument("--chunk", type=int, default=32, help="feed the tail in chunks of this size")
    p.add_argument("--examples", type=int, default=15, help="misses to print")
    args = p.parse_args(argv)
    if args.max_size is None:
        args.max_size = 30_000
    root, files = C.select_files(args)
    opts = {"mutants": args.mutants, "timeout": args.timeout, "chunk": args.chunk}
    print(
        f"{len(files)} files (≤ {args.max_size:,} chars) under {root}, {args.mutants} mutants each",
        file=sys.stderr,
    )
    results, wall = C.run_file_pool(run_file, files, args, opts, root, "mutants")

    muts = [(r, m) for r in results for m in r["mutants"]]
    bad_mut = [(r, m) for r, m in muts if not m["ast_ok"]]
    good_mut = [(r, m) for r, m in muts if m["ast_ok"]]
    caught = [(r, m) for r, m in bad_mut if m["ours"] != "complete"]
    missed = [(r, m) for r, m in bad_mut if m["ours"] == "complete"]
    early = [m for _, m in caught if m["ours"] == "rejected"]
    false_rej = [(r, m) for r, m in good_mut if m["ours"] != "complete"]

    print()
    rows = [
        [
            "rejected by ast.parse",
            len(bad_mut),
            len(caught),
            len(missed),
            C.pct(len(caught), len(bad_mut)),
            "≥ 99%",
        ],
        [
            "accepted by ast.parse",
            len(good_mut),
            len(good_mut) - len(false_rej),
            len(false_rej),
            C.pct(len(good_mut) - len(false_rej), len(good_mut)),
            "100%",
        ],
    ]
    print(C.table(rows, ["mutants", "n", "agree", "disagree", "agree %", "target"], align="lrrrrr"))
    if early:
        ds = sorted(m["distance"] for m in early)
        print(
            f"\ncaught while feeding: {len(early)} ({C.pct(len(early), len(caught))} of caught), "
            f"at the end (not complete): {len(caught) - len(early)}; "
            f"characters after the edit until rejection: median {ds[len(ds) // 2]}, "
            f"90th percentile {ds[int(0.9 * (len(ds) - 1))]}, max {ds[-1]}"
        )

    by_where_all = Counter(m["where"] for _, m in bad_mut)
    by_where_miss = Counter(m["where"] for _, m in missed)
    print("\ncatch rate by where the edit was (mutants rejected by ast.parse):")
    rows = [
        [w, n, n - by_where_miss[w], by_where_miss[w], C.pct(n - by_where_miss[w], n)]
        for w, n in by_where_all.most_common()
    ]
    print(C.table(rows, ["where", "n", "caught", "missed", "caught %"], align="lrrrr"))
    by_kind_all = Counter(m["kind"] for _, m in bad_mut)
    by_kind_miss = Counter(m["kind"] for _, m in missed)
    print("\ncatch rate by kind of edit:")
    rows = [
        [k, n, n - by_kind_miss[k], by_kind_miss[k], C.pct(n - by_kind_miss[k], n)]
        for k, n in by_kind_all.most_common()
    ]
    print(C.table(rows, ["kind", "n", "caught", "missed", "caught %"], align="lrrrr"))
    if missed:
        print("\nmisses by ast.parse message:")
        rows = [[msg[:90], n] for msg, n in Counter(m["ast_msg"] for _, m in missed).most_common()]
        print(C.table(rows, ["SyntaxError message", "misses"], align="lr"))
        print(f"\nexamples of misses ({min(args.examples, len(missed))} of {len(missed)}):")
        for r, m in missed[: args.examples]:
            print(
                f"  {r['file']}:{m['line']}:{m['col']}: {m['kind']} {m['old']!r}->{m['new']!r} "
                f"in {m['where']}; "
                f"ast.parse: {m['ast_msg']}\n      {m['context']}"
            )
    if false_rej:
        print(f"\nCOMPLETENESS FAILURES on valid mutants ({len(false_rej)}):")
        for r, m in false_rej[: args.examples]:
            print(
                f"  {r['file']}:{m['line']}:{m['col']}: {m['kind']} {m['old']!r}->{m['new']!r}: "
                f"ours {m['ours']} at "
                f"{m['dead_line']}:{m['dead_col']}: {m['dead_context']}"
            )
    odd = [r for r in results if r["status"] not in ("ok", "undecodable", "ast-rejects")]
    if odd:
        print(f"\nfiles with problems ({len(odd)}):")
        for r in odd:
            detail = r.get("error") or (
                f"{r.get('line')}:{r.get('col')}: {r.get('context')}" if "context" in r else ""
            )
            print(f"  {r['file']}: {r['status']} {detail}")
    secs = sum(m["seconds"] for _, m in muts)
    print(
        f"\nfiles {sum(1 for r in results if r['mutants'])}, mutants {len(muts)}, "
        f"engine time on tails {secs:.1f} s, wall {wall:.1f} s"
    )
    out = C.write_results(
        "mutation_soundness",
        args,
        {
            "summary": {
                "mutants": len(muts),
                "ast_rejects": len(bad_mut),
                "caught": len(caught),
                "missed": len(missed),
                "catch_rate": len(caught) / len(bad_mut) if bad_mut else None,
                "ast_accepts": len(good_mut),
                "false_rejects": len(false_rej),
                "completeness": (len(good_mut) - len(false_rej)) / len(good_mut) if good_mut else None,
                "misses_by_where": dict(by_where_miss),
                "misses_by_kind": dict(by_kind_miss),
                "misses_by_message": dict(Counter(m["ast_msg"] for _, m in missed)),
                "file_problems": [
                    {k: r.get(k) for k in ("file", "status", "error", "line", "col", "context")} for r in odd
                ],
                "wall_seconds": wall,
            },
            "misses": [{"file": r["file"], **m} for r, m in missed],
            "false_rejects": [{"file": r["file"], **m} for r, m in false_rej],
        },
    )
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
