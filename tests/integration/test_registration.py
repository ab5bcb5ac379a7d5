"""Registration as the kubelet sees it: version, resource name, endpoint, options, retries, late kubelet."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.config.model import Config
from device_plugin.core.errors import RegistrationError
from device_plugin.core.names import GPU_RESOURCE
from device_plugin.dp_helper.plugin_dir import socket_name
from device_plugin.dp_helper.registration import register
from device_plugin.nvml.backends import open_backend
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn, is_extended_resource_name
from testbed.observed import ObservedPluginManager
from tests.composed import build_resources

from .conftest import FAST, WAIT_S, Node


def test_register_request_is_what_the_kubelet_accepts(node: Node) -> None:
    (call,) = node.kubelet.register_calls
    assert call.refusal is None
    assert call.version == "v1beta1"
    assert call.resource_name == "nvidia.com/gpu"
    assert call.endpoint == "nvidia-gpu.sock"
    assert "/" not in call.endpoint and (node.dir / call.endpoint).is_socket()


def test_options_are_the_same_in_register_and_get_options(node: Node) -> None:
    connection = node.connection
    assert connection.request_options == connection.plugin_options
    assert connection.plugin_options.get_preferred_allocation_available is True
    assert connection.plugin_options.pre_start_required is False


def test_plugin_started_before_kubelet_registers_when_socket_appears(plugin_dir: Path) -> None:
    (resource,) = build_resources(open_backend("single-gpu"), Config())
    manager = ObservedPluginManager(resource, plugin_dir, timing=FAST)
    manager.start()
    kubelet = KubeletStandIn(plugin_dir)
    try:
        assert not (plugin_dir / "kubelet.sock").exists()
        kubelet.start()
        connection = kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        assert len(connection.lists[0]) == 1
    finally:
        manager.stop()
        kubelet.stop()


def test_refused_registration_is_retried_not_fatal(plugin_dir: Path) -> None:
    kubelet = KubeletStandIn(plugin_dir, refuse_registrations=2)
    kubelet.start()
    (resource,) = build_resources(open_backend("single-gpu"), Config())
    manager = ObservedPluginManager(resource, plugin_dir, timing=FAST)
    manager.start()
    try:
        kubelet.wait_for_connection(GPU_RESOURCE, timeout_s=WAIT_S)
        assert manager.wait_for_registrations(1, WAIT_S)
        refusals = [c.refusal for c in kubelet.register_calls]
        assert len(refusals) == 3
        assert all("configured to refuse" in (r or "") for r in refusals[:2])
        assert refusals[2] is None
    finally:
        manager.stop()
        kubelet.stop()


def test_kubelet_refusal_reaches_the_plugin_as_registration_error(plugin_dir: Path) -> None:
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    try:
        with pytest.raises(RegistrationError, match="is invalid"):
            register(plugin_dir / "kubelet.sock", "x.sock", "gpu", timeout_s=5.0)
    finally:
        kubelet.stop()


@pytest.mark.parametrize(
    ("name", "valid"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/mig-1g.10gb", True),
        ("nvidia.com/gpu.shared", True),
        ("gpu", False),
        ("kubernetes.io/gpu", False),
        ("requests.nvidia.com/gpu", False),
        ("Nvidia.com/gpu", False),
        ("nvidia.com/" + "g" * 64, False),
        ("nvidia.com/-gpu", False),
    ],
    ids=[
        "gpu",
        "mig",
        "shared",
        "no-prefix",
        "native-prefix",
        "requests-prefix",
        "uppercase-domain",
        "name-64",
        "dash",
    ],
)
def test_stand_in_validates_resource_names_like_the_kubelet(name: str, valid: bool) -> None:
    assert is_extended_resource_name(name) is valid


@pytest.mark.parametrize(
    ("resource", "expected"),
    [("nvidia.com/gpu", "nvidia-gpu.sock"), ("nvidia.com/mig-1g.10gb", "nvidia-mig-1g.10gb.sock")],
    ids=["gpu", "mig"],
)
def test_socket_names_follow_nvidia(resource: str, expected: str) -> None:
    assert socket_name(resource) == expected
