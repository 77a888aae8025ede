#!/usr/bin/env python3
"""Model time against constraint time per token, for published code-model architectures with
random weights (the step time is the real one; no download: the configs are written here).

Models (``--models``): ``santacoder`` (GPTBigCode, 1.1 B parameters, multi-query attention) and
``starcoder2-3b`` (Starcoder2, 3 B, grouped-query attention, sliding window), from their
published configs; ``--tiny`` shrinks both to two small layers (same architectures) for a CPU
check.  The tokenizer is a byte-level BPE trained here on the standard library, with the
model's vocabulary size and SantaCoder's FIM tokens, so that candidate tokens decode to real
code.  Cuts are real (a few lines of a standard-library file taken out).

* batch 1, the project's decode loop (``FimDecoder.generate``, greedy, names guide off): modes
  ``unconstrained``, ``constrained`` (FIM) and ``prefix`` (the mask-store path); model ms per
  token, constraint ms per token (``FimResult``) and the constraint's share of the step;
* batch ``B`` (``--batches``), Hugging Face ``generate`` over ``B`` different cuts at once with
  the serving checker (``fimconstrain.serving.batch.InlineChecker``, one request per row, as
  the vLLM processor drives it) as a logits processor, greedy: the whole top-64 mask and the
  greedy-settled check; model ms per step (the steps after the prompt's pass, less the
  constraint's time), constraint ms per step, share.

    python benchmarks/model_timing.py --device cuda --dtype bfloat16            # a GPU machine
    python benchmarks/model_timing.py --tiny --cuts 2 --tokens 8 --batches 2    # a CPU check
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS_DIR, engine_line, table, write_results
from batch_constraint import cuts
from tokenizer_training import SANTACODER_TOKENS, train_byte_level_bpe

from fimconstrain.decoding.loop.generate import FimDecoder
from fimconstrain.decoding.tokens.fim_formats import build_prompt
from fimconstrain.serving.batch import InlineChecker, RowQuery, constrain
from fimconstrain.serving.requests import FimArgs, TokenTable
from fimconstrain.serving.support import SamplerSupport

VERSION = "3.14"
TOP_K = 64
WINDOW = 1024  # prompt and middle, the shipped model's window (both models allow more)


def model_config(name: str, vocab: int, eos: int, tiny: bool):
    """The published architecture of ``name`` (``tiny``: two small layers of it), with the
    tokenizer's ``vocab`` size and end-of-text id."""
    from transformers import GPTBigCodeConfig, Starcoder2Config

    if name == "santacoder":  # bigcode/santacoder's config.json
        sizes = (
            {"n_embd": 64, "n_layer": 2, "n_head": 4}
            if tiny
            else {"n_embd": 2048, "n_layer": 24, "n_head": 16}
        )
        return GPTBigCodeConfig(
            vocab_size=vocab, n_positions=2048, multi_query=True, bos_token_id=eos, eos_token_id=eos, **sizes
        )
    if name == "starcoder2-3b":  # bigcode/starcoder2-3b's config.json
        sizes = (
            {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4}
            if tiny
            else {
                "hidden_size": 3072,
                "intermediate_size": 12288,
                "num_hidden_layers": 30,
                "num_attention_heads": 24,
            }
        )
        return Starcoder2Config(
            vocab_size=vocab,
            num_key_value_heads=2,
            max_position_embeddings=16384,
            sliding_window=4096,
            rope_theta=999999.4420358813,
            use_bias=True,
            hidden_act="gelu_pytorch_tanh",
            bos_token_id=eos,
            eos_token_id=eos,
            **sizes,
        )
    raise ValueError(f"unknown model {name!r}")


def tokenizer_for(vocab: int, cache: Path):
    """A byte-level BPE of ``vocab`` tokens trained on the standard library (kept in ``cache``)."""
    from _common import list_py_files, read_utf8, stdlib_root
    from transformers import PreTrainedTokenizerFast

    path = cache / f"model_timing_tokenizer_{vocab}.json"
    if not path.is_file():
        texts = [t for t in map(read_utf8, list_py_files(stdlib_root())) if t]
        path.parent.mkdir(parents=True, exist_ok=True)
        train_byte_level_bpe(texts, vocab, special_tokens=SANTACODER_TOKENS, min_frequency=2).save(str(path))
    return PreTrainedTokenizerFast(
        tokenizer_file=str(path), eos_token="<|endoftext|>", bos_token="<|endoftext|>", pad_token="<fim-pad>"
    )


def single(decoder: FimDecoder, cut_list: list, tokens: int) -> list[list]:
    """Batch 1 through the project's decode loop, per mode: ms per token and the share."""
    rows = []
    for mode in ("unconstrained", "constrained", "prefix"):
        model_ms, constraint_ms = [], []
        for prefix, _, suffix in cut_list:
            result = decoder.generate(
                prefix, suffix, mode=mode, max_new_tokens=tokens, finish_in_budget=False, semantic=False
            )
            if result.generated:
                model_ms.append(result.model_ms_per_token)
                constraint_ms.append(result.checker_ms_per_token)
        if not model_ms:
            rows.append([1, mode, "-", "-", "no tokens generated"])
            continue
        model, constraint = statistics.median(model_ms), statistics.median(constraint_ms)
        rows.append([1, mode, f"{model:.2f}", f"{constraint:.3f}", f"{constraint / model:.1%}"])
    return rows


class _BatchConstraint:
    """A Hugging Face logits processor over the serving checker: row ``r`` is request ``r``."""

    def __init__(self, checker: InlineChecker, prompt_width: int, sampler: SamplerSupport | None):
        self.checker, self.width, self.sampler = checker, prompt_width, sampler
        self.seen: list[int] = []  # each row's committed tokens the checker has read
        self.seconds = 0.0
        self.steps = 0
        self.first_call: float | None = None  # when the prompt's pass had ended

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        if self.first_call is None:
            self.first_call = start
        if not self.seen:
            self.seen = [0] * input_ids.shape[0]
        queries = []
        for row in range(input_ids.shape[0]):
            middle = input_ids[row, self.width :].tolist()
            new = tuple(middle[self.seen[row] :])
            self.seen[row] = len(middle)
            queries.append(RowQuery(row, len(middle) - len(new), new, (), ()))
        rows = len(queries)
        out = constrain(self.checker, scores, queries, [TOP_K] * rows, [self.sampler] * rows)
        self.seconds += time.perf_counter() - start
        self.steps += 1
        return out


def batched(model, tokenizer, fim_format, cut_list: list, batch: int, tokens: int, device) -> list[list]:
    """Batch ``batch`` through ``model.generate`` with the serving checker, greedy."""
    from transformers import LogitsProcessorList

    from fimconstrain.decoding.tokens.fim_formats import TextCodec

    codec, table_ = TextCodec(tokenizer), TokenTable.from_tokenizer(tokenizer)
    chosen = (cut_list * batch)[:batch]
    prompts = [build_prompt(fim_format, codec, p, s, WINDOW - tokens) for p, _, s in chosen]
    width = max(map(len, prompts))
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    attention = (input_ids != pad).long()
    rows = []
    for label, sampler in (("whole top-64 mask", None), ("greedy, settled", SamplerSupport(greedy=True))):
        checker = InlineChecker(table_)
        for key, (prefix, _, suffix) in enumerate(chosen):
            checker.add(key, FimArgs(prefix, suffix, VERSION, TOP_K), (), sampler)
        constraint = _BatchConstraint(checker, width, sampler)
        model.generate(
            input_ids=input_ids,
            attention_mask=attention,
            max_new_tokens=tokens,
            do_sample=False,
            logits_processor=LogitsProcessorList([constraint]),
            pad_token_id=pad,
            eos_token_id=tokenizer.eos_token_id,
        )
        if device.type == "cuda":
            torch.cuda.synchronize()
        # the model's steps after the first call (the prompt's pass is not a per-token cost)
        assert constraint.first_call is not None
        decoding = time.perf_counter() - constraint.first_call - constraint.seconds
        model_ms = 1000 * decoding / max(1, constraint.steps - 1)
        constraint_ms = 1000 * constraint.seconds / max(1, constraint.steps)
        rows.append(
            [batch, label, f"{model_ms:.2f}", f"{constraint_ms:.3f}", f"{constraint_ms / model_ms:.1%}"]
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["santacoder", "starcoder2-3b"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None, help="float32, float16 or bfloat16 (default: bf16 on cuda)")
    ap.add_argument("--tiny", action="store_true", help="two small layers of each architecture (a CPU check)")
    ap.add_argument("--cuts", type=int, default=8, help="real cuts for batch 1 (cycled to fill a batch)")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per generation")
    ap.add_argument("--batches", type=int, nargs="+", default=[32])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help=f"JSON (default: {RESULTS_DIR}/model_timing.json)")
    ap.add_argument("--cache", type=Path, default=RESULTS_DIR, help="where the trained tokenizer is kept")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    torch.manual_seed(args.seed)
    vocab = 1000 if args.tiny else 49152
    tokenizer = tokenizer_for(vocab, args.cache)
    from fimconstrain.decoding.tokens.fim_formats import resolve_format

    fim_format = resolve_format(tokenizer)
    cut_list = cuts(args.cuts, args.seed)
    results, rows = {}, []
    for name in args.models:
        from transformers import AutoModelForCausalLM

        config = model_config(name, len(tokenizer), tokenizer.eos_token_id, args.tiny)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()
        parameters = sum(p.numel() for p in model.parameters())
        decoder = FimDecoder.from_model(model, tokenizer, fim_format, window=WINDOW)
        decoder.generate(*cut_list[0][::2], max_new_tokens=2, semantic=False)  # warm-up
        part = single(decoder, cut_list, args.tokens)
        for batch in args.batches:
            part += batched(model, tokenizer, fim_format, cut_list, batch, args.tokens, device)
        rows += [[name, f"{parameters / 1e9:.2f} B", *r] for r in part]
        results[name] = {"parameters": parameters, "rows": part}
        del model, decoder
        if device.type == "cuda":
            torch.cuda.empty_cache()
    where = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"CPU ({torch.get_num_threads()} threads)"
    )
    engine = engine_line()
    print(f"device: {where}, {dtype}; engine: {engine}")
    headers = ["model", "size", "batch", "path", "model ms/step", "constraint ms/step", "share"]
    print(table(rows, headers))
    out = write_results(
        "model_timing", args, {"device": where, "dtype": str(dtype), "engine": engine, "results": results}
    )
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
