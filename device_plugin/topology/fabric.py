"""The node's NVLink clique: the one value NVIDIA's feature discovery publishes as
`nvidia.com/gpu.clique`.

A rack-scale NVLink system (GB200/GB300 NVL72) reaches past the node: every GPU the Fabric Manager
has registered reports its fabric's cluster UUID and its clique (NVLink partition). The node's
clique is decided by GFD's rule, so that Kueue Topology levels and JobSet placement written for
GFD's label work unchanged: only GPUs whose registration is attached (state COMPLETED, status
success, a cluster UUID) count; if they agree on one cluster UUID and one clique ID the node's
clique is `<clusterUUID>.<cliqueID>`; if they disagree there is none; with no attached GPU there is
none. Where GFD stays silent, this says why (GPUs registered elsewhere, a registration still in
progress or failed), for the caller to log. Boundary: a pure function of the per-GPU FabricInfo
values (Topology.gpu_fabric); no logging, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from device_plugin.nvml.fabric_types import FabricInfo, FabricState


@dataclass(frozen=True)
class NodeClique:
    """`clique`: the node's `<clusterUUID>.<cliqueID>`, None when it has none; `problems`: why a GPU
    does not count or the node has none, one sentence each (empty when every GPU agrees or none has
    a fabric)."""

    clique: str | None
    problems: tuple[str, ...] = ()


def node_clique(fabric: Sequence[FabricInfo]) -> NodeClique:
    """The node's clique from its GPUs' fabric registrations (index order), by GFD's rule (module
    doc)."""
    problems = [
        f"GPU {gpu}: fabric registration {info.describe()}, so it is in no clique"
        for gpu, info in enumerate(fabric)
        if not info.attached and info.state is not FabricState.NOT_SUPPORTED
    ]
    attached = {gpu: info for gpu, info in enumerate(fabric) if info.attached}
    clusters = _group(attached, lambda info: info.cluster_uuid)
    cliques = _group(attached, lambda info: str(info.clique_id))
    if len(clusters) > 1:
        problems.append(
            f"the GPUs are registered with different fabrics {_text(clusters)}: no clique"
        )
        return NodeClique(None, tuple(problems))
    if len(cliques) > 1:
        problems.append(f"the GPUs are in different cliques {_text(cliques)}: no clique")
        return NodeClique(None, tuple(problems))
    if not attached:
        return NodeClique(None, tuple(problems))
    return NodeClique(next(iter(attached.values())).clique, tuple(problems))


def _group(
    attached: dict[int, FabricInfo], key: Callable[[FabricInfo], str]
) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for gpu, info in attached.items():
        groups.setdefault(key(info), []).append(gpu)
    return groups


def _text(groups: dict[str, list[int]]) -> str:
    return "; ".join(
        f"{value} (GPUs {', '.join(map(str, gpus))})" for value, gpus in sorted(groups.items())
    )
