"""What produced an evaluation record: the dataset's content, the model, its FIM format and every
decoding setting.

A record's resume key and its ``settings_id`` are hashes of these, so a rerun with another
budget, another model's weights or a dataset rebuilt with another seed under the same name runs
its experiments again instead of reusing the old ones, and ``report`` can refuse to pool results
that different settings produced (paper 004 §VII: a table is one model, one decoder, one dataset).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..decoding.models.loading import ModelNotFoundError

#: files that hold a checkpoint's weights, in the formats transformers reads (a GGUF beside them
#: is a copy for llama.cpp, which loads it as a file of its own)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack")


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_folder(name: str) -> Path:
    """The folder a model's weights were read from: ``name`` itself (a folder, or a GGUF file),
    or the snapshot of a hub id in the local Hugging Face cache (never downloaded)."""
    path = Path(name).expanduser()
    if path.is_dir() or path.is_file():
        return path.resolve()
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name, local_files_only=True)).resolve()
    except Exception as error:  # the hub's errors for a missing repo or file have no common base
        raise ModelNotFoundError(f"model {name!r}: no local folder or cache snapshot ({error})") from None


def weights_sha256(folder: Path) -> str:
    """One hash over the model's weight files (their names and contents, in name order); a
    single-file model (GGUF) is its file's hash."""
    if Path(folder).is_file():
        return file_sha256(Path(folder))
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))
    if not files:
        raise ModelNotFoundError(f"model folder {folder}: no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(folder).as_posix()}\0{file_sha256(path)}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class RunSettings:
    """Every decoding setting a record depends on (paper 004 §VII-B: greedy, top 50, 500 tokens)."""

    max_new_tokens: int = 64
    top_k: int = 50
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    order: str = "psm"
    python_version: str = "3.11"
    device: str = "cpu"
    dtype: str = "torch.float32"
    #: constrained middles: "cursor", one line or a block as the cursor asks (the editor's
    #: :func:`~fimconstrain.decoding.editor.policy.wants_multiline`); "free", the paper's (no line policy)
    shape: str = "cursor"


@dataclass(frozen=True)
class Provenance:
    """The model (folder and weights hash), its FIM format and the decoding settings of a run."""

    model: str  # the resolved folder the weights came from
    weights_sha256: str
    fim_format: str
    settings: RunSettings

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def settings_id(self) -> str:
        """A short hash of all of it: records with the same id may share a table."""
        return settings_id(self.to_dict())


def settings_id(provenance: dict) -> str:
    """The id of a provenance dict (as :meth:`Provenance.to_dict` writes it, or read back)."""
    return hashlib.sha256(json.dumps(provenance, sort_keys=True).encode()).hexdigest()[:12]


def record_key(dataset_sha256: str, example_id: str, mode: str, settings: str) -> str:
    """A record's resume key: which dataset content, which example, which mode, which settings."""
    return f"{dataset_sha256}|{example_id}|{mode}|{settings}"


def differences(provenances: dict[str, dict]) -> str:
    """The fields in which the provenances (by settings id) differ, one "id: field=value" line each."""

    def flat(value: dict, at: str = "") -> dict[str, object]:
        out: dict[str, object] = {}
        for key, item in value.items():
            out.update(flat(item, f"{at}{key}.") if isinstance(item, dict) else {f"{at}{key}": item})
        return out

    flats = {sid: flat(p) for sid, p in provenances.items()}
    fields = sorted({f for values in flats.values() for f in values})
    varying = [f for f in fields if len({json.dumps(v.get(f)) for v in flats.values()}) > 1]
    return "\n".join(
        f"  {sid}: " + ", ".join(f"{f.removeprefix('settings.')}={values.get(f)}" for f in varying)
        for sid, values in sorted(flats.items())
    )
