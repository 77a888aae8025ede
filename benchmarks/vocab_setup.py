#!/usr/bin/env python3
"""What a model's vocabulary costs before the first token: each per-vocabulary structure built
fresh against read back from the cache, and ``fimconstrain complete`` run with an empty cache
(cold) and then with the cache it filled (warm), in one run.

* structures (in this process, an empty cache of its own): the tokenizer rebuilt from the GGUF
  file's metadata, every token's bytes and their fingerprint (the caches' key), the codec's
  piece and tail tables, the token-healing index, the FIM marker lookups a prompt makes, the
  token-mask store for ``--python-version``; each with its build time, the time to read it
  back where it is cached, and its size on disk;
* the command (whole processes, ``--json``): ``complete FILE --cursor L:C --model M`` once
  cold and ``--rounds`` times warm: import, model load, generate and its setup, constraint,
  prefill and model time, and the ratios cold / warm.

    python benchmarks/vocab_setup.py --model qwen2.5-coder-0.5b

Under ``ab.py --same-script`` the baseline side measures what its package has (the rows read
back from a cache are left empty there).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import table, write_results

REPO = Path(__file__).resolve().parents[1]


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - start


def size_of(paths) -> int:
    return sum(p.stat().st_size for p in paths if p.exists())


def structures(model: Path, version: str, cache: Path) -> list[dict]:
    """Each structure's build time, read-back time (where cached) and bytes on disk."""
    os.environ["FIMCONSTRAIN_CACHE"] = str(cache)
    import transformers  # noqa: F401  (its import is not the structures' cost)

    from fimconstrain.decoding.masks.store import MaskStore
    from fimconstrain.decoding.runtimes import llama_backend
    from fimconstrain.decoding.runtimes.llama_backend import gguf_tokenizer
    from fimconstrain.decoding.tokens import token_bytes as vocab
    from fimconstrain.decoding.tokens.fim_formats import TextCodec
    from fimconstrain.decoding.tokens.healing_index import HealingIndex

    rows = []
    tokenizer, built = timed(gguf_tokenizer, model)
    read = None
    if hasattr(llama_backend, "gguf_identity"):  # cached since; the second call reads it back
        _, read = timed(gguf_tokenizer, model)
    rows.append(
        dict(
            structure="tokenizer from the GGUF metadata",
            build=built,
            read=read,
            bytes=size_of((cache / "tokenizers").glob("gguf-*")),
        )
    )
    import llama_cpp

    llama = llama_cpp.Llama(model_path=str(model), n_ctx=256, vocab_only=True, verbose=False)
    width = int(llama.n_vocab())
    llama.close()
    token_bytes, built = timed(vocab.vocabulary, tokenizer, width)
    _, spent = timed(token_bytes.fingerprint)
    rows.append(dict(structure="token bytes + fingerprint", build=built + spent, read=None, bytes=0))
    codec, built = timed(TextCodec, tokenizer)
    rows.append(dict(structure="text codec", build=built, read=None, bytes=0))
    fmt = llama_backend.gguf_fim_format(tokenizer, {})
    _, built = timed(fmt.marker_ids, tokenizer)
    rows.append(dict(structure="FIM marker ids (every prompt)", build=built, read=None, bytes=0))
    _, built = timed(codec.pieces)
    rows.append(dict(structure="codec piece table", build=built, read=None, bytes=0))
    _, built = timed(codec.tail, 0)
    rows.append(dict(structure="codec tail table", build=built, read=None, bytes=0))
    _, built = timed(HealingIndex, TextCodec(tokenizer), width)
    read = size = None
    try:
        from fimconstrain.decoding.loop.decode_vocabulary import DecodeVocabulary

        def backend():
            return SimpleNamespace(
                tokenizer=tokenizer, vocab_size=width, fim_format=fmt, special_ids=frozenset()
            )

        first = DecodeVocabulary(backend())
        first.healing_index(width)  # built and written
        again = DecodeVocabulary(backend())
        again.token_bytes()  # (measured above)
        _, read = timed(again.healing_index, width)
        size = size_of([again.cache_path()])
    except (ImportError, AttributeError):
        pass
    rows.append(dict(structure="healing index + tails (file)", build=built, read=read, bytes=size or 0))
    store, built = timed(MaskStore.build, token_bytes, progress=False, python_version=version)
    path = MaskStore.cache_path(token_bytes, python_version=version)
    store.save(path)
    _, read = timed(MaskStore.load_or_build, token_bytes, progress=False, python_version=version)
    rows.append(
        dict(structure=f"mask store, Python {version}", build=built, read=read, bytes=path.stat().st_size)
    )
    return rows


def command(model: Path, file: str, cursor: str, cache: Path) -> dict:
    """One ``fimconstrain complete --json`` process: its timings."""
    env = dict(os.environ, FIMCONSTRAIN_CACHE=str(cache))
    start = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fimconstrain.cli",
            "complete",
            file,
            "--cursor",
            cursor,
            "--model",
            str(model),
            "--json",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if not done.stdout.strip():
        raise SystemExit(f"complete failed: {done.stderr[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    t = out["timings"]
    return dict(
        wall=wall,
        imports=t["import"],
        load=t["load"],
        generate=t["generate"],
        setup=out["setup_seconds"],
        constraint=out["checker_seconds"],
        prefill=out.get("prefill_seconds", 0.0),
        model=out["model_seconds"],
        tokens=out["generated"],
        middle=out["middle"],
    )


def _gguf(name: str) -> Path:
    """argparse type of ``--model``: a known model's cached GGUF, or the path given."""
    from fimconstrain.decoding.models.known_models import cached_path, find_known

    known = find_known(name)
    return cached_path(known) if known is not None else Path(name)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--model",
        type=_gguf,
        default="qwen2.5-coder-0.5b",
        help="a GGUF file, or a known model's name (fimconstrain model get NAME)",
    )
    p.add_argument("--file", default="examples/inventory.py")
    p.add_argument("--cursor", default="30:9")
    p.add_argument("--python-version", default="3.10", help="the mask store's (the file's project says 3.10)")
    p.add_argument("--rounds", type=int, default=2, help="warm runs of the command")
    p.add_argument("--skip-structures", action="store_true")
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    payload: dict = {}
    if not args.skip_structures:
        with tempfile.TemporaryDirectory() as cache:
            rows = structures(args.model, args.python_version, Path(cache))
        payload["structures"] = rows
        print(
            table(
                [
                    [
                        r["structure"],
                        round(1000 * r["build"]),
                        "-" if r["read"] is None else round(1000 * r["read"]),
                        "-" if r["read"] is None else f"{r['build'] / max(r['read'], 1e-9):.0f}x",
                        round(r["bytes"] / 2**20, 1),
                    ]
                    for r in rows
                ],
                ["structure", "build ms", "read ms", "build / read", "MB on disk"],
            )
        )
    with tempfile.TemporaryDirectory() as cache:
        cold = command(args.model, args.file, args.cursor, Path(cache))
        warm = [command(args.model, args.file, args.cursor, Path(cache)) for _ in range(args.rounds)]
    payload.update(cold=cold, warm=warm)
    keys = ["wall", "imports", "load", "generate", "setup", "constraint", "prefill", "model"]
    median = {k: statistics.median(w[k] for w in warm) for k in keys}
    print()
    print(
        table(
            [
                [k, round(cold[k], 2), round(median[k], 2), f"{cold[k] / max(median[k], 1e-9):.1f}x"]
                for k in keys
            ],
            ["`complete` (s)", "cold", f"warm (median of {len(warm)})", "cold / warm"],
        )
    )
    same = [w["middle"] == cold["middle"] for w in warm]
    print(f"middle: {cold['middle']!r} ({cold['tokens']} tokens); the same when warm: {same}")
    write_results("vocab_setup", args, payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
