"""GetPreferredAllocation over a real unix socket: p50/p99 latency per machine and size. Prints figures.

Usage: .venv/bin/python benchmarks/bench_rpc.py [--requests N] [--seed S]

A gRPC server with the project's servicer (device_plugin.server), a ResourceManager and the
TopologyPolicy serves each shipped machine of at least 8 GPUs on a socket in a temporary directory; a
client sends one ContainerPreferredAllocationRequest per call, with a random available set of
device IDs (shuffled, as the kubelet sends them) and must_include in a third of the calls.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from concurrent import futures
from pathlib import Path

import _common  # noqa: F401  (puts the checkout on sys.path)
import grpc
from _common import percentile, table

from api import deviceplugin_pb2 as pb
from api import deviceplugin_pb2_grpc as pb_grpc
from device_plugin.allocation_policy import EnvVarResponseBuilder
from device_plugin.devices import Device
from device_plugin.gpu_policy import TopologyPolicy
from device_plugin.nvml.catalog import shipped_machine_names
from device_plugin.nvml.fake import FakeNvml
from device_plugin.resources import ResourceManager
from device_plugin.server import DevicePluginServicer


def bench_machine(machine: str, requests: int, rng: random.Random, socket_dir: Path) -> list[list[str]]:
    backend = FakeNvml.from_machine(machine)
    gpus = backend.gpus()
    devices = [Device(id=g.uuid, gpu_indices=(g.index,), numa_node=g.numa_node) for g in gpus]
    resource = ResourceManager("nvidia.com/gpu", devices, TopologyPolicy.from_backend(backend), EnvVarResponseBuilder())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_DevicePluginServicer_to_server(DevicePluginServicer(resource), server)
    path = socket_dir / f"{machine}.sock"
    server.add_insecure_port(f"unix://{path}")
    server.start()
    rows = []
    try:
        with grpc.insecure_channel(f"unix://{path}") as channel:
            stub = pb_grpc.DevicePluginStub(channel)
            ids = [d.id for d in devices]
            n = len(ids)
            stub.GetDevicePluginOptions(pb.Empty())  # connect before timing
            for size in sorted({1, 2, 4, 8, n // 2} - {0}):
                samples = []
                for i in range(requests):
                    count = n if i % 4 == 0 else rng.randint(size, n)
                    available = rng.sample(ids, count)
                    must = rng.sample(available, min(size, rng.randint(0, 2))) if i % 3 == 0 else []
                    request = pb.PreferredAllocationRequest(
                        container_requests=[
                            pb.ContainerPreferredAllocationRequest(
                                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
                            )
                        ]
                    )
                    began = time.perf_counter()
                    response = stub.GetPreferredAllocation(request)
                    samples.append((time.perf_counter() - began) * 1e3)
                    assert len(response.container_responses[0].deviceIDs) == size
                rows.append([machine, str(size), f"{percentile(samples, 50):.2f}", f"{percentile(samples, 99):.2f}"])
    finally:
        server.stop(grace=None)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="calls per machine and size")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for machine in shipped_machine_names():
            if len(FakeNvml.from_machine(machine).gpus()) >= 8:
                rows += bench_machine(machine, args.requests, rng, Path(tmp))
    print(f"GetPreferredAllocation over a unix socket, {args.requests} calls per row (milliseconds)")
    print(table(["machine", "size", "p50 ms", "p99 ms"], rows))


if __name__ == "__main__":
    main()
