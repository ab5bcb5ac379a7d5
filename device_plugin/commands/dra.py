"""`gpu-device-plugin dra slices`: print the ResourceSlices the DRA driver would publish for a node.

No cluster needed: the slices come from NVML (or a simulated --machine), the config's driver name
and the node name. The Node's UID is unknown offline, so the owner reference is left out (the
running driver reads it from the API server).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

from device_plugin.commands._machine import add_machine_argument, fail
from device_plugin.config.arguments import add_config_file_argument
from device_plugin.config.loader import load_effective_config
from device_plugin.core.errors import PluginError

NAME = "dra"
HELP = (
    "Dynamic Resource Allocation driver tools: `dra slices` prints the ResourceSlices of this node"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="dra_command", metavar="ACTION", required=True)
    what = (
        "print the ResourceSlice objects the driver would publish for this node (or a simulated "
        "machine)"
    )
    slices = sub.add_parser(
        "slices",
        help=what,
        description=f"{what[0].upper()}{what[1:]}, with the attributes of each device (partitions, "
        "NVLink "
        "domain, nearest NIC). Reads NVML (or the machine) and the config only; sends nothing to "
        "the API server.",
        allow_abbrev=False,
    )
    add_machine_argument(slices)
    add_config_file_argument(slices)  # the driver name: gpuDevicePlugin.driverName
    slices.add_argument(
        "--node-name", metavar="N", help="node name (default: env NODE_NAME, else the host name)"
    )
    slices.add_argument(
        "--api-version",
        default="v1",
        choices=("v1", "v1beta2", "v1beta1"),
        help="the resource.k8s.io API version to write (default v1)",
    )
    slices.add_argument(
        "--json", action="store_true", help="print a JSON list (default: a readable table)"
    )


def run(args: argparse.Namespace) -> int:
    from device_plugin.core.names import own_name
    from device_plugin.dra.inventory import OWN_ATTRIBUTES, build_devices
    from device_plugin.dra.memory_shares import shareable
    from device_plugin.dra_helper.api.slices import build_slices
    from device_plugin.nvml.backends import open_backend
    from device_plugin.topology.build import build_topology

    try:
        config = load_effective_config(args, os.environ)
        node = args.node_name or os.environ.get("NODE_NAME") or socket.gethostname()
        backend = open_backend(args.machine)
        try:
            topology = build_topology(backend)
            devices, _ = build_devices(
                backend,
                topology,
                own_domain=config.daemon.own_domain,
                hints=config.daemon.placement_hints,
            )
            if config.daemon.memory_shares:
                devices = shareable(
                    devices, config.daemon.own_domain, config.daemon.shares.isolation
                )
        finally:
            backend.close()
    except PluginError as error:
        return fail(error)
    slices = build_slices(
        devices,
        node_name=node,
        driver_name=config.daemon.driver_name,
        generation=1,
        api_version=args.api_version,
    )
    if args.json:
        json.dump(slices, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for obj in slices:
        spec = obj["spec"]
        pool = spec["pool"]
        print(
            f"# {obj['metadata']['name']}: driver {spec['driver']}, pool {pool['name']} generation "
            f"{pool['generation']}"
            f"; our attributes under {config.daemon.own_domain}/"
        )
        for device in spec["devices"]:
            attrs = device.get("attributes") or device["basic"]["attributes"]
            # Ours, shown without the domain (the header line names it), in OWN_ATTRIBUTES' order;
            # the ranked groupings (ten more numbers) only in --json.
            ours = [
                (k, own_name(config.daemon.own_domain, k))
                for k in OWN_ATTRIBUTES
                if not k.startswith("rankedSet")
            ]
            parts = [f"{short}={v}" for short, k in ours if k in attrs for v in attrs[k].values()]
            print(f"{device['name']:<22} {attrs['uuid']['string']:<42} {' '.join(parts)}")
    return 0
