"""The wire under pygls: LSP framing that a broken client cannot wedge, over stdio and TCP.

pygls reads a message as header lines up to a blank line, then exactly ``Content-Length``
bytes, and it knows only the header spelled ``Content-Length: N``. :class:`FramedStream` is the
binary input handed to pygls' own stdio loop (``LanguageServer.start_io(stdin=...)``), so pygls
stays in charge of the loop while the framing becomes forgiving:

* header names are matched case-insensitively (``content-length: 12``), as the LSP base
  protocol's HTTP-style headers are;
* a ``Content-Length`` above ``max_bytes`` is logged and its header hidden: pygls then skips the
  lines that follow until the next header, so nothing is allocated for it and the connection
  resynchronises;
* a body that runs into the next message's header (its ``Content-Length`` was too large) is
  cut there as soon as that header arrives, without waiting for the bytes it claimed, and the
  next message is read from that header on; the cut body fails to parse and gets a parse error
  like any malformed JSON (see ``FimProtocol``);
* header lines are read in bounded pieces, so a stream without line breaks cannot exhaust
  memory, and a header cut between two pieces is still found;
* the end of the stream inside a body, or a failed read, is logged and ends the loop cleanly
  (the cut message is dropped: nobody is left to answer).

TCP (:func:`serve_tcp`) accepts one client and runs the same stdio loop over the socket, so
both transports share this framing.
"""

from __future__ import annotations

import io
import logging
import re
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO, Protocol, cast

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

#: the largest message body the server accepts, by default
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: the longest header line read at once (longer lines are read in pieces and ignored)
MAX_HEADER_LINE = 64 * 1024
#: how far back a header is looked for when a piece of a line or of a body ends (a longer
#: ``Content-Length`` line cut between two reads is not recognised)
_HEADER_OVERLAP = 256
#: a ``Content-Length`` header at the end of a line (what precedes it is the rest of a body)
_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*(\d+)[ \t]*\r?\n\Z", re.IGNORECASE)
#: a header line inside a body, where the next message begins (never in valid JSON: a raw line
#: break cannot stand inside a JSON string, and the name cannot stand outside one)
_NEXT_MESSAGE = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)


class Source(Protocol):
    """What :class:`FramedStream` reads from: a buffered binary stream (stdin, a socket file)."""

    def readline(self, size: int = -1, /) -> bytes: ...

    def read1(self, size: int = -1, /) -> bytes: ...


class FramedStream:
    """A binary input stream for pygls' stdio loop (``readline`` and ``read``) that repairs and
    bounds the LSP framing of ``raw`` (see the module's docstring)."""

    def __init__(self, raw: Source, max_bytes: int = MAX_MESSAGE_BYTES):
        self.raw = raw
        self.max_bytes = max_bytes
        self._pending = b""  # bytes read ahead (the start of the next message), served first

    def readline(self) -> bytes:
        """A header line, the ``Content-Length`` header respelled as pygls reads it."""
        line = self._line()
        match = _HEADER.search(line)
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
        """A message body of ``size`` bytes, cut before the next message's header if one
        begins inside it; nothing if the stream ends first."""
        body = bytearray(self._pending[:size])
        self._pending = self._pending[size:]
        start = 1  # where a header not looked for yet may begin (a body is never empty)
        while (cut := _NEXT_MESSAGE.search(body, start)) is None and len(body) < size:
            start = max(1, len(body) - _HEADER_OVERLAP)
            more = self._receive(self.raw.read1, size - len(body))
            if not more:  # nobody is left to answer: an empty body ends pygls' loop
                log.error("the input ended %d bytes into a message of %d bytes", len(body), size)
                return b""
            body += more
        if cut is not None:
            log.error(
                "a message's Content-Length (%d) runs into the next message: resynchronised at its header",
                size,
            )
            self._pending = bytes(body[cut.start() :]) + self._pending
            del body[cut.start() :]
        return bytes(body)

    def _line(self) -> bytes:
        """The next line, or a piece of a longer one; a piece's last bytes are kept back for
        the next piece, so that a header which begins there is read whole."""
        end = self._pending.find(b"\n")
        if end >= 0:
            line, self._pending = self._pending[: end + 1], self._pending[end + 1 :]
            return line
        line = self._pending + self._receive(self.raw.readline, MAX_HEADER_LINE)
        self._pending = b""
        if not line.endswith(b"\n") and len(line) > _HEADER_OVERLAP:
            line, self._pending = line[:-_HEADER_OVERLAP], line[-_HEADER_OVERLAP:]
        return line

    @staticmethod
    def _receive(read: Callable[[int], bytes], size: int) -> bytes:
        """``read(size)``; a failed read (the client reset the connection) is the stream's end."""
        try:
            return read(size)
        except OSError as error:
            log.error("reading from the client failed: %s", error)
            return b""


def serve_stdio(server: LanguageServer, max_bytes: int) -> None:
    """Run ``server`` on stdin/stdout until the client exits or goes away."""
    stdin = cast(io.BufferedReader, sys.stdin.buffer)  # what Python makes of a binary stdin
    server.start_io(stdin=cast(BinaryIO, FramedStream(stdin, max_bytes)))


def serve_tcp(server: LanguageServer, host: str, port: int, max_bytes: int) -> None:
    """Wait for one client on ``host:port`` and run ``server`` for it, as on stdio (pygls' own
    ``start_tcp`` gives its loop asyncio's stream reader, with no way to hand it another)."""
    with socket.create_server((host, port)) as listener:
        log.info("listening on %s:%d", host, port)
        connection, address = listener.accept()
    log.info("client connected from %s", address)
    with connection:  # its files are left open: closing one flushes, which fails if the client is gone
        rfile, wfile = connection.makefile("rb"), connection.makefile("wb")
        server.start_io(stdin=cast(BinaryIO, FramedStream(rfile, max_bytes)), stdout=wfile)
