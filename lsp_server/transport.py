"""The wire under pygls: LSP framing that a broken client cannot wedge.

pygls reads a message as header lines up to a blank line, then exactly ``Content-Length``
bytes, and it knows only the header spelled ``Content-Length: N``. :class:`FramedStream` is the
binary stdin handed to pygls' own stdio reader (``LanguageServer.start_io(stdin=...)``), so
pygls stays in charge of the loop while the framing becomes forgiving:

* header names are matched case-insensitively (``content-length: 12``), as the LSP base
  protocol's HTTP-style headers are;
* a ``Content-Length`` above ``max_bytes`` is logged and its header hidden: pygls then skips the
  lines that follow until the next header, so nothing is allocated for it and the connection
  resynchronises;
* a body that runs into the next message's header (its ``Content-Length`` was too large) is
  cut there, and the next message is read from that header on; the cut body fails to parse and
  gets a parse error like any malformed JSON (see ``FimProtocol``);
* a header line is read with a bounded length, so a stream without line breaks cannot exhaust
  memory.
"""

from __future__ import annotations

import logging
import re
from typing import BinaryIO

log = logging.getLogger(__name__)

#: the largest message body the server accepts, by default
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: the longest header line read at once (longer lines are read in pieces and ignored)
MAX_HEADER_LINE = 64 * 1024
_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n", re.IGNORECASE)
#: a header line inside a body, where the next message begins (never in valid JSON: a raw line
#: break cannot stand inside a JSON string, and the name cannot stand outside one)
_NEXT_MESSAGE = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)


class FramedStream:
    """A binary input stream for pygls' stdio reader (``readline`` and ``read``) that repairs
    and bounds the LSP framing of ``raw`` (see the module's docstring)."""

    def __init__(self, raw: BinaryIO, max_bytes: int = MAX_MESSAGE_BYTES):
        self.raw = raw
        self.max_bytes = max_bytes
        self._pending = b""  # bytes read ahead (the start of the next message), served first

    def readline(self) -> bytes:
        """A header line, the ``Content-Length`` header respelled as pygls reads it."""
        line = self._line()
        at = line.lower().find(b"content-length")
        if at > 0:  # the end of a short body joined to the next header: start at the header
            line = line[at:]
        match = _HEADER.fullmatch(line)
        if match is None:
            return line
        size = int(match.group(1))
        if size > self.max_bytes:
            log.error(
                "message of %d bytes is over the maximum of %d (--max-message-bytes): skipped",
                size,
                self.max_bytes,
            )
            return b"X-Skipped-Content-Length: %d\r\n" % size
        return b"Content-Length: %d\r\n" % size

    def read(self, size: int) -> bytes:
        """A message body of ``size`` bytes (fewer at the end of the stream), cut before the
        next message's header if one begins inside it."""
        body = self._pending[:size]
        self._pending = self._pending[size:]
        while len(body) < size:
            more = self.raw.read(size - len(body))
            if not more:
                break
            body += more
        match = _NEXT_MESSAGE.search(body)
        if match is not None and match.start() > 0:
            log.error(
                "a message's Content-Length (%d) runs into the next message: resynchronised at its header",
                size,
            )
            self._pending = body[match.start() :] + self._pending
            body = body[: match.start()]
        return body

    def _line(self) -> bytes:
        if self._pending:
            end = self._pending.find(b"\n")
            if end >= 0:
                line, self._pending = self._pending[: end + 1], self._pending[end + 1 :]
                return line
            line, self._pending = self._pending, b""
            return line + self.raw.readline(MAX_HEADER_LINE)
        return self.raw.readline(MAX_HEADER_LINE)
