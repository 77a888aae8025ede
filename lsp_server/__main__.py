"""``python -m lsp_server`` / ``fimconstrain-lsp``: run the language server on stdio (or TCP)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from fimconstrain.command_line.arguments import positive_int

from .transport import MAX_MESSAGE_BYTES, serve_stdio, serve_tcp


def build_parser() -> argparse.ArgumentParser:
    from fimconstrain import __version__

    ap = argparse.ArgumentParser(
        prog="fimconstrain-lsp",
        description="Inline completions over LSP from a FIM model, constrained so that "
        "the file stays valid Python.",
    )
    ap.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    ap.add_argument("--tcp", action="store_true", help="serve one client over TCP instead of stdio")
    ap.add_argument("--host", default="127.0.0.1", help="TCP host (default 127.0.0.1)")
    ap.add_argument("--port", type=int, default=2087, help="TCP port (default 2087)")
    ap.add_argument("--log-file", help="also write the server's log here")
    ap.add_argument(
        "--max-message-bytes",
        type=positive_int,
        default=MAX_MESSAGE_BYTES,
        metavar="N",
        help="larger messages are skipped with an error in the log (default 64 MiB)",
    )
    ap.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="level of the stderr / --log-file log (the client always gets INFO and above)",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if args.log_file:
        handlers.append(logging.FileHandler(args.log_file, encoding="utf-8"))
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = logging.getLogger()
    for handler in handlers:
        handler.setFormatter(fmt)
        handler.setLevel(args.log_level)
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if args.log_level == "DEBUG" else logging.INFO)
    logging.getLogger("pygls").setLevel(max(logging.WARNING, getattr(logging, args.log_level)))

    from .server import create_server

    server = create_server()
    server.collector.install()  # this process is the server's: no full collection mid-request
    try:
        if args.tcp:
            serve_tcp(server, args.host, args.port, args.max_message_bytes)
        else:
            serve_stdio(server, args.max_message_bytes)
    finally:
        server.cancel_all("exit")
        server.worker.shutdown(wait=False, cancel_futures=True)
    code = 0 if server.shut_down else 1
    # the worker may still be inside a model load or a forward pass: don't wait for it
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the client may have closed the pipe already
            pass
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
