"""The command-line interface, run as a subprocess: exit codes and reported positions."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from conftest import EXAMPLES, REPO


def run(*args, stdin: bytes | None = None, cwd=None):
    proc = subprocess.run(
        [sys.executable, "-m", "fimconstrain", *map(str, args)],
        input=stdin,
        capture_output=True,
        cwd=cwd or REPO,
        timeout=300,
    )
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace")


def test_valid_example():
    rc, out, err = run("check", EXAMPLES / "inventory.py")
    assert rc == 0, out + err
    assert "ok: valid program" in out


def test_broken_example_reports_line_and_col():
    rc, out, err = run("check", EXAMPLES / "broken.py")
    assert rc == 1, out + err
    # the stray ')' on line 9: "    return 2 * (width + height))"
    assert f"{EXAMPLES / 'broken.py'}:9:32: error" in out
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if ":9:32:" in line)
    assert lines[i + 1].strip() == "return 2 * (width + height))"
    assert lines[i + 2].index("^") == lines[i + 1].index("))") + 1


def test_unfinished_example_is_incomplete_but_completable():
    rc, out, err = run("check", EXAMPLES / "unfinished.py")
    assert rc == 1, out + err
    assert "unexpected end of file" in out
    text = (EXAMPLES / "unfinished.py").read_text()
    last_line = text.count("\n") + 1
    assert f":{last_line}:{len(text.splitlines()[-1]) + 1}:" in out
    # as a prefix (cursor at the end), it can be completed
    rc, out, err = run("check", EXAMPLES / "unfinished.py", "--cursor", str(len(text)))
    assert rc == 0, out + err
    assert "can be completed" in out


def test_tmp_broken_file(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("def f(x):\n    y = x\n    return y)\n", encoding="utf-8")
    rc, out, _err = run("check", f)
    assert rc == 1
    assert re.search(r"broken\.py:3:13: error", out), out
    assert "    return y)" in out


def test_tmp_broken_file_with_tab_caret(tmp_path):
    f = tmp_path / "tabs.py"
    f.write_text("if x:\n\ty = = 1\n", encoding="utf-8")
    rc, out, _err = run("check", f)
    assert rc == 1
    assert re.search(r"tabs\.py:2:6: error", out), out
    src_line, caret_line = out.splitlines()[1:3]
    assert src_line == "    \ty = = 1"
    assert caret_line == "    \t    ^"


def test_crlf_positions(tmp_path):
    f = tmp_path / "crlf.py"
    f.write_bytes(b"x = 1\r\ny = (2,\r\n     3]]\r\n")
    rc, out, _err = run("check", f)
    assert rc == 1
    assert re.search(r"crlf\.py:3:7: error", out), out


def test_stdin():
    rc, out, err = run("check", "-", stdin=b"x = [1,\n     2]\n")
    assert rc == 0, out + err
    assert out.startswith("<stdin>: ok")
    rc, out, err = run("check", "-", stdin=b"x = [1,\n     2))\n")
    assert rc == 1
    assert "<stdin>:2:7: error" in out


def test_cursor_line_col_and_offset():
    f = EXAMPLES / "inventory.py"
    text = f.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    # cursor at line 30, column 9 (1-based), as an editor shows it
    offset = sum(len(x) for x in lines[:29]) + 8
    rc1, out1, _ = run("check", f, "--cursor", "30:9")
    rc2, out2, _ = run("check", f, "--cursor", str(offset))
    assert rc1 == rc2 == 0
    assert f"{f}:30:9: cursor: prefix ({offset} characters) can be completed" in out1
    assert out1 == out2
    assert "whole file: ok" in out1


def test_cursor_after_error(tmp_path):
    f = tmp_path / "late.py"
    f.write_text("x = 1\ny = )\nz = 3\n", encoding="utf-8")
    rc, out, _ = run("check", f, "--cursor", "3:1")
    assert rc == 1
    assert "cannot be completed" in out and "late.py:2:5:" in out
    # cursor before the error: the prefix is fine, the whole file is not
    rc, out, _ = run("check", f, "--cursor", "2:3")
    assert rc == 0
    assert "can be completed" in out
    assert "whole file: invalid" in out and "late.py:2:5:" in out


def test_feed_chunk_mode_agrees():
    rc, out, err = run("check", EXAMPLES / "broken.py", "--feed-chunk", "7")
    assert rc == 1
    assert ":9:32: error" in out
    rc, out, err = run("check", EXAMPLES / "inventory.py", "--feed-chunk", "3")
    assert rc == 0, out + err


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"x = '\xff'\n", "not valid UTF-8"),
        (b"x = 1\n\x00\n", "NUL"),
    ],
)
def test_bad_input_exit_2(tmp_path, content, needle):
    f = tmp_path / "bad.py"
    f.write_bytes(content)
    rc, _out, err = run("check", f)
    assert rc == 2
    assert needle in err
    assert "Traceback" not in err


def test_bom_is_allowed(tmp_path):
    f = tmp_path / "bom.py"
    f.write_bytes(b"\xef\xbb\xbfx = 1\n")
    rc, out, err = run("check", f)
    assert rc == 0, out + err


@pytest.mark.parametrize(
    "args",
    [
        ["check"],
        [],
        ["check", "missing-file.py"],
        ["check", str(EXAMPLES / "inventory.py"), "--cursor", "abc"],
        ["check", str(EXAMPLES / "inventory.py"), "--cursor", "9999:1"],
        ["check", str(EXAMPLES / "inventory.py"), "--cursor", "1:999"],
        ["check", str(EXAMPLES / "inventory.py"), "--cursor", "99999999"],
    ],
)
def test_usage_errors_exit_2(args):
    rc, out, err = run(*args)
    assert rc == 2, out + err
    assert "Traceback" not in err


def test_help():
    rc, out, _ = run("--help")
    assert rc == 0 and "check" in out
    rc, out, _ = run("check", "--help")
    assert rc == 0 and "--cursor" in out


@pytest.mark.skipif(
    shutil.which("fimconstrain") is None and not (REPO / ".venv/bin/fimconstrain").exists(),
    reason="console script not installed",
)
def test_console_script():
    exe = shutil.which("fimconstrain") or str(REPO / ".venv/bin/fimconstrain")
    proc = subprocess.run([exe, "check", str(EXAMPLES / "inventory.py")], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_console_examples_match():
    """The `$ ...` examples of docs/command-line.md print what it says they print."""
    readme = (REPO / "docs" / "command-line.md").read_text(encoding="utf-8")
    block = readme[readme.index("```console") + len("```console") :]
    block = block[: block.index("```")]
    examples = re.split(r"^\$ ", block, flags=re.M)[1:]
    assert len(examples) >= 3
    for example in examples:
        cmd, _, expected = example.partition("\n")
        argv = cmd.split()
        assert argv[0].endswith("fimconstrain"), cmd
        _rc, out, err = run(*argv[1:])
        assert out.rstrip("\n") == expected.rstrip("\n"), f"{cmd}\n{out}{err}"


def test_readme_python_examples():
    import doctest

    result = doctest.testfile(str(REPO / "README.md"), module_relative=False, verbose=False)
    assert result.attempted >= 4 and result.failed == 0


# ---------------------------------------------------------------- --python-version


def test_python_version_decides_what_is_valid(tmp_path):
    """`type X = int` is a 3.12 statement: invalid as 3.11 (exit 1, with a note that it is valid
    from 3.12 on), valid as 3.12 and by default (the newest)."""
    f = tmp_path / "alias.py"
    f.write_text("type X = int\n", encoding="utf-8")
    rc, out, err = run("check", f, "--python-version", "3.11")
    assert rc == 1, out + err
    assert re.search(r"alias\.py:1:6: error", out), out
    assert "valid as Python 3.12 and newer; checked as 3.11" in out
    rc, out, err = run("check", f, "--python-version", "3.12")
    assert rc == 0 and "ok: valid program" in out, out + err
    rc, out, err = run("check", f)
    assert rc == 0, out + err
    # with a cursor the prefix sets the exit code; the whole file is still judged at 3.11
    rc, out, err = run("check", f, "--cursor", "1:1", "--python-version", "3.11")
    assert rc == 0 and "whole file: invalid" in out, out + err


def test_python_version_match_statement(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("match x:\n    case 1:\n        pass\n", encoding="utf-8")
    assert run("check", f, "--python-version", "3.9")[0] == 1
    assert run("check", f, "--python-version", "3.10")[0] == 0


@pytest.mark.parametrize("value", ["3.7", "3.15", "4.0", "abc", "3", "3.12.1", ""])
def test_bad_python_version_is_a_usage_error(value):
    rc, out, err = run("check", EXAMPLES / "inventory.py", "--python-version", value)
    assert rc == 2, out + err
    assert "--python-version" in err and "3.8 to 3.14" in err and "Traceback" not in err


def test_help_shows_the_python_version_default():
    rc, out, _ = run("check", "--help")
    assert rc == 0 and "--python-version" in out
    assert re.search(r"default:\s+3\.14", out), out


# ---------------------------------------------------------------- complete: arguments, stdin, imports


@pytest.mark.parametrize(
    "option, value, needle",
    [
        ("--top-k", "-1", "must be at least 1"),
        ("--max-new-tokens", "0", "must be at least 1"),
        ("--max-new-tokens", "-3", "must be at least 1"),
        ("--temperature", "-0.5", "must be 0 or more"),
        ("--temperature", "nan", "not a finite number"),
        ("--top-p", "0", "must be in (0, 1]"),
        ("--top-p", "1.5", "must be in (0, 1]"),
        ("--seed", "x", "not an integer"),
        ("--format", "bogus", "unknown FIM format 'bogus'"),  # before any model is loaded
    ],
)
def test_complete_rejects_bad_numbers_with_one_line(option, value, needle):
    rc, out, err = run("complete", EXAMPLES / "inventory.py", "--cursor", "30:9", option, value)
    assert rc == 2, out + err
    assert "Traceback" not in err and needle in err
    assert f"argument {option}" in err.splitlines()[-1]


@pytest.mark.parametrize(
    "content, needle",
    [(b"x = 1\ny = \n# \x00\n", "3:3: NUL character"), (b"x = '\xff'\n", "not valid UTF-8")],
    ids=["nul-after-cursor", "not-utf8"],
)
def test_complete_rejects_a_file_no_python_can_read(tmp_path, content, needle):
    path = tmp_path / "bad.py"
    path.write_bytes(content)
    rc, out, err = run("complete", path, "--cursor", "2:5")
    assert rc == 2, out + err
    assert needle in err and "Traceback" not in err


def _modules_after(argv: list[str]) -> set[str]:
    """The modules imported by running the CLI with ``argv`` (in a fresh interpreter)."""
    code = (
        "import sys, json\nfrom fimconstrain.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, timeout=300)
    import json

    return set(json.loads(proc.stdout.decode().strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["complete", "--help"], ["check", str(EXAMPLES / "inventory.py")]],
    ids=["help", "complete-help", "check"],
)
def test_help_and_check_never_import_torch(argv):
    heavy = {"torch", "transformers", "tokenizers", "numpy"}
    assert not heavy & _modules_after(argv)


def test_complete_help_shows_defaults():
    rc, out, _ = run("complete", "--help")
    assert rc == 0
    flat = " ".join(out.split())
    assert "(default: 64)" in flat and "(default: constrained)" in flat and "(default: auto)" in flat


@pytest.mark.slow
def test_complete_reads_stdin_and_reports_where_the_time_went():
    source = (EXAMPLES / "inventory.py").read_bytes()
    rc, _out, err = run("complete", "-", "--cursor", "30:9", "--max-new-tokens", "8", stdin=source)
    assert rc in (0, 1), err
    assert "# stopped: " in err and re.search(
        r"# time: import [\d.]+ s, model load [\d.]+ s \((transformers|llama)\), generate", err
    )


def test_the_docs_explain_every_stopped_value():
    from fimconstrain.decoding.loop.result import StopReason

    readme = (REPO / "docs" / "command-line.md").read_text(encoding="utf-8")
    for reason in StopReason:
        assert f"- `{reason.value}`:" in readme, reason


# ---------------------------------------------------------------- the program around the commands


def test_cli_module_runs_as_a_program_without_torch():
    """`python -X importtime -m fimconstrain.cli --help` prints the help, and no heavy module is
    among the imports it lists."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fimconstrain.cli", "--help"],
        capture_output=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 0 and proc.stdout.decode().startswith("usage: fimconstrain")
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines()}
    assert not {name.split(".")[0] for name in imported} & {"torch", "transformers", "tokenizers", "numpy"}


@pytest.mark.parametrize(
    "argv",
    [["report", "missing.jsonl", "--out-dir", "{tmp}"], ["eval", "missing.jsonl", "--out", "{tmp}/e.jsonl"]],
    ids=["report", "eval"],
)
def test_subcommand_with_a_missing_file_is_one_line(tmp_path, argv):
    rc, out, err = run(*(arg.format(tmp=tmp_path) for arg in argv))
    assert rc == 2, out + err
    assert err == f"fimconstrain {argv[0]}: missing.jsonl: No such file or directory\n"


def test_ctrl_c_in_a_subcommand_is_one_line(monkeypatch, capsys):
    import fimconstrain.command_line.complete as complete_command
    from fimconstrain import cli

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(complete_command, "main_complete", interrupted)
    try:
        rc = cli.main(["complete", "x.py", "--cursor", "1:1"])
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped from the command line")
    assert rc == 130
    assert capsys.readouterr().err == "fimconstrain complete: interrupted\n"


def test_only_a_program_run_skips_the_last_collection():
    """Run as the program (no argv), the CLI freezes the collector's objects so that exit does not
    sweep torch's; called as a function, it leaves the caller's collector alone."""
    code = (
        "import gc, sys\nfrom fimconstrain.cli import main\n"
        f"main(['check', {str(EXAMPLES / 'inventory.py')!r}])\nprint('frozen', gc.get_freeze_count() > 0)\n"
        f"sys.argv = ['fimconstrain', 'check', {str(EXAMPLES / 'inventory.py')!r}]\n"
        "main()\nprint('frozen', gc.get_freeze_count() > 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, timeout=300)
    frozen = re.findall(r"^frozen (\w+)$", proc.stdout.decode(), flags=re.M)
    assert frozen == ["False", "True"], proc.stdout.decode() + proc.stderr.decode()


@pytest.mark.slow
def test_complete_loads_the_model_once():
    code = (
        "import fimconstrain.decoding.models.loading as models\nfrom fimconstrain.cli import main\n"
        "calls, load = [], models.load_model\n"
        "def counted(*args, **kwargs):\n    calls.append(args)\n    return load(*args, **kwargs)\n"
        "models.load_model = counted\n"
        f"rc = main(['complete', {str(EXAMPLES / 'inventory.py')!r}, '--cursor', '30:9', "
        "'--max-new-tokens', '4'])\nprint('loads', len(calls), 'rc', rc)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=REPO, timeout=300)
    assert proc.stdout.decode().splitlines()[-1] in ("loads 1 rc 0", "loads 1 rc 1"), proc.stderr.decode()
