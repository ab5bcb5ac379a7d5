"""Names on the wire that are ours or NVIDIA's, in one place, so a clash is decided once.

NVIDIA's names are used only where we mean exactly what NVIDIA's components mean by them (the
resource `nvidia.com/gpu`, the CDI kind, feature discovery's `nvidia.com/gpu.*` labels that we write
with the same meaning). Everything of our own (topology labels and DRA attributes that NVIDIA does
not define) lives under OWN_DOMAIN, which an operator can change. Nothing here is under
kubernetes.io.
"""

from __future__ import annotations

# NVIDIA's domain: its resource names (nvidia.com/gpu, nvidia.com/mig-<profile>) and labels live
# under it.
NVIDIA_DOMAIN = "nvidia.com"

# The resource name kubelet, schedulers and Kueue count whole GPUs by; NVIDIA's, same meaning.
GPU_RESOURCE = f"{NVIDIA_DOMAIN}/gpu"

# The vendor/class of the CDI spec nvidia-ctk generates; NVIDIA's, same meaning.
CDI_KIND = "nvidia.com/gpu"

# Feature discovery's node label for the NVLink clique (`<clusterUUID>.<cliqueID>`): NVIDIA's, same
# meaning, value and rule (device_plugin/topology/fabric.py), so Kueue and JobSet setups written for
# it work.
GPU_CLIQUE_LABEL = "nvidia.com/gpu.clique"

# Our own domain for labels and DRA attributes NVIDIA does not define (configurable where used).
OWN_DOMAIN = "gpu-device-plugin.io"

# Domains whose names mean what their owners say: none of ours may sit under them (ownDomain refuses
# them).
FOREIGN_DOMAINS = (NVIDIA_DOMAIN, "kubernetes.io", "k8s.io")


def foreign_owner(domain: str) -> str | None:
    """The foreign domain that `domain` is or sits under (`gpu.nvidia.com` -> `nvidia.com`); None if
    none."""
    lowered = domain.lower().rstrip(".")
    for owner in FOREIGN_DOMAINS:
        if lowered == owner or lowered.endswith("." + owner):
            return owner
    return None


def own_name(domain: str, name: str) -> str:
    """`<domain>/<name>`: a label key or a DRA attribute of ours, qualified by the configured
    domain."""
    return f"{domain}/{name}"


# NVIDIA's DRA driver's device-taint keys (under its driver name gpu.nvidia.com), used with NVIDIA's
# meaning: a fatal Xid (value: the Xid) and a lost GPU, both NoSchedule. NVIDIA's third key,
# gpu.nvidia.com/unmonitored, is informational (effect None) there; we fail closed on an unwatched
# GPU, so that and every other cause of ours is `<ownDomain>/unhealthy`
# (device_plugin/dra/taints.py).
NVIDIA_DRA_DOMAIN = "gpu.nvidia.com"
NVIDIA_XID_TAINT = f"{NVIDIA_DRA_DOMAIN}/xid"
NVIDIA_GPU_LOST_TAINT = f"{NVIDIA_DRA_DOMAIN}/gpu-lost"
