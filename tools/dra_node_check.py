"""Read-only check of what the DRA driver would publish for this node: ResourceSlices from real NVML and sysfs.

Usage (on a GPU node, from the checkout): .venv/bin/python tools/dra_node_check.py [--json-out FILE]
(`--machine NAME` runs the same checks on a simulated machine; the test suite does, so the tool cannot rot.)

Opens NVML (reads only: never changes MIG or any other setting), reads the RDMA NICs and the PCIe root
of every GPU from sysfs, builds the devices and slices exactly as `run --mode dra` would, and checks
them: every whole GPU published once as gpu-<minor> with its NVML UUID, every MIG device of a GPU in
MIG mode published and the GPU itself not, at most 32 attributes and capacities per device, grouping
attributes (`<ownDomain>/bestSetK`, `rankedSetK<A..D>`) in groups of their exact size K, and, where
kubernetes-validate is installed (`make venv` installs it), each slice valid for Kubernetes 1.34. What
only a real node shows (pcieRoot, NUMA, NICs) is printed; a missing one is a note, not a failure, since
a VM or sandbox may hide sysfs. No cluster is contacted. Exit 0 when every check passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from device_plugin.config.schema import DEFAULT_DRA_DRIVER_NAME  # noqa: E402
from device_plugin.core.names import OWN_DOMAIN  # noqa: E402
from device_plugin.core.short_text import counted  # noqa: E402
from device_plugin.dra.inventory import build_devices  # noqa: E402
from device_plugin.dra_helper.api.devices import MAX_ATTRIBUTES_AND_CAPACITIES  # noqa: E402
from device_plugin.dra_helper.api.slices import build_slices  # noqa: E402
from device_plugin.nvml.backends import open_backend  # noqa: E402
from device_plugin.nvml.protocol import NvmlBackend  # noqa: E402
from device_plugin.topology.build import build_topology  # noqa: E402

STANDARD = "resource.kubernetes.io/"
BEST_SET = re.compile(r"^(?:bestSet|rankedSet)(\d+)")


def device_bodies(slices: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each device as {name, attributes: {name: value}, capacity} whatever the API version's nesting."""
    out = []
    for obj in slices:
        for device in obj["spec"]["devices"]:
            body = device.get("basic", device)
            attributes = {name: next(iter(v.values())) for name, v in body.get("attributes", {}).items()}
            out.append({"name": device["name"], "attributes": attributes, "capacity": body.get("capacity", {})})
    return out


def check_slices(slices: Sequence[dict[str, Any]], backend: NvmlBackend) -> list[str]:
    """What is wrong with `slices` for this backend's GPUs (empty when nothing is)."""
    failures: list[str] = []
    devices = device_bodies(slices)
    names = Counter(d["name"] for d in devices)
    failures += [f"device {name} published {count} times" for name, count in names.items() if count > 1]
    by_uuid = {d["attributes"].get("uuid"): d for d in devices}
    for gpu in backend.gpus():
        mode = backend.mig_mode(gpu.index)
        if mode is not None and mode.current:
            if gpu.uuid in by_uuid:
                failures.append(f"GPU {gpu.index} is in MIG mode but published whole")
            failures += [
                f"MIG device {m.uuid} of GPU {gpu.index} missing"
                for m in backend.mig_devices(gpu.index)
                if m.uuid not in by_uuid
            ]
            continue
        device = by_uuid.get(gpu.uuid)
        expected = f"gpu-{backend.device_minor(gpu.index)}"
        if device is None or device["name"] != expected:
            failures.append(f"GPU {gpu.index} ({gpu.uuid}) not published as {expected}")
    for d in devices:
        count = len(d["attributes"]) + len(d["capacity"])
        if count > MAX_ATTRIBUTES_AND_CAPACITIES:
            failures.append(f"{d['name']}: {count} attributes and capacities (limit {MAX_ATTRIBUTES_AND_CAPACITIES})")
    groups = Counter(
        (name, size, value)
        for d in devices
        for name, value in d["attributes"].items()
        if (size := best_set_size(name)) is not None
    )
    failures += [f"{name}={value} has {counted(n, 'GPU')}" for (name, size, value), n in groups.items() if n != size]
    return failures


def best_set_size(name: str) -> int | None:
    """K of one of our grouping attributes (`<domain>/bestSet4`, `.../rankedSet4B`), else None."""
    match = BEST_SET.match(name.rsplit("/", 1)[-1]) if name.startswith(f"{OWN_DOMAIN}/") else None
    return int(match.group(1)) if match else None


def schema_failures(slices: Sequence[dict[str, Any]]) -> list[str]:
    try:
        import kubernetes_validate
    except ImportError:
        print("note: kubernetes-validate is not installed; the Kubernetes schema check is skipped")
        return []
    failures = []
    for obj in slices:
        try:
            kubernetes_validate.validate(obj, "1.34", strict=True)
        except kubernetes_validate.ValidationError as error:
            failures.append(f"{obj['metadata']['name']}: not a valid ResourceSlice for 1.34: {error}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machine", help="a simulated machine instead of this node's real NVML")
    parser.add_argument("--node-name", default="this-node")
    parser.add_argument("--json-out", type=Path, help="also write the slices as JSON to this file")
    args = parser.parse_args(argv)
    backend = open_backend(args.machine)
    try:
        info = backend.system_info()
        topology = build_topology(backend)
        print(f"driver {info.driver_version}, CUDA {info.cuda_driver_version}; {counted(topology.gpu_count, 'GPU')}")
        print(f"RDMA NICs: {', '.join(topology.nic_names) or 'none seen'}")
        devices, _ = build_devices(backend, topology)
        slices = build_slices(devices, node_name=args.node_name, driver_name=DEFAULT_DRA_DRIVER_NAME, generation=1)
        for d in device_bodies(slices):
            a = d["attributes"]
            where = [
                f"{key.removeprefix(STANDARD)}={a[key]}"
                for key in (STANDARD + "pcieRoot", STANDARD + "numaNode")
                if key in a
            ]
            nic_key = f"{OWN_DOMAIN}/nearestNIC"
            nic = f"nearestNIC={a[nic_key]}" if nic_key in a else "no NIC"
            parts = " ".join(f"{k.rsplit('/', 1)[1]}={v}" for k, v in a.items() if best_set_size(k) is not None)
            print(
                f"  {d['name']:<22} {a.get('productName', '')}  {' '.join(where) or 'no pcieRoot/NUMA'}  {nic}  {parts}"
            )
            if args.machine is None and STANDARD + "pcieRoot" not in a:
                print(f"  note: {d['name']}: sysfs shows no PCIe root (a VM or sandbox may hide it)")
        failures = check_slices(slices, backend) + schema_failures(slices)
        if args.json_out is not None:
            args.json_out.write_text(json.dumps(slices, indent=2) + "\n", encoding="utf-8")
    finally:
        backend.close()
    print("PASS" if not failures else "FAIL:\n  " + "\n  ".join(failures))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
