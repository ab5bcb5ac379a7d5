"""docs/support.md, the one page that states versions, says what the code speaks and what the tests check.

Each claim of the page is read back from its source: the DRA version order and the kubelet services from
the driver's modules, the schema versions from the tests that validate against them, the API stand-in's
release mapping, the Python floor from pyproject.toml and the Dockerfile. A change to any of them without
the page (or the other way round) fails here.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from device_plugin.dra_helper.api.slices import API_VERSIONS
from device_plugin.dra_helper.service.servicers import SERVED
from device_plugin.standins.api_objects import RELEASE_OF
from tests.deploy.test_render import KUBERNETES_VERSIONS as DEVICE_PLUGIN_SCHEMAS
from tests.dra.test_deploy import VERSIONS as DRA_SCHEMAS

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "support.md").read_text(encoding="utf-8")
FLAT = " ".join(PAGE.split())  # prose wraps anywhere


def dra_rows() -> dict[str, list[str]]:
    """Release -> cells of the DRA table (the rows whose first cell is a 1.x release)."""
    rows = {}
    for line in PAGE.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| 1.") and len(cells) >= 4:
            rows[cells[0]] = cells[1:]
    return rows


def test_the_version_order_is_the_drivers() -> None:
    order = ", else ".join(f"`{version}`" for version in API_VERSIONS)
    assert order in FLAT


def test_the_dra_table_has_the_releases_the_driver_can_publish_to() -> None:
    assert sorted(dra_rows()) == sorted({*RELEASE_OF.values(), *DRA_SCHEMAS})


@pytest.mark.parametrize(("version", "release"), sorted(RELEASE_OF.items()), ids=sorted(RELEASE_OF.values()))
def test_each_release_publishes_the_version_the_api_stand_in_plays(version: str, release: str) -> None:
    assert dra_rows()[release][0].startswith(f"`{version}`")


def test_the_kubelet_services_are_those_served() -> None:
    served = [version for _, _, version in SERVED]
    assert " and ".join(f"`{version}`" for version in served) in FLAT
    assert {row[1] for row in dra_rows().values()} <= {f"`{version}`" for version in served}


def test_deploy_dra_is_validated_for_exactly_the_rows_that_say_so() -> None:
    said = sorted(release for release, cells in dra_rows().items() if cells[2].startswith("validated offline"))
    assert said == sorted(DRA_SCHEMAS)


def test_the_device_plugin_manifests_name_the_schemas_they_are_validated_against() -> None:
    (row,) = [line for line in PAGE.splitlines() if line.startswith("| manifests (`deploy/base`")]
    assert re.findall(r"1\.\d+", row) == list(DEVICE_PLUGIN_SCHEMAS)


def test_the_python_floor_is_the_packages() -> None:
    requires = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["requires-python"]
    floor = requires.removeprefix(">=")
    image = re.search(r"PYTHON_IMAGE=python:(\d+\.\d+)", (REPO / "Dockerfile").read_text(encoding="utf-8"))
    assert image is not None
    assert f"| Python | {floor} or newer" in FLAT and f"the image uses {image.group(1)}" in FLAT
