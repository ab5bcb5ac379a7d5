"""Our settings for GPU memory shares in DRA mode (section `gpuDevicePlugin.shares`): which
isolation a share gets on this node, and where its MPS parts live.

Boundary: declarations and their checks only. `isolation` is what the node publishes as
`<own domain>/memoryIsolation` and what each share's Prepare sets up (dra/memory_shares.py,
dra/mps/): `none` (bookkeeping only) or `per-process` (one MPS control daemon per shared GPU, each
CUDA process of a share capped by the share's pinned-memory and thread limits). `hard` (a
per-container limit: MPS memory partitioning or NVML per-cgroup limits) is refused with the reason:
this build cannot set it. NVIDIA's `flags.mpsRoot` says where the daemons' pipe and log folders go
(docs/sharing-dra.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from device_plugin.config.declare import CliFlag, Reload, setting
from device_plugin.config.schema import Field
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import short

ISOLATION_NONE, ISOLATION_PER_PROCESS, ISOLATION_HARD = "none", "per-process", "hard"
ISOLATIONS = (ISOLATION_NONE, ISOLATION_PER_PROCESS)
HARD_NOT_BUILT = (
    "hard is not built: a per-container memory limit needs MPS memory partitioning or NVML "
    "per-cgroup "
    "limits (driver r615 or later, cgroup v2 with the dmem controller), which this build does not "
    "set; "
    "use per-process (MPS, each CUDA process capped) or none"
)
DEFAULT_MPS_ROOT = "/run/gpu-device-plugin/mps"  # where flags.mpsRoot is empty
# the runtime's dynamic CDI folder (containerd and CRI-O read it)
DEFAULT_CDI_SPEC_DIR = "/var/run/cdi"


def _isolation(field: str, value: Any) -> str:
    if value == ISOLATION_HARD:
        raise ConfigError(field, HARD_NOT_BUILT)
    if value not in ISOLATIONS:
        raise ConfigError(field, f"must be one of {', '.join(ISOLATIONS)}; got {short(value)}")
    return str(value)


def _absolute(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise ConfigError(field, f"must be an absolute path, got {short(value)}")
    return value


def _command(field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            field, f"must name a program (a path or a name on PATH), got {short(value)}"
        )
    return value


ISOLATION = Field(_isolation, _isolation)
ABSOLUTE_PATH = Field(_absolute, _absolute)
COMMAND = Field(_command, _command)


@dataclass(frozen=True)
class ShareSettings:
    """`gpuDevicePlugin.shares`: read at start (a restart applies a change); used with memoryShares
    on."""

    isolation: str = setting(
        "isolation",
        ISOLATION,
        default=ISOLATION_NONE,
        reload=Reload.RESTART,
        env="MEMORY_SHARE_ISOLATION",
        cli=CliFlag(
            "--memory-share-isolation",
            "DRA memory shares: none (bookkeeping) or per-process (an MPS daemon per shared GPU)",
            "none|per-process",
        ),
    )
    # the MPS control program; tests point it at the project's own double
    mps_control: str = setting(
        "mpsControl",
        COMMAND,
        default="nvidia-cuda-mps-control",
        reload=Reload.RESTART,
        env="MPS_CONTROL",
    )
    # where the CDI specs of MPS shares are written (the container runtime reads them at container
    # start)
    cdi_spec_dir: str = setting(
        "cdiSpecDir",
        ABSOLUTE_PATH,
        default=DEFAULT_CDI_SPEC_DIR,
        reload=Reload.RESTART,
        env="CDI_SPEC_DIR",
    )
