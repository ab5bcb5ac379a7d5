"""Whether the node's container runtime passes CDI devices to containers, from the version the Node
reports.

Boundary: pure; the Node's `status.nodeInfo.containerRuntimeVersion` in ("containerd://1.6.20~ds1"),
a verdict out. A DRA driver hands the kubelet CDI device IDs only; a runtime without CDI drops them
without a word, so the claim is prepared and the container starts with no device (seen on the real
node with containerd 1.6.20). What is known: containerd before 1.7 has no CDI; 1.7 has it behind
`enable_cdi` (off by default; the Node does not say which); 2.0 and later on by default; CRI-O from
1.23. Anything else: unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SUPPORTED, NEEDS_CONFIG, DROPPED, UNKNOWN = "supported", "needs-enable-cdi", "dropped", "unknown"
_VERSION = re.compile(r"(\d+)\.(\d+)")


@dataclass(frozen=True)
class CdiVerdict:
    runtime: str  # "containerd", "cri-o", ... ("" when the Node named none)
    version: str  # as the Node reports it, cut short
    cdi: str  # one of SUPPORTED, NEEDS_CONFIG, DROPPED, UNKNOWN
    detail: str  # what an operator reads in the log and /readyz ("" when supported)


def _release(version: str) -> tuple[int, int] | None:
    found = _VERSION.match(version)
    return (int(found.group(1)), int(found.group(2))) if found else None


def cdi_verdict(runtime_version: str) -> CdiVerdict:
    runtime, _, version = runtime_version.partition("://")
    runtime, version = runtime.strip().lower()[:32], version.strip()[:64]
    release = _release(version)
    shown = f"{runtime} {version}" if runtime else "the node's container runtime"
    if runtime == "containerd" and release is not None:
        if release < (1, 7):
            why = (
                f"{shown} has no CDI support: the CDI devices of every prepared claim are dropped "
                "without an "
                "error, so containers start without their GPUs; use containerd 2.0+, or 1.7 with "
                "enable_cdi = true"
            )
            return CdiVerdict(runtime, version, DROPPED, why)
        if release < (2, 0):
            why = (
                f"{shown} passes CDI devices only with enable_cdi = true in its CRI config (off by "
                "default)"
            )
            return CdiVerdict(runtime, version, NEEDS_CONFIG, why)
        return CdiVerdict(runtime, version, SUPPORTED, "")
    if runtime == "cri-o" and release is not None:
        if release < (1, 23):
            why = (
                f"{shown} has no CDI support: claims' CDI devices are dropped; use CRI-O 1.23 or "
                "newer"
            )
            return CdiVerdict(runtime, version, DROPPED, why)
        return CdiVerdict(runtime, version, SUPPORTED, "")
    why = (
        f"{shown} ({runtime_version[:80] or 'not reported'}): whether it passes CDI devices is not "
        "known here"
    )
    return CdiVerdict(runtime, version, UNKNOWN, why)
