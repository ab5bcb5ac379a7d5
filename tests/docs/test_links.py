"""Every relative link in README.md and docs/*.md leads somewhere: the file exists, and an `#anchor` names a
heading of the target (GitHub's anchors: lower case, punctuation dropped, spaces to dashes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```.*?^```", flags=re.DOTALL | re.MULTILINE)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", flags=re.MULTILINE)
_EXTERNAL = ("http://", "https://", "mailto:")


def _prose(text: str) -> str:
    """The text outside fenced code blocks (whose `#` lines are comments, not headings)."""
    return _FENCE.sub("", text)


def github_anchor(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading counts by its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(_prose(path.read_text(encoding="utf-8"))):
        slug = github_anchor(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def _links() -> list[tuple[str, Path, str]]:
    """(id, source file, target) of every relative link."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        prose = _INLINE_CODE.sub("", _prose(text))
        for target in _LINK.findall(prose):
            if target.startswith(_EXTERNAL):
                continue
            link = (f"{path.relative_to(REPO)}->{target}", path, target)
            if link not in found:
                found.append(link)
    return found


LINKS = _links()


def test_the_docs_link_to_each_other() -> None:
    assert len(LINKS) >= 50
    assert any(target.startswith("docs/") for _, source, target in LINKS if source.name == "README.md")


@pytest.mark.parametrize(("source", "target"), [(s, t) for _, s, t in LINKS], ids=[i for i, _, _ in LINKS])
def test_relative_link_resolves(source: Path, target: str) -> None:
    file_part, _, anchor = target.partition("#")
    resolved = (source.parent / file_part).resolve() if file_part else source
    assert resolved.is_relative_to(REPO), f"{target}: leads outside the repository"
    assert resolved.exists(), f"{target}: no such file {resolved.relative_to(REPO)}"
    if anchor:
        assert resolved.suffix == ".md", f"{target}: an anchor into a file that is not markdown"
        assert anchor in anchors(resolved), f"{target}: no heading with anchor #{anchor} in {resolved.name}"


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("The demo (no GPU, no Kubernetes)", "the-demo-no-gpu-no-kubernetes"),
        ("The objective (`device_plugin/gpu_sets/objective.py`)", "the-objective-device_plugingpu_setsobjectivepy"),
        ("GPU\u2013NIC topology", "gpunic-topology"),
        ("Try it without GPUs (kind, minikube)", "try-it-without-gpus-kind-minikube"),
    ],
    ids=["parentheses-and-commas", "code-slashes-and-dots", "en-dash", "plain"],
)
def test_anchors_follow_github(heading: str, anchor: str) -> None:
    assert github_anchor(heading) == anchor


def test_code_comments_are_not_headings_and_repeats_are_numbered(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n```sh\n# a comment, not a heading\n```\n\n## Title\n", encoding="utf-8")
    assert anchors(page) == {"title", "title-1"}


def test_the_readme_links_every_docs_page() -> None:
    """The README is the front door: every page of the manual is reachable from it."""
    linked = {target.partition("#")[0] for _, source, target in LINKS if source.name == "README.md"}
    pages = {f"docs/{page.name}" for page in sorted((REPO / "docs").glob("*.md"))}
    assert pages - linked == set()
