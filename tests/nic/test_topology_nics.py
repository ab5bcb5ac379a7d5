"""GPU-NIC distances: the `topology` matrix of every shipped machine with NICs against its documented layout.

The expected blocks are the GPU-NIC columns `nvidia-smi topo -m` prints for the hardware each machine file
describes (written by hand from the layout in the file's comments, not computed): rows GPU0.., columns NIC0...
"""

from __future__ import annotations

import json

import pytest

from device_plugin.cli import main
from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fake.catalog import load_machine_description, shipped_machine_names
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.types import PcieLevel
from device_plugin.topology.build import build_topology
from device_plugin.topology.model import Topology

EXPECTED = {
    # DGX-1V: one EDR NIC in each PLX switch; the socket's other switch is across its host bridge.
    "dgx1-v100": """
        GPU0 PIX PHB SYS SYS
        GPU1 PIX PHB SYS SYS
        GPU2 PHB PIX SYS SYS
        GPU3 PHB PIX SYS SYS
        GPU4 SYS SYS PIX PHB
        GPU5 SYS SYS PIX PHB
        GPU6 SYS SYS PHB PIX
        GPU7 SYS SYS PHB PIX
    """,
    # DGX A100: two HDR NICs per GPU pair's switch tier, each behind its own leaf switch.
    "dgx-a100": """
        GPU0 PXB PXB NODE NODE SYS SYS SYS SYS
        GPU1 PXB PXB NODE NODE SYS SYS SYS SYS
        GPU2 NODE NODE PXB PXB SYS SYS SYS SYS
        GPU3 NODE NODE PXB PXB SYS SYS SYS SYS
        GPU4 SYS SYS SYS SYS PXB PXB NODE NODE
        GPU5 SYS SYS SYS SYS PXB PXB NODE NODE
        GPU6 SYS SYS SYS SYS NODE NODE PXB PXB
        GPU7 SYS SYS SYS SYS NODE NODE PXB PXB
    """,
    # HGX H100 / DGX H100: one NDR NIC in each GPU's own switch (rail-aligned).
    "hgx-h100": """
        GPU0 PIX NODE NODE NODE SYS SYS SYS SYS
        GPU1 NODE PIX NODE NODE SYS SYS SYS SYS
        GPU2 NODE NODE PIX NODE SYS SYS SYS SYS
        GPU3 NODE NODE NODE PIX SYS SYS SYS SYS
        GPU4 SYS SYS SYS SYS PIX NODE NODE NODE
        GPU5 SYS SYS SYS SYS NODE PIX NODE NODE
        GPU6 SYS SYS SYS SYS NODE NODE PIX NODE
        GPU7 SYS SYS SYS SYS NODE NODE NODE PIX
    """,
    # 2-socket PCIe box: one NIC per socket, in the socket's first switch.
    "pcie-8gpu-2socket": """
        GPU0 PIX SYS
        GPU1 PIX SYS
        GPU2 NODE SYS
        GPU3 NODE SYS
        GPU4 SYS PIX
        GPU5 SYS PIX
        GPU6 SYS NODE
        GPU7 SYS NODE
    """,
    # 1-socket PCIe box: NICs in the second and fourth switch only.
    "pcie-8gpu-2nic": """
        GPU0 NODE NODE
        GPU1 NODE NODE
        GPU2 PIX NODE
        GPU3 PIX NODE
        GPU4 NODE NODE
        GPU5 NODE NODE
        GPU6 NODE PIX
        GPU7 NODE PIX
    """,
    # GB200 NVL72 compute tray: GPUs on NVLink-C2C root complexes of their Grace, ConnectX-7s on the
    # Grace's root ports: NODE on the same Grace, SYS across, no GPUDirect-close NIC.
    "gb200-nvl72-tray-a": """
        GPU0 NODE NODE SYS SYS
        GPU1 NODE NODE SYS SYS
        GPU2 SYS SYS NODE NODE
        GPU3 SYS SYS NODE NODE
    """,
    "gb200-nvl72-tray-b": """
        GPU0 NODE NODE SYS SYS
        GPU1 NODE NODE SYS SYS
        GPU2 SYS SYS NODE NODE
        GPU3 SYS SYS NODE NODE
    """,
}


def _expected_rows(text: str) -> list[list[str]]:
    return [line.split()[1:] for line in text.strip().splitlines()]


def _printed(machine: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["topology", "--machine", machine]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_printed_gpu_nic_block_matches_the_documented_matrix(machine: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _printed(machine, capsys).splitlines()
    header = out[0].split()
    nic_columns = [i for i, head in enumerate(header) if head.startswith("NIC")]
    expected = _expected_rows(EXPECTED[machine])
    assert [header[i] for i in nic_columns] == [f"NIC{k}" for k in range(len(expected[0]))]
    rows = [line.split() for line in out[1 : 1 + len(expected)]]
    # a GPU row's cells are shifted by one against the header (the row name has no header cell)
    assert [[row[i + 1] for i in nic_columns] for row in rows] == expected


def test_every_shipped_machine_with_nics_has_an_expected_matrix() -> None:
    with_nics = {m for m in shipped_machine_names() if load_machine_description(m).nics}
    assert with_nics == set(EXPECTED)


@pytest.mark.parametrize("machine", sorted(EXPECTED))
def test_legend_maps_nic_columns_to_rdma_devices(machine: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _printed(machine, capsys)
    count = len(_expected_rows(EXPECTED[machine])[0])
    legend = out.split("NIC Legend:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert legend == [f"  NIC{k}: mlx5_{k}" for k in range(count)]


NEAREST = [
    ("hgx-h100", 5, "  GPU5: NIC5 (mlx5_5, PIX; GPUDirect-close)"),
    ("dgx-a100", 3, "  GPU3: NIC2 (mlx5_2, PXB; GPUDirect-close)"),
    ("pcie-8gpu-2nic", 4, "  GPU4: NIC0 (mlx5_0, NODE; no GPUDirect-close NIC)"),
    ("pcie-8gpu-2socket", 7, "  GPU7: NIC1 (mlx5_1, NODE; no GPUDirect-close NIC)"),
]


@pytest.mark.parametrize(
    ("machine", "gpu", "line"),
    NEAREST,
    ids=[
        "own NIC in the GPU's switch",
        "two equally close NICs: the lower one",
        "no close NIC: the nearest by level, then index",
        "no close NIC: the socket's NIC beats the other socket's",
    ],
)
def test_nearest_nic_line_per_gpu(machine: str, gpu: int, line: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _printed(machine, capsys)
    nearest = out.split("Nearest NIC:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(nearest) == 8
    assert nearest[gpu] == line


def test_machines_without_nics_print_no_nic_columns(capsys: pytest.CaptureFixture[str]) -> None:
    out = _printed("hgx-h200", capsys)
    assert "NIC" not in out.split("\n\n", 1)[0]
    assert "Nearest NIC" not in out


def test_json_lists_nics_with_their_close_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topology", "--machine", "pcie-8gpu-2nic", "--json"]) == 0
    nics = json.loads(capsys.readouterr().out)["nics"]
    assert [(n["name"], n["close_gpus"]) for n in nics] == [("mlx5_0", [2, 3]), ("mlx5_1", [6, 7])]
    assert nics[0]["pcie_by_gpu"] == ["NODE", "NODE", "PIX", "PIX", "NODE", "NODE", "NODE", "NODE"]


class _GpusOnly:
    """An NvmlBackend that is no NicSource (e.g. a minimal stand-in): the topology has no NICs."""

    def __init__(self, fake: FakeNvml) -> None:
        self.gpus = fake.gpus
        self.nvlinks = fake.nvlinks
        self.pcie_level = fake.pcie_level
        self.fabric_info = fake.fabric_info  # NvmlBackend: every GPU's fabric registration (none here)


def test_a_backend_without_nic_support_yields_no_nics() -> None:
    topology = build_topology(_GpusOnly(FakeNvml.from_machine("hgx-h100")))  # type: ignore[arg-type]
    assert topology.nic_names == () and topology.nic_levels == ()
    assert topology.nearest_nic(0) is None and topology.close_nics(0) == ()


def test_gpu_nic_matrix_must_match_the_nic_list() -> None:
    base = build_topology(FakeNvml.from_machine("workstation-4gpu"))
    with pytest.raises(MachineDescriptionError) as error:
        Topology(base.gpu_names, base.numa_nodes, base.links, nic_names=("mlx5_0",), nic_levels=((PcieLevel.NODE,),))
    assert error.value.field == "topology.nic_levels"
