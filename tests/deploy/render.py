"""A small, honest kustomize stand-in for tests: `resources`, strategic-merge `patches` and `images`.

Why: CI machines may lack kustomize (and have no network to fetch it). The manifests under deploy/ use
only these two features, and render() refuses any other kustomization key, so a manifest change that
needs real kustomize fails loudly here instead of being rendered wrongly. When `kustomize` or `kubectl`
is on PATH, tests/deploy/test_render.py checks that both renderings agree object for object.

`images` rewrites the image of every container and init container whose image name (without tag or
digest) matches `name`, to `newName` (if given) with `newTag` or `digest` (if given), as kustomize's image
transformer does for pod templates.

Strategic merge, as the Kubernetes API defines it for the fields we patch: maps merge recursively; the
lists containers/initContainers/env/volumes (key `name`), volumeMounts (`mountPath`) and ports
(`containerPort`) merge by key, patch items first then the base's others (kustomize's order); every
other list, and every scalar, is replaced by the patch.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}
SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "patches", "images"}
IMAGE_KEYS = {"name", "newName", "newTag", "digest"}

Obj = dict[str, Any]


def identity(obj: Obj) -> tuple[str, str, str, str]:
    meta = obj.get("metadata", {})
    return (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])


def load_documents(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def render(directory: Path) -> list[Obj]:
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise ValueError(f"{directory}: kustomization keys {sorted(unsupported)} need real kustomize")
    objects: list[Obj] = []
    for resource in kustomization.get("resources", []):
        path = directory / resource
        objects.extend(render(path) if path.is_dir() else load_documents(path))
    ids = [identity(o) for o in objects]
    if len(ids) != len(set(ids)):
        raise ValueError(f"{directory}: duplicate objects {sorted(i for i in ids if ids.count(i) > 1)}")
    for patch_entry in kustomization.get("patches", []):
        if set(patch_entry) != {"path"}:
            raise ValueError(f"{directory}: only `patches: - path: FILE` is supported, got {patch_entry}")
        for patch in load_documents(directory / patch_entry["path"]):
            targets = [i for i, o in enumerate(objects) if identity(o) == identity(patch)]
            if len(targets) != 1:
                raise ValueError(f"{directory}: patch {identity(patch)} matches {len(targets)} objects")
            objects[targets[0]] = merge(objects[targets[0]], patch)
    for image in kustomization.get("images", []):
        if not set(image) <= IMAGE_KEYS or "name" not in image:
            raise ValueError(f"{directory}: an `images` entry takes {sorted(IMAGE_KEYS)}, got {image}")
        for obj in objects:
            set_image(obj, image)
    return objects


def image_name(image: str) -> str:
    """'reg:5000/x/y:tag' -> 'reg:5000/x/y'; 'y@sha256:..' -> 'y' (a ':' before the last '/' is a port)."""
    without_digest = image.split("@", 1)[0]
    head, _, last = without_digest.rpartition("/")
    return f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]


def set_image(obj: Obj, image: dict[str, str]) -> None:
    pod = obj.get("spec", {}).get("template", {}).get("spec", {})
    for c in [*pod.get("containers", []), *pod.get("initContainers", [])]:
        if image_name(c.get("image", "")) != image["name"]:
            continue
        name = image.get("newName", image["name"])
        old_tag = c["image"][len(image_name(c["image"])) :]
        suffix = f"@{image['digest']}" if "digest" in image else f":{image['newTag']}" if "newTag" in image else old_tag
        c["image"] = name + suffix


def merge(base: Any, patch: Any, field: str = "") -> Any:
    if isinstance(base, dict) and isinstance(patch, dict):
        result = dict(base)
        for key, value in patch.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = merge(base[key], value, key) if key in base else value
        return result
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        originals = {item[key]: item for item in base}
        merged = [merge(originals[item[key]], item) if item[key] in originals else item for item in patch]
        patched = {item[key] for item in patch}
        return merged + [item for item in base if item[key] not in patched]
    return patch


def kustomize_command() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


def render_with_kustomize(directory: Path, command: list[str]) -> list[Obj]:
    out = subprocess.run([*command, str(directory)], check=True, capture_output=True, text=True, timeout=60)
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc is not None]


def by_identity(objects: Iterable[Obj]) -> dict[tuple[str, str, str, str], Obj]:
    return {identity(o): o for o in objects}
