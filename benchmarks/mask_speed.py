"""Token-mask store: build time and size at a 49k vocabulary, mask time per decoding step on real
prefixes, and soundness / tightness against the exact checker with the full vocabulary.

    python benchmarks/mask_speed.py                   # 49,152-token BPE, 12 stdlib files
    python benchmarks/mask_speed.py --vocab-size 8192 --limit 4 --sound-positions 10
    python benchmarks/mask_speed.py --vocab-size 8192 --limit 4 --exact 20  # the exact whole mask
    python benchmarks/mask_speed.py --model qwen2.5-coder-0.5b --limit 4 --exact 20  # at Qwen's 151,936

``--exact N`` times instead the exact whole-vocabulary mask as a bool vector
(:meth:`.ConstraintState.whole_mask`), and that mask listed as token ids (what serving's
full-mask fallback hands on today), at ``N`` held-out FIM cuts of the sampled files (a random
column of a random line of code, the rest of the file as the suffix), each checked bit for bit
against feeding every token of the vocabulary to the checker without the store. It also
times the mask along decoding, as a decode meets it: at each cut the rest of the line is the
middle, and the state after each of its first ``--exact-steps`` tokens is asked once, cold (one
step of each cut checked bit for bit too); ``--python-walk`` leaves the C vocabulary walk out
(``fimconstrain/decoding/masks/vocab_walk.py``), as where it is not built.

The tokenizer is a byte-level BPE trained on the standard library (cached under
``~/.cache/fimconstrain/tokenizers``); the store is built fresh into a temporary folder so the
build is timed, then reloaded from disk. Decoding steps walk each file's own tokenization token
by token: the mask is taken before each token and the token is then fed to the checker.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import base_parser, progress, read_utf8, select_files, table, timed, write_results
from tokenizer_training import SPECIAL_TOKENS, stdlib_tokenizer

import fimconstrain
from fimconstrain.decoding.masks.builder import Alphabet
from fimconstrain.decoding.masks.store import MaskStore
from fimconstrain.decoding.tokens.token_bytes import split_utf8, token_steps, vocabulary

#: what ``--exact`` times: each cut's mask (wall, CPU, and listed as ids) and along decoding
EXACT_SERIES = ("wall", "cpu", "listed_wall", "decoding_wall", "decoding_cpu")


def percentiles(us: list[float]) -> dict:
    """Mean and percentiles of per-step times in microseconds."""
    a = np.array(us)
    return {
        "n": len(a),
        "mean_us": float(a.mean()),
        "p50_us": float(np.percentile(a, 50)),
        "p90_us": float(np.percentile(a, 90)),
        "p99_us": float(np.percentile(a, 99)),
        "max_us": float(a.max()),
    }


def build_and_load(tokenizer, show: bool) -> tuple[MaskStore, dict]:
    """Build the store into a fresh folder (timed), then reload it from disk (timed)."""
    vocab = vocabulary(tokenizer)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        built = MaskStore.build(vocab, progress=show)
        build_s = time.perf_counter() - start
        path = built.save(Path(tmp) / "store.npz")
        size = path.stat().st_size
        loads = []
        for _ in range(5):
            start = time.perf_counter()
            store = MaskStore.load(path, vocab=vocab)
            loads.append(time.perf_counter() - start)
    info = {
        "build_s": build_s,
        "file_bytes": size,
        "load_s_min": min(loads),
        "load_s_mean": float(np.mean(loads)),
        **store.stats(),
    }
    return store, info


def walk(store: MaskStore, vocab, tokenizer, texts: list[str], max_tokens: int, show: bool):
    """Mask time at every step of each file's tokenization; (timings, unpack timings, checkers
    at sampled steps for the soundness check, misses of the true next token)."""
    times = {"wall": [], "cpu": [], "bool_wall": [], "bool_cpu": []}
    states, true_missed = [], 0
    for text in progress(texts, desc="decoding steps", disable=not show):
        ids = tokenizer.encode(text).ids[:max_tokens]
        checker, held = fimconstrain.fim_checker(""), 0
        for token, (piece, new_held) in zip(ids, token_steps(vocab, ids)):
            wall, cpu, _ = timed(store.mask, checker, held)
            times["wall"].append(wall)
            times["cpu"].append(cpu)
            wall, cpu, bits = timed(store.allowed, checker, held)
            times["bool_wall"].append(wall)
            times["bool_cpu"].append(cpu)
            true_missed += not bits[token]
            states.append((checker, held))
            checker, held = checker.feed(piece), new_held
            if checker is None:
                raise RuntimeError(f"the exact checker rejected a valid file at {piece!r}")
    return times, states, true_missed


def soundness(store: MaskStore, vocab, states: list, n: int, seed: int, show: bool) -> dict:
    """At ``n`` sampled steps: tokens the exact checker accepts (full vocabulary) that the mask
    lacks (must be none), and masked-in tokens the exact checker rejects (looseness)."""
    alphabet = Alphabet(store.layer.dfa)
    variants = []
    for piece in vocab.pieces:
        if piece is None:
            variants.append(())
        else:
            text, tail = split_utf8(piece)
            variants.append(tuple(text + ch for ch in alphabet.non_ascii.values()) if tail else (text,))
    picked = random.Random(seed).sample([s for s in states if not s[1]], min(n, len(states)))
    missed = masked = accepted = 0
    examples = []
    for checker, _ in progress(picked, desc="soundness", disable=not show, unit="position"):
        mask = store.allowed(checker)
        exact = np.array([any(checker.feed(v) is not None for v in vs) for vs in variants])
        miss = np.flatnonzero(exact & ~mask)
        missed += len(miss)
        masked += int(mask.sum())
        accepted += int(exact.sum())
        loose = np.flatnonzero(mask & ~exact)
        if len(loose) and len(examples) < 8:
            _, _, _, tail, _ = checker.branches[0]
            examples.append(
                {"lexeme": tail[-30:], "loose": len(loose), "tokens": [variants[t][0] for t in loose[:6]]}
            )
    return {
        "positions": len(picked),
        "missed_tokens": missed,
        "mean_masked": masked / max(1, len(picked)),
        "mean_accepted": accepted / max(1, len(picked)),
        "loose_fraction": (masked - accepted) / masked if masked else 0.0,
        "loose_examples": examples,
    }


def held_out_cuts(texts: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` FIM cuts ``(prefix, suffix)``: a random column of a random line of code of a random
    file (as ``tests/decoding/stdlib_cursors.py`` picks them)."""
    rng = random.Random(seed)
    cuts = []
    while len(cuts) < n:
        text = rng.choice(texts)
        lines = text.splitlines(keepends=True)
        code = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
        if not code:
            continue
        i = rng.choice(code)
        at = sum(map(len, lines[:i])) + rng.randrange(len(lines[i].rstrip("\n")) + 1)
        cuts.append((text[:at], text[at:]))
    return cuts


def exact_masks(hf, store: MaskStore, texts: list[str], n: int, seed: int, steps: int, show: bool) -> dict:
    """The exact whole mask at ``n`` held-out cuts over the transformers tokenizer ``hf``: its
    time (a fresh state each, as after a committed token, the cut's memos warm), and along
    decoding (:func:`decoding_masks`); its tokens against feeding every token (must be the same)
    at each cut and at one decoding step of each."""
    from fimconstrain.decoding.loop.constraint import ConstraintState
    from fimconstrain.decoding.tokens.fim_formats import TextCodec

    codec = TextCodec(hf)
    size = len(hf)
    stops = {hf.eos_token_id}
    banned = {*hf.all_special_ids, *hf.added_tokens_decoder} - stops
    codec.pieces(), codec.tails()  # built once per vocabulary, not per mask
    times: dict[str, list[float]] = {name: [] for name in EXACT_SERIES}
    differing, passing = [0, 0], 0
    rng = random.Random(seed)
    for prefix, suffix in progress(held_out_cuts(texts, n, seed), desc="exact masks", disable=not show):
        checker = fimconstrain.fim_checker(prefix, suffix)

        def mask(checker=checker) -> np.ndarray:
            return whole_mask(ConstraintState(checker, codec, store=store), size, stops, banned)

        mask()  # the first mask at a cut pays for the suffix's memo and the DFA's new states
        wall, cpu, bits = timed(mask)
        times["wall"].append(wall)
        times["cpu"].append(cpu)
        listing, _, got = timed(lambda bits=bits: np.flatnonzero(bits).tolist())
        times["listed_wall"].append(wall + listing)
        checked = [(checker, got)]
        decoded = decoding_masks(hf, store, codec, prefix, suffix, steps, stops, banned)
        for wall, cpu, _, _ in decoded:
            times["decoding_wall"].append(wall)
            times["decoding_cpu"].append(cpu)
        if decoded:
            _, _, state, step_bits = decoded[rng.randrange(len(decoded))]
            checked.append((state, np.flatnonzero(step_bits).tolist()))
        references = [reference_mask(state, codec, size, stops, banned) for state, _ in checked]
        for (_, tokens), reference in zip(checked, references):
            for token in set(tokens) ^ set(reference):
                differing[codec.piece(token) is None] += 1
        passing += len(references[0])  # (the cut's own)
    return {
        "positions": n,
        "mean_passing": passing / max(1, n),
        "differing_tokens": differing[0],
        # tokens that end inside a UTF-8 character: the store rules some out that the checker
        # takes (a character they may become continues a name), before and after stage 0
        "differing_partial_tokens": differing[1],
        **{k: percentiles(v) for k, v in times.items() if v},
    }


def whole_mask(state, size: int, stops: set[int], banned: set[int]) -> np.ndarray:
    """``state``'s exact whole mask (RuntimeError where it has none: inside a character)."""
    bits = state.whole_mask(size, stops, banned)
    if bits is None:
        raise RuntimeError("no whole mask after whole characters")
    return bits


def decoding_masks(hf, store: MaskStore, codec, prefix: str, suffix: str, steps: int, stops, banned) -> list:
    """The whole mask along decoding: the rest of the cut's line is the middle, its first
    ``steps`` tokens are fed one at a time, and each new state's mask is timed the first time it
    is asked for, as a decode meets it (no memo of the cut warm). Returns (wall us, CPU us,
    checker, mask) per step; stops where a token ends inside a character."""
    from fimconstrain.decoding.loop.constraint import ConstraintState

    middle = suffix[: suffix.find("\n") + 1] or suffix
    state = ConstraintState(fimconstrain.fim_checker(prefix, suffix[len(middle) :]), codec, store=store)
    out = []
    for token in hf(middle, add_special_tokens=False)["input_ids"][:steps]:
        if not state.ends_whole():
            break
        wall, cpu, bits = timed(whole_mask, state, len(hf), stops, banned)
        out.append((wall, cpu, state.checker, bits))
        state = state.child(token)
        if state is None:
            raise RuntimeError(f"the checker rejected the file's own middle at {prefix[-40:]!r}")
    return out


def reference_mask(checker, codec, size: int, stops: set[int], banned: set[int]) -> list[int]:
    """The tokens that pass after ``checker``, each fed to it (no store, no walk)."""
    from fimconstrain.decoding.loop.constraint import ConstraintState, passing_candidates

    return [t for t, _ in passing_candidates(ConstraintState(checker, codec), range(size), stops, banned)]


def model_tokenizer(name: str):
    """A model's tokenizer (transformers), as the decode loop reads it."""
    from fimconstrain.decoding.models.loading import load_tokenizer

    return load_tokenizer(name)[0]


def as_transformers(tokenizer):
    """``tokenizer`` as a transformers tokenizer (a stdlib BPE is a bare ``tokenizers`` one)."""
    if hasattr(tokenizer, "backend_tokenizer"):
        return tokenizer
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=SPECIAL_TOKENS[0])


def main() -> None:
    p = base_parser(__doc__.splitlines()[0], limit_default=12, workers=False)
    p.add_argument("--vocab-size", type=int, default=49152)
    p.add_argument("--max-tokens", type=int, default=2000, help="decoding steps per file")
    p.add_argument("--sound-positions", type=int, default=40, help="steps checked against the exact checker")
    p.add_argument(
        "--exact",
        type=int,
        default=0,
        metavar="N",
        help="time the exact whole mask at N held-out cuts instead",
    )
    p.add_argument(
        "--exact-steps",
        type=int,
        default=8,
        metavar="K",
        help="with --exact: also along decoding, the first K tokens of the rest of each cut's line",
    )
    p.add_argument(
        "--model",
        help="with --exact: a model's tokenizer instead (a known model's name such as "
        "qwen2.5-coder-0.5b, fetched; a .gguf file; a checkpoint folder)",
    )
    p.add_argument(
        "--python-walk",
        action="store_true",
        help="with --exact: leave the C vocabulary walk out (the Python path, as where it is not built)",
    )
    args = p.parse_args()
    show = not args.no_progress
    from fimconstrain.decoding.masks import vocab_walk

    if args.python_walk:
        vocab_walk.native_walk = lambda: None
    walk_kind = "Python" if vocab_walk.native_walk() is None else "C"
    if args.model and not args.exact:
        p.error("--model needs --exact")
    start = time.perf_counter()
    tokenizer = model_tokenizer(args.model) if args.model else stdlib_tokenizer(args.vocab_size)
    tok_s = time.perf_counter() - start
    vocab = vocabulary(tokenizer)
    _root, files = select_files(args)
    texts = [t for t in (read_utf8(f) for f in files) if t]
    if args.exact:
        store = MaskStore.load_or_build(tokenizer, progress=show)
        exact = exact_masks(
            as_transformers(tokenizer), store, texts, args.exact, args.seed, args.exact_steps, show
        )
        exact["walk"] = walk_kind
        print(
            table(
                [
                    [k, v["n"], v["mean_us"] / 1e3, v["p50_us"] / 1e3, v["p99_us"] / 1e3]
                    for k, v in exact.items()
                    if k in EXACT_SERIES
                ],
                [
                    f"exact whole mask, {vocab.size:,} tokens, {walk_kind} walk",
                    "masks",
                    "mean ms",
                    "p50 ms",
                    "p99 ms",
                ],
            )
        )
        print(
            f"{exact['mean_passing']:.0f} tokens pass per cut; "
            f"{exact['differing_tokens']} differ from feeding every token "
            f"(and {exact['differing_partial_tokens']} that end inside a UTF-8 character)"
        )
        out = write_results(
            f"mask_speed_exact_{vocab.size}_{walk_kind.lower()}",
            args,
            {"tokenizer": {"vocab_size": vocab.size}, "exact": exact},
        )
        print(f"wrote {out}")
        if exact["differing_tokens"]:
            sys.exit(1)
        return
    store, build = build_and_load(tokenizer, show)
    times, states, true_missed = walk(store, vocab, tokenizer, texts, args.max_tokens, show)
    steps = {name: percentiles(values) for name, values in times.items()}
    sound = soundness(store, vocab, states, args.sound_positions, args.seed, show)
    print(
        table(
            [
                [
                    f"{vocab.size:,}",
                    build["build_s"],
                    build["file_bytes"] / 1e6,
                    build["load_s_min"] * 1e3,
                    build["states"],
                    build["rows"],
                ]
            ],
            ["vocabulary", "build s", "store MB", "load ms", "lexer states", "bitsets"],
        )
    )
    print()
    labels = {
        "wall": "mask, uint64 words (wall)",
        "cpu": "mask, uint64 words (CPU)",
        "bool_wall": "mask as bool vector (wall)",
        "bool_cpu": "mask as bool vector (CPU)",
    }
    print(
        table(
            [
                [labels[k], v["n"], v["mean_us"], v["p50_us"], v["p99_us"], v["max_us"]]
                for k, v in steps.items()
            ],
            ["per decoding step", "steps", "mean us", "p50 us", "p99 us", "max us"],
        )
    )
    print()
    print(
        f"soundness: {sound['missed_tokens']} accepted tokens missing from the mask at {sound['positions']} "
        f"positions (full vocabulary); true next token missing {true_missed} times in {len(states)} steps"
    )
    print(
        f"tightness: {sound['mean_masked']:.0f} tokens masked in, {sound['mean_accepted']:.0f} accepted "
        f"by the exact checker per position; "
        f"{100 * sound['loose_fraction']:.2f}% of masked-in tokens are rejected"
    )
    out = write_results(
        f"mask_speed_{vocab.size}" if vocab.size != 49152 else "mask_speed",
        args,
        {
            "tokenizer": {"vocab_size": vocab.size, "seconds": tok_s},
            "store": build,
            "files": len(texts),
            "steps": steps,
            "true_token_missed": true_missed,
            "soundness": sound,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
