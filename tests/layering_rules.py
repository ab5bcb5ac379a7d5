"""The machinery of tests/test_layering.py: reading the imports out of the source, and the rules it applies.

The tables (LAYERS, THIRD_PARTY, ...) and the tests stay in tests/test_layering.py; everything here takes
them as arguments, so the same rules run on the real source and on the synthetic graphs there.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

# ---- reading the source ------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    modules: Mapping[str, Path]  # dotted name -> file
    edges: Mapping[str, frozenset[str]]  # module -> our modules it imports
    third_party: Mapping[str, frozenset[str]]  # module -> third-party top-level packages it imports


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path, module: str) -> Iterable[str]:
    """Every dotted name an import statement in `path` may refer to, relative imports resolved."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - (node.level - 1)]
                parent = ".".join([*base, *([node.module] if node.module else [])])
            else:
                parent = node.module or ""
            yield parent
            yield from (f"{parent}.{alias.name}" for alias in node.names)


def read_source(root: Path, scanned: Sequence[str], layerless: str) -> Source:
    """The modules of the `scanned` packages under `root`, and what each imports (`layerless` is no target)."""
    modules = {module_name(p, root): p for package in scanned for p in sorted((root / package).rglob("*.py"))}
    edges: dict[str, frozenset[str]] = {}
    third: dict[str, frozenset[str]] = {}
    for module, path in modules.items():
        ours: set[str] = set()
        theirs: set[str] = set()
        for name in imported_names(path, module):
            top = name.split(".")[0]
            if top in scanned:
                target = name
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != module and target != layerless:  # `from device_plugin import x`
                    ours.add(target)
            elif top and top not in sys.stdlib_module_names:
                theirs.add(top)
        edges[module] = frozenset(ours)
        third[module] = frozenset(theirs)
    return Source(modules, edges, third)


# ---- the rules ---------------------------------------------------------------------------------


def unit_of(module: str, layers: Sequence[Sequence[str]]) -> str | None:
    units = [u for layer in layers for u in layer if module == u or module.startswith(u + ".")]
    return max(units, key=len, default=None)


def layer_index(layers: Sequence[Sequence[str]]) -> dict[str, int]:
    return {unit: i for i, layer in enumerate(layers) for unit in layer}


def direction_violations(edges: Mapping[str, Iterable[str]], layers: Sequence[Sequence[str]]) -> list[str]:
    """Each import that points up, or sideways to another unit of the same layer."""
    index = layer_index(layers)
    found = []
    for module, targets in sorted(edges.items()):
        source_unit = unit_of(module, layers)
        for target in sorted(targets):
            target_unit = unit_of(target, layers)
            if source_unit is None or target_unit is None or source_unit == target_unit:
                continue  # unplaced modules fail their own test
            here, there = index[source_unit], index[target_unit]
            if there < here:
                found.append(f"{module} imports {target}: up from layer {here} to layer {there}")
            elif there == here:
                found.append(f"{module} imports {target}: sideways, {source_unit} and {target_unit} share a layer")
    return found


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import cycles (strongly connected groups of more than one module, or a self-import), each as a path."""
    graph = {m: sorted(t for t in targets if t in edges) for m, targets in edges.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's algorithm; the module graph is small and shallow
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph[node]:
                groups.append(group)

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return [_cycle_path(sorted(group), graph) for group in groups]


def _cycle_path(group: list[str], graph: Mapping[str, Sequence[str]]) -> list[str]:
    """One concrete cycle through the group's first module: a -> b -> ... -> a."""
    members = set(group)
    start = group[0]
    paths = [[start]]
    while paths:  # breadth first: the shortest way back to start
        path = paths.pop(0)
        for nxt in graph[path[-1]]:
            if nxt == start:
                return [*path, start]
            if nxt in members and nxt not in path:
                paths.append([*path, nxt])
    return [*group, start]  # unreachable for a strongly connected group


def matches(module: str, pattern: str) -> bool:
    return module == pattern or module.startswith(pattern + ".") or fnmatchcase(module, pattern)


def dynamic_imports(path: Path) -> list[int]:
    """Lines of calls that import by name at run time: importlib.import_module(...), __import__(...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__"):
            found.append(node.lineno)
    return found


# ---- reading the diagram in docs/architecture.md ------------------------------------------------


def diagram_layers(text: str) -> list[list[str]]:
    block = re.search(r"^```layers\n(.*?)^```", text, flags=re.M | re.S)
    assert block, "docs/architecture.md has no ```layers block"
    rows = []
    for line in block.group(1).splitlines():
        units, _, description = line.partition("  ")
        assert description.strip(), f"layer without a description: {line!r}"
        rows.append([u.strip() for u in units.split(" | ")])
    return rows


def beyond_allowed(edges: Mapping[str, Iterable[str]], package: str, allowed: tuple[str, ...]) -> dict[str, list[str]]:
    """For each module of `package`, what it imports outside itself and `allowed` (only those with any)."""
    modules = [m for m in edges if matches(m, package)]
    beyond = {
        m: sorted(t for t in edges[m] if not matches(t, package) and not any(matches(t, a) for a in allowed))
        for m in modules
    }
    return {m: t for m, t in beyond.items() if t}
