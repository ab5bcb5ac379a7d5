"""Fixtures of the NVML mock tests: the mock (or a skip with the reason), host processes per profile, the real
backend opened in them over the sysfs tree the mock renders, and hosts of a test's own for faults.

Hosts that nothing changes are shared by every test of a worker (one process per profile); a test that writes
faults gets its own host (`own_host`), so no other test sees them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.nvml_mock.mock_folder import NvmlMock, find_mock
from tests.nvml_mock.profiles import Profile, load_profile
from tests.nvml_mock.remote import MockHost, RemoteBackend

WAIT_S = 15.0  # a failure bound for a loaded 2-core machine, never a timing claim


def eventually(check: Callable[[], object], what: str, timeout_s: float = WAIT_S) -> None:
    """Poll `check` until it holds: the mock re-reads its overrides every 20 ms, the daemon probes on its own."""
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture(scope="session")
def nvml_mock() -> NvmlMock:
    mock, reason = find_mock()
    if mock is None:
        pytest.skip(f"NVML mock not found: {reason}")
    return mock


class HostPool:
    """Per worker: one host process per profile and one rendered sysfs tree per profile, made on first use."""

    def __init__(self, mock: NvmlMock, workdir: Path) -> None:
        self.mock = mock
        self._workdir = workdir
        self._hosts: dict[str, MockHost] = {}
        self._sysfs: dict[str, Path] = {}

    def require(self, profile: str) -> None:
        if not self.mock.has_profile(profile):
            pytest.skip(f"the NVML mock at {self.mock.root} has no profile {profile}")

    def host(self, profile: str) -> MockHost:
        self.require(profile)
        if profile not in self._hosts:
            self._hosts[profile] = MockHost(self.mock, profile, self._workdir / f"host-{profile}")
        return self._hosts[profile]

    def sysfs(self, profile: str) -> Path:
        """The `sys` folder `render-pci-sysfs` writes for the profile (NUMA nodes, root complexes)."""
        self.require(profile)
        if profile not in self._sysfs:
            self._sysfs[profile] = self.mock.render_sysfs(profile, self._workdir / f"sysfs-{profile}")
        return self._sysfs[profile]

    def profile(self, profile: str) -> Profile:
        self.require(profile)
        return load_profile(self.mock.config(profile))

    def close(self) -> None:
        for host in self._hosts.values():
            host.close()


@pytest.fixture(scope="session")
def mock_hosts(nvml_mock: NvmlMock, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostPool]:
    pool = HostPool(nvml_mock, tmp_path_factory.mktemp("nvml-mock"))
    yield pool
    pool.close()


OpenReal = Callable[..., RemoteBackend]


@pytest.fixture
def real_on(mock_hosts: HostPool, tmp_path: Path) -> Iterator[OpenReal]:
    """real_on(profile, sysfs=True): RealNvml on the profile in a shared host, closed after the test; without
    the rendered sysfs tree it reads an empty one (no NUMA nodes, no PCIe paths)."""
    opened: list[RemoteBackend] = []

    def open_real(profile: str, *, sysfs: bool = True) -> RemoteBackend:
        root = mock_hosts.sysfs(profile) if sysfs else tmp_path / "no-sysfs"
        backend = mock_hosts.host(profile).open_backend(root)
        opened.append(backend)
        return backend

    yield open_real
    for backend in opened:
        backend.close()


@pytest.fixture
def own_host(mock_hosts: HostPool, tmp_path: Path) -> Iterator[Callable[[str], MockHost]]:
    """own_host(profile): a host process for this test alone (it may write faults), stopped after it."""
    hosts: list[MockHost] = []

    def start(profile: str) -> MockHost:
        mock_hosts.require(profile)
        hosts.append(MockHost(mock_hosts.mock, profile, tmp_path / f"host-{profile}-{len(hosts)}"))
        return hosts[-1]

    yield start
    for host in hosts:
        host.close()
