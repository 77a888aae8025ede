"""The one folder fimconstrain caches in: ``$FIMCONSTRAIN_CACHE``, else ``~/.cache/fimconstrain``.

Each kind of cached file has a subfolder of its own: ``masks/`` (token-mask stores), ``vocab/``
(a vocabulary's tables), ``tokenizers/``, ``models/`` (fetched models), ``default-model/`` (the
shipped model's GGUF copy), and the language server's remembered reading rates.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$FIMCONSTRAIN_CACHE`` or ``~/.cache/fimconstrain``, read at each call (tests set it)."""
    return Path(os.environ.get("FIMCONSTRAIN_CACHE") or Path.home() / ".cache" / "fimconstrain")
