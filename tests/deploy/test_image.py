"""One edit sets the image everywhere: the README's sed line changes only deploy/overlays/image, so every
kustomization that runs our DaemonSet on GPU nodes builds on that overlay and none sets an image of its own.
Two run the base's local tag on purpose (LOCAL_TAG, with the reason); no other renders it."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.conftest import ALL, DEPLOY_DIR, Rendered, container
from tests.deploy.kustomize import KUSTOMIZATION_FILES, build

REPO = DEPLOY_DIR.parent
IMAGE_OVERLAY = DEPLOY_DIR / "overlays" / "image" / "kustomization.yaml"
LOCAL_TAG = {
    "base": "the layer the overlays list; applied alone it names an image that no node can pull",
    "overlays/fake-gpu": "for kind or minikube, whose nodes get the local build by `kind load docker-image`",
}
# At least these run the DaemonSet on GPU nodes (the test below finds the rest by rendering).
GPU_NODE_MODES = {
    "overlays/image",
    "overlays/time-slicing",
    "overlays/mig-mixed",
    "overlays/cdi",
    "overlays/network-policy",
    "overlays/device-plugin-pool",
    "dra",
    "dra/extended-resource",
}
DOCUMENTED_SED = re.compile(r"sed -i '([^']+)' deploy/overlays/image/kustomization\.yaml")


def image_overlay_entry(kustomization: Path = IMAGE_OVERLAY) -> tuple[str, str]:
    """(the image name the overlay's `images:` entry rewrites, the image it sets), read from the overlay."""
    (entry,) = yaml.safe_load(kustomization.read_text())["images"]
    suffix = f"@{entry['digest']}" if "digest" in entry else f":{entry['newTag']}"
    return entry["name"], f"{entry['newName']}{suffix}"


def daemonset_images(objects: list[dict[str, Any]]) -> list[str]:
    pods = [o["spec"]["template"]["spec"] for o in objects if o["kind"] == "DaemonSet"]
    return [c["image"] for pod in pods for c in [*pod["containers"], *pod.get("initContainers", [])]]


def strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def gpu_node_kustomizations(rendered: Rendered) -> set[str]:
    return {name for name in ALL if name not in LOCAL_TAG and daemonset_images(rendered[name])}


def test_the_overlay_rewrites_the_base_image_to_a_registry(rendered: Rendered) -> None:
    name, image = image_overlay_entry()
    local = container(rendered["base"])["image"]
    assert local.split(":", 1)[0] == name and "/" not in local, "the entry targets the base's local image"
    assert "/" in image and image != local, "the overlay names an image in a registry"


@pytest.mark.parametrize("name", ALL)
def test_gpu_nodes_run_the_image_overlays_image_and_nothing_else_the_local_tag(rendered: Rendered, name: str) -> None:
    _, image = image_overlay_entry()
    local = container(rendered["base"])["image"]
    images = daemonset_images(rendered[name])
    if name in LOCAL_TAG:
        assert images == [local], LOCAL_TAG[name]
    else:
        assert set(images) <= {image}, f"deploy/{name} runs {images}: list ../image (or the overlay on it)"
        assert local not in strings(rendered[name]), f"deploy/{name} names the local tag {local}"


def test_the_check_covers_every_mode_on_gpu_nodes(rendered: Rendered) -> None:
    assert gpu_node_kustomizations(rendered) >= GPU_NODE_MODES


def test_only_the_image_overlay_sets_an_image() -> None:
    files = [DEPLOY_DIR / name / f for name in ALL for f in KUSTOMIZATION_FILES if (DEPLOY_DIR / name / f).is_file()]
    setting = [str(p.relative_to(DEPLOY_DIR)) for p in files if "images" in yaml.safe_load(p.read_text())]
    assert setting == [str(IMAGE_OVERLAY.relative_to(DEPLOY_DIR))], "the sed line edits only that file"


def test_the_documented_sed_line_sets_the_image_of_every_gpu_node_kustomization(
    rendered: Rendered, tmp_path: Path
) -> None:
    """docs/deploy.md's line, run by sed on a copy of deploy/, then every GPU-node kustomization rendered again."""
    guide = (REPO / "docs" / "deploy.md").read_text()
    (expression,) = set(DOCUMENTED_SED.findall(guide))
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY_DIR, copy)
    registry = "registry.test:5000/team"
    edited = copy / IMAGE_OVERLAY.relative_to(DEPLOY_DIR)
    subprocess.run(["sed", "-i", expression.replace("<registry>", registry), str(edited)], check=True, timeout=30)
    _, image = image_overlay_entry(edited)
    assert image.startswith(f"{registry}/") and "registry.example.com" not in edited.read_text()
    for name in sorted(gpu_node_kustomizations(rendered)):
        assert set(daemonset_images(build(copy / name))) == {image}, name


def test_every_doc_shows_the_same_sed_line() -> None:
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    found = {m for doc in docs for m in DOCUMENTED_SED.findall(doc.read_text())}
    assert len(found) == 1, found


def test_the_kind_lines_load_the_image_fake_gpu_runs(rendered: Rendered) -> None:
    text = (REPO / "docs" / "deploy.md").read_text()
    pattern = r"(?:docker build -t|kind load docker-image|minikube image load) ([\w.:/-]+)"
    loaded = set(re.findall(pattern, text))
    assert loaded == {container(rendered["overlays/fake-gpu"])["image"]}
