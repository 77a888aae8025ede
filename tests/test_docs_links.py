"""Every link of README.md and docs/ resolves: a relative link to a file that exists, and an
anchor (``#...``) to a heading of the file it points at (GitHub's slugs). The README stays a
front door: at most about 150 lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "vscode-extension" / "README.md"]
#: a markdown link (not an image's) and the target in its parentheses
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
README_LINES = 160


def slugs(page: Path) -> set[str]:
    """The anchors GitHub gives ``page``'s headings (repeated ones get -1, -2, ...), and its
    ``<a id>`` anchors."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", page.read_text("utf-8")), re.M):
        text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out | set(re.findall(r'<a id="([^"]+)"', page.read_text("utf-8")))  # (explicit anchors)


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text("utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_link_resolves(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # (https:, mailto:...: not checked offline)
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no {file.relative_to(REPO) if file.is_relative_to(REPO) else file}")
        elif anchor and file.suffix == ".md" and anchor not in slugs(file):
            broken.append(f"{target}: no heading #{anchor} in {file.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text("utf-8").count("\n")
    assert lines <= README_LINES, f"README.md has {lines} lines; the manual goes to docs/"
