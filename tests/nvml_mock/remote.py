"""MockHost: a process running the real backend (RealNvml) on one NVML mock profile, and RemoteBackend, the
NvmlBackend that hands each call to it (with the NIC, IMEX, health and telemetry sides RealNvml has).

Boundary: carrying calls to tests/nvml_mock/host.py and back, and writing the mock's overrides file (faults
while the process runs). Nothing is answered here: values are RealNvml's, errors are RealNvml's NvmlErrors
rebuilt with the same call, device and code. Calls are serialised (one socket, one lock), so threads of a
daemon under test wait their turn, as they would for a busy driver.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml

from device_plugin.core.errors import NvmlError, NvmlUnavailableError
from device_plugin.nvml.fabric_types import FabricInfo
from device_plugin.nvml.health_types import HealthEvent, ProbeResult
from device_plugin.nvml.mig_types import MigDevice, MigMode
from device_plugin.nvml.telemetry import GpuTelemetry
from device_plugin.nvml.types import GpuInfo, NicInfo, NvLinkInfo, PcieLevel, SystemInfo
from tests.nvml_mock.mock_folder import NvmlMock

ROOT = Path(__file__).resolve().parents[2]
STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class _Ref:
    object_id: int


def rebuild_error(class_name: str, text: str, call: str, device: str | None, code: int | None) -> NvmlError:
    """The host's NvmlError again, with its call, device, code and message."""
    cls = NvmlUnavailableError if class_name == NvmlUnavailableError.__name__ else NvmlError
    prefix = f"NVML {call}{f' on {device}' if device else ''} failed: "
    return cls(call, text.removeprefix(prefix), device=device, code=code)


def write_overrides(path: Path, devices: Mapping[int, Mapping[str, Any]]) -> None:
    """Per-GPU patches of the profile (e.g. {2: {"failure": {"mode": "lost"}}}) for the running mock to read;
    none ({}) is the profile as shipped, so a failed GPU recovers."""
    text = yaml.safe_dump({"devices": {str(i): dict(patch) for i, patch in devices.items()}}) if devices else ""
    draft = path.with_suffix(".draft")
    draft.write_text(text, encoding="utf-8")
    os.replace(draft, path)  # the mock never reads half a file


class MockHost:
    """One host process on `profile`; `overrides` is the file the mock re-reads (inject() and clear() write it)."""

    def __init__(self, mock: NvmlMock, profile: str, workdir: Path) -> None:
        self.profile = profile
        self.overrides = workdir / "overrides.yaml"
        self._no_sysfs = workdir / "no-sysfs"  # absent: no NUMA node, no PCIe path
        self._log = workdir / "host.log"
        env = mock.environment(profile, library_dir=mock.library_dir(workdir / "lib"), overrides=self.overrides)
        ours, theirs = socket.socketpair()
        with theirs, self._log.open("w") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.nvml_mock.host", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=log,
            )
        self._connection = Connection(ours.detach())
        self._lock = threading.Lock()

    def request(self, *request: Any) -> Any:
        with self._lock:
            try:
                self._connection.send(request)
                answer = self._connection.recv()
            except (EOFError, OSError) as exc:
                raise RuntimeError(f"the NVML mock host of {self.profile} is gone ({exc}): {self._log_tail()}") from exc
        kind = answer[0]
        if kind == "value":
            return answer[1]
        if kind == "object":
            return _Ref(answer[1])
        if kind == "nvml_error":
            raise rebuild_error(*answer[1:])
        raise RuntimeError(f"the NVML mock host of {self.profile} raised:\n{answer[1]}")

    def open_backend(self, sys_root: Path | None = None) -> RemoteBackend:
        """RealNvml on this profile over `sys_root`; by default an empty one, never the sysfs of the machine
        running the tests (whose PCI devices may sit at the profile's bus ids)."""
        return RemoteBackend(self, self.request("open", str(sys_root or self._no_sysfs)).object_id)

    def inject(self, devices: Mapping[int, Mapping[str, Any]]) -> None:
        write_overrides(self.overrides, devices)

    def clear(self) -> None:
        write_overrides(self.overrides, {})

    def _log_tail(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-2000:] or "(no output)"
        except OSError:
            return "(no log)"

    def close(self) -> None:
        self._connection.close()  # end of file: the host closes its backends and exits
        try:
            self._process.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


class RemoteEventWatch:
    """A RealEventWatch living in the host (the EventWatch protocol)."""

    def __init__(self, host: MockHost, object_id: int) -> None:
        self._host, self._id = host, object_id

    @property
    def registration_failures(self) -> Mapping[int, str]:
        return dict(self._host.request("call", self._id, "registration_failures", ()))

    def wait(self, timeout_s: float) -> HealthEvent | None:
        event: HealthEvent | None = self._host.request("call", self._id, "wait", (timeout_s,))
        return event

    def close(self) -> None:
        self._host.request("call", self._id, "close", ())


class RemoteBackend:
    """RealNvml in a MockHost, method for method."""

    def __init__(self, host: MockHost, object_id: int) -> None:
        self.host, self._id = host, object_id

    def _call(self, name: str, *args: Any) -> Any:
        return self.host.request("call", self._id, name, args)

    def system_info(self) -> SystemInfo:
        return self._call("system_info")

    def gpus(self) -> tuple[GpuInfo, ...]:
        return self._call("gpus")

    def nvlinks(self, index: int) -> tuple[NvLinkInfo, ...]:
        return self._call("nvlinks", index)

    def device_minor(self, index: int) -> int:
        return self._call("device_minor", index)

    def pcie_level(self, index_a: int, index_b: int) -> PcieLevel:
        return self._call("pcie_level", index_a, index_b)

    def mig_mode(self, index: int) -> MigMode | None:
        return self._call("mig_mode", index)

    def mig_devices(self, index: int) -> tuple[MigDevice, ...]:
        return self._call("mig_devices", index)

    def fabric_info(self, index: int) -> FabricInfo:
        return self._call("fabric_info", index)

    def imex_channels(self, dev_root: Path) -> frozenset[int]:
        return self._call("imex_channels", dev_root)

    def nics(self) -> tuple[NicInfo, ...]:
        return self._call("nics")

    def pcie_path(self, pci_bus_id: str) -> tuple[str, ...] | None:
        return self._call("pcie_path", pci_bus_id)

    def telemetry(self, index: int) -> GpuTelemetry:
        return self._call("telemetry", index)

    def open_event_watch(self, indices: tuple[int, ...]) -> RemoteEventWatch:
        return RemoteEventWatch(self.host, self._call("open_event_watch", tuple(indices)).object_id)

    def probe(self, index: int) -> ProbeResult:
        return self._call("probe", index)

    def close(self) -> None:
        self._call("close")
