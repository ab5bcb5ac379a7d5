"""Socket names per instance (gpuDevicePlugin.socketNames) as a careless operator or a crowded directory
gets them: a wrong setting, a missing or odd POD_UID, a directory path so long that a UID does not fit,
and, at stop, sockets in the directory that look like a sibling of ours but are not one (issue 31)."""

from __future__ import annotations

import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError
from device_plugin.dp_helper.plugin_dir import SocketNaming
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
    ("pod_uid", "expected"),
    [(UID, UID), (UID.upper(), UID), (f"  {UID}\n", UID)],
    ids=["pod-uid", "upper-case-uid-is-the-same-pod", "whitespace-around"],
)
def test_the_instance_id_is_the_pod_uid(pod_uid: str, expected: str) -> None:
    assert SocketNaming.of("per-instance", {"POD_UID": pod_uid}).instance == expected


@pytest.mark.parametrize(
    "env",
    [{"POD_UID": "my-pod; rm -rf /"}, {"POD_UID": ""}, {}],
    ids=["not-a-uid", "empty", "unset"],
)
def test_per_instance_names_without_a_pod_uid_are_refused_naming_the_field(env: dict[str, str]) -> None:
    """One rule in both modes (core/instance_id.py): a made-up id would change at every restart."""
    with pytest.raises(ConfigError) as refused:
        SocketNaming.of("per-instance", env)
    assert str(refused.value).startswith(f"{FIELD}: per-instance needs POD_UID")
    assert SocketNaming.of("fixed", env).instance == ""


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
