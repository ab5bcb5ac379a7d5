"""Rendered manifests for the deploy tests: every kustomization under deploy/, rendered by real kustomize
(tests/deploy/kustomize.py) the first time a test reads it, once per test process."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.kustomize import DEPLOY_DIR, Rendered, kustomizations

__all__ = ["ALL", "DEPLOY_DIR", "KUSTOMIZATIONS", "Rendered", "container", "only"]

ALL = kustomizations()
# The device-plugin mode's: the base and its overlays (deploy/dra and deploy/monitoring have tests of their own).
KUSTOMIZATIONS = [name for name in ALL if name == "base" or name.startswith("overlays/")]


@pytest.fixture(scope="session")
def rendered() -> Rendered:
    return Rendered()


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    matches = [o for o in objects if o["kind"] == kind]
    assert len(matches) == 1, f"expected one {kind}, found {len(matches)}"
    return matches[0]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = only(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    return c
