"""The NVLink clique as a DRA device attribute under our own domain: each GPU's own registration, so a
claim can require it (`device.attributes["<ownDomain>"].clique == "..."`) or match on it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from device_plugin.cli import main
from device_plugin.core.names import OWN_DOMAIN
from device_plugin.dra.inventory import build_devices
from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology

CLUSTER = "4b1d7c2e-93a0-4f6e-8d25-0c6e9f2a7b13"
CLIQUE = f"{OWN_DOMAIN}/clique"


def cliques(fake: FakeNvml, domain: str = OWN_DOMAIN) -> dict[int, object]:
    """GPU index -> its `<domain>/clique` value (None where absent)."""
    devices, _ = build_devices(fake, build_topology(fake), own_domain=domain)
    return {d.gpu_index: {n: v for n, _, v in d.attributes}.get(f"{domain}/clique") for d in devices}


@pytest.mark.parametrize(
    ("machine", "expected"),
    [("gb200-nvl72-tray-a", f"{CLUSTER}.1"), ("gb200-nvl72-tray-b", f"{CLUSTER}.2"), ("hgx-h100", None)],
    ids=str,
)
def test_every_gpu_carries_its_clique_where_it_has_one(machine: str, expected: str | None) -> None:
    found = cliques(FakeNvml.from_machine(machine))
    assert found and set(found.values()) == {expected}


def test_a_gpu_whose_registration_is_not_complete_has_no_clique_attribute() -> None:
    doc: dict[str, Any] = {
        "name": "tray",
        "fabric": {"cluster_uuid": CLUSTER, "clique_id": 3},
        "gpus": [{"model": "NVIDIA GB200", "memory_mib": 189471} for _ in range(4)],
        "nvswitch": [{"gpus": "all", "links_per_gpu": 18}],
    }
    doc["gpus"][2]["fabric"] = {"state": "in_progress"}
    assert cliques(FakeNvml(parse_machine_description(doc))) == {
        0: f"{CLUSTER}.3",
        1: f"{CLUSTER}.3",
        2: None,
        3: f"{CLUSTER}.3",
    }


def test_the_attribute_follows_the_configured_domain_and_reaches_the_slice(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dra", "slices", "--machine", "gb200-nvl72-tray-a", "--node-name", "tray-a", "--json"]) == 0
    (obj,) = json.loads(capsys.readouterr().out)
    values = {d["attributes"][CLIQUE]["string"] for d in obj["spec"]["devices"]}
    assert values == {f"{CLUSTER}.1"}
    assert set(cliques(FakeNvml.from_machine("gb200-nvl72-tray-a"), "gpus.example.org").values()) == {f"{CLUSTER}.1"}
