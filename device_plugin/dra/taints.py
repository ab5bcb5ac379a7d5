"""Device taints for unhealthy GPUs (KEP-5055): which taint a health transition puts on a GPU's
devices.

Boundary: pure; a HealthTransition and a wall-clock time in, a DeviceTaint out. The value type and
the taint as the ResourceSlice API spells it (`devices[].taints[]`) are the helper's
(dra_helper/api/ devices.py). Whether the API server keeps taints, and what happens when it does not
(the devices leave the pool instead), is the slice builder's and the publisher's.

Keys: NVIDIA's DRA driver's keys where we mean what NVIDIA means (core/names.py):
`gpu.nvidia.com/xid` (value: the Xid) for a critical Xid, `gpu.nvidia.com/gpu-lost` for a lost GPU,
both NoSchedule as NVIDIA's are. Every other cause is `<ownDomain>/unhealthy` with the cause as its
value (double-bit-ecc, probe-failed, health-unwatched); NVIDIA's `gpu.nvidia.com/unmonitored` is
informational (effect None), while an unwatched GPU of ours is Unhealthy (fail closed), so that
meaning is not NVIDIA's. Every taint of ours is
NoSchedule: a transition to Unhealthy is by policy a fault (ignored Xids make none), and never
NoExecute: evicting running work is the operator's decision (a DeviceTaintRule), not the driver's.

The driver's recovery action (nvml/recovery_action.py) decides as NVIDIA's driver does: an action
that takes the GPU out (reset, reboot, drain...) makes the fault NoSchedule, with the Xid's key when
an Xid came with it and `<ownDomain>/unhealthy=recovery-<action>` when a probe found it; NONE and
RECOVER_IMEX_DOMAIN leave the GPU Healthy, so no transition reaches here and no taint is written.
NVIDIA publishes those as effect None; we do not: the API servers we support from 1.34 refuse that
effect (it is 1.35's), and a Healthy GPU carries no taint here.
"""

from __future__ import annotations

import time

from device_plugin.core.names import NVIDIA_GPU_LOST_TAINT, NVIDIA_XID_TAINT, OWN_DOMAIN, own_name
from device_plugin.dra_helper.api.devices import NO_SCHEDULE, DeviceTaint
from device_plugin.health.state import HealthCause, HealthTransition
from device_plugin.nvml.recovery_action import RecoveryAction

OWN_TAINT = "unhealthy"  # <ownDomain>/unhealthy


def rfc3339(unix_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(unix_s)))


def taint_for(
    transition: HealthTransition, *, own_domain: str = OWN_DOMAIN, now_unix_s: float
) -> DeviceTaint:
    """The taint for a GPU that `transition` made Unhealthy, added at `now_unix_s` (wall clock)."""
    added = rfc3339(now_unix_s)
    if transition.cause is HealthCause.XID and transition.xid is not None:
        return DeviceTaint(NVIDIA_XID_TAINT, str(transition.xid), NO_SCHEDULE, added)
    if transition.cause is HealthCause.LOST:
        return DeviceTaint(NVIDIA_GPU_LOST_TAINT, "", NO_SCHEDULE, added)
    if transition.cause is HealthCause.RECOVERY_ACTION and transition.recovery_action is not None:
        known = transition.recovery_action in set(RecoveryAction)  # a label value: no "unknown (9)"
        action = (
            RecoveryAction(transition.recovery_action).name.lower().replace("_", "-")
            if known
            else "unknown"
        )
        return DeviceTaint(
            own_name(own_domain, OWN_TAINT), f"recovery-{action}", NO_SCHEDULE, added
        )
    cause = transition.cause.value if transition.cause is not None else "unhealthy"
    return DeviceTaint(own_name(own_domain, OWN_TAINT), cause, NO_SCHEDULE, added)
