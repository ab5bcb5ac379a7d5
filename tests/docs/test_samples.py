"""Output samples shown in the docs match what the code produces (their golden files), so they cannot go stale."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _block_after(doc: Path, marker: str) -> str:
    text = doc.read_text(encoding="utf-8")
    start = text.index(marker)
    match = re.compile(r"^```[a-z]*\n(.*?)^```", flags=re.DOTALL | re.MULTILINE).search(text, start)
    assert match is not None, f"no code block after {marker!r} in {doc.name}"
    return match.group(1)


@pytest.mark.parametrize(
    ("doc", "marker", "golden"),
    [
        (
            "docs/observability.md",
            "Sample labels file (`gpu-device-plugin labels --machine dgx1-v100`)",
            "tests/observability/golden/labels/dgx1-v100.txt",
        ),
    ],
    ids=["labels-dgx1-v100"],
)
def test_sample_matches_golden_file(doc: str, marker: str, golden: str) -> None:
    assert _block_after(REPO / doc, marker) == (REPO / golden).read_text(encoding="utf-8")
