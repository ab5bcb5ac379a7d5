"""Every config example in the README loads with the daemon's own parser (docs that cannot drift)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from device_plugin.config.model import parse_config
from device_plugin.config.schema import TOP_LEVEL

REPO = Path(__file__).resolve().parents[2]
TEXT = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
BLOCKS = re.findall(r"```yaml\n(.*?)```", TEXT, flags=re.DOTALL)
CONFIGS = [
    (i, block)
    for i, block in enumerate(BLOCKS)
    if isinstance(loaded := yaml.safe_load(block), dict) and loaded and set(loaded) <= set(TOP_LEVEL)
]


def test_the_readme_has_config_examples() -> None:
    assert len(CONFIGS) >= 3


@pytest.mark.parametrize(("index", "block"), CONFIGS, ids=[f"yaml-block-{i}" for i, _ in CONFIGS])
def test_readme_config_example_loads(index: int, block: str) -> None:
    parse_config(yaml.safe_load(block))
