#!/usr/bin/env python3
"""The language server under load, as an editor drives it over stdio.

Prints, each beside the baseline measured in the same run:

* time to the first non-empty answer from process start (the request is sent right after
  ``initialized``, while the model loads);
* p50/p95 latency and items answered / requests with 1, 4 and 20 requests in flight at once
  (``--levels``; one small document each, each document its own, so that no two prompts are
  the same), how many of them the server logged as ``completion failed``, and how many items
  were due: the requests that got one when each document was asked alone, one after the other;
* small-document latency while a large document (``--big-mb``, default 5 MB; ``maxFileChars``
  raised for it) is edited and completed, against the same requests idle (goal: p95 within
  1.2x);
* the server's resident memory after opening and closing the large document 10 times,
  against before it was first opened (goal: within 10%).

The server runs with ``finishSearch`` on unless ``--no-finish-search``: these are the server's
figures, and a small model's items are otherwise rarely whole.

    python benchmarks/lsp_load.py                 # the shipped model
    python benchmarks/lsp_load.py --model DIR     # another one (the tiny test model works)
    python benchmarks/lsp_load.py --model ~/qwen.gguf --levels 20 --only-concurrency
    python benchmarks/lsp_load.py --model ~/qwen.gguf --only-first   # the start-up time alone
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import _common as C

REPO = Path(__file__).resolve().parent.parent
SMALL = "def area(width, height):\n    return \n\n\nprint(area(2, 3))\n"
SMALL_CURSOR = (1, 11)
#: the concurrent documents: each its own names (and so its own prompt), the cursor where SMALL's is
NAMES = ("area", "perimeter", "volume", "ratio", "scale", "total", "mean", "spread", "offset", "blend")


def small_document(i: int) -> str:
    name = f"{NAMES[i % len(NAMES)]}{'' if i < len(NAMES) else i // len(NAMES)}"
    return SMALL.replace("area", name)


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def _server_pid() -> int:
    """The ``python -m lsp_server`` child of this process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"lsp_server" in cmdline:
            return int(entry.name)
    raise RuntimeError("server process not found")


def _big_document(megabytes: float) -> str:
    lines, size, i = [], 0, 0
    while size < megabytes * 1_000_000:
        line = f"def function_{i}(value):\n    return value * {i} + {i % 7}\n\n"
        lines.append(line)
        size += len(line)
        i += 1
    return "".join(lines)


class Editor:
    """An LSP client over stdio with the requests the benchmark makes."""

    def __init__(self, model: str | None, options: dict):
        from pygls.lsp.client import LanguageClient

        self.client = LanguageClient("fimconstrain-lsp-load", "0")
        self.failures: list[str] = []  # the server's "completion failed" log lines
        self.client.feature("window/logMessage")(lambda params: self._log(params))
        self.client.feature("fimconstrain/status")(lambda params: None)
        self.model, self.options = model, options
        self.versions: dict[str, int] = {}

    def _log(self, params) -> None:
        if "completion failed" in params.message:
            self.failures.append(params.message)

    async def start(self) -> None:
        from lsprotocol import types

        init = {**self.options, **({"model": self.model} if self.model else {})}
        await self.client.start_io(sys.executable, "-m", "lsp_server", cwd=str(REPO))
        await self.client.initialize_async(
            types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options=init)
        )
        self.client.initialized(types.InitializedParams())

    def open(self, uri: str, text: str) -> None:
        from lsprotocol import types

        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )

    def close(self, uri: str) -> None:
        from lsprotocol import types

        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def insert(self, uri: str, line: int, text: str) -> None:
        from lsprotocol import types

        self.versions[uri] += 1
        at = types.Position(line=line, character=0)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[
                    types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=text)
                ],
            )
        )

    async def complete(self, uri: str, line: int, character: int) -> tuple[float, int]:
        """(seconds, items) of one inline completion request."""
        from lsprotocol import types

        start = time.perf_counter()
        result = await self.client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=types.Position(line=line, character=character),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic
                ),
            )
        )
        items = list(result.items) if isinstance(result, types.InlineCompletionList) else list(result or [])
        return time.perf_counter() - start, len(items)

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def concurrent(editor: Editor, n: int, rounds: int) -> dict:
    """``n`` small documents, a request each at once, ``rounds`` times."""
    uris = [f"file:///load/{n}-{i}.py" for i in range(n)]
    for i, uri in enumerate(uris):
        editor.open(uri, small_document(i))
    # what each gets asked alone, one after the other: the items due at once
    alone = [(await editor.complete(uri, *SMALL_CURSOR))[1] for uri in uris] if n > 1 else []
    results = []
    failed_before = len(editor.failures)
    for _ in range(rounds):
        results += await asyncio.gather(*(editor.complete(uri, *SMALL_CURSOR) for uri in uris))
    await editor.complete("file:///load/none.py", 0, 0)  # a round trip: the log lines are in
    for uri in uris:
        editor.close(uri)
    seconds = [s for s, _ in results]
    answered = sum(1 for _, items in results if items)
    return {
        "p50": _p(seconds, 0.5),
        "p95": _p(seconds, 0.95),
        "answered": answered,
        "due": sum(1 for items in alone if items) * rounds if n > 1 else answered,
        "requests": len(results),
        "failed": len(editor.failures) - failed_before,
    }


async def small_requests(editor: Editor, count: int) -> list[float]:
    editor.open("file:///load/small.py", SMALL)
    seconds = [(await editor.complete("file:///load/small.py", *SMALL_CURSOR))[0] for _ in range(count)]
    editor.close("file:///load/small.py")
    return seconds


async def while_big_is_edited(editor: Editor, big: str, count: int) -> list[float]:
    """Small-document requests while the big document is edited and completed at its end."""
    uri, lines = "file:///load/big.py", big.count("\n")
    editor.open(uri, big)
    editor.open("file:///load/small.py", SMALL)
    seconds = []
    for i in range(count):
        editor.insert(uri, (i * 7919) % lines, f"extra_{i} = {i}\n")
        big_request = asyncio.ensure_future(editor.complete(uri, lines + i + 1, 0))
        seconds.append((await editor.complete("file:///load/small.py", *SMALL_CURSOR))[0])
        await big_request
    editor.close("file:///load/small.py")
    editor.close(uri)
    return seconds


async def run(args) -> dict:
    big = _big_document(args.big_mb)
    options = {
        "maxFileChars": len(big) * 2,
        "deadlineMs": args.deadline_ms,
        "finishSearch": args.finish_search,
        **({"runtime": args.runtime} if args.runtime else {}),
    }
    editor = Editor(args.model, options)
    started = time.perf_counter()
    await editor.start()
    editor.open("file:///load/first.py", SMALL)
    first = None
    while first is None:
        _, items = await editor.complete("file:///load/first.py", *SMALL_CURSOR)
        if items:
            first = time.perf_counter() - started
        elif time.perf_counter() - started > 300:
            break
    editor.close("file:///load/first.py")
    out: dict = {"first_answer_s": first}
    if args.only_first:
        await editor.stop()
        return out
    out["concurrency"] = {n: await concurrent(editor, n, args.rounds) for n in args.levels}
    if args.only_concurrency:
        await editor.stop()
        return out
    out["idle_small"] = await small_requests(editor, args.samples)
    pid = _server_pid()
    out["rss_before_mib"] = _rss_mib(pid)  # before the large document was ever opened
    out["busy_small"] = await while_big_is_edited(editor, big, args.samples)
    for _ in range(10):
        editor.open("file:///load/big.py", big)
        editor.close("file:///load/big.py")
        await editor.complete("file:///load/none.py", 0, 0)  # a round trip: the notifications are handled
    await asyncio.sleep(1.0)
    out["rss_after_mib"] = _rss_mib(pid)
    await editor.stop()
    return out


def main(argv=None) -> int:
    p = C.base_parser(__doc__.split("\n\n")[0], limit_default=None, workers=False)
    p.add_argument("--model", help="model directory or .gguf file (default: the shipped model)")
    p.add_argument(
        "--runtime", choices=("auto", "transformers", "llama"), help="the server's runtime setting"
    )
    p.add_argument(
        "--levels",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 4, 20],
        help="requests in flight at once, comma-separated (default 1,4,20)",
    )
    p.add_argument(
        "--only-concurrency",
        action="store_true",
        help="only the requests in flight at once (not the large document, nor the memory)",
    )
    p.add_argument(
        "--only-first",
        action="store_true",
        help="only the time to the first non-empty answer after process start (the start-up time)",
    )
    p.add_argument("--big-mb", type=float, default=5.0, help="size of the large document in MB")
    p.add_argument("--rounds", type=int, default=3, help="rounds of concurrent requests per level")
    p.add_argument("--samples", type=int, default=20, help="small-document requests, idle and busy")
    p.add_argument("--deadline-ms", type=int, default=3000, help="the server's deadlineMs")
    p.add_argument(
        "--no-finish-search",
        dest="finish_search",
        action="store_false",
        help="the server's default: only items the model wrote whole (a small model then shows few); "
        "by default the benchmark turns finishSearch on, to measure the server rather than the model",
    )
    args = p.parse_args(argv)
    out = asyncio.run(run(args))
    first = out["first_answer_s"]
    print(f"first non-empty answer after process start: {'none' if first is None else f'{first:.2f} s'}")
    if args.only_first:
        return 0 if first is not None else 1
    one = out["concurrency"][min(out["concurrency"])]["p95"]
    rows = [
        [
            f"{n} at once",
            c["p50"] * 1000,
            c["p95"] * 1000,
            f"{c['answered']}/{c['requests']}",
            c["due"],
            c["failed"],
            c["p95"] / one,
        ]
        for n, c in out["concurrency"].items()
    ]
    print(
        C.table(
            rows,
            [
                "requests",
                "p50 ms",
                "p95 ms",
                "with item",
                "due (alone)",
                "failed",
                f"p95 x {min(out['concurrency'])}-at-once",
            ],
        )
    )
    if args.only_concurrency:
        print(f"wrote {C.write_results('lsp_load', args, out)}")
        return 0
    idle, busy = _p(out["idle_small"], 0.95), _p(out["busy_small"], 0.95)
    print(
        f"small document p95: idle {idle * 1000:.0f} ms, while the {args.big_mb:g} MB one is edited "
        f"{busy * 1000:.0f} ms ({busy / idle:.2f}x; goal <= 1.2x)"
    )
    before, after = out["rss_before_mib"], out["rss_after_mib"]
    print(
        f"resident memory: {before:.0f} MiB before, {after:.0f} MiB after opening and closing it 10 times "
        f"({after / before:.2f}x; goal <= 1.10x)"
    )
    path = C.write_results("lsp_load", args, out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
