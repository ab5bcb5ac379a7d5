"""GPU recovery actions: what the driver says a GPU needs after a fault
(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION).

Boundary: the vocabulary only. The values (nvml.h's nvmlDeviceGpuRecoveryAction_t), their names,
which of them take a GPU out of service, and parsing a stated action (a faults file, a machine's
fake state). Reading the field is the backends' (real_health.py, fake_faults.py); what a fatal
action does to health and taints is device_plugin/health/state.py's and
device_plugin/dra/taints.py's.

Drivers from 565 answer the field; older ones answer NOT_SUPPORTED, which means "no information",
never a fault. NONE means the GPU is fine to use by new processes; RECOVER_IMEX_DOMAIN asks for the
IMEX domain (the multi-node memory-sharing domain) to be recovered, not this GPU, so neither takes
the GPU out. Every other value, including one a newer driver adds that we do not know, does (fail
closed).
"""

from __future__ import annotations

from enum import IntEnum

FI_DEV_GET_GPU_RECOVERY_ACTION = 230  # nvmlFieldValue fieldId
FIRST_DRIVER_MAJOR = 565  # the first driver branch whose NVML answers the field


class RecoveryAction(IntEnum):
    NONE = 0  # nothing to do: a new process can use the GPU at once
    GPU_RESET = 1  # stop every process on the GPU and reset it
    NODE_REBOOT = 2  # the fault may have left the OS inconsistent: reboot the node
    DRAIN_P2P = 3  # quiesce all peer-to-peer traffic first, then ask again
    DRAIN_AND_RESET = 4  # quiesce peer-to-peer traffic, then reset the GPU
    RECOVER_IMEX_DOMAIN = 5  # recover the IMEX domain; the GPU itself is not the problem
    BUS_RESET = 6  # reset the GPU's PCIe bus
    SYSTEM_REBOOT = 7  # reboot the whole system


INFORMATIONAL = frozenset({RecoveryAction.NONE, RecoveryAction.RECOVER_IMEX_DOMAIN})
_PREFIX = "GPU_RECOVERY_ACTION_"


def recovery_action_name(value: int) -> str:
    """nvml.h's name without its prefix (GPU_RESET), or `unknown (N)` for a value newer than this
    table."""
    try:
        return RecoveryAction(value).name
    except ValueError:
        return f"unknown ({value})"


def takes_gpu_out(value: int) -> bool:
    """Whether a GPU whose driver reports `value` must not get new work (unknown values: yes)."""
    return value not in INFORMATIONAL


def supported_by_driver(driver_version: str) -> bool:
    """Whether a driver of this version answers the field (its major number is 565 or later)."""
    major = driver_version.split(".", 1)[0]
    return major.isdigit() and int(major) >= FIRST_DRIVER_MAJOR


def parse_recovery_action(value: object, field: str) -> RecoveryAction:
    """A stated action: nvml.h's name (any case, with or without GPU_RECOVERY_ACTION_) or its
    number.

    ValueError names `field` and the accepted names."""
    if isinstance(value, str):
        name = value.strip().upper()
        name = name[len(_PREFIX) :] if name.startswith(_PREFIX) else name
        if name in RecoveryAction.__members__:
            return RecoveryAction[name]
    elif isinstance(value, int) and not isinstance(value, bool) and value in set(RecoveryAction):
        return RecoveryAction(value)
    names = ", ".join(a.name for a in RecoveryAction)
    raise ValueError(
        f'"{field}" must be one of {names} (or its number 0-{len(RecoveryAction) - 1}), got '
        f"{value!r}"
    )
