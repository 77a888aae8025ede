"""Train fimconstrain's shipped default model: a tiny GPTBigCode (SantaCoder architecture) FIM model.

Data: the Python files of the running interpreter's standard library (its tests
included, site-packages left out), a deterministic 5% of files held out for evaluation; or,
with ``--code``, permissively licensed code of installed distributions
(``permissive_code.py``; the standard library's held-out files still give the card's losses).
Tokenizer: byte-level BPE trained here with SantaCoder's special tokens.  Examples:
about half FIM with a random middle span (half of those in PSM order, half in SPM),
half plain left-to-right windows.  Training runs for a fixed time budget (``--minutes``)
on a GPU if there is one (bfloat16, examples drawn by worker processes), else on the
CPU; the weights kept are those with the lowest held-out loss seen at the periodic
evaluations.

    python scripts/train_default_model.py --out fimconstrain/default_model

The defaults are the shipped model's recipe (7 minutes on one H100); on a CPU, give it hours
(``--minutes``) and a smaller ``--batch-size``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import shutil
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import GPTBigCodeConfig, GPTBigCodeForCausalLM, PreTrainedTokenizerFast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fimconstrain.decoding.loop.oracle import ast_parses
from fimconstrain.decoding.tokens.fim_formats import split_budget

sys.path.insert(0, str(Path(__file__).resolve().parent))
from permissive_code import CodeFile, collect, write_manifest
from tokenizer_training import train_byte_level_bpe

EOT, PRE, MID, SUF, PAD = "<|endoftext|>", "<fim-prefix>", "<fim-middle>", "<fim-suffix>", "<fim-pad>"
SPECIAL_TOKENS = [EOT, PRE, MID, SUF, PAD]
EXCLUDED_DIRS = {"site-packages", "__pycache__"}
HOLDOUT_MODULUS = 20  # 1 file in 20 (5%) is held out
MAX_MIDDLE_TOKENS = 160
TEXT_WINDOW_CHARS = 4000  # characters of prefix / suffix around a cut that are tokenized
MAX_GENERATION_ROOM = 256  # a FIM prompt leaves 0..255 tokens of room beyond its middle, as decoders do
CODE_HELDOUT_FILES = 300  # held-out --code files read for its held-out loss
HELDOUT_BATCHES = 8  # batches of held-out examples behind the card's losses


@dataclass
class Corpus:
    """Standard-library sources split into training and held-out files (relative path -> text)."""

    root: Path
    train: dict[str, str]
    heldout: dict[str, str]


def is_heldout(relpath: str) -> bool:
    """Deterministic 5% split by a hash of the path relative to the standard library."""
    return int(hashlib.sha256(relpath.encode()).hexdigest(), 16) % HOLDOUT_MODULUS == 0


def load_corpus(root: Path) -> Corpus:
    """Every UTF-8 ``.py`` file under ``root`` that ``ast.parse`` accepts, outside site-packages."""
    train, heldout = {}, {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if EXCLUDED_DIRS.intersection(path.relative_to(root).parts[:-1]):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if not ast_parses(text):
            continue
        (heldout if is_heldout(rel) else train)[rel] = text
    return Corpus(root, train, heldout)


def select_code(
    files: list[CodeFile], total_chars: float, per_distribution_chars: float
) -> tuple[list[CodeFile], list[CodeFile]]:
    """(training files, held-out files) of ``files``: a deterministic 5% held out by content
    hash; of the rest, files in hash order until ``total_chars``, at most
    ``per_distribution_chars`` from one distribution (so that no generated SDK dominates)."""
    heldout = sorted((f for f in files if int(f.sha256, 16) % HOLDOUT_MODULUS == 0), key=lambda f: f.sha256)
    taken: dict[str, int] = {}
    train: list[CodeFile] = []
    chars = 0
    for f in sorted(files, key=lambda f: f.sha256):
        if int(f.sha256, 16) % HOLDOUT_MODULUS == 0 or chars >= total_chars:
            continue
        if taken.get(f.distribution, 0) + len(f.text) > per_distribution_chars:
            continue
        taken[f.distribution] = taken.get(f.distribution, 0) + len(f.text)
        train.append(f)
        chars += len(f.text)
    return train, heldout


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE (GPT-2 style pre-tokenization, no added prefix space) with the FIM special tokens."""
    tok = train_byte_level_bpe(texts, vocab_size, special_tokens=SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOT,
        eos_token=EOT,
        unk_token=EOT,
        pad_token=PAD,
        model_max_length=1 << 30,
    )


class ExampleSampler:
    """Draws training examples: FIM (PSM or SPM, random middle span) or left-to-right windows of a file."""

    def __init__(
        self,
        texts: list[str],
        tokenizer: PreTrainedTokenizerFast,
        context: int,
        fim_rate: float,
        seed: int,
        spm_rate: float = 0.0,
    ):
        self.texts = texts
        self.tok = tokenizer
        self.context = context
        self.fim_rate = fim_rate
        self.spm_rate = spm_rate
        self.rng = random.Random(seed)
        self.ids = {name: tokenizer.convert_tokens_to_ids(name) for name in SPECIAL_TOKENS}
        stream = []
        for enc in tokenizer.backend_tokenizer.encode_batch(texts):
            stream.extend(enc.ids)
            stream.append(self.ids[EOT])
        self.stream = torch.tensor(stream, dtype=torch.long)
        self.weights = [len(t) for t in texts]

    def batch(self, size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input_ids, attention_mask, labels), padded on the right; padding is ignored by the loss."""
        rows = [
            self.fim_example() if self.rng.random() < self.fim_rate else self.plain_example()
            for _ in range(size)
        ]
        width = max(len(r) for r in rows)
        ids = torch.full((size, width), self.ids[PAD], dtype=torch.long)
        mask = torch.zeros((size, width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        return ids, mask, ids.masked_fill(mask == 0, -100)

    def plain_example(self) -> list[int]:
        """A window of ``context`` tokens from the concatenated token stream."""
        start = self.rng.randrange(0, len(self.stream) - self.context)
        return self.stream[start : start + self.context].tolist()

    def fim_example(self) -> list[int]:
        """``<fim-prefix> P <fim-suffix> S <fim-middle> M <|endoftext|>`` (PSM) or, with probability
        ``spm_rate``, ``<fim-prefix> <fim-suffix> S <fim-middle> P M <|endoftext|>`` (SPM, the
        decoder's ``order="spm"``), cut from one file and fitted to the context."""
        text = self.rng.choices(self.texts, weights=self.weights)[0]
        start, end = self.middle_span(text)
        middle = self.tok.backend_tokenizer.encode(text[start:end])
        if len(middle.ids) > MAX_MIDDLE_TOKENS:
            end = start + middle.offsets[MAX_MIDDLE_TOKENS - 1][1]
            middle_ids = middle.ids[:MAX_MIDDLE_TOKENS]
        else:
            middle_ids = middle.ids
        pre = self.tok.backend_tokenizer.encode(text[max(0, start - TEXT_WINDOW_CHARS) : start]).ids
        suf = self.tok.backend_tokenizer.encode(text[end : end + TEXT_WINDOW_CHARS]).ids
        # The decoder leaves room for max_new_tokens after the prompt, so the middle (and its end
        # token) must not always sit at the end of the context, or the model learns to stop only there.
        room = len(middle_ids) + self.rng.randrange(0, MAX_GENERATION_ROOM)
        keep_pre, keep_suf = split_budget(len(pre), len(suf), self.context - 4 - room)
        pre, suf = pre[len(pre) - keep_pre :], suf[:keep_suf]
        if self.rng.random() < self.spm_rate:
            return [self.ids[PRE], self.ids[SUF]] + suf + [self.ids[MID]] + pre + middle_ids + [self.ids[EOT]]
        return [self.ids[PRE]] + pre + [self.ids[SUF]] + suf + [self.ids[MID]] + middle_ids + [self.ids[EOT]]

    def middle_span(self, text: str) -> tuple[int, int]:
        """A random middle as an editor cursor sees it.

        It starts at any character, at a line start, or after a line's indentation (a third each)
        and ends at any character, before a line break, or after one (a third each).
        """
        n = len(text)
        length = int(math.exp(self.rng.uniform(0, math.log(800))))
        kind = self.rng.randrange(3)
        start = self.rng.randrange(0, n)
        if kind > 0:
            start = text.rfind("\n", 0, start) + 1
            if kind == 2:
                start += len(text[start:]) - len(text[start:].lstrip(" \t"))
        end = min(n, start + length)
        kind = self.rng.randrange(3)
        if kind > 0:
            nl = text.find("\n", end)
            end = n if nl < 0 else nl + (kind == 2)
        return start, max(start, end)


class ExampleStream(torch.utils.data.IterableDataset):
    """Endless batches from an :class:`ExampleSampler`, reseeded per DataLoader worker so workers differ."""

    def __init__(self, sampler: ExampleSampler, batch_size: int, seed: int):
        self.sampler, self.batch_size, self.seed = sampler, batch_size, seed

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        self.sampler.rng.seed(self.seed * 1000 + (info.id if info else 0))
        while True:
            yield self.sampler.batch(self.batch_size)


def batches(sampler: ExampleSampler, batch_size: int, seed: int, workers: int, pin: bool):
    """An iterator of training batches, drawn by ``workers`` processes (0: in this one)."""
    loader = torch.utils.data.DataLoader(
        ExampleStream(sampler, batch_size, seed),
        batch_size=None,
        num_workers=workers,
        persistent_workers=workers > 0,
        prefetch_factor=8 if workers else None,
        pin_memory=pin,
    )
    return iter(loader)


def lr_at(progress: float, peak: float) -> float:
    """Linear warm-up over the first 3% of the time budget, then cosine decay to 10% of the peak."""
    if progress < 0.03:
        return peak * progress / 0.03
    p = min(1.0, (progress - 0.03) / 0.97)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


@torch.no_grad()
def evaluate(model, sampler: ExampleSampler, batches: int, batch_size: int) -> dict[str, float]:
    """Mean token loss and perplexity on held-out FIM and left-to-right examples (fixed seed)."""
    model.eval()
    device = next(model.parameters()).device
    result = {}
    for kind, rate in (("fim", 1.0), ("plain", 0.0)):
        sampler.rng.seed(1234)
        sampler.fim_rate = rate
        total, count = 0.0, 0
        for _ in range(batches):
            ids, mask, labels = (t.to(device) for t in sampler.batch(batch_size))
            n = int((labels[:, 1:] != -100).sum())
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            total += float(loss) * n
            count += n
        result[f"{kind}_loss"] = total / count
        result[f"{kind}_perplexity"] = math.exp(total / count)
    model.train()
    return result


def save(model, tokenizer, out: Path) -> None:
    """Write the weights in float16 safetensors and the tokenizer, and their GGUF copy for
    llama.cpp when the ``gguf`` package is installed; the training copy stays float32."""
    import importlib.util

    out.mkdir(parents=True, exist_ok=True)
    half = GPTBigCodeForCausalLM(model.config)
    half.load_state_dict({name: value.cpu() for name, value in model.state_dict().items()})
    half.to(torch.float16).save_pretrained(out)
    tokenizer.save_pretrained(out)
    if importlib.util.find_spec("gguf") is not None:
        from fimconstrain.decoding.models.gguf_export import export_gguf

        export_gguf(out, out / "model.gguf")


EXAMPLES = (
    "{fim:.0%} FIM, {spm:.0%} of them in SPM order and the rest in PSM: a middle of up to {mid} "
    "tokens that starts at any character, a line start or after a line's indentation and ends at "
    "any character, before or after a line break (a third each); the prefix is cut from the left "
    "and the suffix from the right to fit the context less a random 0-255 tokens of generation "
    "room, as the decoder does. The rest are left-to-right windows. Loss on every token."
)


def run_summary(run: dict) -> str:
    """One model-card bullet for a training run."""
    curve = run["curve"][:: max(1, len(run["curve"]) // 8)]
    losses = ", ".join(f"{p['minutes']:.0f} min: {p['loss']:.2f}" for p in curve)
    hardware = run.get("device") or f"{run['threads']} CPU thread(s)" + (
        ", bfloat16 autocast" if run.get("cpu_bf16") else ""
    )
    kept = (
        f"  Weights kept from minute {run['best_minutes']:.0f} (lowest held-out FIM loss"
        f"{' on the installed code' if run.get('code') else ''}, "
        f"{run['best_heldout_loss']:.3f}).\n"
        if "best_minutes" in run
        else ""
    )
    command = f"  Command: `{run['command']}`\n" if "command" in run else ""
    code = run.get("code")
    data = (
        f"  Data: {code['files']} files ({code['chars'] / 1e6:.1f} M characters) of {code['distributions']} "
        f"permissively licensed distributions installed here (`scripts/permissive_code.py`; manifest "
        f"`{code['manifest']}`); held-out FIM loss on {code['heldout_files']} of their held-out files "
        f"{code['heldout']['fim_loss']:.3f}.\n"
        if code
        else ""
    )
    return (
        f"- {run['steps']} steps, {run['tokens'] / 1e6:.1f} M tokens in {run['minutes']:.1f} minutes on "
        f"{hardware} ({run['tokens_per_s']:.0f} tokens/s); AdamW, peak lr {run['lr']}, "
        f"betas 0.9/0.95, weight decay 0.1, warm-up then cosine to 10%, batch {run['batch_size']} sequences, "
        f"seed {run['seed']}.\n  Examples: {run['examples']}\n"
        f"  Training loss (smoothed): {losses}; final {run['final_train_loss']:.3f}.\n{data}{kept}{command}"
    ).rstrip()


def data_bullet(facts: dict, code: dict | None) -> str:
    """The card's Data bullet: the standard library, or ``code``, what the latest run that read
    ``--code`` read (the standard library then held out whole: its files are skipped by hash)."""
    if code is None:
        return f"""- Data: the `.py` files of the CPython {facts["python"]} standard library, its tests
  included ({facts["train_files"]} training files, {facts["train_chars"] / 1e6:.1f} M characters);
  `site-packages` left out, and files that are not UTF-8 or that `ast.parse` rejects.
  A deterministic 5% of the files ({facts["heldout_files"]}: those whose path relative to the
  standard library has a sha256 that is 0 mod 20) is held out; `training.json` lists them.
  Evaluation sets must come from those files or from code outside the standard library."""
    return f"""- Data: permissively licensed code of installed distributions (each run's line below says how
  much), chosen by `scripts/permissive_code.py` (licence metadata, RECORD files,
  `ast.parse`, vendored copies and the packages reserved for evaluation left out, sha256
  de-duplication), at most a fixed number of characters of one distribution, in sha256 order;
  files whose sha256 is 0 mod 20 held out. `{Path(code["manifest"] or "code.manifest.jsonl.gz").name}`
  lists every training file (distribution, version, licence, path, sha256) and
  `scripts/code_corpus.py` remakes the corpus from its pinned wheels. No file of the standard
  library was trained on: it is held out whole, with the reserved packages
  (`benchmarks/editor_quality.py`'s)."""


def write_card(out: Path, facts: dict) -> None:
    """The model card (README.md) next to the weights, from the facts of ``training.json``."""
    ev, cfg, runs = facts["heldout"], facts["config"], facts["runs"]
    n = facts.get("heldout_examples", 64)  # (the first cards' losses came from 64 examples each)
    total_minutes = sum(r["minutes"] for r in runs)
    total_tokens = sum(r["tokens"] for r in runs)
    code = next((r["code"] for r in reversed(runs) if r.get("code")), None)
    orders = (
        "PSM and SPM order: `--order spm` works too" if any(r.get("spm_rate") for r in runs) else "PSM order"
    )
    own = (code or facts)["heldout"]  # the losses on held-out files of what it was trained on
    heldout = f"""- Held-out loss ({n} FIM examples in PSM order and {n} left-to-right examples of the
  {"held-out installed files" if code else "held-out files"}):
  FIM {own["fim_loss"]:.3f} (perplexity {own["fim_perplexity"]:.1f}),
  left-to-right {own["plain_loss"]:.3f} (perplexity {own["plain_perplexity"]:.1f})""" + (
        f"; on the standard library (not trained on) FIM {ev['fim_loss']:.3f}, "
        f"left-to-right {ev['plain_loss']:.3f}."
        if code
        else "."
    )
    (out / "README.md").write_text(f"""# fimconstrain default model

A small fill-in-the-middle code model that ships with fimconstrain so that
`fimconstrain complete FILE --cursor LINE:COL` works offline, on a CPU.  It is
a demonstration model: its own output is often invalid Python, which is what
the constrained decoder is for.  For useful completions use a real code model:
`fimconstrain model get qwen2.5-coder-0.5b`, then `--model qwen2.5-coder-0.5b`.

- Architecture: GPTBigCode (SantaCoder's: multi-query attention, learned positions), {cfg["n_layer"]} layers,
  d={cfg["n_embd"]}, {cfg["n_head"]} heads, context {cfg["n_positions"]} tokens,
  {facts["parameters"] / 1e6:.2f} M parameters, stored in float16 (`model.safetensors`). llama.cpp runs
  the same weights as an f16 GGUF that fimconstrain writes once into its cache on first use
  (`fimconstrain export-gguf`, deterministic).
- Tokenizer: byte-level BPE, {facts["vocab_size"]} tokens, trained on the training files; special tokens
  `<|endoftext|>`, `<fim-prefix>`, `<fim-middle>`, `<fim-suffix>`, `<fim-pad>`
  (SantaCoder's FIM format, {orders}).
{data_bullet(facts, code)}
- Training: {len(runs)} run(s), {total_tokens / 1e6:.1f} M tokens in {total_minutes:.0f} minutes in all,
  each run continuing from the one before:
{chr(10).join(run_summary(r) for r in runs)}
{heldout}

Retrain with the command above (on a GPU; on a CPU, give it hours and a smaller `--batch-size`),
or continue training the shipped model with `--init fimconstrain/default_model --out /tmp/model`
(on a lent GPU machine: `scripts/gpu_continue.sh`, see docs/models.md). Rewrite this card from
`training.json` with `python scripts/train_default_model.py --card DIR`.
""")


def new_model(args, tokenizer) -> GPTBigCodeForCausalLM:
    """A freshly initialised GPTBigCode with multi-query attention, sized by the command line."""
    eot = tokenizer.convert_tokens_to_ids(EOT)
    config = GPTBigCodeConfig(
        vocab_size=len(tokenizer),
        n_positions=args.context,
        n_embd=args.dim,
        n_layer=args.layers,
        n_head=args.heads,
        multi_query=True,
        activation_function="gelu_pytorch_tanh",
        resid_pdrop=args.dropout,
        embd_pdrop=args.dropout,
        attn_pdrop=args.dropout,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD),
    )
    return GPTBigCodeForCausalLM(config)


def training_device(choice: str) -> torch.device:
    """``auto``: the GPU if torch sees one, else the CPU."""
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def main(argv: list[str] | None = None) -> None:
    started = time.monotonic()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=7.0, help="training time budget")
    ap.add_argument(
        "--end-by",
        type=float,
        default=None,
        metavar="MINUTES",
        help="end the whole run within MINUTES of its start, reading the corpus included: training "
        "gets at most what is left less a minute for the held-out losses and saving (a lent "
        "machine's call has a hard limit)",
    )
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "fimconstrain" / "default_model"
    )
    ap.add_argument("--stdlib", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dim", type=int, default=320)
    ap.add_argument("--heads", type=int, default=5)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--fim-rate", type=float, default=0.5)
    ap.add_argument("--spm-rate", type=float, default=0.5, help="share of the FIM examples in SPM order")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto", help="auto (GPU if available), cpu or cuda")
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes that draw examples (default: 0 on the CPU, 12 on a GPU)",
    )
    ap.add_argument(
        "--dropout", type=float, default=0.1, help="dropout on residuals, embeddings and attention"
    )
    ap.add_argument(
        "--eval-minutes",
        type=float,
        default=0.5,
        help="evaluate on held-out files this often and keep the best weights",
    )
    ap.add_argument(
        "--python-version",
        default=platform.python_version(),
        help="the Python whose standard library --stdlib is (for the model card)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--init",
        type=Path,
        default=None,
        help="continue training this saved model (and keep its tokenizer) instead of starting afresh",
    )
    ap.add_argument("--checkpoint-minutes", type=float, default=5.0, help="save this often while training")
    ap.add_argument(
        "--code",
        type=Path,
        nargs="+",
        default=None,
        help="train on the permissively licensed code installed in these site-packages directories "
        "instead of the standard library (see permissive_code.py)",
    )
    ap.add_argument("--code-chars", type=float, default=60e6, help="characters of --code to train on")
    ap.add_argument(
        "--code-per-distribution",
        type=float,
        default=3e6,
        help="most characters of one distribution",
    )
    ap.add_argument("--manifest", type=Path, default=None, help="write the --code files' manifest here")
    ap.add_argument(
        "--cpu-bf16",
        action="store_true",
        help="bfloat16 autocast on the CPU (2x faster where supported)",
    )
    ap.add_argument(
        "--heldout-only", action="store_true", help="print the --init model's held-out losses and exit"
    )
    ap.add_argument(
        "--card", type=Path, metavar="DIR", help="rewrite DIR's README.md from its training.json and exit"
    )
    args = ap.parse_args(argv)
    if args.card:
        write_card(args.card, json.loads((args.card / "training.json").read_text("utf-8")))
        print(f"wrote {args.card / 'README.md'}")
        return
    if args.heldout_only and not args.init:
        ap.error("--heldout-only needs --init MODEL")
    device = training_device(args.device)
    workers = args.workers if args.workers is not None else (12 if device.type == "cuda" else 0)
    torch.backends.cuda.matmul.allow_tf32 = True

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    corpus = load_corpus(args.stdlib)
    train_texts = list(corpus.train.values())
    print(f"{len(corpus.train)} training files, {len(corpus.heldout)} held out", flush=True)
    code: dict | None = None
    code_heldout: list[str] = []
    if args.code:
        stdlib = {
            hashlib.sha256(t.encode()).hexdigest() for t in (*corpus.train.values(), *corpus.heldout.values())
        }
        found = list(
            tqdm(
                collect(args.code, skip_hashes=stdlib), desc="collecting code", unit=" files", mininterval=10
            )
        )
        code_files, heldout_files = select_code(found, args.code_chars, args.code_per_distribution)
        train_texts = [f.text for f in code_files]
        code_heldout = [f.text for f in heldout_files[:CODE_HELDOUT_FILES]]
        if args.manifest:
            write_manifest(code_files, args.manifest)
        code = {
            "site_packages": [str(p) for p in args.code],
            "distributions": len({f.distribution for f in code_files}),
            "files": len(code_files),
            "chars": sum(map(len, train_texts)),
            "heldout_files": len(code_heldout),
            "manifest": str(args.manifest) if args.manifest else None,
        }
        print(
            f"code: {code['files']} training files of {code['distributions']} distributions "
            f"({code['chars'] / 1e6:.1f} M characters), {len(heldout_files)} held out",
            flush=True,
        )
    previous = json.loads((args.init / "training.json").read_text()) if args.init else None
    if args.init:
        tokenizer = PreTrainedTokenizerFast.from_pretrained(args.init)
        model = GPTBigCodeForCausalLM.from_pretrained(args.init, dtype=torch.float32)
        args.context = model.config.n_positions
    else:
        tokenizer = train_tokenizer(train_texts, args.vocab_size)
        model = new_model(args, tokenizer)
    heldout = ExampleSampler(list(corpus.heldout.values()), tokenizer, args.context, 1.0, args.seed)
    heldout_code = (
        ExampleSampler(code_heldout, tokenizer, args.context, 1.0, args.seed) if code_heldout else None
    )
    if args.heldout_only:
        print(
            "held out (standard library):",
            json.dumps(evaluate(model, heldout, HELDOUT_BATCHES, args.batch_size)),
        )
        if heldout_code is not None:
            print(
                "held out (code):",
                json.dumps(evaluate(model, heldout_code, HELDOUT_BATCHES, args.batch_size)),
            )
        return
    selection = heldout_code or heldout  # the held-out files the kept weights are chosen on
    sampler = ExampleSampler(train_texts, tokenizer, args.context, args.fim_rate, args.seed, args.spm_rate)
    print(f"vocabulary {len(tokenizer)}, {len(sampler.stream)} training tokens", flush=True)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the example workers fork after the tokenizer ran
    model.to(device)
    stream = batches(sampler, args.batch_size, args.seed, workers, pin=device.type == "cuda")

    config = model.config
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )

    budget = args.minutes * 60
    if args.end_by is not None:
        budget = max(0.0, min(budget, (args.end_by - 1) * 60 - (time.monotonic() - started)))
        print(f"training for {budget / 60:.1f} minutes (--end-by {args.end_by})", flush=True)
    start = last_save = last_eval = time.monotonic()
    steps = tokens = 0
    ema = None
    curve, heldout_curve = [], []
    best = None  # (held-out FIM loss, minute, weights on the CPU)
    bar = tqdm(total=int(budget), unit="s", desc="training", mininterval=10)
    while (elapsed := time.monotonic() - start) < budget:
        for group in opt.param_groups:
            group["lr"] = lr_at(elapsed / budget, args.lr)
        ids, mask, labels = (t.to(device, non_blocking=True) for t in next(stream))
        with torch.autocast(
            device.type, dtype=torch.bfloat16, enabled=device.type == "cuda" or args.cpu_bf16
        ):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        steps += 1
        tokens += int(mask.sum())
        value = loss.item()
        ema = value if ema is None else 0.98 * ema + 0.02 * value
        if steps % 25 == 0:
            curve.append({"step": steps, "minutes": elapsed / 60, "loss": round(ema, 4)})
        bar.update(int(time.monotonic() - start) - bar.n)
        bar.set_postfix(step=steps, loss=f"{ema:.3f}", tok_s=f"{tokens / max(elapsed, 1e-9):.0f}")
        if time.monotonic() - last_eval > args.eval_minutes * 60:
            fim_loss = evaluate(model, selection, batches=4, batch_size=args.batch_size)["fim_loss"]
            heldout_curve.append({"step": steps, "minutes": elapsed / 60, "fim_loss": round(fim_loss, 4)})
            tqdm.write(f"minute {elapsed / 60:.1f}: held-out FIM loss {fim_loss:.3f}")
            if best is None or fim_loss < best[0]:
                weights = {
                    name: value.detach().to("cpu", copy=True) for name, value in model.state_dict().items()
                }
                best = (fim_loss, elapsed / 60, weights)
            last_eval = time.monotonic()
        if time.monotonic() - last_save > args.checkpoint_minutes * 60:
            save(model, tokenizer, args.out)
            last_save = time.monotonic()
    bar.close()
    minutes = (time.monotonic() - start) / 60

    fim_loss = evaluate(model, selection, batches=4, batch_size=args.batch_size)["fim_loss"]
    heldout_curve.append({"step": steps, "minutes": minutes, "fim_loss": round(fim_loss, 4)})
    if best is not None and best[0] < fim_loss:
        model.load_state_dict(best[2])
    else:
        best = (fim_loss, minutes, None)
    ev = evaluate(model, heldout, batches=HELDOUT_BATCHES, batch_size=args.batch_size)
    print("held out:", json.dumps(ev), flush=True)
    if heldout_code is not None and code is not None:
        code["heldout"] = evaluate(model, heldout_code, batches=HELDOUT_BATCHES, batch_size=args.batch_size)
        print("held out (code):", json.dumps(code["heldout"]), flush=True)
    if args.out.exists():
        shutil.rmtree(args.out)
    save(model, tokenizer, args.out)
    size_mb = sum(p.stat().st_size for p in args.out.iterdir()) / 1e6
    run = {
        "steps": steps,
        "tokens": tokens,
        "minutes": minutes,
        "minutes_budget": budget / 60,
        "threads": args.threads,
        "tokens_per_s": tokens / (minutes * 60),
        "lr": args.lr,
        "batch_size": args.batch_size,
        "seed": args.seed,
        "final_train_loss": ema,
        "curve": curve,
        "examples": EXAMPLES.format(fim=args.fim_rate, spm=args.spm_rate, mid=MAX_MIDDLE_TOKENS),
        "torch": torch.__version__,
        "command": " ".join(
            ["python", "scripts/train_default_model.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "dropout": args.dropout,
        "fim_rate": args.fim_rate,
        "spm_rate": args.spm_rate,
        "heldout_curve": heldout_curve,
        "code": code,
        "cpu_bf16": args.cpu_bf16,
        "best_minutes": best[1],
        "best_heldout_loss": best[0],
    }
    facts = {
        "python": args.python_version,
        "stdlib": str(corpus.root),
        "train_files": len(corpus.train),
        "train_chars": sum(map(len, train_texts)),
        "heldout_files": len(corpus.heldout),
        "heldout_paths": sorted(corpus.heldout),
        "vocab_size": len(tokenizer),
        "config": config.to_dict(),
        "parameters": n_params,
        "size_mb": size_mb,
        "heldout": ev,
        "heldout_examples": HELDOUT_BATCHES * args.batch_size,
        "runs": (previous or {}).get("runs", []) + [run],
    }
    (args.out / "training.json").write_text(json.dumps(facts, indent=1) + "\n")
    write_card(args.out, facts)
    print(f"saved to {args.out} ({size_mb:.1f} MB)", flush=True)


if __name__ == "__main__":
    main()
