"""Kubelet restarts and lost streams: fresh socket, registration again, full list; other files untouched."""

from __future__ import annotations

from device_plugin.core.names import GPU_RESOURCE

from .conftest import WAIT_S, Node

CHECKPOINT = "kubelet_internal_checkpoint"


def test_kubelet_restart_gives_a_fresh_socket_and_a_new_registration(node: Node) -> None:
    checkpoint = node.dir / CHECKPOINT
    checkpoint.write_text("kubelet data")
    deleted = node.kubelet.restart()
    assert "nvidia-gpu.sock" in deleted  # kubelet.sock went with its server

    connection = node.kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
    assert node.manager.wait_for_registrations(2, WAIT_S)
    assert (node.dir / "nvidia-gpu.sock").is_socket()  # the restart deleted it: this one is fresh
    assert len(connection.lists[0]) == 8
    assert {d.health for d in connection.lists[0]} == {"Healthy"}
    assert connection.request_options == connection.plugin_options
    assert checkpoint.read_text() == "kubelet data"
    assert sorted(p.name for p in node.dir.iterdir()) == sorted([CHECKPOINT, "kubelet.sock", "nvidia-gpu.sock"])


def test_two_restarts_in_a_row_end_registered_once_more_each(node: Node) -> None:
    node.kubelet.restart()
    node.kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
    node.kubelet.restart()
    connection = node.kubelet.wait_for_connection(GPU_RESOURCE, count=3, timeout_s=WAIT_S)
    assert len(connection.lists[-1]) == 8
    assert not connection.stream_ended


def test_stream_cancelled_with_sockets_in_place_leads_to_registration_again(node: Node) -> None:
    first = node.connection
    assert first.call is not None
    first.call.cancel()
    second = node.kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
    assert second is not first
    assert len(second.lists[0]) == 8
    assert node.manager.wait_for_registrations(2, WAIT_S)
