"""The Debian base's recipe: what the Dockerfile needs is in it, and its cache key follows every input."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tools.image.base import BaseRecipe

CHANGES: dict[str, Any] = {
    "suite": "trixie",
    "mirror": "http://mirror.example/debian",
    "packages": ("python3.11", "python3-venv"),
    "venv": "/usr/local/venv",
    "arch": "aarch64",
}


@pytest.mark.parametrize("field", CHANGES, ids=[f"{f}-changes-the-key" for f in CHANGES])
def test_every_input_is_in_the_key(field: str) -> None:
    recipe = BaseRecipe(arch="x86_64")
    changed = dataclasses.replace(recipe, **{field: CHANGES[field]})
    assert changed.key() != recipe.key()
    assert changed.tag() != recipe.tag()


def test_the_same_recipe_has_the_same_key_and_a_local_tag() -> None:
    assert BaseRecipe(arch="x86_64").key() == BaseRecipe(arch="x86_64").key()
    tag = BaseRecipe(arch="x86_64").tag()
    assert tag.startswith("localhost/gpu-device-plugin-base:bookworm-"), "buildah finds it without a registry"


def test_the_base_gives_the_dockerfile_pip_and_python_on_path() -> None:
    recipe = BaseRecipe()
    assert {"python3.11", "python3-venv"} <= set(recipe.packages)
    # debootstrap resolves no virtual package: python3.11-venv's python3.11-distutils comes from this one.
    assert "python3-distutils" in recipe.packages
    assert recipe.steps()[0] == f"/usr/bin/python3.11 -m venv {recipe.venv}"
    (path,) = recipe.env()
    assert path.startswith(f"PATH={recipe.venv}/bin:"), "the venv's pip and python come first"
    assert path.endswith(":/usr/bin:/sbin:/bin")
