#!/usr/bin/env python3
"""Typing replay: what a person typing at an editor gets from the language server.

A person types a character every 100-250 ms and does not wait: an answer that comes after the
next keystroke was never seen. So this replays a person typing, through the real server
(``python -m lsp_server`` over stdio, as an editor runs it), instead of timing single requests.

Cursors come from held-out files (editor_quality.py's: pure-Python packages installed beside
fimconstrain, or ``--root``), one per file, the kinds in turn: ``mid-line`` (the rest of a line
deleted from a point inside it) and ``new-line`` (a whole line deleted after its indentation).
The text from the cursor to the end of its line is the truth; the rest of the file the suffix.

The person opens the document at the cursor (``didOpen``; as a search result or a definition
opens it, the extension then tells the server where the cursor is: ``fimconstrain/cursor``),
looks at it ``--open-pause`` and the editor asks for a completion there (the first request,
the cursor at the start); the person
thinks up to 1.5 s (uniform) and then types the truth one character at a time, ``--rate``
seconds apart, plus up to ``--word-pause`` (uniform) after a character that ends a word (a
space, or a character that is no part of a name after one that is). After every keystroke
(the last one too) the editor sends ``didChange``, cancels the request still in flight
(``$/cancelRequest``, as VS Code does) and sends an Automatic ``inlineCompletion``; with
``--debounce-ms`` (the extension's ``debounceMs``) it first waits that long without a keystroke,
and sends nothing when the next keystroke comes first (a request ``debounced``). An answer
counts only when it arrives before the next keystroke is due (the schedule is the person's,
not the server's); a later one is late and ignored, as VS Code drops it. Latency counts from
the keystroke (the debounce included).

When the item shown has a first line that begins what the person is about to type, the person
takes it at the next keystroke instead of typing (Tab: a ``didChange`` inserting that line; its
characters are saved) and types on after it: the requests that follow are of the cursor kind
``after-accept``. An item shown and not taken is a wrong item (shown after the line was finished
too: the file is then whole), counted per answer and apart as distinct items (an answer that is
the rest of the item shown before it, once what was typed since is cut off, is the same item).
Every item shown is checked with the running interpreter's ``ast.parse`` (prefix + item +
suffix); the server is told that interpreter's version (``pythonVersion``), so that every item
should pass.

Two persons are replayed by default (``--accept line,word``), each in a pass of its own on the
same cursors, the pauses drawn from the same seeds (and a fresh server): ``line``, as above, and
``word``, who also takes the first word of an item whose first line is not what comes next but
whose first word is (VS Code's Ctrl+Right: spaces or tabs, then a name or a run of other
characters). The second's figures beside the first's say what taking a word at a time adds (a
second person rather than a counterfactual count, because a word taken changes the requests
after it and their answers); its row "of which by a word" is the characters those words saved.
``--wait`` replays the ceiling person, who waits for every answer (up to 4 s) before the next
keystroke: the model's quality alone, without the clock.

Reported per person, each figure's mean and range over ``--seeds`` (each seed its own files,
cursors and pauses; each seed and person its own server process): characters saved (share of all
truth characters), requests answered in time with an item, late answers (and those that came
with an item: the work was done, too late), wrong items shown, items that do not parse, lines
helped by an accepted item (at least one taken) and lines ended by one, requests never sent
(debounced), the server's peak memory; latency p50/p95 of the answers in time by request kind
(``first`` in the document, ``keystroke``, ``tab``: right after an item was taken) and by
cursor kind.

The server gets ``--model``, ``--runtime`` and ``pythonVersion``; the rest are its defaults
(``deadlineMs`` 3000, ``finishSearch`` off), as a user gets them.

    python benchmarks/typing_replay.py --cursors 30 --seeds 1,2,3
    python benchmarks/typing_replay.py --wait --accept line          # the ceiling, one person
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import re
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import _common as C
import editor_quality as EQ

KINDS = ("mid-line", "new-line")
AFTER_ACCEPT = "after-accept"
REQUEST_KINDS = ("first", "keystroke", "tab")
POLICIES = ("line", "word")
FIRST_PAUSE = 1.5  # the person thinks up to this long before the first character
WAIT_SECONDS = 4.0  # the ceiling person waits this long for an answer at most
READY_SECONDS = 600.0  # for the model to load
#: what Ctrl+Right takes of an item: spaces or tabs, then a name or a run of other characters
WORD = re.compile(r"[ \t]*(?:\w+|[^\w\s]+)")


@dataclass
class Cursor:
    file: str
    line: int  # 1-based
    kind: str
    prefix: str
    truth: str  # the rest of the line, deleted
    suffix: str  # from the end of the line on


def pick_cursors(root: Path | None, n: int, seed: int) -> list[Cursor]:
    """``n`` cursors, one per held-out file (in the seed's order), the kinds in turn."""
    rng = random.Random(seed)
    out: list[Cursor] = []
    for path in EQ.held_out_files(root, None, seed):
        if len(out) == n:
            break
        text = path.read_text("utf-8", errors="replace")
        if EQ.parses(text):
            cursor = cut(str(path), text, KINDS[len(out) % len(KINDS)], rng)
            if cursor is not None:
                out.append(cursor)
    return out


def cut(name: str, text: str, kind: str, rng: random.Random) -> Cursor | None:
    """A cursor of ``kind`` on a random line of code of ``text`` (None when there is none)."""
    lines = text.split("\n")
    code = [i for i, s in enumerate(lines) if s.strip() and not s.strip().startswith(("#", '"', "'", "@"))]
    if kind == "mid-line":
        code = [i for i in code if len(lines[i].strip()) >= 6]
    if not code:
        return None
    i = rng.choice(code)
    at = sum(len(line) + 1 for line in lines[:i])
    line, body = lines[i], lines[i].rstrip()
    indent = len(line) - len(line.lstrip())
    col = rng.randint(indent + 2, len(body) - 2) if kind == "mid-line" else indent
    return Cursor(name, i + 1, kind, text[: at + col], body[col:], text[at + len(line) :])


def is_name_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def ends_word(before: str, char: str) -> bool:
    """Whether ``char``, typed after ``before``, ends a word: a space, or a character that is no
    part of a name after one that is."""
    return char == " " or (not is_name_char(char) and before[-1:] != "" and is_name_char(before[-1]))


def position(text: str):
    """The LSP position (UTF-16 columns, the default encoding) of the end of ``text``."""
    from lsprotocol import types

    column = text[text.rfind("\n") + 1 :]
    return types.Position(line=text.count("\n"), character=len(column.encode("utf-16-le")) // 2)


# ---------------------------------------------------------------- the editor's side


@dataclass
class Pending:
    """One inline completion request in flight, or answered."""

    kind: str  # first, keystroke, tab
    cursor_kind: str
    msg_id: str
    sent: float
    future: Future
    arrived: float | None = None
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    def on_answer(self, _future) -> None:
        self.arrived = time.perf_counter()
        self.answered.set()

    def item(self) -> str | None:
        """The first item's text (None: no item, or an error)."""
        from lsprotocol import types

        if self.future.exception() is not None:
            return None
        result = self.future.result()
        items = list(result.items) if isinstance(result, types.InlineCompletionList) else list(result or [])
        text = items[0].insert_text if items else None
        return text if isinstance(text, str) and text else None


@dataclass
class Debounced:
    """A request the editor never sent: the next keystroke came within its debounce."""

    kind: str
    cursor_kind: str


class Editor:
    """An LSP client over stdio that sends what VS Code sends while a person types."""

    def __init__(self, options: dict):
        from pygls.lsp.client import LanguageClient

        self.client = LanguageClient("fimconstrain-typing-replay", "0")
        self.client.feature("fimconstrain/status")(lambda params: self._status(params))
        self.client.feature("window/logMessage")(lambda params: self._log(params))
        self.options = options
        self.ready = asyncio.Event()
        self.error: str | None = None
        self.failures = 0  # the server's "completion failed" log lines
        self.stderr: deque[str] = deque(maxlen=20)  # the server's last lines on standard error
        self.drainer: asyncio.Future | None = None  # reads that (kept: a task nothing holds may go)
        self.versions: dict[str, int] = {}
        self.ids = 0

    def _status(self, params) -> None:
        state = getattr(params, "state", None)
        message = str(getattr(params, "message", ""))
        if state == "error":
            self.error = message
            self.ready.set()
        elif state == "idle" and message.startswith("ready"):
            self.ready.set()

    def _log(self, params) -> None:
        self.failures += "completion failed" in params.message

    async def start(self) -> None:
        """Start the server (the ``lsp_server`` package this process imports: ab.py's PYTHONPATH
        tree's) and wait for its model."""
        from lsprotocol import types

        spec = importlib.util.find_spec("lsp_server")
        if spec is None or spec.origin is None:
            raise SystemExit("the lsp_server package is not importable (pip install -e .[lsp])")
        home = Path(spec.origin).resolve().parent.parent
        await self.client.start_io(sys.executable, "-m", "lsp_server", cwd=str(home))
        # (read on: a full pipe would block the server)
        self.drainer = asyncio.ensure_future(self._drain(self.client._server.stderr))
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(), initialization_options=self.options
            )
        )
        self.client.initialized(types.InitializedParams())
        try:
            await asyncio.wait_for(self.ready.wait(), READY_SECONDS)
        except asyncio.TimeoutError:
            self.error = f"no model after {READY_SECONDS:.0f} s"
        if self.error:
            raise SystemExit(f"the server has no model: {self.error}\n" + "".join(self.stderr))

    def peak_memory(self) -> float:
        """The server process's peak resident memory so far, in MB (NaN where /proc cannot say)."""
        try:
            status = Path(f"/proc/{self.client._server.pid}/status").read_text()
        except (AttributeError, OSError):
            return float("nan")
        kilobytes = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        return int(kilobytes.group(1)) / 1024 if kilobytes else float("nan")

    async def _drain(self, stream) -> None:
        async for line in stream:
            self.stderr.append(line.decode("utf-8", errors="replace"))

    def open(self, uri: str, text: str) -> None:
        from lsprotocol import types

        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )

    def cursor(self, uri: str, before: str) -> None:
        """The cursor is at the end of ``before`` (what the extension says on opening a document
        and on moving the cursor other than by typing)."""
        at = position(before)
        place = {"textDocument": {"uri": uri}, "position": {"line": at.line, "character": at.character}}
        self.client.protocol.notify("fimconstrain/cursor", place)

    def close(self, uri: str) -> None:
        from lsprotocol import types

        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def insert(self, uri: str, before: str, text: str) -> None:
        """``text`` typed (or accepted) at the end of ``before``, the document's text before the cursor."""
        from lsprotocol import types

        self.versions[uri] += 1
        at = position(before)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[
                    types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=text)
                ],
            )
        )

    def request(
        self, uri: str, before: str, kind: str, cursor_kind: str, since: float | None = None
    ) -> Pending:
        """An Automatic inline completion at the end of ``before`` (its latency counted from
        ``since``, the keystroke, when given)."""
        from lsprotocol import types

        self.ids += 1
        msg_id = f"replay-{self.ids}"
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=position(before),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
        sent = time.perf_counter() if since is None else since
        future = self.client.protocol.send_request(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
        )
        pending = Pending(kind, cursor_kind, msg_id, sent, future)
        future.add_done_callback(pending.on_answer)  # (called on this loop's thread, as the answer is read)
        return pending

    def cancel(self, pending: Pending | Debounced) -> None:
        from lsprotocol import types

        if isinstance(pending, Pending) and not pending.future.done():
            self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=pending.msg_id))

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


# ---------------------------------------------------------------- the person


@dataclass
class Person:
    policy: str  # line: takes an item's first line; word: also the first word of another item
    rate: float
    word_pause: float
    open_pause: float
    wait: bool  # the ceiling: waits for every answer (up to WAIT_SECONDS)
    debounce: float = 0.0  # the editor waits this long without a keystroke before it asks

    def pause(self, before: str, typed: str, rng: random.Random) -> float:
        """The time from this keystroke to the next one."""
        extra = rng.uniform(0, self.word_pause) if ends_word(before + typed[:-1], typed[-1]) else 0.0
        return self.rate + extra

    async def ask(self, editor: Editor, uri: str, before: str, kind: str, cursor_kind: str, due: float):
        """The editor's request at the end of ``before`` after a keystroke (now), the next one due
        at ``due``: sent once the debounce has passed without one, else never."""
        since = time.perf_counter()
        if self.debounce:
            if since + self.debounce >= due and not self.wait:
                return Debounced(kind, cursor_kind)
            await asyncio.sleep(self.debounce)
        return editor.request(uri, before, kind, cursor_kind, since)

    async def keystroke_at(self, pending: Pending | Debounced, due: float) -> float:
        """Wait for the next keystroke (due at ``due``; the ceiling person also waits for the
        answer): its time."""
        if self.wait and isinstance(pending, Pending):
            left = pending.sent + WAIT_SECONDS - time.perf_counter()
            try:
                await asyncio.wait_for(pending.answered.wait(), max(0.0, left))
            except asyncio.TimeoutError:
                pass
            waited = pending.arrived if pending.arrived is not None else pending.sent + WAIT_SECONDS
            due = max(due, min(waited, pending.sent + WAIT_SECONDS))
        await asyncio.sleep(max(0.0, due - time.perf_counter()))
        return due

    def judge(self, pending: Pending | Debounced, due: float, before: str, rest: str, suffix: str) -> dict:
        """What the person saw of ``pending``'s answer at the keystroke due at ``due``, with
        ``rest`` still to type, and what they take of it."""
        record = {"kind": pending.kind, "cursor_kind": pending.cursor_kind, "at_end": not rest}
        if isinstance(pending, Debounced):
            return {**record, "status": "debounced", "take": ""}
        if pending.arrived is None or pending.arrived > due:
            late = {**record, "status": "late", "take": ""}
            pending.future.add_done_callback(lambda _: late.update(late_item=pending.item() is not None))
            return late
        record["latency"] = pending.arrived - pending.sent
        if pending.future.exception() is not None:
            return {**record, "status": "error", "take": ""}
        item = pending.item()
        if item is None:
            return {**record, "status": "empty", "take": ""}
        first = item.split("\n", 1)[0]
        line_ok = bool(first) and rest.startswith(first)
        word = WORD.match(first)
        word_ok = self.policy == "word" and word is not None and rest.startswith(word.group())
        take, taken = (first, "line") if line_ok else (word.group(), "word") if word_ok else ("", None)
        return {
            **record,
            "status": "item",
            "item": item,
            "wrong": not line_ok,
            "parses": EQ.parses(before + item + suffix),
            "take": take,
            "taken": taken,
        }

    async def replay(self, editor: Editor, uri: str, cursor: Cursor, rng: random.Random) -> dict:
        """Type ``cursor``'s truth into a fresh document: the cursor's record and its requests'."""
        truth, typed = cursor.truth, 0
        editor.open(uri, cursor.prefix + cursor.suffix)
        editor.cursor(uri, cursor.prefix)
        await asyncio.sleep(self.open_pause)
        due = time.perf_counter() + rng.uniform(0, FIRST_PAUSE)
        pending = await self.ask(editor, uri, cursor.prefix, "first", cursor.kind, due)
        requests: list[dict] = []
        saved = {"line": 0, "word": 0}
        ended_by_item = False
        shown = ""  # the text before the cursor and the item, as last shown
        while True:
            due = await self.keystroke_at(pending, due)
            before = cursor.prefix + truth[:typed]
            record = self.judge(pending, due, before, truth[typed:], cursor.suffix)
            if record["status"] == "item":  # the same item as before, what was typed since cut off?
                record["repeat"] = before + record["item"] == shown
                shown = before + record["item"]
            requests.append(record)
            if typed == len(truth):
                break
            text = record["take"] or truth[typed]
            editor.insert(uri, before, text)
            editor.cancel(pending)
            typed += len(text)
            if record["take"]:
                saved[record["taken"]] += len(text)
            ended_by_item = bool(record["take"]) and typed == len(truth)
            kind = "tab" if record["take"] else "keystroke"
            cursor_kind = AFTER_ACCEPT if sum(saved.values()) else cursor.kind
            due += self.pause(before, text, rng)
            pending = await self.ask(editor, uri, cursor.prefix + truth[:typed], kind, cursor_kind, due)
        editor.cancel(pending)
        editor.close(uri)
        return {
            "file": cursor.file,
            "line": cursor.line,
            "kind": cursor.kind,
            "truth": truth,
            "saved_line": saved["line"],
            "saved_word": saved["word"],
            "ended_by_item": ended_by_item,
            "requests": requests,
        }


# ---------------------------------------------------------------- one pass and the report


async def replay_pass(args, person: Person, seed: int, cursors: list[Cursor]) -> dict:
    """Every cursor typed by ``person`` through a fresh server: its figures and records."""
    options = {
        "model": args.model,
        "runtime": args.runtime,
        "pythonVersion": f"{sys.version_info.major}.{sys.version_info.minor}",
    }
    editor = Editor(options)
    await editor.start()
    rows = []
    desc = f"seed {seed} {person.policy}"
    for index, cursor in enumerate(C.progress(cursors, desc=desc, disable=args.no_progress, unit="cursor")):
        uri = f"file:///typing-replay/{seed}-{index}-{Path(cursor.file).name}"
        rows.append(await person.replay(editor, uri, cursor, random.Random(f"{seed}:{index}")))
    await asyncio.sleep(0.5)  # the answers and log lines of the last document are in
    failures, peak = editor.failures, editor.peak_memory()
    await editor.stop()
    return {"seed": seed, "policy": person.policy, "figures": figures(rows, failures, peak), "cursors": rows}


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def latency(requests: list[dict]) -> dict:
    """How a group of requests was answered: shares in time and with an item, p50/p95 ms."""
    n = len(requests)
    in_time = [r["latency"] for r in requests if "latency" in r]
    return {
        "requests": n,
        "in_time": len(in_time) / n if n else float("nan"),
        "with_item": sum(r["status"] == "item" for r in requests) / n if n else float("nan"),
        "p50_ms": 1000 * _quantile(in_time, 0.5),
        "p95_ms": 1000 * _quantile(in_time, 0.95),
    }


def figures(rows: list[dict], failures: int, peak_mb: float = float("nan")) -> dict:
    requests = [r for row in rows for r in row["requests"]]
    shown = [r for r in requests if r["status"] == "item"]
    truth = sum(len(row["truth"]) for row in rows)
    saved = sum(row["saved_line"] + row["saved_word"] for row in rows)
    n = len(rows)
    return {
        "cursors": n,
        "truth_chars": truth,
        "saved": saved / truth if truth else 0.0,
        "saved_by_word": sum(row["saved_word"] for row in rows) / truth if truth else 0.0,
        "requests": len(requests),
        "answered_with_item": len(shown) / len(requests) if requests else 0.0,
        "late": sum(r["status"] == "late" for r in requests) / len(requests) if requests else 0.0,
        "debounced": sum(r["status"] == "debounced" for r in requests) / len(requests) if requests else 0.0,
        "late_with_item": sum(r.get("late_item", False) for r in requests),
        "wrong_items": sum(r["wrong"] for r in shown),
        "wrong_distinct": sum(r["wrong"] and not r["repeat"] for r in shown),
        "wrong_at_finished_line": sum(r["wrong"] and r["at_end"] for r in shown),
        "unparsable": sum(not r["parses"] for r in shown),
        "lines_helped": sum(row["saved_line"] + row["saved_word"] > 0 for row in rows) / n if n else 0.0,
        "lines_ended_by_item": sum(row["ended_by_item"] for row in rows) / n if n else 0.0,
        "server_failures": failures,
        "server_peak_mb": peak_mb,
        "latency": {
            **{k: latency([r for r in requests if r["kind"] == k]) for k in REQUEST_KINDS},
            **{k: latency([r for r in requests if r["cursor_kind"] == k]) for k in (*KINDS, AFTER_ACCEPT)},
        },
    }


#: the rows of the main table: (label, key in figures, a share?)
ROWS = (
    ("requests", "requests", False),
    ("characters saved", "saved", True),
    ("  of which by a word", "saved_by_word", True),
    ("requests answered in time with an item", "answered_with_item", True),
    ("late answers (after the next keystroke)", "late", True),
    ("late answers that came with an item", "late_with_item", False),
    ("requests never sent (debounced)", "debounced", True),
    ("wrong items shown (answers)", "wrong_items", False),
    ("  of which at a finished line", "wrong_at_finished_line", False),
    ("  distinct items (not the rest of the one before)", "wrong_distinct", False),
    ("items shown that do not parse", "unparsable", False),
    ("lines helped by an accepted item", "lines_helped", True),
    ("lines ended by an accepted item", "lines_ended_by_item", True),
    ("server 'completion failed'", "server_failures", False),
    ("server's peak memory (MB, VmHWM)", "server_peak_mb", False),
)


def spread(values: list[float], show: Callable[[float], str]) -> str:
    """The mean, and the range over seeds when they differ."""
    values = [v for v in values if v == v]  # (NaN: no request of that kind in a seed)
    if not values:
        return "-"
    mean = show(statistics.mean(values))
    return mean if min(values) == max(values) else f"{mean} ({show(min(values))}-{show(max(values))})"


def _share(value: float) -> str:
    return f"{100 * value:.1f}%"


def _count(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def report(passes: list[dict], policies: list[str]) -> None:
    by_policy = {p: [run["figures"] for run in passes if run["policy"] == p] for p in policies}
    rows = [
        [label, *(spread([f[key] for f in by_policy[p]], _share if share else _count) for p in policies)]
        for label, key, share in ROWS
        if key != "saved_by_word" or "word" in policies
    ]
    print(C.table(rows, ["figure", *(f"person: {p}" for p in policies)], "l" + "r" * len(policies)))
    lat_rows = []
    for p in policies:
        for group, kinds in (("request", REQUEST_KINDS), ("cursor", (*KINDS, AFTER_ACCEPT))):
            for k in kinds:
                cells = [f["latency"][k] for f in by_policy[p]]
                lat_rows.append(
                    [
                        p,
                        f"{group}: {k}",
                        spread([c["requests"] for c in cells], _count),
                        spread([c["in_time"] for c in cells], _share),
                        spread([c["with_item"] for c in cells], _share),
                        spread([c["p50_ms"] for c in cells], "{:.0f}".format),
                        spread([c["p95_ms"] for c in cells], "{:.0f}".format),
                    ]
                )
    print()
    print(
        C.table(
            lat_rows,
            ["person", "kind", "requests", "in time", "with item", "p50 ms", "p95 ms"],
            "llrrrrr",
        )
    )
    print(
        "in time: answered before the next keystroke; p50/p95: of the answers in time; request kinds: "
        "first in the document, after a keystroke, after an item was taken (tab); cursor kinds: the "
        f"cursor's, or {AFTER_ACCEPT} once an item of its line was taken; values: mean (min-max) over seeds"
    )


async def run(args) -> list[dict]:
    passes = []
    for seed in args.seeds:
        cursors = pick_cursors(args.root, args.cursors, seed)
        for policy in args.accept:
            person = Person(
                policy, args.rate, args.word_pause, args.open_pause, args.wait, args.debounce_ms / 1000
            )
            passes.append(await replay_pass(args, person, seed, cursors))
    return passes


def _list(convert):
    return lambda text: [convert(part) for part in text.split(",") if part]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument(
        "--root", type=Path, default=None, help="folder of .py files (default: editor_quality.py's packages)"
    )
    p.add_argument(
        "--model",
        default="qwen2.5-coder-0.5b",
        help="the server's model setting (a known name, directory or .gguf)",
    )
    p.add_argument(
        "--runtime", default="llama", choices=("auto", "transformers", "llama"), help="the server's runtime"
    )
    p.add_argument("--cursors", type=int, default=30, help="cursors a seed, one per file")
    p.add_argument("--seeds", type=_list(int), default="1,2,3", help="comma-separated: a pass each")
    p.add_argument("--rate", type=float, default=0.2, help="seconds per character")
    p.add_argument("--word-pause", type=float, default=0.6, help="up to this many seconds more after a word")
    p.add_argument("--open-pause", type=float, default=1.0, help="seconds from didOpen to the first request")
    p.add_argument(
        "--accept",
        type=_list(str),
        default=",".join(POLICIES),
        help="comma-separated persons, a pass each: line (takes an item's first line), word (also an "
        "item's first word)",
    )
    p.add_argument("--wait", action="store_true", help="the ceiling person: waits up to 4 s for every answer")
    p.add_argument(
        "--debounce-ms",
        type=float,
        default=0.0,
        help="the editor asks only after this long without a keystroke (the extension's debounceMs)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON result file (default: benchmarks/results/typing_replay.json)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    args = p.parse_args(argv)
    if not args.accept or set(args.accept) - set(POLICIES):
        p.error(f"--accept: a comma-separated list of {', '.join(POLICIES)}")
    passes = asyncio.run(run(args))
    print(
        f"typing replay: {args.model} ({args.runtime}), {args.cursors} cursors a seed, {args.rate:g} s a "
        f"character, word pause up to "
        f"{args.word_pause:g} s{', waiting for every answer' if args.wait else ''}; seeds "
        f"{','.join(map(str, args.seeds))}"
    )
    report(passes, args.accept)
    summary = {
        policy: [run["figures"] for run in passes if run["policy"] == policy] for policy in args.accept
    }
    out = C.write_results("typing_replay", args, {"summary": summary, "passes": passes})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
