"""The editor's shape of a completion (no model, no LSP here): :func:`wants_multiline` decides
whether the cursor's context asks for one line or a block. How the middle then ends is the
decode loop's one policy, :mod:`fimconstrain.decoding.end_of_middle`."""

from __future__ import annotations

import re

from fimconstrain.decoding.positions import NEWLINE


def wants_multiline(prefix: str, suffix: str, policy: str = "auto") -> bool:
    """Whether to offer a block (True) or one line (False) at the cursor between ``prefix`` and ``suffix``.

    ``auto``: text after the cursor on its line -> one line (an edit inside a line);
    an empty or indentation-only line, or a line that opens a block (ends in ``:``)
    -> a block; otherwise (finishing a line) -> one line.
    """
    if policy == "always":
        return True
    if policy == "never":
        return False
    rest = NEWLINE.split(suffix, maxsplit=1)[0]
    if rest.strip():
        return False
    line = prefix[max(prefix.rfind("\n"), prefix.rfind("\r")) + 1 :]  # (not a split of the whole file)
    if not line.strip():
        return True
    code = re.sub(r"\s*#[^'\"]*$", "", line).rstrip()  # drop a trailing comment (not one inside a string)
    return code.endswith(":")
