"""Measure the server's completion latency as an editor sees it (a measurement, not a test).

    python -m lsp_server.latency [--model DIR] [--file some.py] [--requests 8]

Starts ``python -m lsp_server`` over stdio, like an editor, and reports wall-clock
times of ``textDocument/inlineCompletion`` round trips:

* ``first``: from starting the server process to the first completion (the
  request is sent right after initialize, so it includes loading the model);
* ``typical``: completions at cursors spread over the file (after the first);
* ``keystroke``: a request, one character typed (incremental didChange), the
  request again one character further on.

Without ``--model`` the shipped model is used.  Output is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import sysconfig
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lsprotocol.types import StringValue


def _cursors(text: str, n: int, seed: int = 0) -> list[int]:
    """Offsets at the end of non-blank lines (an editor's most common completion point)."""
    ends, pos = [], 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if body.strip() and not body.lstrip().startswith("#"):
            ends.append(pos + len(body))
        pos += len(line)
    rng = random.Random(seed)
    return sorted(rng.sample(ends, min(n, len(ends))))


def _text(insert_text: str | StringValue) -> str:
    """An inline completion's text (a snippet's template as written)."""
    return insert_text if isinstance(insert_text, str) else insert_text.value


def _position(text: str, offset: int):
    from lsprotocol import types

    from lsp_server.documents import UTF16, position_at

    line, character = position_at(text, offset, UTF16)
    return types.Position(line=line, character=character)


async def measure(model: str | None, path: Path, requests: int, options: dict) -> dict:
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    text = path.read_text(encoding="utf-8")
    uri = path.resolve().as_uri()
    client = LanguageClient("fimconstrain-latency", "0")
    statuses: list = []

    @client.feature("fimconstrain/status")
    def on_status(params):
        statuses.append(params)

    async def complete(offset: int, version_text: str) -> tuple[float, int, int]:
        start = time.perf_counter()
        result = await client.text_document_inline_completion_async(
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                position=_position(version_text, offset),
                context=types.InlineCompletionContext(
                    trigger_kind=types.InlineCompletionTriggerKind.Automatic
                ),
            )
        )
        if isinstance(result, types.InlineCompletionList):
            items = list(result.items)
        else:
            items = list(result or [])
        return time.perf_counter() - start, len(items), sum(len(_text(i.insert_text)) for i in items)

    init = {"deadlineMs": 600_000, **options}
    if model:
        init["model"] = model
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    await client.start_io(sys.executable, "-m", "lsp_server", env=env)
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                window=types.WindowClientCapabilities(work_done_progress=False)
            ),
            initialization_options=init,
        )
    )
    client.initialized(types.InitializedParams())
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    cursors = _cursors(text, requests + 1)
    _, n_first, _ = await complete(cursors[0], text)
    first = time.perf_counter() - started
    typical = []
    for offset in cursors[1:]:
        seconds, n, chars = await complete(offset, text)
        typical.append({"seconds": round(seconds, 4), "items": n, "chars": chars})
    # one keystroke: ask, type a space at the cursor, ask again after it
    offset = cursors[len(cursors) // 2]
    before, _, _ = await complete(offset, text)
    edited = text[:offset] + " " + text[offset:]
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=_position(text, offset), end=_position(text, offset)), text=" "
                )
            ],
        )
    )
    after, _, _ = await complete(offset + 1, edited)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    times = [t["seconds"] for t in typical]
    return {
        "model": model or "shipped",
        "file": str(path),
        "file_chars": len(text),
        "options": init,
        "first_completion_after_start_s": round(first, 3),
        "first_items": n_first,
        "typical_median_s": round(statistics.median(times), 4) if times else None,
        "typical_max_s": round(max(times), 4) if times else None,
        "typical": typical,
        "request_before_keystroke_s": round(before, 4),
        "request_after_one_keystroke_s": round(after, 4),
        "statuses": [getattr(s, "_asdict", lambda s=s: s)() for s in statuses[-2:]],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lsp_server.latency", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="model directory (default: the shipped model)")
    ap.add_argument("--file", type=Path, default=Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py")
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args(argv)
    options = {"maxTokens": args.max_tokens}
    if args.threads:
        options["threads"] = args.threads
    print(json.dumps(asyncio.run(measure(args.model, args.file, args.requests, options)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
