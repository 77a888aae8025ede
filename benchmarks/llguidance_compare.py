"""The mask store side by side with llguidance on the prefix-only task: same tokenizer, same
(adapted) grammar, masks at every step of real files.

    pip install llguidance
    python benchmarks/llguidance_compare.py                 # 49,152-token BPE, 6 stdlib files
    python benchmarks/llguidance_compare.py --vocab-size 8192 --limit 3
    python benchmarks/llguidance_compare.py --model qwen2.5-coder-0.5b   # Qwen's 151,936 tokens

llguidance reads Lark grammars but has no indentation post-lexer and no context-dependent
ignoring of newlines, so ``grammars/python.lark`` is adapted mechanically (see
``llguidance_grammar``): INDENT/DEDENT are dropped (a block is a newline and one or more
statements: any indentation passes), and between brackets every terminal may be preceded by an
optional newline lexeme (blank lines and comments included), which is how Python's implicit line
joining is expressed without a post-lexer; NAME excludes the hard keywords with llguidance's
``& ~`` regex operators (the engine's layer does that); lexing modes are beyond it too, so an
f-string (or t-string) is one lexeme, a string with the prefix, as before 3.12 (llguidance then
does not parse its replacement fields). ``no_forcing`` is set so that llguidance answers with
a mask at every step. Per step both masks are taken before the file's next token; the tokens
where they differ are judged by the exact checker (``checker.feed``).
"""

from __future__ import annotations

import json
import keyword
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (
    RESULTS_DIR,
    base_parser,
    progress,
    read_utf8,
    select_files,
    table,
    timed,
    write_results,
)
from tokenizer_training import SPECIAL_TOKENS, stdlib_tokenizer

import fimconstrain
from fimconstrain.decoding.masks.store import MaskStore, unpack
from fimconstrain.decoding.tokens.token_bytes import split_utf8, token_steps, vocabulary
from fimconstrain.engine.automata.grammar import apply_version_gates, load_builtin
from fimconstrain.engine.versions import NEWEST

#: the Python version both sides read (the checker's default, the newest)
VERSION = NEWEST
OPENERS, CLOSERS = {'"("', '"["', '"{"'}, {'")"', '"]"', '"}"'}
NEWLINE_IN_BRACKETS = "_BNL"
WHOLE_FSTRING = "FSTRING_WHOLE"
#: llguidance's default limits (50,000 Earley items per mask) stop at the first statement of a
#: file with this grammar and a 49k vocabulary; these let it run (and cost it time).
#: differing tokens judged by the exact checker per judged step and side (a random sample)
JUDGED_PER_STEP = 100
#: an example of differing masks is kept every this many judged steps
EXAMPLE_EVERY = 25
LIMITS = dict(step_max_items=2_000_000, step_lexer_fuel=10_000_000, max_items_in_row=100_000)


# ---------------------------------------------------------------- the grammar for llguidance


def llguidance_grammar(start: str = "file_input") -> str:
    """``grammars/python.lark`` in llguidance's Lark dialect (see the module docstring)."""
    from lark import Tree
    from lark.load_grammar import load_grammar

    text = (Path(__file__).resolve().parents[1] / "grammars" / "python.lark").read_text("utf-8")
    lark_grammar, _ = load_grammar(apply_version_gates(text, VERSION), "python.lark", [], False)
    trees = {name: tree for name, _params, tree, _options in lark_grammar.rule_defs}
    writer = _RuleWriter(trees, Tree)
    rules = writer.write(start)
    terms = {t.name: t for t in load_builtin("python", start, VERSION).terminals}
    lines = ['%llguidance {"no_forcing": true}', f"start: {start}", *rules]
    defined = {"NAME", WHOLE_FSTRING, NEWLINE_IN_BRACKETS}
    for name in sorted({"STRING", "_NEWLINE", *writer.terminals} - defined):
        lines.append(f"{name}: /{_regex(terms[name].pattern)}/")
    # An f-string (or t-string) is one lexeme, a string with the prefix (as before 3.12).
    prefixes = "(?:[fFtT]|[fFtT][rR]|[rR][fFtT])"
    lines.append(f"{WHOLE_FSTRING}: /{_regex(terms['STRING'].pattern.replace('(?:[rRuU])?', prefixes, 1))}/")
    # A hard keyword is never a name (the engine's layer says so; here the regex does).
    lines.append(f"NAME: /{_regex(terms['NAME'].pattern)}/ & ~HARD_KEYWORD")
    lines.append("HARD_KEYWORD: " + " | ".join(json.dumps(k) for k in keyword.kwlist))
    lines.append(f"{NEWLINE_IN_BRACKETS}: /(?:(?:#[^\\r\\n]*)?\\r?\\n[\\t \\x0c]*)+/")
    lines += [f"%ignore /{_regex(terms[name].pattern)}/" for name in ("WS", "LINE_CONT")]
    return "\n".join(lines) + "\n"


def _regex(pattern: str) -> str:
    """A regex source written between slashes, control characters escaped."""
    for ch, esc in (("/", "\\/"), ("\r", "\\r"), ("\n", "\\n"), ("\t", "\\t"), ("\x0c", "\\x0c")):
        pattern = pattern.replace(ch, esc)
    return pattern


class _RuleWriter:
    """Writes EBNF rules back as text, with a bracket-mode copy (``name_b``) of every rule used
    between brackets, where each terminal may follow a newline lexeme."""

    def __init__(self, trees: dict, tree_class):
        self.trees, self.Tree = trees, tree_class
        self.todo: list[tuple[str, bool]] = []
        self.seen: set[tuple[str, bool]] = set()
        #: the named terminals the rules use
        self.terminals: set[str] = set()

    def write(self, start: str) -> list[str]:
        out = []
        self.ref(start, False)
        while self.todo:
            name, bracket = self.todo.pop(0)
            out.append(f"{name}{'_b' if bracket else ''}: {self.node(self.trees[name], bracket)}")
        return out

    def ref(self, name: str, bracket: bool) -> str:
        if (name, bracket) not in self.seen:
            self.seen.add((name, bracket))
            self.todo.append((name, bracket))
        return name + ("_b" if bracket else "")

    def node(self, node, bracket: bool) -> str:
        kind = node.data
        if kind == "expansions":
            alts = [a for a in (self.node(c, bracket) for c in node.children) if a]
            return f"({' | '.join(alts)})" if len(alts) > 1 else (alts[0] if alts else "")
        if kind == "alias":
            return self.node(node.children[0], bracket)
        if kind == "expansion":
            return self.sequence(node.children, bracket)
        if kind in ("expr", "maybe"):
            inner = self.node(node.children[0], bracket)
            op = "".join(str(c) for c in node.children[1:]) if kind == "expr" else "?"
            return f"({inner}){op}" if inner else ""
        if kind == "value":
            return self.value(node.children[0], bracket)
        raise ValueError(f"unexpected grammar node {kind}")

    def value(self, item, bracket: bool) -> str:
        if isinstance(item, self.Tree):  # a literal
            text = str(item.children[0])
        elif item.name in ("_INDENT", "_DEDENT"):
            return ""
        elif item.name in ("fstring", "tstring"):
            text = WHOLE_FSTRING
        elif item.name.lstrip("_").isupper():
            text = item.name
            self.terminals.add(text)
        else:
            return self.ref(item.name, bracket)
        return f"{NEWLINE_IN_BRACKETS}? {text}" if bracket else text

    def sequence(self, items: list, bracket: bool) -> str:
        """A sequence; what stands between an opening and its closing bracket is in bracket mode."""
        depth, parts = 0, []
        for item in items:
            lit = _literal(item, self.Tree)
            inside = bracket or depth > 0
            if lit in CLOSERS and not bracket:
                depth -= 1
                inside = True
            part = self.node(item, inside)
            if lit in OPENERS and not bracket:
                depth += 1
            if part:
                parts.append(part)
        return " ".join(parts)


def _literal(node, tree_class) -> str | None:
    if (
        node.data == "value"
        and isinstance(node.children[0], tree_class)
        and node.children[0].data == "literal"
    ):
        return str(node.children[0].children[0])
    return None


# ---------------------------------------------------------------- the walk


class Compare:
    """Both engines over the same token sequences; per-step timings and mask differences."""

    def __init__(
        self, tokenizer, store: MaskStore, llg_tokenizer, grammar: str, examples: int, judge_every: int
    ):
        import llguidance
        import llguidance.numpy as llg_numpy

        #: the raw ``tokenizers`` one, which encodes a file as the model's tokens with no specials
        self.tokenizer = getattr(tokenizer, "backend_tokenizer", tokenizer)
        self.store = store
        self.vocab = vocabulary(tokenizer)
        self.size = self.vocab.size
        self.matcher = llguidance.LLMatcher(
            llg_tokenizer, grammar, log_level=0, limits=llguidance.LLParserLimits(**LIMITS)
        )
        self.fill = llg_numpy.fill_next_token_bitmask
        self.bitmask = llg_numpy.allocate_token_bitmask(1, max(llg_tokenizer.vocab_size, self.size))
        # Compared: tokens whose bytes are whole UTF-8 characters. llguidance works on bytes, the
        # checker on decoded text (a stray byte is U+FFFD to it), so byte fragments are not compared.
        self.compared = np.array([p is not None and _whole_utf8(p) for p in self.vocab.pieces])
        self.times = {"ours_wall": [], "ours_cpu": [], "llg_wall": [], "llg_cpu": []}
        self.counts = dict.fromkeys(
            [
                "steps",
                "steps_differing",
                "steps_judged",
                "ours_only",
                "llg_only",
                "ours_only_judged",
                "ours_only_judged_exact_ok",
                "llg_only_judged",
                "llg_only_judged_exact_ok",
                "llg_rejected_true_token",
                "ours_missing_true_token",
                "mask_tokens_ours",
                "mask_tokens_llg",
            ],
            0,
        )
        self.judge_every = judge_every
        self.rng = np.random.default_rng(0)
        self.examples = {"ours_only": [], "llg_only": []}
        self.frequent = {
            name: Counter() for name in ("ours_only", "llg_only", "ours_only_exact_ok", "llg_only_exact_ok")
        }
        self.max_examples = examples

    def llg_mask(self) -> np.ndarray:
        self.fill(self.matcher, self.bitmask, 0)
        return self.bitmask[0]

    def run_file(self, text: str, max_tokens: int) -> str | None:
        """Walk one file; returns why llguidance stopped early, if it did."""
        ids = self.tokenizer.encode(text).ids[:max_tokens]
        self.matcher.reset()
        checker, held = fimconstrain.fim_checker(""), 0
        done = ""
        for token, (piece, new_held) in zip(ids, token_steps(self.vocab, ids)):
            w, c, words = timed(self.store.mask, checker, held)
            self.times["ours_wall"].append(w)
            self.times["ours_cpu"].append(c)
            w, c, llg_words = timed(self.llg_mask)
            self.times["llg_wall"].append(w)
            self.times["llg_cpu"].append(c)
            self.compare(
                checker,
                held,
                unpack(words, self.size),
                unpack(llg_words.view(np.uint32), self.size),
                token,
                done,
            )
            if not self.matcher.consume_token(token):
                self.counts["llg_rejected_true_token"] += 1
                return self.matcher.get_error().splitlines()[0][:200]
            checker, held = checker.feed(piece), new_held
            done += piece
        return None

    def compare(self, checker, held: int, ours: np.ndarray, llg: np.ndarray, token: int, done: str) -> None:
        """Count the tokens one mask admits and the other not; every few steps judge a sample of
        them with the exact checker."""
        n = self.counts
        n["steps"] += 1
        n["ours_missing_true_token"] += not ours[token]
        ours, llg = ours & self.compared, llg & self.compared
        n["mask_tokens_ours"] += int(ours.sum())
        n["mask_tokens_llg"] += int(llg.sum())
        ours_only, llg_only = np.flatnonzero(ours & ~llg), np.flatnonzero(llg & ~ours)
        n["steps_differing"] += bool(len(ours_only) or len(llg_only))
        judge = not held and n["steps"] % self.judge_every == 0  # held: the checker lacks a character
        n["steps_judged"] += judge
        for name, tokens in (("ours_only", ours_only), ("llg_only", llg_only)):
            n[name] += len(tokens)
            self.frequent[name].update(tokens.tolist())
            if judge:
                self.judge(name, checker, tokens, done)

    def judge(self, name: str, checker, tokens: np.ndarray, done: str) -> None:
        if len(tokens) > JUDGED_PER_STEP:
            tokens = np.sort(self.rng.choice(tokens, JUDGED_PER_STEP, replace=False))
        ok = [t for t in tokens if self.exact_ok(checker, t)]
        self.frequent[f"{name}_exact_ok"].update(ok)
        self.counts[f"{name}_judged"] += len(tokens)
        self.counts[f"{name}_judged_exact_ok"] += len(ok)
        texts = {self.vocab.pieces[t] for t in tokens}
        spread = self.counts["steps_judged"] % EXAMPLE_EVERY == 1  # examples from all over the files
        if spread and texts - {b"\x00"} and len(self.examples[name]) < self.max_examples:
            text = lambda t: self.vocab.pieces[t].decode("utf-8")
            self.examples[name].append(
                {
                    "context": done[-50:],
                    "judged": len(tokens),
                    "exact_accepts": len(ok),
                    "sample": [text(t) for t in tokens[:8]],
                    "sample_exact_ok": [text(t) for t in ok[:8]],
                }
            )

    def exact_ok(self, checker, token: int) -> bool:
        return checker.feed(self.vocab.pieces[token].decode("utf-8")) is not None


def _whole_utf8(piece: bytes) -> bool:
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def main() -> None:
    p = base_parser(__doc__.splitlines()[0], limit_default=6, workers=False)
    p.add_argument("--vocab-size", type=int, default=49152)
    p.add_argument("--max-tokens", type=int, default=1500, help="decoding steps per file")
    p.add_argument("--examples", type=int, default=12, help="examples of differing masks to keep")
    p.add_argument(
        "--model",
        help="a model's tokenizer instead of the stdlib BPE (a known model's name such as "
        "qwen2.5-coder-0.5b, fetched; a .gguf file; a checkpoint folder)",
    )
    p.add_argument(
        "--judge-every",
        type=int,
        default=5,
        help=f"judge differing tokens with the exact checker every N steps "
        f"(at most {JUDGED_PER_STEP} a side)",
    )
    args = p.parse_args()
    show = not args.no_progress
    try:
        import llguidance
        import llguidance.hf
        from transformers import PreTrainedTokenizerFast
    except ImportError as exc:
        sys.exit(f"needs llguidance and transformers ({exc}); pip install llguidance")
    if args.model:
        from fimconstrain.decoding.models.loading import load_tokenizer

        tokenizer = hf = load_tokenizer(args.model)[0]
    else:
        tokenizer = stdlib_tokenizer(args.vocab_size)
        hf = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=SPECIAL_TOKENS[0])
    store = MaskStore.load_or_build(tokenizer, progress=show)
    llg_tokenizer = llguidance.hf.from_tokenizer(hf)
    grammar_text = llguidance_grammar()
    (RESULTS_DIR / "python_llguidance.lark").write_text(grammar_text, encoding="utf-8")
    grammar = llguidance.LLMatcher.grammar_from_lark(grammar_text)
    error = llguidance.LLMatcher.validate_grammar(grammar, llg_tokenizer)
    if error:
        sys.exit(f"llguidance rejects the adapted grammar: {error}")
    cmp = Compare(tokenizer, store, llg_tokenizer, grammar, args.examples, args.judge_every)
    _root, files = select_files(args)
    stopped = {}
    for path in progress(files, desc="files", disable=not show):
        text = read_utf8(path)
        if text:
            why = cmp.run_file(text, args.max_tokens)
            if why:
                stopped[path.name] = why
    steps = {k: _stats(v) for k, v in cmp.times.items()}
    n = cmp.counts
    ratio = {k: steps[f"llg_{k}"]["mean_us"] / steps[f"ours_{k}"]["mean_us"] for k in ("wall", "cpu")}
    print(
        table(
            [[k, v["n"], v["mean_us"], v["p50_us"], v["p99_us"], v["max_us"]] for k, v in steps.items()],
            ["mask per step", "steps", "mean us", "p50 us", "p99 us", "max us"],
        )
    )
    print(f"\nllguidance / ours, mean time per mask: {ratio['wall']:.1f}x (wall), {ratio['cpu']:.1f}x (CPU)")
    steps_n = max(1, n["steps"])
    print(
        f"tokens per mask: ours {n['mask_tokens_ours'] / steps_n:.0f}, "
        f"llguidance {n['mask_tokens_llg'] / steps_n:.0f}; "
        f"masks differ at {n['steps_differing']} of {n['steps']} steps"
    )
    for name, who in (("ours_only", "ours"), ("llg_only", "llguidance")):
        print(
            f"admitted by {who} only: {n[name] / steps_n:.1f} tokens per step; "
            f"of {n[name + '_judged']} judged, "
            f"the exact checker accepts {n[name + '_judged_exact_ok']}"
        )
    print(
        f"true next token rejected: llguidance {n['llg_rejected_true_token']}, "
        f"ours {n['ours_missing_true_token']}"
    )
    frequent = {
        name: [(split_utf8(cmp.vocab.pieces[t])[0], k) for t, k in c.most_common(10)]
        for name, c in cmp.frequent.items()
    }
    for name, rows in frequent.items():
        print(f"  most often {name}: {rows[:6]}")
    for name, rows in cmp.examples.items():
        for row in rows[:6]:
            print(
                f"  {name}: ...{row['context'][-30:]!r} -> {row['sample'][:4]} "
                f"(exact accepts {row['exact_accepts']} of {row['judged']} judged)"
            )
    name = "llguidance_compare" + (f"_{cmp.size}" if args.model or args.vocab_size != 49152 else "")
    out = write_results(
        name,
        args,
        {
            "llguidance_version": llguidance.__version__,
            "tokenizer": {"model": args.model, "vocab_size": cmp.size},
            "limits": LIMITS,
            "steps": steps,
            "ratio_mean": ratio,
            "counts": n,
            "examples": cmp.examples,
            "most_often": frequent,
            "llguidance_stopped": stopped,
        },
    )
    print(f"wrote {out}")


def _stats(us: list[float]) -> dict:
    a = np.array(us) if us else np.zeros(1)
    return {
        "n": len(us),
        "mean_us": float(a.mean()),
        "p50_us": float(np.percentile(a, 50)),
        "p99_us": float(np.percentile(a, 99)),
        "max_us": float(a.max()),
    }


if __name__ == "__main__":
    main()
