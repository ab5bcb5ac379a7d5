"""The DRA sockets as files: private whatever the umask, a foreign file at either path left alone, a path
too long for a unix socket refused up front.

Each case fails on the thread-pool server this replaced: it bound with the umask's mode (0755 under 022,
0777 under 000: any local user could call NodePrepareResources or tell us we were refused), unlinked
whatever file sat at its paths, and a long driverName under a long kubelet directory died in a traceback.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from device_plugin.core.errors import ConfigError
from device_plugin.dra_helper.service.grpc_service import DraGrpcServer
from device_plugin.dra_helper.service.socket_paths import SocketPaths, check_socket_paths
from device_plugin.serving.socket_files import SUN_PATH_BYTES, bind_bytes
from tests.adversarial.dra.harness import DRIVER, dra_server, get_info, unprepare, wait_until


@pytest.fixture
def started() -> Iterator[list[DraGrpcServer]]:
    servers: list[DraGrpcServer] = []
    yield servers
    for server in servers:
        server.stop(0.1)


def _start(root: Path, started: list[DraGrpcServer], **kwargs: object) -> DraGrpcServer:
    server = dra_server(root, **kwargs)  # type: ignore[arg-type]
    started.append(server)
    server.start()
    return server


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_both_sockets_are_0600_whatever_the_umask_also_when_served_afresh(
    root: Path, started: list[DraGrpcServer], umask: int
) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    previous = os.umask(umask)
    try:
        server = _start(root, started)
        assert (_mode(paths.endpoint), _mode(paths.registration)) == (0o600, 0o600)
        first = paths.endpoint.lstat().st_ino
        shutil.rmtree(root / "plugins")  # served afresh by the keeper thread, under the same umask
        wait_until(lambda: paths.endpoint.exists() and paths.endpoint.lstat().st_ino != first)
        assert _mode(paths.endpoint) == 0o600
    finally:
        os.umask(previous)
    assert server.serving()[0]


def _regular_file(path: Path) -> Callable[[], object]:
    path.write_text("someone else's\n")
    return lambda: (path.lstat().st_ino, path.read_text())


def _directory(path: Path) -> Callable[[], object]:
    path.mkdir()
    (path / "inside").write_text("x")
    return lambda: (path.lstat().st_ino, sorted(p.name for p in path.iterdir()))


def _symlink(path: Path) -> Callable[[], object]:
    path.symlink_to("/dev/null")
    return lambda: (path.lstat().st_ino, os.readlink(path))


FOREIGN = {"regular-file": _regular_file, "directory": _directory, "symlink": _symlink}
WHICH = {"endpoint": lambda p: p.endpoint, "registration": lambda p: p.registration}


@pytest.mark.parametrize("which", sorted(WHICH), ids=[f"at-the-{w}-path" for w in sorted(WHICH)])
@pytest.mark.parametrize("kind", sorted(FOREIGN), ids=sorted(FOREIGN))
def test_a_foreign_file_at_a_socket_path_is_left_untouched_and_reported(
    root: Path, started: list[DraGrpcServer], caplog: pytest.LogCaptureFixture, which: str, kind: str
) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    target = WHICH[which](paths)
    target.parent.mkdir(parents=True)
    look = FOREIGN[kind](target)
    before = look()
    with caplog.at_level(logging.ERROR):
        server = _start(root, started)
        wait_until(lambda: server.serving()[0] is False)  # a few polls: the file is still refused
        for _ in range(3):
            ok, reason = server.serving()
            assert not ok and str(target) in reason and "untouched" in reason, reason
    assert look() == before
    refusals = [r for r in caplog.records if str(target) in r.getMessage() and "untouched" in r.getMessage()]
    assert len(refusals) == 1, [r.getMessage() for r in caplog.records]  # once, not once per poll
    if which == "endpoint":  # the kubelet is not sent to an endpoint we do not serve
        assert not paths.registration.exists()


def test_once_the_foreign_file_is_gone_the_socket_is_served(root: Path, started: list[DraGrpcServer]) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    paths.registration.parent.mkdir(parents=True)
    paths.registration.write_text("stale\n")
    server = _start(root, started)
    assert not server.serving()[0]
    paths.registration.unlink()
    wait_until(lambda: server.serving()[0])
    assert get_info(paths.registration).endpoint == str(paths.endpoint)


def test_stop_removes_only_sockets_that_are_still_ours(root: Path, started: list[DraGrpcServer]) -> None:
    paths = SocketPaths.for_driver(DRIVER, root)
    server = _start(root, started, poll_s=3600.0)  # no keeper round between the swap and stop()
    paths.endpoint.unlink()
    paths.endpoint.write_text("put here by someone else\n")
    server.stop(0.1)
    assert paths.endpoint.read_text() == "put here by someone else\n"
    assert not paths.registration.exists()


def _kubelet_dir(length: int, base: Path) -> Path:
    """A path of exactly `length` characters under `base` (not created)."""
    assert length > len(str(base)) + 1, "the kubelet directory must lie under the test's folder"
    return base / ("k" * (length - len(str(base)) - 1))


@pytest.mark.parametrize(
    ("driver_name", "kubelet_dir_chars"),
    [
        ("g" * 40, 41),  # <kubelet>/plugins_registry/<name>-reg.sock: 108 characters, 109 bytes with the NUL
        ("gpu." + "n" * 90 + ".com", 20),  # a long driverName under a short kubelet directory
        (DRIVER, 90),  # a short driverName under a long kubelet directory
    ],
    ids=["40-char-name-41-char-dir", "long-name", "long-kubelet-dir"],
)
def test_a_socket_path_too_long_is_a_config_error_naming_driver_name_and_the_kubelet_dir(
    root: Path, driver_name: str, kubelet_dir_chars: int
) -> None:
    kubelet_dir = _kubelet_dir(kubelet_dir_chars, root)
    server = dra_server(root, driver_name=driver_name, kubelet_dir=kubelet_dir)
    with pytest.raises(ConfigError) as raised:
        server.start()
    assert "driverName" in raised.value.field
    assert driver_name in str(raised.value) and str(kubelet_dir) in str(raised.value)
    assert not kubelet_dir.exists()  # refused before anything was created


def test_the_longest_path_that_fits_is_served_and_one_byte_more_is_refused(
    root: Path, started: list[DraGrpcServer]
) -> None:
    """The check is the OS's limit, not a guess: at exactly SUN_PATH_BYTES both sockets bind and answer
    (a 39-character name under a 41-character kubelet directory is such a case; it failed in gRPC before)."""
    name = DRIVER
    while max(bind_bytes(p) for p in _paths_of(name, root)) < SUN_PATH_BYTES:
        name = "g" + name
    assert max(bind_bytes(p) for p in _paths_of(name, root)) == SUN_PATH_BYTES
    fits = _start(root, started, driver_name=name)
    wait_until(lambda: fits.serving()[0])
    paths = SocketPaths.for_driver(name, root)
    assert get_info(paths.registration).name == name and unprepare(paths.endpoint, []).claims == {}
    with pytest.raises(ConfigError, match="driverName"):
        dra_server(root, driver_name="g" + name).start()


def _paths_of(name: str, root: Path) -> tuple[Path, Path]:
    paths = SocketPaths.for_driver(name, root)
    return paths.endpoint, paths.registration


POD_UID = "8048b244-c8cf-4294-a1d1-1fb506c06452"


@pytest.mark.parametrize(
    ("driver_name", "kubelet_dir", "fits"),
    [
        (DRIVER, "/var/lib/kubelet", True),
        (DRIVER, "/tmp/gdp-rn-abcdefgh/kubelet/root", True),  # the real-node tests' root: 34 characters
        (DRIVER, "/" + "r" * 42, True),  # 43 characters: the longest root the default name fits
        ("d" * 50 + ".example.com", "/k", True),  # 63 characters, the longest driver name
        ("d" * 50 + ".example.com", "/var/lib/kubelet", False),
        (DRIVER, "/" + "r" * 43, False),
    ],
    ids=[
        "default-root",
        "a-34-character-root",
        "a-43-character-root",
        "63-character-name-short-root",
        "63-character-name-default-root-refused",
        "a-44-character-root-refused",
    ],
)
def test_per_instance_socket_paths_fit_a_unix_socket_or_are_refused_naming_the_fix(
    driver_name: str, kubelet_dir: str, fits: bool
) -> None:
    """The UID, or where it would not fit its 12-digit digest (the real kubelet with a root over 19
    characters refused the driver before); what not even that fits is refused at start, never at serving."""
    root = Path(kubelet_dir)
    paths = SocketPaths.for_driver(driver_name, root, POD_UID)
    assert paths == SocketPaths.for_driver(driver_name, root, POD_UID)  # the same pod, the same names
    assert paths.registration.name.startswith(f"{driver_name}-") and paths.endpoint.name.startswith("dra-")
    if fits:
        check_socket_paths(driver_name, paths)
        assert all(bind_bytes(p) <= SUN_PATH_BYTES for p in (paths.registration, paths.endpoint))
    else:
        with pytest.raises(ConfigError) as refused:
            check_socket_paths(driver_name, paths)
        assert "108" in str(refused.value) and "socketNames fixed" in str(refused.value)


def test_a_root_too_long_even_for_the_digest_is_refused_naming_the_limit_and_the_fix(root: Path) -> None:
    deep = _kubelet_dir(70, root)
    server = dra_server(root, driver_name=DRIVER, kubelet_dir=deep, instance=POD_UID)
    with pytest.raises(ConfigError) as raised:
        server.start()
    assert "108" in str(raised.value) and "--root-dir" in str(raised.value)


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        (f"{DRIVER}-reg.sock", True),
        (f"{DRIVER}-{POD_UID}-reg.sock", True),
        (f"{DRIVER}-0123456789ab-reg.sock", True),
        (f"{DRIVER}-mig-reg.sock", False),  # another driver whose name begins with ours
        (f"{DRIVER}.example-reg.sock", False),
        (f"{DRIVER}-{POD_UID}x-reg.sock", False),
    ],
    ids=["fixed", "uid", "digest", "driver-name-with-our-prefix", "longer-driver-name", "uid-and-more"],
)
def test_only_our_own_socket_names_count_as_another_instance(root: Path, name: str, ours: bool) -> None:
    import socket as socket_module

    registry = root / "plugins_registry"
    registry.mkdir(parents=True, exist_ok=True)
    other = socket_module.socket(socket_module.AF_UNIX, socket_module.SOCK_STREAM)
    other.bind(str(registry / name))
    other.listen(1)
    try:
        paths = SocketPaths.for_driver(DRIVER, root, "11111111-2222-3333-4444-555555555555")
        assert bool(paths.others_served(DRIVER)) is ours
    finally:
        other.close()
