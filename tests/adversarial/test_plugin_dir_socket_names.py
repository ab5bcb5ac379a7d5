"""Socket names per instance (gpuDevicePlugin.socketNames) as a careless operator or a crowded directory
gets them: a wrong setting, a missing or odd POD_UID, a directory path so long that a UID does not fit,
and, at stop, sockets in the directory that look like a sibling of ours but are not one (issue 31)."""

from __future__ import annotations

import logging
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from device_plugin.kubelet.plugin_dir import SocketNaming, instance_id
from device_plugin.serving.socket_files import too_long

FIELD = "gpuDevicePlugin.socketNames"
UID = "0b6c2c4e-5d1f-4a2b-8c3d-0000000000aa"
GPU = "nvidia.com/gpu"


@pytest.fixture
def directory() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gdp-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize(
    ("file", "env", "cli"),
    [
        ("gpuDevicePlugin: {socketNames: per_instance}\n", {}, {}),
        ("", {"SOCKET_NAMES": "PER-INSTANCE"}, {}),
        ("", {}, {FIELD: "both"}),
        ("gpuDevicePlugin: {socketNames: [fixed]}\n", {}, {}),
    ],
    ids=["file-underscore-spelling", "env-upper-case", "cli-unknown-word", "file-a-list"],
)
def test_a_wrong_setting_is_refused_naming_the_field(
    directory: Path, file: str, env: dict[str, str], cli: dict[str, str]
) -> None:
    config = directory / "config.yaml"
    config.write_text("version: v1\n" + file)
    with pytest.raises(ConfigError) as refused:
        load_config(config_file=config, env=env, cli=cli)
    assert str(refused.value).startswith(f"{FIELD}: must be one of fixed, per-instance")


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, "fixed"), ({"SOCKET_NAMES": "per-instance"}, "per-instance")],
    ids=["default-is-fixed", "env-per-instance"],
)
def test_the_setting_loads(env: dict[str, str], expected: str) -> None:
    assert load_config(env=env).daemon.socket_names == expected


@pytest.mark.parametrize(
    ("pod_uid", "shape", "warned"),
    [
        (UID, re.escape(UID), False),
        (UID.upper(), re.escape(UID), False),
        ("my-pod; rm -rf /", r"[0-9a-f]{12}", True),
        ("", r"[0-9a-f]{12}", True),
        (None, r"[0-9a-f]{12}", True),
    ],
    ids=["pod-uid", "upper-case-uid", "not-a-uid-gets-a-digest", "empty-gets-a-random-id", "unset-gets-a-random-id"],
)
def test_the_instance_id_comes_from_pod_uid_or_a_logged_fallback(
    caplog: pytest.LogCaptureFixture, pod_uid: str | None, shape: str, warned: bool
) -> None:
    env = {} if pod_uid is None else {"POD_UID": pod_uid}
    with caplog.at_level(logging.WARNING, logger="device_plugin.kubelet.plugin_dir"):
        made = instance_id(env)
    assert re.fullmatch(shape, made)
    assert bool(caplog.records) is warned
    assert not warned or "POD_UID" in caplog.records[0].getMessage()


def test_random_ids_differ_between_instances() -> None:
    assert instance_id({}) != instance_id({})


@pytest.mark.parametrize(
    ("naming", "expected"),
    [(SocketNaming(), "nvidia-gpu.sock"), (SocketNaming(UID), f"nvidia-gpu-{UID}.sock")],
    ids=["fixed", "per-instance"],
)
def test_socket_file_names(directory: Path, naming: SocketNaming, expected: str) -> None:
    assert naming.socket_file(GPU, directory) == expected


def test_a_uid_too_long_for_the_socket_path_is_replaced_by_its_digest(directory: Path) -> None:
    deep = directory / ("d" * 40)  # /tmp/gdp-xxxxxxxx/ddd…: the UID name would pass sun_path's 108 bytes
    assert too_long(deep / f"nvidia-gpu-{UID}.sock")
    name = SocketNaming(UID).socket_file(GPU, deep)
    assert re.fullmatch(r"nvidia-gpu-[0-9a-f]{12}\.sock", name)
    assert too_long(deep / name) is None
    assert name == SocketNaming(UID).socket_file(GPU, deep)  # the same pod gets the same name again


def _listen(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    return server


OWN = f"nvidia-gpu-{UID}.sock"
CASES = [
    (f"nvidia-gpu-{UID[:-2]}bb.sock", "served", True),
    ("nvidia-gpu.sock", "served", True),
    ("nvidia-gpu-0123456789ab.sock", "served", True),
    (f"nvidia-gpu-{UID[:-2]}cc.sock", "stale", False),
    ("nvidia-gpu-shared.sock", "served", False),
    (f"nvidia-gpu-shared-{UID[:-2]}dd.sock", "served", False),
    ("nvidia-gpu-0123456789ab.sock", "regular-file", False),
    (OWN, "served", False),
]


@pytest.mark.parametrize(
    ("name", "kind", "sibling"),
    CASES,
    ids=[
        "another-pod-of-the-resource",
        "a-fixed-name-instance",
        "a-digest-named-instance",
        "a-socket-nobody-serves-any-more",
        "another-resource-whose-name-extends-ours",
        "an-instance-of-that-other-resource",
        "a-regular-file-with-a-sibling-name",
        "our-own-socket",
    ],
)
def test_only_a_served_socket_of_the_same_resource_is_a_sibling(
    directory: Path, name: str, kind: str, sibling: bool
) -> None:
    path = directory / name
    server = None
    if kind == "regular-file":
        path.write_text("not a socket")
    else:
        server = _listen(path)
        if kind == "stale":  # the process died: its file stays, nobody accepts on it
            server.close()
            server = None
    try:
        found = SocketNaming(UID).live_siblings(GPU, directory, OWN)
    finally:
        if server is not None:
            server.close()
    assert found == ([name] if sibling else [])


def test_a_missing_directory_has_no_siblings(directory: Path) -> None:
    assert SocketNaming(UID).live_siblings(GPU, directory / "gone", OWN) == []
