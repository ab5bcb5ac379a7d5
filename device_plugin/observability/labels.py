"""Node labels: what kind of GPUs this node has and how they are connected.

Boundary: pure computation from an NvmlBackend (versions, models, memory) and the node's Topology
(NVLink fabric, NUMA nodes, NICs: never re-derived here) plus a few configuration values (MIG
strategy, sharing), and a writer for node-feature-discovery's `features.d` directory. No Kubernetes
API.

Keys follow NVIDIA gpu-feature-discovery (GFD) so existing node selectors keep working:
nvidia.com/gpu.{product,memory,count,family,compute.major,compute.minor,replicas,sharing-strategy},
nvidia.com/mig.{capable,strategy}, nvidia.com/cuda.driver-version.* and
nvidia.com/cuda.runtime-version.* (plus GFD's deprecated cuda.driver.* / cuda.runtime.*, which
selectors in the wild still use), and nvidia.com/gpu.clique on rack-scale NVLink nodes (GFD's value
and rule: device_plugin/topology/fabric.py). GFD's "cuda.runtime" is the CUDA version the *driver*
supports (nvmlSystemGetCudaDriverVersion). Our own topology labels (GFD has none of these) live
under the configured own domain (LabelOptions.own_domain, default core/names.py OWN_DOMAIN), never
under nvidia.com: OWN_LABELS names and explains them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from device_plugin.config.model import DEFAULT_DEVICE_PLUGIN_DIR
from device_plugin.config.safe_write import (
    kubelet_owned_dirs,
    remove_if_unchanged,
    write_atomically,
)
from device_plugin.core.ascii_digits import is_ascii_digits
from device_plugin.core.errors import PluginError
from device_plugin.core.gpu_models import mig_capable, model_facts
from device_plugin.core.mig_strategy import MigStrategy
from device_plugin.core.names import GPU_CLIQUE_LABEL, GPU_RESOURCE, OWN_DOMAIN, own_name
from device_plugin.nvml.protocol import NvmlBackend
from device_plugin.nvml.types import GpuInfo, SystemInfo
from device_plugin.topology.build import build_topology
from device_plugin.topology.fabric import node_clique
from device_plugin.topology.model import Topology

log = logging.getLogger(__name__)

DEFAULT_FEATURES_FILE = Path("/etc/kubernetes/node-feature-discovery/features.d/gpu-device-plugin")
SHARING_STRATEGIES = ("none", "time-slicing", "mps")
MIG_STRATEGIES = tuple(strategy.value for strategy in MigStrategy)
LABELS_FILE_FIELD = "gpuDevicePlugin.labelsFile"


@dataclass(frozen=True)
class SharingLabelInput:
    """How one resource is shared; `renamed` when the replicas are advertised under another name."""

    strategy: str = "none"
    replicas: int = 1
    renamed: bool = False
    # What one replica can count on (device memory / replicas): a share, not a limit.
    replica_memory_mib: int | None = None

    def __post_init__(self) -> None:
        if self.strategy not in SHARING_STRATEGIES:
            raise ValueError(
                f"sharing strategy {self.strategy!r} is not one of {SHARING_STRATEGIES}"
            )
        if self.replicas < 1:
            raise ValueError(f"replicas must be >= 1, got {self.replicas}")


@dataclass(frozen=True)
class MigResourceLabelInput:
    """One advertised MIG resource (migStrategy mixed): how many, and what each device has."""

    count: int
    memory_mib: int
    multiprocessors: int


@dataclass(frozen=True)
class LabelOptions:
    mig_strategy: str = MigStrategy.NONE.value
    # None: decide from the GPU model (A100/A30/H100/H200/B200 ... are MIG-capable).
    mig_capable: bool | None = None
    # resource name -> sharing; nvidia.com/gpu is labelled unshared (replicas 1, none) unless
    # listed.
    sharing: Mapping[str, SharingLabelInput] = field(default_factory=dict)
    machine_type: str | None = None  # nvidia.com/gpu.machine (DMI product name), when known
    # MIG resource name (nvidia.com/mig-1g.10gb) -> its devices, for GFD's per-profile labels.
    mig_resources: Mapping[str, MigResourceLabelInput] = field(default_factory=dict)
    own_domain: str = OWN_DOMAIN  # gpuDevicePlugin.ownDomain: the domain of OWN_LABELS

    def __post_init__(self) -> None:
        if self.mig_strategy not in MIG_STRATEGIES:
            raise ValueError(f"MIG strategy {self.mig_strategy!r} is not one of {MIG_STRATEGIES}")


def compute_labels(
    backend: NvmlBackend, options: LabelOptions | None = None, topology: Topology | None = None
) -> dict[str, str]:
    """Every label for this node, as a dict sorted by key. A node without GPUs gets no labels.

    `topology`: the node's Topology, when the caller has it; None builds it from `backend`."""
    options = options or LabelOptions()
    gpus = tuple(sorted(backend.gpus(), key=lambda g: g.index))
    if not gpus:
        return {}
    if topology is None:
        topology = build_topology(backend)
    labels: dict[str, str] = {}
    labels.update(_version_labels(backend.system_info()))
    labels.update(_product_labels(gpus, options))
    labels.update(_sharing_labels(options))
    capable = (
        options.mig_capable
        if options.mig_capable is not None
        else any(mig_capable(g.name) for g in gpus)
    )
    labels["nvidia.com/mig.capable"] = "true" if capable else "false"
    labels["nvidia.com/mig.strategy"] = options.mig_strategy
    if options.machine_type:
        labels["nvidia.com/gpu.machine"] = options.machine_type.strip().replace(" ", "-")
    labels.update(_topology_labels(topology, options.own_domain))
    labels.update(_clique_labels(topology))
    # GFD's keys: nvidia.com/mig-<profile>.<what>
    for resource, mig in options.mig_resources.items():
        labels[f"{resource}.count"] = str(mig.count)
        labels[f"{resource}.memory"] = str(mig.memory_mib)
        labels[f"{resource}.multiprocessors"] = str(mig.multiprocessors)
    return dict(sorted(labels.items()))


def _version_labels(system: SystemInfo) -> dict[str, str]:
    labels: dict[str, str] = {}
    parts = system.driver_version.split(".")
    if 2 <= len(parts) <= 3 and all(is_ascii_digits(p) for p in parts):
        major, minor, rev = parts[0], parts[1], parts[2] if len(parts) == 3 else ""
        labels |= {
            "nvidia.com/cuda.driver-version.major": major,
            "nvidia.com/cuda.driver-version.minor": minor,
            "nvidia.com/cuda.driver-version.revision": rev,
            "nvidia.com/cuda.driver-version.full": system.driver_version,
            "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev,
        }
    else:
        log.warning(
            "driver version %r is not X.Y[.Z]: no driver-version labels", system.driver_version
        )
    cuda = system.cuda_driver_version.split(".")
    if len(cuda) == 2 and all(is_ascii_digits(p) for p in cuda):
        labels |= {
            "nvidia.com/cuda.runtime-version.major": cuda[0],
            "nvidia.com/cuda.runtime-version.minor": cuda[1],
            "nvidia.com/cuda.runtime-version.full": system.cuda_driver_version,
            "nvidia.com/cuda.runtime.major": cuda[0],
            "nvidia.com/cuda.runtime.minor": cuda[1],
        }
    else:
        log.warning(
            "CUDA driver version %r is not X.Y: no cuda.runtime-version labels",
            system.cuda_driver_version,
        )
    return labels


def _product_labels(gpus: tuple[GpuInfo, ...], options: LabelOptions) -> dict[str, str]:
    # A node with mixed models is labelled with its most common one (ties: name order), and the
    # memory label with that model's smallest card, so a selector never promises more than a pod
    # gets.
    counts = Counter(g.name for g in gpus)
    model = min(counts, key=lambda name: (-counts[name], name))
    if len(counts) > 1:
        log.warning("mixed GPU models %s: labelling the node as %s", sorted(counts), model)
    product = "-".join(part for part in model.strip().split(" ") if part)
    sharing = options.sharing.get(GPU_RESOURCE)
    if sharing is not None and sharing.replicas > 1 and not sharing.renamed:
        product += "-SHARED"  # GFD's convention: the product label says the cards are shared
    labels = {
        f"{GPU_RESOURCE}.product": product,
        f"{GPU_RESOURCE}.count": str(len(gpus)),
        f"{GPU_RESOURCE}.memory": str(min(g.memory_mib for g in gpus if g.name == model)),
    }
    facts = model_facts(model)
    if facts is None:
        log.warning("GPU model %r is not in the family table: no family/compute labels", model)
    else:
        labels[f"{GPU_RESOURCE}.family"] = facts.family
        labels[f"{GPU_RESOURCE}.compute.major"] = str(facts.compute_major)
        labels[f"{GPU_RESOURCE}.compute.minor"] = str(facts.compute_minor)
    return labels


def _sharing_labels(options: LabelOptions) -> dict[str, str]:
    sharing = {GPU_RESOURCE: SharingLabelInput(), **options.sharing}
    labels: dict[str, str] = {}
    for resource, info in sharing.items():
        labels[f"{resource}.replicas"] = str(info.replicas)
        labels[f"{resource}.sharing-strategy"] = info.strategy
        # ours (GFD has none): `<own domain>/gpu.shared.replica-memory`
        if info.replica_memory_mib is not None:
            short = resource.split("/", 1)[-1]
            labels[own_name(options.own_domain, f"{short}.replica-memory")] = str(
                info.replica_memory_mib
            )
    return labels


def _clique_labels(topology: Topology) -> dict[str, str]:
    """GFD's nvidia.com/gpu.clique when the GPUs agree on one clique; every reason it is absent or
    partial is logged."""
    decided = node_clique(topology.gpu_fabric)
    for problem in decided.problems:
        log.warning(
            "%s%s: %s", GPU_CLIQUE_LABEL, "" if decided.clique else " not labelled", problem
        )
    return {GPU_CLIQUE_LABEL: decided.clique} if decided.clique else {}


def nvlink_kind(topology: Topology) -> str:
    """none | pairs | mesh | nvswitch: NVSwitch when any GPU links into one; else by the largest
    NVLinked group."""
    if topology.nvswitch_seen:
        return "nvswitch"
    if not topology.nvlinked:
        return "none"
    return "pairs" if topology.largest_nvlink_group == 2 else "mesh"


# Our own labels (name under the own domain -> meaning); docs/observability.md lists them with the
# old names.
OWN_LABELS = {
    "nvlink-kind": "none | pairs | mesh | nvswitch: how the GPUs are NVLinked",
    "nvlink-largest-group-gpus": "GPUs in the largest group joined by NVLink (1 without NVLink)",
    "gpu-numa-node-count": "NUMA nodes that hold GPUs; absent where the platform reports none",
    "rdma-nic-count": "RDMA NICs seen",
    "gpudirect-close-gpu-fraction": "share of GPUs with a GPUDirect-close (PIX/PXB) NIC, e.g. 0.5; "
    "absent without NICs",
    "<resource>.replica-memory": "MiB one time-sliced replica of nvidia.com/<resource> can count "
    "on; shared ones only",
}


def _topology_labels(topology: Topology, domain: str) -> dict[str, str]:
    labels = {
        own_name(domain, "nvlink-kind"): nvlink_kind(topology),
        own_name(domain, "nvlink-largest-group-gpus"): str(topology.largest_nvlink_group),
    }
    numa = {node for node in topology.numa_nodes if node is not None}
    if numa:  # unknown on platforms that do not report NUMA: omit rather than claim 0
        labels[own_name(domain, "gpu-numa-node-count")] = str(len(numa))
    labels.update(_nic_labels(topology, domain))
    return labels


def _nic_labels(topology: Topology, domain: str) -> dict[str, str]:
    """RDMA NICs, and the share of GPUs with a GPUDirect-close one (PIX/PXB), as "0.5"; no share
    without NICs."""
    labels = {own_name(domain, "rdma-nic-count"): str(topology.nic_count)}
    if topology.nic_count and topology.gpu_count:
        close = sum(1 for gpu in range(topology.gpu_count) if topology.close_nics(gpu))
        labels[own_name(domain, "gpudirect-close-gpu-fraction")] = (
            f"{close / topology.gpu_count:.3g}"
        )
    return labels


def format_features_file(labels: Mapping[str, str]) -> str:
    """NFD's local-source format: one `key=value` per line, sorted for stable diffs."""
    return "".join(f"{key}={labels[key]}\n" for key in sorted(labels))


class FeaturesFileWriter:
    """Keeps one NFD features.d file in step with the labels; rewrites only when the content
    changes.

    The path is checked at every write (device_plugin.config.safe_write): never inside
    `refuse_under` (the kubelet directories we serve in: device-plugins/, plugins/,
    plugins_registry/), never onto something that is not a regular file.
    """

    def __init__(
        self,
        path: Path = DEFAULT_FEATURES_FILE,
        *,
        refuse_under: Sequence[Path] = kubelet_owned_dirs(DEFAULT_DEVICE_PLUGIN_DIR),
        field: str = LABELS_FILE_FIELD,
    ) -> None:
        self.path = path
        self.refuse_under = tuple(refuse_under)
        self.field = field
        self._written: str | None = None  # the content at the path as we last wrote or found it

    def write(self, labels: Mapping[str, str]) -> bool:
        """Write atomically (temp file + rename in the same directory); True when the file
        changed."""
        content = format_features_file(labels)
        changed = write_atomically(
            self.path, content, refuse_under=self.refuse_under, field=self.field
        )
        self._written = content
        if changed:
            log.info("wrote %d node labels to %s", len(labels), self.path)
        return changed

    def retire(self) -> bool:
        """labelsFile moved or turned off: remove our file, so node-feature-discovery drops its
        labels.

        Only a file that still holds what this writer wrote goes; True when removed."""
        if self._written is None:
            return False
        try:
            removed = remove_if_unchanged(self.path, self._written, field=self.field)
        except OSError as error:
            log.error(
                "cannot remove the old labels file %s (its labels stay on the node): %s",
                self.path,
                error,
            )
            return False
        if removed:
            log.info("removed the old labels file %s (labelsFile changed)", self.path)
        return removed


def refresh_features_file(
    backend: NvmlBackend,
    options: LabelOptions,
    writer: FeaturesFileWriter,
    topology: Topology | None = None,
) -> bool:
    """Recompute and write the labels; for the daemon's periodic refresh and config reloads.

    Returns True when the file changed. A failure is logged and leaves the old file in place: stale
    labels are better than none, and a label refresh must never take the daemon down."""
    try:
        return writer.write(compute_labels(backend, options, topology))
    except (PluginError, OSError) as error:
        log.error("node labels not refreshed (%s stays as it was): %s", writer.path, error)
        return False
