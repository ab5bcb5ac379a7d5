"""deploy/ rendered by real kustomize: `kustomize build DIR` where kustomize is on PATH, else `kubectl kustomize
DIR` (the kustomize built into kubectl, the code `kubectl apply -k` renders with).

Responsibility: find the tool, find every kustomization under deploy/, run the tool once per kustomization
per test process (build() caches) and parse what it prints. What the objects must be is the tests' business.
Each caller gets its own copy of the cached objects, so a test that breaks one on purpose (to show that
validation catches it) changes nothing another test reads.

There is no fallback: a machine with neither tool fails every test that renders, with a message naming both,
because a stand-in renderer agrees with kustomize only where its author thought to make it agree.
"""

from __future__ import annotations

import copy
import functools
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"
# (the tool, the command that renders a folder with it), in the order they are preferred
TOOLS = (("kustomize", ("kustomize", "build")), ("kubectl", ("kubectl", "kustomize")))
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
RENDER_TIMEOUT_S = 60

Obj = dict[str, Any]


class KustomizeError(RuntimeError):
    """The tool is missing, or refused a kustomization: the message says which, and why."""


def kustomize_command(search_path: str | None = None) -> list[str]:
    """The command that renders a folder; `search_path` is a PATH to search instead of this process's."""
    for tool, command in TOOLS:
        if shutil.which(tool, path=search_path):
            return list(command)
    names = " nor ".join(f"`{tool}`" for tool, _ in TOOLS)
    raise KustomizeError(
        f"neither {names} is on PATH: the deploy tests render deploy/ with real kustomize "
        "(`kubectl kustomize DIR` or `kustomize build DIR`); install kubectl (it embeds kustomize)"
    )


def kustomizations(root: Path = DEPLOY_DIR) -> list[str]:
    """Every folder under `root` holding a kustomization, relative to `root` ('base', 'dra/examples', ...).
    Components (deploy/components/) are left out: kustomize renders them only inside a kustomization."""
    files = [p for name in KUSTOMIZATION_FILES for p in root.rglob(name)]
    found = {str(p.parent.relative_to(root)) for p in files if not _is_component(p)}
    return sorted(found)


def components(root: Path = DEPLOY_DIR) -> list[str]:
    """Every folder under `root` holding a kustomize Component, relative to `root`."""
    files = [p for name in KUSTOMIZATION_FILES for p in root.rglob(name)]
    return sorted(str(p.parent.relative_to(root)) for p in files if _is_component(p))


def _is_component(path: Path) -> bool:
    return bool((yaml.safe_load(path.read_text()) or {}).get("kind") == "Component")


def build(directory: Path | str) -> list[Obj]:
    """The objects `directory` renders to (a str is relative to deploy/), in the tool's order."""
    path = Path(directory) if isinstance(directory, Path) else DEPLOY_DIR / directory
    return copy.deepcopy(list(_build(path.resolve())))


@functools.cache
def _build(directory: Path) -> tuple[Obj, ...]:
    command = [*kustomize_command(), str(directory)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=RENDER_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise KustomizeError(f"`{' '.join(command)}` exited {done.returncode}:\n{done.stderr.strip()}")
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc is not None)


class Rendered(Mapping[str, list[Obj]]):
    """Kustomization under deploy/ ('dra/examples') -> its objects, rendered on first read: a test that reads
    one fails (rather than erroring in set-up) when the tool is missing or refuses it, and a test process
    renders only the kustomizations its tests read."""

    def __init__(self, root: Path = DEPLOY_DIR) -> None:
        self._root = root
        self._names = kustomizations(root)

    def __getitem__(self, name: str) -> list[Obj]:
        if name not in self._names:
            raise KeyError(f"no kustomization {self._root / name}")
        return build(self._root / name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def identity(obj: Obj) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name): what makes two objects the same object to the API server."""
    meta = obj.get("metadata", {})
    return (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])
