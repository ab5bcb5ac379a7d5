"""Rendered manifests, shared by the deploy tests (rendered once per session: the YAML is small)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.render import render

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"
KUSTOMIZATIONS = ("base", *(f"overlays/{p.name}" for p in sorted((DEPLOY_DIR / "overlays").iterdir()) if p.is_dir()))


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(DEPLOY_DIR / name) for name in KUSTOMIZATIONS}


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind]
    assert len(matches) == 1, f"expected one {kind}, found {len(matches)}"
    return matches[0]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = only(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    return c
