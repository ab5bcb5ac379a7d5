"""The NVLink part of a machine description: direct NVLink bundles and NVSwitch domains.

Boundary: the `nvlinks:` and `nvswitch:` keys of a machine-description file into frozen values, and
the check that no GPU has more NVLinks than any GPU generation has; machine_description.py calls it.
"""

from __future__ import annotations

from dataclasses import dataclass

from device_plugin.core.errors import MachineDescriptionError
from device_plugin.nvml.fake import description_fields as read

# NVLink 4 (Hopper) has 18 links per GPU, the most of any generation; more is a typo.
MAX_NVLINKS_PER_GPU = 18
_NVSWITCH_KEYS = frozenset({"gpus", "links_per_gpu"})


@dataclass(frozen=True)
class NvLinkBundle:
    """`links` direct NVLinks between two GPUs; gpu_a < gpu_b always."""

    gpu_a: int
    gpu_b: int
    links: int


@dataclass(frozen=True)
class NvSwitchDomain:
    """GPUs that reach each other through one NVSwitch fabric, each with `links_per_gpu` links into
    it."""

    gpus: tuple[int, ...]  # sorted
    links_per_gpu: int


def nvswitch_bus_id(domain: int, switch: int) -> str:
    """Synthetic PCI bus id of switch `switch` of NVSwitch domain `domain` (PCI domain 0xfe00 +
    domain)."""
    return f"{0xFE00 + domain:04x}:{switch:02x}:00.0"


def parse_nvlinks(raw: object, gpu_count: int) -> tuple[NvLinkBundle, ...]:
    if raw is None:
        return ()
    bundles: dict[tuple[int, int], NvLinkBundle] = {}
    for i, entry in enumerate(read.list_of(raw, "nvlinks")):
        where = f"nvlinks[{i}]"
        triple = read.list_of(entry, where)
        if len(triple) != 3:
            raise MachineDescriptionError(where, "must be [gpu a, gpu b, number of links]")
        a = read.gpu_index(triple[0], f"{where}[0]", gpu_count)
        b = read.gpu_index(triple[1], f"{where}[1]", gpu_count)
        links = read.integer(triple[2], f"{where}[2]", 1, MAX_NVLINKS_PER_GPU)
        if a == b:
            raise MachineDescriptionError(where, f"links GPU {a} to itself")
        key = (min(a, b), max(a, b))
        if key in bundles:
            raise MachineDescriptionError(
                where, f"GPUs {key[0]} and {key[1]} are already linked by another entry"
            )
        bundles[key] = NvLinkBundle(key[0], key[1], links)
    return tuple(bundles[key] for key in sorted(bundles))


def parse_nvswitch(raw: object, gpu_count: int) -> tuple[NvSwitchDomain, ...]:
    if raw is None:
        return ()
    domains: list[NvSwitchDomain] = []
    owner: dict[int, int] = {}
    for d, entry in enumerate(read.list_of(raw, "nvswitch")):
        where = f"nvswitch[{d}]"
        domain = read.mapping(entry, where, _NVSWITCH_KEYS, required=("gpus", "links_per_gpu"))
        links = read.integer(
            domain["links_per_gpu"], f"{where}.links_per_gpu", 1, MAX_NVLINKS_PER_GPU
        )
        if domain["gpus"] == "all":
            members = list(range(gpu_count))
        else:
            listed = read.list_of(domain["gpus"], f"{where}.gpus")
            if not listed:
                raise MachineDescriptionError(
                    f"{where}.gpus", 'is empty; give GPU indices or "all"'
                )
            members = [
                read.gpu_index(g, f"{where}.gpus[{i}]", gpu_count) for i, g in enumerate(listed)
            ]
        for i, gpu in enumerate(members):
            field = f"{where}.gpus" if domain["gpus"] == "all" else f"{where}.gpus[{i}]"
            if gpu in owner:
                other = "this domain" if owner[gpu] == d else f"nvswitch[{owner[gpu]}]"
                raise MachineDescriptionError(field, f"GPU {gpu} is already in {other}")
            owner[gpu] = d
        domains.append(NvSwitchDomain(tuple(sorted(members)), links))
    return tuple(domains)


def check_link_totals(
    gpu_count: int, nvlinks: tuple[NvLinkBundle, ...], nvswitch: tuple[NvSwitchDomain, ...]
) -> None:
    totals = [0] * gpu_count
    for bundle in nvlinks:
        totals[bundle.gpu_a] += bundle.links
        totals[bundle.gpu_b] += bundle.links
    for gpu, total in enumerate(totals):
        if total > MAX_NVLINKS_PER_GPU:
            raise MachineDescriptionError(
                "nvlinks", f"GPU {gpu} has {total} NVLinks; at most {MAX_NVLINKS_PER_GPU}"
            )
    for d, domain in enumerate(nvswitch):
        for gpu in domain.gpus:
            totals[gpu] += domain.links_per_gpu
            if totals[gpu] > MAX_NVLINKS_PER_GPU:
                raise MachineDescriptionError(
                    f"nvswitch[{d}].links_per_gpu",
                    f"GPU {gpu} would have {totals[gpu]} NVLinks in all; at most "
                    f"{MAX_NVLINKS_PER_GPU}",
                )
