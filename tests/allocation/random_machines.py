"""Hypothesis strategies for random, valid machine descriptions (fed through the real parser and FakeNvml)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from device_plugin.nvml.fake.description import parse_machine_description
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology

MODELS = ("Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA RTX A6000")


@st.composite
def machine_descriptions(draw: st.DrawFn, max_gpus: int = 8) -> dict[str, Any]:
    n = draw(st.integers(1, max_gpus))
    model = draw(st.sampled_from(MODELS))
    sockets = draw(st.integers(1, 2))
    gpus = []
    for _ in range(n):
        socket = draw(st.integers(0, sockets - 1))
        bridge = draw(st.integers(0, 1))
        path = [f"cpu{socket}", f"cpu{socket}-hb{bridge}"]
        switch = draw(st.integers(-1, 1))
        if switch >= 0:
            path.append(f"cpu{socket}-hb{bridge}-sw{switch}")
        gpus.append({"model": model, "memory_mib": 1024, "numa_node": socket, "pcie": path})
    description: dict[str, Any] = {"name": "random", "gpus": gpus}
    if n >= 2 and draw(st.booleans()):
        members = sorted(draw(st.sets(st.integers(0, n - 1), min_size=2, max_size=n)))
        description["nvswitch"] = [{"gpus": members, "links_per_gpu": draw(st.integers(1, 12))}]
    elif n >= 2:
        used = [0] * n
        links = []
        for a in range(n):
            for b in range(a + 1, n):
                count = draw(st.integers(0, 4))
                if count and used[a] + count <= 18 and used[b] + count <= 18:
                    used[a] += count
                    used[b] += count
                    links.append([a, b, count])
        if links:
            description["nvlinks"] = links
    return description


def topology_from(description: dict[str, Any]) -> Topology:
    return build_topology(FakeNvml(parse_machine_description(description)))
