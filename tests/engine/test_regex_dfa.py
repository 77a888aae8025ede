"""Tests for fimconstrain.engine.automata.regex_dfa: the combined lazy DFA is checked against Python's
``re.fullmatch``."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fimconstrain.engine.automata.regex_dfa import DEAD, LexerDFA
from fimconstrain.engine.errors import GrammarError

_ESC = r"\\[\s\S]"  # a backslash escape, newline included
_SQ_BODY = r"(?:[^'\\]|" + _ESC + ")"
_DQ_BODY = r'(?:[^"\\]|' + _ESC + ")"

# (pattern, lark-style flags): terminals typical of Python / JSON lexers, all lookahead-free.
LEXER_TERMINALS = [
    (r"[^\W\d]\w*", ""),  # NAME
    (r"0[xX](?:_?[0-9a-fA-F])+", ""),  # HEX_NUMBER
    (r"0[oO](?:_?[0-7])+|0[bB](?:_?[01])+", ""),  # OCT / BIN
    (r"(?:[1-9](?:_?\d)*|0(?:_?0)*)", ""),  # DEC_NUMBER
    (
        r"(?:\d(?:_?\d)*\.(?:\d(?:_?\d)*)?|\.\d(?:_?\d)*)(?:[eE][-+]?\d(?:_?\d)*)?|\d(?:_?\d)*[eE][-+]?\d(?:_?\d)*",
        "",
    ),
    (r"(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][-+]?\d(?:_?\d)*)?[jJ]", ""),  # IMAG_NUMBER
    (r"[rRbBuUfF]{0,2}'(?:[^'\\\n]|\\.|\\\n)*'", ""),  # short single-quoted string
    (r'[rRbBuUfF]{0,2}"(?:[^"\\\n]|\\.|\\\n)*"', ""),  # short double-quoted string
    (r"[rRbBuUfF]{0,2}'''(?:" + _SQ_BODY + r"|'" + _SQ_BODY + r"|''" + _SQ_BODY + r")*'''", ""),
    (r'[rRbBuUfF]{0,2}"""(?:' + _DQ_BODY + r'|"' + _DQ_BODY + r'|""' + _DQ_BODY + r')*"""', ""),
    (r"\*\*=?|//=?|<<=?|>>=?|->|:=|\.\.\.|[-+*/%@&|^<>=!]=|[-+*/%@&|^~<>=.,:;()\[\]{}]", ""),  # operators
    (r"#[^\r\n]*", ""),  # COMMENT
    (r"[ \t\f]+", ""),  # WS
    (r"(?:\r?\n[\t ]*)+", ""),  # NEWLINE
    (r"\\[\t \f]*\r?\n", ""),  # line continuation
    (r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"', ""),  # JSON string
    (r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?", ""),  # JSON number
    (r"true|false|null", ""),
    (r"select|from|where", "i"),  # case-insensitive keywords
    (r"a.b", "s"),  # dotall
    (r" x{2,4} y* \# not a comment", "x"),  # verbose
    (r"(?:ab|a)*c?", ""),
    (r"a{3,6}?b{2}", ""),
    (r"(?i:x[a-c]+)Y", ""),
]
PATTERNS = [p for p, _ in LEXER_TERMINALS]
FLAGS = [f for _, f in LEXER_TERMINALS]
_RE_FLAGS = {"i": re.I, "s": re.S, "x": re.X, "m": re.M}
COMPILED = [re.compile(p, sum(_RE_FLAGS[c] for c in f)) for p, f in LEXER_TERMINALS]
DFA = LexerDFA(PATTERNS, FLAGS)

ASCII_ALPHABET = "abcxyzXYZABCjJeEoO_0123789.+-'\"\\\n\r\t #rRbBuUfF=*/<>!{}[]()tnl:;,%@&|^~ "


def expected_masks(text):
    """Bitmask of the patterns ``re`` fully matches on ``text``."""
    return sum(1 << i for i, rx in enumerate(COMPILED) if rx.fullmatch(text))


def assert_agrees_on_prefixes(text):
    """Walk ``text`` through the DFA, checking accept/live against ``re`` at every prefix."""
    state = DFA.start
    for end in range(len(text) + 1):
        if end:
            state = DFA.step(state, text[end - 1])
        prefix = text[:end]
        assert DFA.accept[state] == expected_masks(prefix), prefix
        assert DFA.accept[state] & ~DFA.live[state] == 0
        for i, rx in enumerate(COMPILED):
            if DFA.live[state] >> i & 1:
                tail = DFA.shortest_completion(state, 1 << i)
                assert tail is not None and rx.fullmatch(prefix + tail), (PATTERNS[i], prefix, tail)
        assert state == DFA.run(prefix)
    return state


@pytest.mark.parametrize(
    "text",
    [
        "",
        "foo",
        "_x1",
        "1_000",
        "1__0",
        "0x_ff",
        "0o17",
        "0b102",
        "3.14",
        "1e-5",
        ".5j",
        "10J",
        "1_0.0_1e+1_0",
        "'abc'",
        "r'a\\'b'",
        "b'\\n'",
        "'a\nb'",
        "'''x''y'''",
        "'''a''''",
        "'''a\\''''",
        '"""q"""',
        'rb"x"',
        "**=",
        "//",
        "->",
        ":=",
        "...",
        "!=",
        "!",
        "# hi",
        "#",
        "# a\nb",
        "  \t",
        "\n  \n\t",
        "\\\n",
        '"\\u00e9"',
        '"\\u00g9"',
        '"a\tb"',
        "-0.5e10",
        "01",
        "-",
        "null",
        "nul",
        "SeLeCt",
        "FROM",
        "a\nb",
        "axb",
        "xxy",
        "xxxxxy",
        "xy",
        "ababac",
        "aaab",
        "aaaaabb",
        "aaabb",
        "xABcY",
        "xaby",
    ],
)
def test_matches_re_on_examples(text):
    assert_agrees_on_prefixes(text)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=ASCII_ALPHABET, max_size=14))
def test_matches_re_on_random_ascii(text):
    assert_agrees_on_prefixes(text)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(range(len(PATTERNS))),
    st.text(alphabet=ASCII_ALPHABET, max_size=8),
    st.text(alphabet=ASCII_ALPHABET, max_size=8),
)
def test_dead_patterns_never_match_again(index, prefix, suffix):
    state = DFA.run(prefix)
    if not DFA.live[state] >> index & 1:
        assert COMPILED[index].fullmatch(prefix + suffix) is None


def test_single_pattern_dfas_agree_with_combined():
    texts = ["foo", "0x1f", "'''a'''", "# c", "1.5e3", "true", "abac"]
    for i, (pattern, flags) in enumerate(LEXER_TERMINALS):
        single = LexerDFA([pattern], [flags])
        for text in texts:
            assert single.accept[single.run(text)] == (DFA.accept[DFA.run(text)] >> i & 1)


def test_accept_and_live_bitmasks():
    dfa = LexerDFA(["if", r"[a-z]+", r"\d+", "i"])
    s = dfa.run("i")
    assert dfa.accept[s] == 0b1010 and dfa.live[s] == 0b1011
    s = dfa.step(s, "f")
    assert dfa.accept[s] == 0b0011 and dfa.live[s] == 0b0011
    s = dfa.step(s, "x")
    assert dfa.accept[s] == 0b0010 and dfa.live[s] == 0b0010
    assert dfa.accept[dfa.start] == 0 and dfa.live[dfa.start] == 0b1111
    assert dfa.run("if9") == DEAD


def test_states_are_interned_and_cached():
    dfa = LexerDFA([r"(?:ab)*", r"a(?:ba)*b"])
    s1 = dfa.run("ab")
    s2 = dfa.run("abab")
    assert s1 == s2
    assert dfa.trans[dfa.start]["a"] == dfa.step(dfa.start, "a")
    assert dfa.run("b", dfa.run("a")) == s1


def test_the_lexers_tables_agree_with_the_transitions():
    """``final`` and ``ascii_trans`` (what the lexer reads per character) say what
    ``accept`` and ``trans`` say, for every state and every character stepped so far."""
    dfa = LexerDFA(PATTERNS, FLAGS)
    for text in ("x = f(a, 'b') + 3.5e-2  # é\n", "déjà vu != 0x1F", "\t\tif y:\r\n"):
        state = dfa.start
        for ch in text:
            state = dfa.step(state, ch) if state != DEAD else DEAD
    assert len(dfa.final) == len(dfa.accept) == len(dfa.ascii_trans) == len(dfa.trans)
    assert dfa.final == [mask != 0 for mask in dfa.accept]
    for state, row in enumerate(dfa.trans):
        expected = [row.get(chr(code), -1) for code in range(128)]
        assert dfa.ascii_trans[state] == expected
    assert any(code >= 0 for row in dfa.ascii_trans for code in row)


def test_dead_state():
    dfa = LexerDFA(["abc"])
    assert DEAD == 0
    assert dfa.accept[DEAD] == 0 and dfa.live[DEAD] == 0
    assert dfa.step(DEAD, "a") == DEAD and dfa.trans[DEAD] == {"a": DEAD}
    assert dfa.run("abd") == DEAD and dfa.run("x", DEAD) == DEAD
    assert dfa.shortest_completion(DEAD) is None
    assert dfa.start != DEAD


def test_restrict():
    dfa = LexerDFA(["if", r"[a-z]+", r"\d+"])
    only_name = dfa.restrict(dfa.start, 0b010)
    assert dfa.live[only_name] == 0b010
    assert dfa.accept[dfa.run("if", only_name)] == 0b010
    assert dfa.run("12", only_name) == DEAD
    assert dfa.restrict(dfa.start, 0b010) == only_name
    assert dfa.restrict(dfa.start, -1) == dfa.start
    assert dfa.restrict(dfa.start, 0) == DEAD
    assert dfa.restrict(dfa.run("9"), 0b011) == DEAD
    mid = dfa.run("i")
    assert dfa.live[dfa.restrict(mid, 0b001)] == 0b001


def test_shortest_completion():
    dfa = LexerDFA([r"'(?:[^'\\]|\\.)*'", r"abc", r"\d{3}", r"[^\W\d]\w*", r"x+", r"[^\s\S]"])
    assert dfa.shortest_completion(dfa.start, 1 << 0) == "''"
    assert dfa.shortest_completion(dfa.run("'a\\"), 1 << 0) == " '"
    assert dfa.shortest_completion(dfa.start, 1 << 1) == "abc"
    assert dfa.shortest_completion(dfa.run("ab"), 1 << 1) == "c"
    assert dfa.shortest_completion(dfa.start, 1 << 2) == "000"
    assert dfa.shortest_completion(dfa.start, 1 << 3) == "A"
    assert dfa.shortest_completion(dfa.run("xx")) == ""
    assert dfa.shortest_completion(dfa.run("xx"), 1 << 1) is None
    assert dfa.shortest_completion(dfa.start, 1 << 5) is None
    assert len(dfa.shortest_completion(dfa.start)) == 1


def test_empty_class_is_never_live():
    dfa = LexerDFA([r"a[^\s\S]", "ab"])
    s = dfa.run("a")
    assert dfa.live[s] == 0b10


def test_identifier_word_class_on_non_ascii():
    dfa = LexerDFA([r"[^\W\d]\w*", r"\w+", r"\d+"])
    name = 1
    for text in ["ä", "𝔘", "a\u0301", "ä\u0301x", "Ωmega_2", "变量"]:
        assert dfa.accept[dfa.run(text)] & name, text
    assert dfa.accept[dfa.run("\u0301")] & 0b10  # a combining mark is a \w char
    assert not dfa.accept[dfa.run("9a")] & name
    assert dfa.accept[dfa.run("٣")] == 0b110  # Arabic-Indic digit: \d, so not a NAME start
    assert dfa.run("a-") == DEAD


def test_unicode_categories_and_ignorecase():
    dfa = LexerDFA([r"\s+", r"\S+", r"\D", r"\W"])
    assert dfa.accept[dfa.run("\u3000\u2028")] == 0b1
    assert dfa.accept[dfa.run("x")] == 0b110
    ascii_words = LexerDFA([r"(?a)\w+", r"\w+"])
    assert ascii_words.accept[ascii_words.run("ab_1")] == 0b11
    assert ascii_words.accept[ascii_words.run("ä")] == 0b10
    ci = LexerDFA([r"stra[ß]e", "k", r"[^a]"], ["i", "i", "i"])
    assert ci.accept[ci.run("STRAßE")] == 1
    assert ci.accept[ci.run("\u212a")] == 0b110  # Kelvin sign folds to k
    assert ci.accept[ci.run("A")] == 0


def test_large_counted_repeats_stay_small():
    dfa = LexerDFA([r"a{1,50}", r"(?:b{1,20}c){2,30}", r"x{100}"])
    assert dfa.accept[dfa.run("a" * 50)] == 1
    assert dfa.run("a" * 51) == DEAD
    assert dfa.accept[dfa.run("bbc" * 30)] == 0b10
    assert dfa.accept[dfa.run("x" * 100)] == 0b100
    assert dfa.shortest_completion(dfa.start, 0b100) == "x" * 100


def test_lazy_repeats_and_inline_flags():
    dfa = LexerDFA([r"a+?b*?", r"(?s:.)", r"(?i)ab(?-i:c)", "."])
    assert dfa.accept[dfa.run("aab")] == 1
    assert dfa.accept[dfa.run("\n")] == 0b0010
    assert dfa.accept[dfa.run("ABc")] == 0b0100
    assert dfa.run("ABC") == DEAD


@pytest.mark.parametrize(
    "pattern, construct",
    [
        ("a(?=b)", "ASSERT"),
        ("(?!a)b", "ASSERT_NOT"),
        ("(?<=a)b", "ASSERT"),
        ("^a", "AT"),
        ("a$", "AT"),
        (r"\bfoo", "AT"),
        (r"(a)\1", "GROUPREF"),
        (r"(a)?(?(1)b|c)", "GROUPREF_EXISTS"),
    ],
)
def test_unsupported_constructs_raise(pattern, construct):
    with pytest.raises(GrammarError, match=re.escape(repr(pattern)) + ".*" + construct):
        LexerDFA(["ok", pattern])


def test_bad_pattern_or_flag_raises():
    with pytest.raises(GrammarError, match="not a valid regex"):
        LexerDFA(["(ab"])
    with pytest.raises(GrammarError, match="flag"):
        LexerDFA(["ab"], ["q"])
    with pytest.raises(GrammarError):
        LexerDFA(["ab", "cd"], ["i"])
