"""A second language through the same API: JSON (``grammars/json.lark`` with ``PlainLayer``),
checked against ``json.loads``; and a third, registered from a grammar file and a layer only."""

from __future__ import annotations

import itertools
import json
import random
import re

import pytest

from fimconstrain import UncompletableError, fim_checker
from fimconstrain.engine import checker as checker_module
from fimconstrain.engine.checker import get_layer, register_language
from fimconstrain.engine.errors import GrammarError
from fimconstrain.engine.layers.base_layer import PlainLayer
from fimconstrain.engine.rejection import first_rejection


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def json_ok(text: str) -> bool:
    """The oracle: RFC 8259 JSON as ``json.loads`` reads it (NaN and Infinity refused)."""
    try:
        json.loads(text, parse_constant=_no_constants)
    except ValueError:
        return False
    return True


def complete(prefix: str, middle: str, suffix: str, language: str = "json", rng=None) -> bool:
    """Whether the checker calls ``prefix + middle + suffix`` a complete program (the middle
    fed in random chunks when ``rng`` is given)."""
    try:
        checker = fim_checker(prefix, suffix, language=language)
    except UncompletableError:
        return False
    pieces = [middle]
    if rng is not None and len(middle) > 1:
        cuts = sorted(rng.sample(range(1, len(middle)), k=min(len(middle) - 1, rng.randint(0, 2))))
        bounds = [0, *cuts, len(middle)]
        pieces = [middle[a:b] for a, b in itertools.pairwise(bounds)]
    for piece in pieces:
        checker = checker.feed(piece)
        if checker is None:
            return False
    return checker.is_complete()


# ------------------------------------------------------------------ generated documents

_WS = ["", "", "", " ", "\n", "\t", "  ", "\n  ", "\r\n"]
_STRING_PIECES = [
    "a",
    "b",
    "Z",
    "0",
    " ",
    "é",
    "😀",
    "\\n",
    '\\"',
    "\\\\",
    "\\/",
    "\\u00e9",
    "\\uD83D",
    "\\t",
    "x",
]
_NUMBERS = ["0", "-0", "7", "-12", "3.25", "0.5", "1e10", "2E-3", "-4.5e+2", "10"]


def _ws(rng: random.Random) -> str:
    return rng.choice(_WS)


def _value(rng: random.Random, depth: int) -> str:
    kind = rng.choice(
        ["number", "string", "literal", "array", "object"] if depth < 3 else ["number", "string"]
    )
    if kind == "number":
        return rng.choice(_NUMBERS)
    if kind == "string":
        return '"' + "".join(rng.choice(_STRING_PIECES) for _ in range(rng.randint(0, 3))) + '"'
    if kind == "literal":
        return rng.choice(["true", "false", "null"])
    items = [
        (_value(rng, depth + 1) if kind == "array" else f'"{rng.choice("abk")}"{_ws(rng)}:{_ws(rng)}')
        + (_value(rng, depth + 1) if kind == "object" else "")
        for _ in range(rng.randint(0, 3))
    ]
    body = ",".join(_ws(rng) + item + _ws(rng) for item in items) or _ws(rng)
    return ("[" if kind == "array" else "{") + body + ("]" if kind == "array" else "}")


def document(rng: random.Random) -> str:
    return _ws(rng) + _value(rng, 0) + _ws(rng)


_NOISE = list('{}[],:"\\0123456789.eE+-truefalsn ') + ["\t", "\x01", "x", "NaN", "'"]


def mutate(rng: random.Random, text: str) -> str:
    """``text`` with one to three random characters deleted, inserted or replaced."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(text))
        op = rng.choice(["delete", "insert", "replace"]) if text else "insert"
        if op == "delete" and at < len(text):
            text = text[:at] + text[at + 1 :]
        elif op == "replace" and at < len(text):
            text = text[:at] + rng.choice(_NOISE) + text[at + 1 :]
        else:
            text = text[:at] + rng.choice(_NOISE) + text[at:]
    return text


def _corpus(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [document(rng) for _ in range(n)]


def test_generated_documents_are_json():
    """The generator's documents are valid (so the tests below test the checker)."""
    docs = _corpus(1, 300)
    assert all(json_ok(doc) for doc in docs)
    assert len(set(docs)) > 150


def test_whole_documents_agree_with_json_loads():
    rng = random.Random(2)
    docs = _corpus(2, 200)
    texts = docs + [mutate(rng, doc) for doc in docs]
    agree = {True: 0, False: 0}
    for text in texts:
        expected = json_ok(text)
        assert complete("", text, "", rng=rng) == expected, text
        agree[expected] += 1
    assert agree[True] >= 200 and agree[False] >= 100  # both verdicts are exercised


def test_every_prefix_of_a_document_is_viable():
    """Valid documents are never rejected part-way, fed one character at a time."""
    for doc in _corpus(3, 60):
        checker = fim_checker("", language="json")
        for i, ch in enumerate(doc):
            checker = checker.feed(ch)
            assert checker is not None, (doc, i)
            assert checker.is_complete() == json_ok(doc[: i + 1]), (doc, i)


def test_accepted_prefixes_have_a_finish():
    """What the checker lets through can still become JSON: the longest accepted prefix of a
    broken document has a finish, and ``json.loads`` takes the finished text."""
    rng = random.Random(4)
    found = 0
    docs = _corpus(4, 120)
    for doc in docs:
        text = mutate(rng, doc)
        start = fim_checker("", language="json")
        offset, checker = first_rejection(start, text)
        accepted = text if offset is None else text[:offset]
        finish = checker.shortest_finish()
        if finish is not None:
            found += 1
            assert json_ok(accepted + finish), (accepted, finish)
    assert found >= 0.9 * len(docs)


def test_finishes_before_a_suffix_are_json():
    """With a suffix the finish search also bridges into it, with no JSON of its own (the
    layer's default vocabulary): what it returns makes ``json.loads`` take the whole file."""
    rng = random.Random(8)
    found = tried = 0
    for doc in _corpus(8, 200):
        i = rng.randrange(len(doc))
        j = rng.randint(i, len(doc))
        prefix, suffix = doc[:i], doc[j:]
        try:
            start = fim_checker(prefix, suffix, language="json")
        except UncompletableError:
            continue
        text = mutate(rng, doc[i:j])
        offset, checker = first_rejection(start, text)
        if checker.is_complete():
            continue
        middle = text if offset is None else text[:offset]
        tried += 1
        finish = checker.shortest_finish()
        if finish is not None:
            found += 1
            assert json_ok(prefix + middle + finish + suffix), (prefix, middle, finish, suffix)
    assert tried >= 50 and found >= 0.4 * tried, (found, tried)  # measured: 52 of 82


def test_all_cuts_of_small_documents():
    """Every (prefix, middle, suffix) cut of small documents: the true middle is accepted and
    completes; a broken middle is judged as ``json.loads`` judges the whole."""
    rng = random.Random(5)
    docs = [doc for doc in _corpus(5, 2000) if 2 <= len(doc) <= 24][:200]
    assert len(docs) == 200
    cuts = 0
    for doc in docs:
        for i, j in itertools.combinations_with_replacement(range(len(doc) + 1), 2):
            prefix, middle, suffix = doc[:i], doc[i:j], doc[j:]
            checker = fim_checker(prefix, suffix, language="json")  # joinable: must not raise
            after = checker.feed(middle)
            assert after is not None and after.is_complete(), (prefix, middle, suffix)
            broken = mutate(rng, middle)
            assert complete(prefix, broken, suffix, rng=rng) == json_ok(prefix + broken + suffix), (
                prefix,
                broken,
                suffix,
            )
            cuts += 1
    assert cuts > 10_000


def test_json_errors_and_line_breaks():
    with pytest.raises(UncompletableError) as error:
        fim_checker("[1,,", "]", language="json")
    assert error.value.offset == 3
    assert not fim_checker("[1, ", "]]", language="json").feed("2").is_complete()
    # a document that ends in a line break: the suffix "\n" is no error (it was refuted once)
    assert fim_checker("null", "\r\n", language="json").is_complete()
    assert fim_checker("[1", "]\n\n", language="json").feed(", 2").is_complete()
    assert fim_checker('{"a": tru', "", language="json").feed("x") is None
    assert fim_checker('{"a": tru', "}", language="json").feed("e").is_complete()


# ------------------------------------------------------------------ a third language

ARITH = r"""
start: sum
sum: sum "+" product | product
product: product "*" atom | atom
atom: NUMBER | "(" sum ")"
NUMBER: /[0-9]+/
%ignore " "
"""


def arith_ok(text: str) -> bool:
    """A recursive-descent oracle for the grammar above."""
    tokens = [t for t in re.findall(r"[0-9]+| |.", text, re.S) if t != " "]
    at = 0

    def atom() -> bool:
        nonlocal at
        if at < len(tokens) and tokens[at].isdigit():
            at += 1
            return True
        if at < len(tokens) and tokens[at] == "(":
            at += 1
            if not chain("+", product_chain):
                return False
            if at < len(tokens) and tokens[at] == ")":
                at += 1
                return True
        return False

    def product_chain() -> bool:
        return chain("*", atom)

    def chain(op: str, part) -> bool:
        nonlocal at
        if not part():
            return False
        while at < len(tokens) and tokens[at] == op:
            at += 1
            if not part():
                return False
        return True

    return chain("+", product_chain) and at == len(tokens)


def test_a_language_needs_only_a_grammar_and_a_layer(tmp_path, monkeypatch):
    monkeypatch.setattr(checker_module, "LANGUAGES", dict(checker_module.LANGUAGES))
    with pytest.raises(GrammarError):
        fim_checker("", language="arith")
    grammar = tmp_path / "arith.lark"
    grammar.write_text(ARITH, "utf-8")
    register_language("arith", grammar, "start", PlainLayer)
    assert isinstance(get_layer("arith"), PlainLayer)
    assert get_layer("arith").version is None

    # every text over the alphabet up to 6 characters: complete exactly when the oracle says so
    checked = 0
    start = fim_checker("", language="arith")
    for n in range(7):
        for chars in itertools.product("1+*() ", repeat=n):
            text = "".join(chars)
            after = start.feed(text)
            assert (after is not None and after.is_complete()) == arith_ok(text), text
            checked += 1
    assert checked > 50_000

    # fill in the middle, through the same API
    rng = random.Random(6)
    for expr in ["1+2*3", "(1+2)*3", "((4))", "12 * (3 + 45)", "1*(2+(3*4))+5"]:
        assert arith_ok(expr)
        for i, j in itertools.combinations_with_replacement(range(len(expr) + 1), 2):
            prefix, middle, suffix = expr[:i], expr[i:j], expr[j:]
            assert complete(prefix, middle, suffix, language="arith", rng=rng), (prefix, middle, suffix)
            broken = mutate(rng, middle)
            whole = prefix + broken + suffix
            assert complete(prefix, broken, suffix, language="arith") == arith_ok(whole), whole
    with pytest.raises(UncompletableError) as error:
        fim_checker("(1+*", "", language="arith")
    assert error.value.offset == 3

    # the budget finish, from the grammar alone
    for prefix in ["(", "1+", "((1*", "(1+2)*(3"]:
        finish = fim_checker(prefix, "", language="arith").shortest_finish()
        assert finish is not None and arith_ok(prefix + finish), (prefix, finish)
