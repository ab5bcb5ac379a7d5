"""The one boundary test: the layer order, stated once, and the third-party boundaries, checked on the source.

LAYERS lists the layers top to bottom; each layer is a tuple of units (a package or a module, dotted from
the repository root). A module belongs to the unit with the longest matching name. An import may point
down to any lower layer; it may not point up, nor sideways to another unit of its own layer. Inside a
unit, imports are free, but no module may take part in an import cycle (anywhere). Every import counts,
including deferred ones inside functions and `if TYPE_CHECKING:` ones: each is a dependency.

Where this order differs from a plain reading of the layout, and why:
- cli and commands/ are two layers: cli dispatches to commands/, and commands/run picks the node's
  front-end and builds its runtime. The front-ends (dp/: the device plugin; dra/: the DRA driver)
  sit above node/, the runtime both modes share: they implement its FrontEnd protocol, and node/ never
  names them. standins/ (the kubelet and API-server stand-ins of both modes) sits beside them, so
  neither front-end may import it; RESTRICTED lets only the demo and kubelet-standin commands do so.
- the two helpers sit side by side below node/ and above serving/: dp_helper/ (the device-plugin API's
  contract: registration, serving, ListAndWatch, the kubelet's restarts) and dra_helper/ (the generic
  half of a DRA driver: registration, the DRA and health services, claim reads, the prepare steps,
  slices, the checkpoint). Each front-end is built on its helper; neither helper may import the
  runtime. HELPER_MAY_IMPORT keeps dra_helper/ off the GPU layers below it as well.
- process/ (signals, log output; used by cli and commands/run, importing nothing of ours) sits beside node/.
- mig/ and timeslice/ (inside device_plugin/) sit above allocation/: they implement its policy protocol,
  read its ValidatedRequest and share its gpu_choice; allocation/ never names them (dp/composition).
- observability/ > health/ > gpu_sets/ > topology/: labels need the topology; the GPU-set choice needs the
  topology; health transitions are what metrics and labels report, so health sits below observability.
- serving/ sits just below dp_helper/ and dra_helper/: both serve kubelet sockets the same way (one
  event loop, 0600 binds, foreign files refused, sockets kept); dp/ and dra/ may not import each other.
- core/ (errors among its value types) sits below nvml/: every layer, the hardware boundary included,
  raises the project's errors, and core/ imports nothing of ours.
Every layer names folders (units are packages), except cli, the console script. No module is placed
outside its folder's unit. Dynamic imports (importlib, __import__) are refused outside cli.py: every
dependency is an import statement this test can read.

THIRD_PARTY names, for each third-party package, the units that may import it; a third-party import
that the table does not list fails, so a new dependency gets a home on purpose. mig/ and timeslice/ see
value types only (VALUE_TYPES). docs/architecture.md draws the same layers; the last tests compare.

The tables are here; reading the source and applying the rules is tests/layering_rules.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import layering_rules
from tests.layering_rules import cycles, diagram_layers, direction_violations, dynamic_imports, matches, read_source

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("device_plugin", "api")
DIAGRAM = ROOT / "docs" / "architecture.md"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("device_plugin.cli",),
    ("device_plugin.commands",),
    ("device_plugin.dp", "device_plugin.dra", "device_plugin.standins"),
    ("device_plugin.node", "device_plugin.process"),
    ("device_plugin.dp_helper", "device_plugin.dra_helper"),
    ("device_plugin.serving",),
    ("device_plugin.mig", "device_plugin.timeslice"),
    ("device_plugin.allocation",),
    ("device_plugin.observability",),
    ("device_plugin.health",),
    ("device_plugin.gpu_sets",),
    ("device_plugin.topology",),
    ("device_plugin.config",),
    ("device_plugin.nvml",),
    ("device_plugin.core",),
    ("api",),
)
# device_plugin/__init__.py holds only a docstring; it belongs to no layer and must import nothing.
LAYERLESS = "device_plugin"

# Third-party package -> who may import it (unit names, or fnmatch patterns on module names).
THIRD_PARTY: dict[str, tuple[str, ...]] = {
    "pynvml": ("device_plugin.nvml.real",),  # the real backend, a package of its own
    "grpc": (
        "device_plugin.dp_helper",
        "device_plugin.standins",
        "device_plugin.dra_helper",
        "device_plugin.serving",
        "api",
    ),
    "google": ("api",),  # protobuf, for the generated messages
    # The kubernetes client: only where the connection settings come from (and are read); dra: at start.
    "kubernetes": (
        "device_plugin.dra_helper.api.kube",
        "device_plugin.dra_helper.api.transport",
        "device_plugin.dra_helper.api.connection_settings",
        "device_plugin.dra_helper.plugin",
        "device_plugin.dra",
    ),
    "aiohttp": ("device_plugin.dra_helper.api.transport",),  # the one transport to the API server
    "prometheus_client": ("device_plugin.observability", "device_plugin.node"),
    "watchdog": ("device_plugin.dp_helper", "device_plugin.config"),
    "yaml": ("device_plugin.core.bounded_yaml",),  # the one YAML reader, with limits
}
# Our own packages that only some units may import, though they lie below everyone.
RESTRICTED = {
    "api": ("device_plugin.dp_helper", "device_plugin.standins", "device_plugin.dra_helper"),
    # The stand-ins ship for the demo, but the daemon never imports them.
    "device_plugin.standins": (
        "device_plugin.standins",
        "device_plugin.commands.demo*",
        "device_plugin.commands.standin",
    ),
}
# What mig/ and timeslice/ may import besides themselves and the standard library.
VALUE_TYPES = (
    "device_plugin.core.devices",
    "device_plugin.core.ids",
    "device_plugin.core.errors",
    "device_plugin.core.short_text",
    "device_plugin.core.mig_strategy",  # the strategy names (none, single, mixed)
    "device_plugin.core.names",  # the wire names (nvidia.com/gpu)
    "device_plugin.allocation.protocols",
    "device_plugin.allocation.request",  # the ValidatedRequest a policy takes
    "device_plugin.nvml.types",
    "device_plugin.nvml.mig_types",
    "device_plugin.config.sharing_model",  # the typed `sharing` section
    "device_plugin.config.sharing",  # its pure parser (raw mapping -> those types), no I/O
    "device_plugin.allocation.gpu_choice",  # how both ask which GPUs a request spans (one placement helper)
)

# What the kubelet-plugin helper may import besides itself: no GPU layer (nvml, topology, allocator, health,
# mig, ...) and no GPU fact of core/ (gpu_models, names): what is ours comes from the driver above it.
HELPER = "device_plugin.dra_helper"
HELPER_MAY_IMPORT = (
    "api",  # the generated DRA and registration protos
    "device_plugin.serving",  # the sockets, served and kept
    "device_plugin.config.reading",  # bounded reads of regular files (the checkpoint's journal)
    "device_plugin.core.errors",
    "device_plugin.core.short_text",
    "device_plugin.core.backoff",
    "device_plugin.core.bounded_json",
    "device_plugin.core.atomic_write",  # the one atomic file write (the claim files)
    "device_plugin.core.call_log",  # the one rate-limited INFO line per kubelet call
    "device_plugin.core.instance_id",  # the instance id of per-instance socket names, one rule in both modes
)


def unit_of(module: str) -> str | None:
    """The unit of LAYERS that `module` belongs to (the one with the longest matching name)."""
    return layering_rules.unit_of(module, LAYERS)


SOURCE = read_source(ROOT, SCANNED, LAYERLESS)
CODE = sorted(m for m in SOURCE.modules if m.split(".")[0] != "api")  # our code, not the generated stubs


# ---- the tests ---------------------------------------------------------------------------------


def test_the_scan_sees_the_code() -> None:
    # Guards against rules that pass because they scanned nothing.
    assert len(CODE) > 80, CODE
    assert sum(len(SOURCE.edges[m]) for m in CODE) > 200
    assert {
        "device_plugin.nvml.real.backend",
        "device_plugin.dp_helper.servicer",
        "device_plugin.mig.policy",
        "device_plugin.timeslice.policy",
    } <= set(CODE)


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in SOURCE.modules if m != LAYERLESS and unit_of(m) is None]
    assert unplaced == [], f"add these to LAYERS (and docs/architecture.md): {unplaced}"


def test_every_unit_holds_modules() -> None:
    units = [u for layer in LAYERS for u in layer]
    assert len(units) == len(set(units)), "a unit is listed twice"
    empty = [u for u in units if not any(unit_of(m) == u for m in SOURCE.modules)]
    assert empty == [], f"LAYERS names units with no module: {empty}"
    packages = [u for u in units if u != "device_plugin.cli"]
    modules_as_units = [u for u in packages if not (ROOT / u.replace(".", "/")).is_dir()]
    assert modules_as_units == [], f"every layer names folders only (cli.py aside): {modules_as_units}"


def test_the_package_root_imports_nothing() -> None:
    assert LAYERLESS in SOURCE.modules
    assert sorted(SOURCE.edges[LAYERLESS] | SOURCE.third_party[LAYERLESS]) == []


def test_no_import_points_up_or_sideways() -> None:
    found = direction_violations(SOURCE.edges, LAYERS)
    assert found == [], "\n".join(found)


DYNAMIC_IMPORTERS = ("device_plugin.cli",)  # the console script may load its subcommands lazily


def test_no_dynamic_import_outside_the_console_script() -> None:
    found = [
        f"{m}:{line}" for m, p in SOURCE.modules.items() if m not in DYNAMIC_IMPORTERS for line in dynamic_imports(p)
    ]
    assert found == [], f"import these with an import statement (the layering test cannot see them): {found}"


def test_the_dynamic_import_check_sees_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import importlib\nimportlib.import_module('x')\nm = __import__('y')\n", encoding="utf-8")
    assert dynamic_imports(sample) == [2, 3]


def test_no_import_cycle() -> None:
    found = cycles(SOURCE.edges)
    assert found == [], "\n".join(" -> ".join(c) for c in found)


@pytest.mark.parametrize("package", sorted(THIRD_PARTY), ids=sorted(THIRD_PARTY))
def test_third_party_package_imported_only_where_allowed(package: str) -> None:
    allowed = THIRD_PARTY[package]
    importers = sorted(m for m in SOURCE.modules if package in SOURCE.third_party[m])
    outside = [m for m in importers if not any(matches(m, p) for p in allowed)]
    assert outside == [], f"{package} imported outside {allowed}: {outside}"
    # Each allowance is in use: an unused one would hide a stale table.
    unused = [p for p in allowed if not any(matches(m, p) for m in importers)]
    assert unused == [], f"{package} is allowed to {unused} but none of them imports it"


def test_every_third_party_import_is_in_the_table() -> None:
    unknown = {m: sorted(SOURCE.third_party[m] - set(THIRD_PARTY)) for m in SOURCE.modules}
    assert {m: pkgs for m, pkgs in unknown.items() if pkgs} == {}, "give each new dependency a home in THIRD_PARTY"


@pytest.mark.parametrize("package", sorted(RESTRICTED), ids=sorted(RESTRICTED))
def test_restricted_package_imported_only_where_allowed(package: str) -> None:
    importers = sorted(m for m in CODE if any(t == package or t.startswith(package + ".") for t in SOURCE.edges[m]))
    outside = [m for m in importers if not any(matches(m, p) for p in RESTRICTED[package])]
    assert outside == [], f"{package} imported outside {RESTRICTED[package]}: {outside}"
    assert all(any(matches(m, p) for m in importers) for p in RESTRICTED[package]), importers


def test_the_dra_helper_knows_no_gpu() -> None:
    helper = [m for m in CODE if matches(m, HELPER)]
    assert len(helper) > 20, helper
    assert layering_rules.beyond_allowed(dict(SOURCE.edges), HELPER, HELPER_MAY_IMPORT) == {}
    assert any(t.startswith("device_plugin.serving") for m in helper for t in SOURCE.edges[m])  # exercised


def test_the_helper_check_catches_a_gpu_import() -> None:
    edges = {
        "device_plugin.dra_helper.a": frozenset({"device_plugin.core.errors", "device_plugin.dra_helper.b"}),
        "device_plugin.dra_helper.b": frozenset({"device_plugin.nvml.types", "device_plugin.core.gpu_models"}),
    }
    assert layering_rules.beyond_allowed(edges, HELPER, HELPER_MAY_IMPORT) == {
        "device_plugin.dra_helper.b": ["device_plugin.core.gpu_models", "device_plugin.nvml.types"]
    }


@pytest.mark.parametrize("package", ["device_plugin.mig", "device_plugin.timeslice"], ids=["mig", "timeslice"])
def test_mig_and_timeslice_see_value_types_only(package: str) -> None:
    modules = [m for m in CODE if m == package or m.startswith(package + ".")]
    assert len(modules) > 3, modules
    assert layering_rules.beyond_allowed(SOURCE.edges, package, VALUE_TYPES) == {}
    assert {m: sorted(SOURCE.third_party[m]) for m in modules if SOURCE.third_party[m]} == {}
    assert any(t in VALUE_TYPES for m in modules for t in SOURCE.edges[m])  # the rule is exercised


# ---- docs/architecture.md draws the same layers -----------------------------------------------


def spelled(unit: str) -> str:
    """How the diagram writes a unit: a path under device_plugin/ (or the repository root), '/' for a package."""
    path = unit.removeprefix("device_plugin.").replace(".", "/")
    is_package = (ROOT / unit.replace(".", "/")).is_dir()
    return f"{path}/" if is_package else path


def test_the_architecture_diagram_names_the_same_layers() -> None:
    expected = [[spelled(u) for u in layer] for layer in LAYERS]
    assert diagram_layers(DIAGRAM.read_text(encoding="utf-8")) == expected


def test_the_diagram_check_catches_a_difference() -> None:
    right = "\n".join(" | ".join(spelled(u) for u in layer) + "  words" for layer in LAYERS)
    swapped = "\n".join(" | ".join(spelled(u) for u in layer) + "  words" for layer in reversed(LAYERS))
    expected = [[spelled(u) for u in layer] for layer in LAYERS]
    assert diagram_layers(f"```layers\n{right}\n```\n") == expected
    assert diagram_layers(f"```layers\n{swapped}\n```\n") != expected
