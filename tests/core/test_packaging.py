"""pyproject.toml in the form setuptools keeps reading: `project.license` as a table stops working after
2027-02-18 (setuptools' deprecation), so the license is an SPDX expression and the backend is bounded to a
setuptools that reads one (issue 32 item 9)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_license_is_an_spdx_expression_with_its_file() -> None:
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]


def test_the_build_backend_reads_spdx_licenses() -> None:
    (requirement,) = PYPROJECT["build-system"]["requires"]
    found = re.fullmatch(r"setuptools>=([0-9]+)", requirement)
    assert found is not None and int(found[1]) >= 77, requirement
