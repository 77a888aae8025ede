"""Write a GPTBigCode checkpoint (the shipped model's architecture) as a GGUF file for llama.cpp.

llama.cpp's own converter stops on the shipped tokenizer (its pre-tokenizer hash is unknown to
it), so this one writes the file from the checkpoint directly with the ``gguf`` package: the
tensors under llama.cpp's ``starcoder`` names (``gguf``'s own name map), matrices in f16 or f32
and norms and biases in f32 as llama.cpp expects, the byte-level BPE vocabulary and merges with
the GPT-2 pre-tokenizer (which is what a ByteLevel tokenizer with its default pattern is), the
special tokens as control tokens, and the FIM marker ids of the project's format table. The output
depends only on the checkpoint, so exporting the same model twice gives the same bytes.

``fimconstrain export-gguf MODEL_DIR OUT.gguf [--dtype f16|f32]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ...engine.errors import FimConstrainError
from ..tokens.fim_formats import FORMATS, FimFormat

#: ``gguf``'s name for GPTBigCode
ARCHITECTURE = "starcoder"
#: llama.cpp's name for a ByteLevel pre-tokenizer with GPT-2's pattern
PRE_TOKENIZER = "gpt-2"
DTYPES = {"f16": np.float16, "f32": np.float32}


class ExportError(FimConstrainError):
    """A checkpoint this exporter cannot write as GGUF (another architecture or tokenizer)."""


def export_gguf(model_dir: str | Path, out: str | Path, dtype: str = "f16") -> Path:
    """Write the GPTBigCode checkpoint in ``model_dir`` (config.json, safetensors weights,
    tokenizer.json) to ``out`` as GGUF, matrices in ``dtype``; returns ``out``."""
    import gguf

    model_dir, out = Path(model_dir), Path(out)
    if dtype not in DTYPES:
        raise ExportError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    config = json.loads((model_dir / "config.json").read_text())
    if config.get("model_type") != "gpt_bigcode":
        raise ExportError(
            f"{model_dir}: model_type {config.get('model_type')!r}; this exporter writes GPTBigCode "
            f"checkpoints only (for other models use llama.cpp's convert_hf_to_gguf.py)"
        )
    tokenizer = json.loads((model_dir / "tokenizer.json").read_text())
    tensors = _tensors(model_dir)
    writer = gguf.GGUFWriter(str(out), ARCHITECTURE)
    writer.add_name(config.get("_name_or_path") or model_dir.name)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "f16" else gguf.LlamaFileType.ALL_F32)
    _add_hyperparameters(writer, config)
    _add_tokenizer(writer, tokenizer, config)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.STARCODER, int(config["n_layer"]))
    for name, array in tensors.items():
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise ExportError(f"{model_dir}: tensor {name!r} has no llama.cpp starcoder name")
        kept = DTYPES[dtype] if array.ndim > 1 else np.float32  # llama.cpp keeps 1-D tensors f32
        writer.add_tensor(gguf_name, np.ascontiguousarray(array, dtype=kept))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _tensors(model_dir: Path) -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint's safetensors files, in name order (a tied ``lm_head``
    is left out: llama.cpp's starcoder reads the token embedding when ``output`` is absent)."""
    from safetensors.numpy import load_file

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ExportError(f"{model_dir}: no .safetensors weights")
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        tensors.update(load_file(str(file)))
    tied = "transformer.wte.weight" in tensors and np.array_equal(
        tensors.get("lm_head.weight", tensors["transformer.wte.weight"]), tensors["transformer.wte.weight"]
    )
    if tied:
        tensors.pop("lm_head.weight", None)
    return dict(sorted(tensors.items()))


def _add_hyperparameters(writer, config: dict) -> None:
    """GPTBigCode's config under llama.cpp's starcoder keys (multi-query: one key/value head)."""
    n_embd = int(config["n_embd"])
    writer.add_context_length(int(config["n_positions"]))
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(int(config.get("n_inner") or 4 * n_embd))
    writer.add_block_count(int(config["n_layer"]))
    writer.add_head_count(int(config["n_head"]))
    writer.add_head_count_kv(1 if config.get("multi_query", True) else int(config["n_head"]))
    writer.add_layer_norm_eps(float(config.get("layer_norm_epsilon", 1e-5)))


def _add_tokenizer(writer, tokenizer: dict, config: dict) -> None:
    """The byte-level BPE of ``tokenizer.json``: tokens by id, merges, token types (added tokens
    are control tokens), the special ids, and the FIM markers of the format the vocabulary has."""
    import gguf

    model = tokenizer["model"]
    if model.get("type") != "BPE" or "ByteLevel" not in json.dumps(tokenizer.get("pre_tokenizer")):
        raise ExportError("only byte-level BPE tokenizers (GPT-2 style) can be exported")
    by_id = {index: token for token, index in model["vocab"].items()}
    control = {added["id"] for added in tokenizer.get("added_tokens", []) if added.get("special")}
    for added in tokenizer.get("added_tokens", []):
        by_id[added["id"]] = added["content"]
    size = int(config["vocab_size"])
    if len(by_id) > size:
        raise ExportError(f"tokenizer has {len(by_id)} tokens for a model of {size}")
    tokens = [by_id.get(index, f"[PAD{index}]") for index in range(size)]
    types = [
        gguf.TokenType.CONTROL
        if index in control
        else gguf.TokenType.NORMAL
        if index in by_id
        else gguf.TokenType.UNUSED
        for index in range(size)
    ]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(PRE_TOKENIZER)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model["merges"]])
    ids = {token: index for index, token in enumerate(tokens)}
    for key, add in (
        ("bos_token_id", writer.add_bos_token_id),
        ("eos_token_id", writer.add_eos_token_id),
        ("pad_token_id", writer.add_pad_token_id),
    ):
        if config.get(key) is not None:
            add(int(config[key]))
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    fim = _format_of(ids)
    if fim is not None:
        marker = {
            role: next(ids[s] for s in spellings if s in ids) for role, spellings in fim.markers.items()
        }
        keys = gguf.Keys.Tokenizer
        for role, key in (("PRE", keys.FIM_PRE_ID), ("SUF", keys.FIM_SUF_ID), ("MID", keys.FIM_MID_ID)):
            writer.add_uint32(key, marker[role])


def _format_of(ids: dict[str, int]) -> FimFormat | None:
    """The project's FIM format whose markers are all in the vocabulary, if any."""
    for fmt in FORMATS.values():
        if all(any(s in ids for s in spellings) for spellings in fmt.markers.values()):
            return fmt
    return None


def main_export(argv: list[str] | None = None) -> int:
    """``fimconstrain export-gguf``: write a checkpoint as GGUF."""
    ap = argparse.ArgumentParser(
        prog="fimconstrain export-gguf",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,  # (every option here has a default)
        description=(
            "Write a GPTBigCode checkpoint (the shipped model's architecture) as a GGUF file that "
            "llama.cpp runs and `--model FILE.gguf` loads. Other architectures: llama.cpp's own "
            "convert_hf_to_gguf.py."
        ),
    )
    ap.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        help="checkpoint directory (config.json, safetensors, tokenizer.json)",
    )
    ap.add_argument("out", metavar="OUT.gguf", help="the GGUF file to write")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f16", help="type of the weight matrices")
    args = ap.parse_args(argv)
    out = export_gguf(args.model_dir, args.out, args.dtype)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {args.dtype})")
    return 0
