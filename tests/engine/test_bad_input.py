"""Bad and extreme input: a clear exception or a correct verdict, never a crash or a hang.

Every test here runs under the conftest time limit, so a hang fails instead of
stalling the run.
"""

from __future__ import annotations

import pytest
from conftest import ast_ok, fc, uncompletable


def _errors():
    from fimconstrain.engine import errors

    return errors


def _verdict_or_input_error(build):
    """Run ``build()`` -> checker-or-None; return 'input-error', 'rejected' or the is_complete() bool."""
    errors = _errors()
    try:
        c = build()
    except errors.InputError:
        return "input-error"
    except errors.UncompletableError:
        return "rejected"
    if c is None:
        return "rejected"
    return bool(c.is_complete())


# ---------------------------------------------------------------- bad text


@pytest.mark.parametrize("text", ["x = 1\0\n", "\0", "x = '\0'\n", "# \0\n"], ids=repr)
def test_nul_is_input_error_or_rejected(text):
    assert not ast_ok(text)
    out = _verdict_or_input_error(lambda: fc().fim_checker("", "").feed(text))
    assert out in ("input-error", "rejected", False)
    out = _verdict_or_input_error(lambda: fc().fim_checker(text, ""))
    assert out in ("input-error", "rejected", False)


@pytest.mark.parametrize("text", ["x = '\ud800'\n", "# \udfff\n", "\ud83d"], ids=ascii)
def test_lone_surrogates(text):
    assert not ast_ok(text)  # cannot be encoded, so never a real source file
    out = _verdict_or_input_error(lambda: fc().fim_checker("", "").feed(text))
    assert out in ("input-error", "rejected", False)
    out = _verdict_or_input_error(lambda: fc().fim_checker(text, ""))
    assert out in ("input-error", "rejected", False)


@pytest.mark.parametrize("bad", [b"x = 1\n", None, 42, ["x"]], ids=repr)
def test_wrong_type_is_input_error(bad):
    errors = _errors()
    with pytest.raises(errors.InputError):
        fc().fim_checker(bad, "")
    with pytest.raises(errors.InputError):
        fc().fim_checker("", "").feed(bad)


def test_error_types_are_exported():
    errors = _errors()
    for name in ("FimConstrainError", "GrammarError", "InputError", "UncompletableError"):
        assert issubclass(getattr(errors, name), errors.FimConstrainError)
        assert getattr(fc(), name) is getattr(errors, name)


def test_uncompletable_prefix_has_offset():
    with pytest.raises(uncompletable()) as info:
        fc().fim_checker("x = 1\ny = = 2\n", "")
    off = info.value.offset
    assert off is None or 0 <= off <= len("x = 1\ny = = 2\n")


def test_unknown_language():
    with pytest.raises(_errors().FimConstrainError):
        fc().fim_checker("x", "", language="cobol-85")


# ---------------------------------------------------------------- size and depth


def _big_program(target_chars: int) -> str:
    lines = []
    n = 0
    i = 0
    while n < target_chars:
        line = (
            f"value_{i} = {i} * 3 + other_{i % 97}\n",
            f"if value_{i}:\n    total += value_{i}\n",
            f"items.append((value_{i}, 'label {i}'))\n",
        )[i % 3]
        lines.append(line)
        n += len(line)
        i += 1
    return "".join(lines)


@pytest.mark.slow
@pytest.mark.time_limit(900)
def test_ten_megabyte_file():
    """10 MB of simple statements, given as one prefix, then fed a little more (slow: tens of seconds)."""
    text = _big_program(10_000_000)
    assert len(text) >= 10_000_000
    c = fc().fim_checker(text, "")
    assert c.is_complete()
    d = c.feed("x = (")
    assert d is not None and not d.is_complete()
    assert d.feed("1)\n").is_complete()
    assert c.feed(")") is None


def test_one_megabyte_fed_in_chunks():
    text = _big_program(300_000)
    c = fc().fim_checker("", "")
    for i in range(0, len(text), 4096):
        c = c.feed(text[i : i + 4096])
        assert c is not None, i
    assert c.is_complete()


@pytest.mark.parametrize("depth", [50, 199, 500])
def test_nested_brackets(depth):
    """Deep nesting: no RecursionError. CPython's parser stops at 200 levels ('too many nested
    parentheses'); beyond that the engine may accept or reject, but must not crash."""
    src = "x = " + "(" * depth + "1" + ")" * depth + "\n"
    ours_feed = _verdict_or_input_error(lambda: fc().fim_checker("", "").feed(src))
    ours_prefix = _verdict_or_input_error(lambda: fc().fim_checker(src, ""))
    if ast_ok(src):
        assert ours_feed is True and ours_prefix is True
    else:
        assert ours_feed in (True, False, "rejected") and ours_prefix == ours_feed
    # one closing bracket short: never complete; one too many: rejected
    short = "x = " + "(" * depth + "1" + ")" * (depth - 1) + "\n"
    c = fc().fim_checker("", "").feed(short)
    assert c is None or not c.is_complete()
    extra = "x = " + "(" * depth + "1" + ")" * (depth + 1) + "\n"
    assert fc().fim_checker("", "").feed(extra) is None


def test_nested_mixed_brackets_char_by_char():
    depth = 150
    opens = "([{" * (depth // 3)
    closes = "".join({"(": ")", "[": "]", "{": "}"}[ch] for ch in reversed(opens))
    src = "x = " + opens + "1" + closes + "\n"
    assert ast_ok(src)
    c = fc().fim_checker("", "")
    for ch in src:
        c = c.feed(ch)
        assert c is not None
    assert c.is_complete()
    wrong = "x = " + opens + "1" + closes[:-1] + ("]" if closes[-1] != "]" else ")")
    assert fc().fim_checker("", "").feed(wrong) is None


def test_five_thousand_line_expression():
    body = "".join(f"    {i} + value_{i % 10},\n" for i in range(5000))
    src = "x = [\n" + body + "]\n"
    assert ast_ok(src)
    assert fc().fim_checker("", "").feed(src).is_complete()
    assert fc().fim_checker(src, "").is_complete()
    # unfinished: every line fine, but the list is never closed
    c = fc().fim_checker("", "").feed("x = [\n" + body)
    assert c is not None and not c.is_complete()
    # broken in the last line
    assert fc().fim_checker("", "").feed("x = [\n" + body + "    1 +* 2,\n]\n") is None


def test_five_thousand_line_call_chain():
    # valid by the grammar; ast.parse itself hits its recursion limit here, so no oracle
    src = "y = (x\n" + "".join(f"     .method_{i}(arg, {i})\n" for i in range(5000)) + ")\n"
    assert fc().fim_checker(src, "").is_complete()
    assert fc().fim_checker(src[:-3], "").feed("\n     .(") is None


def test_five_thousand_argument_call():
    src = "f(\n" + "".join(f"    arg_{i},\n" for i in range(5000)) + ")\n"
    assert ast_ok(src)
    assert fc().fim_checker("", "").feed(src).is_complete()
    assert fc().fim_checker(src, "").is_complete()


def test_long_line():
    src = "x = " + " + ".join(f"v{i}" for i in range(20_000)) + "\n"
    c = fc().fim_checker(src, "")
    assert c.is_complete()  # ast.parse itself overflows its C stack on this one, so no oracle here


def test_deep_indentation():
    lines = []
    for i in range(90):  # CPython's limit is 100 indentation levels
        lines.append("    " * i + f"if x{i}:\n")
    lines.append("    " * 90 + "pass\n")
    src = "".join(lines)
    assert ast_ok(src)
    assert fc().fim_checker(src, "").is_complete()
    assert fc().fim_checker("", "").feed(src).is_complete()
