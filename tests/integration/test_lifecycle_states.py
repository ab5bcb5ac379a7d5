"""The lifecycle state machine: its transition table holds, and a running plugin walks it as documented."""

from __future__ import annotations

import logging
import threading

import pytest

from device_plugin.core.names import GPU_RESOURCE
from device_plugin.dp_helper.lifecycle_state import LIVE, TRANSITIONS, IllegalTransition, State, StateMachine

from .conftest import WAIT_S, Node, start_node

S = State


def _machine_in(state: State) -> StateMachine:
    """A machine walked to `state` along documented transitions only."""
    paths = {
        S.RESTARTING: [],
        S.WAITING_FOR_DIRECTORY: [S.WAITING_FOR_DIRECTORY],
        S.NOT_SERVING: [S.NOT_SERVING],
        S.SOCKET_TAKEN: [S.SOCKET_TAKEN],
        S.UNREGISTERED: [S.UNREGISTERED],
        S.REGISTERING: [S.UNREGISTERED, S.REGISTERING],
        S.REGISTERED: [S.UNREGISTERED, S.REGISTERING, S.REGISTERED],
        S.STREAM_LOST: [S.UNREGISTERED, S.REGISTERING, S.REGISTERED, S.STREAM_LOST],
        S.FAILED: [S.FAILED],
        S.STOPPING: [S.STOPPING],
        S.STOPPED: [S.STOPPING, S.STOPPED],
    }
    machine = StateMachine("test")
    for step in paths[state]:
        assert machine.move(step, "walk", expect=machine.state)
    assert machine.state is state
    return machine


@pytest.mark.parametrize("state", list(State), ids=[s.value for s in State])
def test_every_state_moves_only_as_the_table_says(state: State) -> None:
    for target in State:
        machine = _machine_in(state)
        if target is state:
            assert machine.move(target, "no-op", expect=state)
        elif target in TRANSITIONS[state]:
            assert machine.move(target, "allowed", expect=state)
            assert machine.state is target
        else:
            with pytest.raises(IllegalTransition):
                machine.move(target, "not in the table", expect=state)
            assert machine.state is state


@pytest.mark.parametrize(
    ("state", "event", "expect"),
    [
        (S.STOPPING, S.RESTARTING, LIVE),
        (S.STOPPED, S.STOPPING, LIVE),
        (S.UNREGISTERED, S.STREAM_LOST, (S.REGISTERING, S.REGISTERED)),
        (S.REGISTERED, S.UNREGISTERED, S.REGISTERING),
    ],
    ids=[
        "a-stop-beats-a-kubelet-restart",
        "stopped-stays-stopped",
        "a-stream-ending-before-registration-is-ignored",
        "a-refusal-after-registration-succeeded-is-moot",
    ],
)
def test_a_move_from_a_state_already_left_is_refused_not_an_error(
    state: State, event: State, expect: State | tuple[State, ...] | frozenset[State]
) -> None:
    machine = _machine_in(state)
    assert machine.move(event, "late event", expect=expect) is False
    assert machine.state is state


def test_a_wait_ends_when_another_thread_moves_the_state() -> None:
    machine = _machine_in(S.REGISTERED)
    mover = threading.Timer(0.05, machine.move, args=(S.STREAM_LOST, "stream ended"), kwargs={"expect": LIVE})
    mover.start()
    assert machine.wait_while(S.REGISTERED, WAIT_S) is S.STREAM_LOST
    mover.join()


def _transitions(caplog: pytest.LogCaptureFixture) -> list[str]:
    prefix = f"{GPU_RESOURCE}: "
    return [
        r.getMessage().removeprefix(prefix).split(":")[0]
        for r in caplog.records
        if r.name == "device_plugin.dp_helper.lifecycle_state"
    ]


def test_start_kubelet_restart_and_stop_walk_the_documented_states(
    plugin_dir, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="device_plugin.dp_helper.lifecycle_state"):
        node: Node = start_node(plugin_dir, "single-gpu")
        try:
            assert node.manager.wait_for_registrations(1, WAIT_S)
            node.kubelet.restart()
            node.kubelet.wait_for_connection(GPU_RESOURCE, count=2, timeout_s=WAIT_S)
            assert node.manager.wait_for_registrations(2, WAIT_S)
        finally:
            node.manager.stop()
            node.kubelet.stop()
    walked = _transitions(caplog)
    registration = [
        "restarting -> serving-unregistered",
        "serving-unregistered -> registering",
        "registering -> registered",
    ]
    assert walked[:3] == registration
    # The restart's stream end and directory events race; whichever comes first, it ends in a fresh socket.
    restart = walked[3:-2]
    assert any(step.endswith("-> restarting") for step in restart), walked
    assert restart[-3:] == registration, walked
    assert walked[-2:] == ["registered -> stopping", "stopping -> stopped"]
    by_value = {s.value: s for s in State}
    for step in walked:
        before, _, after = step.partition(" -> ")
        assert by_value[after] in TRANSITIONS[by_value[before]], step
