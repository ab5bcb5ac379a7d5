"""Every YAML/JSON example in README.md and docs/*.md loads with the daemon's own parser (docs that cannot drift).

Each fenced `yaml` or `json` block is one of: a config file (its top-level keys are config sections),
loaded by parse_config; a machine description (top-level `name` and `gpus`), loaded by the
machine-description parser; a Kubernetes object (`apiVersion` and `kind`); or a pod-spec fragment
named in KUBERNETES_FRAGMENTS. A block that is none of these fails the test, so a new kind of example
has to be classified here rather than go unchecked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from device_plugin.config.model import parse_config
from device_plugin.config.schema import TOP_LEVEL
from device_plugin.nvml.fake.description import parse_machine_yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Keys of pod-spec fragments shown in the docs (probes for the DaemonSet); checked for shape only.
KUBERNETES_FRAGMENTS = {frozenset({"livenessProbe", "readinessProbe"})}
_FENCE = re.compile(r"^```(yaml|json)\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str, str]]:
    """(id, language, text) of every yaml/json block, ids naming the file and the block's line."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(REPO)}:{line}", match.group(1), match.group(2)))
    return found


def _load(language: str, text: str) -> Any:
    return json.loads(text) if language == "json" else yaml.safe_load(text)


def _kind(loaded: Any) -> str:
    if not isinstance(loaded, dict) or not loaded:
        return "other"
    keys = set(loaded)
    if keys <= set(TOP_LEVEL):
        return "config"
    if {"name", "gpus"} <= keys:
        return "machine"
    if {"apiVersion", "kind"} <= keys:
        return "kubernetes"
    if frozenset(keys) in KUBERNETES_FRAGMENTS:
        return "fragment"
    return "other"


BLOCKS = _blocks()
BY_KIND: dict[str, list[tuple[str, str, str]]] = {}
for _block in BLOCKS:
    BY_KIND.setdefault(_kind(_load(_block[1], _block[2])), []).append(_block)


def _ids(blocks: list[tuple[str, str, str]]) -> list[str]:
    return [block_id for block_id, _, _ in blocks]


@pytest.mark.parametrize(
    ("kind", "at_least"),
    [("config", 5), ("machine", 3)],
    ids=["config-examples-exist", "machine-description-examples-exist"],
)
def test_the_docs_have_examples_of_each_kind(kind: str, at_least: int) -> None:
    assert len(BY_KIND.get(kind, [])) >= at_least, f"only {_ids(BY_KIND.get(kind, []))}"


@pytest.mark.parametrize(("block_id", "language", "text"), BLOCKS, ids=_ids(BLOCKS))
def test_every_example_is_a_known_kind(block_id: str, language: str, text: str) -> None:
    assert _kind(_load(language, text)) != "other", f"{block_id}: not a config, machine description or manifest"


CONFIGS = BY_KIND.get("config", [])


@pytest.mark.parametrize(("block_id", "language", "text"), CONFIGS, ids=_ids(CONFIGS))
def test_config_example_loads(block_id: str, language: str, text: str) -> None:
    parse_config(_load(language, text))


MACHINES = BY_KIND.get("machine", [])


@pytest.mark.parametrize(("block_id", "language", "text"), MACHINES, ids=_ids(MACHINES))
def test_machine_description_example_loads(block_id: str, language: str, text: str) -> None:
    machine = parse_machine_yaml(text, source=block_id)
    assert machine.gpus, "a machine has at least one GPU"


def test_the_machine_description_doc_shows_complete_machines() -> None:
    in_doc = [block_id for block_id in _ids(MACHINES) if block_id.startswith("docs/machine-description.md")]
    assert len(in_doc) >= 2
