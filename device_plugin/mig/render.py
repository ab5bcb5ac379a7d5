"""Text rendering of a node's MIG layout for `gpu-device-plugin topology`: MIG devices under their
parents.

Boundary: reads a MigBackend (gpus, mig_mode, mig_devices) and returns text; no printing, no policy.
"""

from __future__ import annotations

from device_plugin.mig.discovery import MigBackend, discover
from device_plugin.mig.strategy import mig_resource


def render_mig_tree(backend: MigBackend) -> str:
    """One line per GPU with its MIG mode, then one indented line per MIG device (placement
    order)."""
    inventory = discover(backend)
    lines = [
        "MIG layout (placement = memory-slice start:size; resource = its name under migStrategy "
        "mixed)"
    ]
    for gpu in inventory.gpus:
        mode = inventory.modes.get(gpu.index)
        if mode is None:
            state = "MIG not supported"
        else:
            state = f"MIG {'enabled' if mode.current else 'disabled'}"
            if mode.pending != mode.current:
                state += f" (pending: {'enabled' if mode.pending else 'disabled'} after reset)"
        numa = "-" if gpu.numa_node is None else str(gpu.numa_node)
        lines.append(f"GPU {gpu.index}  {gpu.name}  {gpu.uuid}  NUMA {numa}  {state}")
        devices = inventory.devices_by_gpu.get(gpu.index)
        if devices is None:
            continue
        if not devices:
            lines.append("  (no MIG devices)")
        for k, mig in enumerate(devices):
            branch = "`-" if k == len(devices) - 1 else "|-"
            placement = (
                "?" if mig.placement_start < 0 else f"{mig.placement_start}:{mig.placement_size}"
            )
            lines.append(
                f"  {branch} {mig.profile:<12} {mig.uuid}  placement {placement:<4} GI "
                f"{mig.gpu_instance_id:<2} "
                f"CI {mig.compute_instance_id}  {mig.memory_mib} MiB  {mig.multiprocessor_count} "
                "SMs  "
                f"{mig_resource(mig.profile)}"
            )
    return "\n".join(lines) + "\n"
