"""FakeEventsTail and parse_fault_line: JSON lines appended by another process become injected faults."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_plugin.health.fake_events import FakeEventsTail, parse_fault_line
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.nvml.health_types import HealthEvent, HealthEventKind

from .conftest import WAIT_S

GOOD = [
    ("xid", '{"gpu": 3, "xid": 79}', HealthEvent(3, HealthEventKind.XID, xid=79)),
    ("ecc", '{"gpu": 3, "ecc": "double_bit"}', HealthEvent(3, HealthEventKind.DOUBLE_BIT_ECC)),
    ("lost", '{"gpu": 3, "lost": true}', HealthEvent(3, HealthEventKind.LOST)),
    ("recovered", '{"gpu": 3, "recovered": true}', HealthEvent(3, HealthEventKind.RECOVERED)),
    ("detail", '{"gpu": 0, "xid": 48, "detail": "drill"}', HealthEvent(0, HealthEventKind.XID, xid=48, detail="drill")),
]


@pytest.mark.parametrize(("line", "event"), [g[1:] for g in GOOD], ids=[g[0] for g in GOOD])
def test_parse_good_lines(line: str, event: HealthEvent) -> None:
    assert parse_fault_line(line) == event


BAD = [
    ("not-json", "{gpu: 3}", "not JSON"),
    ("not-object", "[3, 79]", "expected a JSON object"),
    ("no-fault", '{"gpu": 3}', "exactly one of"),
    ("two-faults", '{"gpu": 3, "xid": 79, "lost": true}', "exactly one of"),
    ("unknown-key", '{"gpu": 3, "xid": 79, "sev": 1}', "unknown key"),
    ("gpu-missing", '{"xid": 79}', '"gpu" must be'),
    ("gpu-string", '{"gpu": "3", "xid": 79}', '"gpu" must be'),
    ("gpu-bool", '{"gpu": true, "xid": 79}', '"gpu" must be'),
    ("xid-negative", '{"gpu": 3, "xid": -1}', '"xid" must be'),
    ("xid-float", '{"gpu": 3, "xid": 79.5}', '"xid" must be'),
    ("single-bit-ecc", '{"gpu": 3, "ecc": "single_bit"}', '"ecc" must be "double_bit"'),
    ("lost-false", '{"gpu": 3, "lost": false}', '"lost" must be true'),
    ("detail-number", '{"gpu": 3, "lost": true, "detail": 5}', '"detail" must be'),
]


@pytest.mark.parametrize(("line", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_parse_bad_lines(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_fault_line(line)


class Recorder:
    def __init__(self) -> None:
        self.events: list[HealthEvent] = []

    def __call__(self, event: HealthEvent) -> None:
        self.events.append(event)


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(text)


def test_a_missing_file_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    recorder = Recorder()
    tail = FakeEventsTail(path, recorder)
    assert tail.poll_once() == 0
    append(path, '{"gpu": 1, "lost": true}\n')
    assert tail.poll_once() == 1
    assert recorder.events == [HealthEvent(1, HealthEventKind.LOST)]


def test_malformed_lines_are_skipped_and_the_rest_applied(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "faults.jsonl"
    append(path, '{"gpu": 1, "xid": 79}\nnonsense\n\n{"gpu": 2, "ecc": "single_bit"}\n\xff\n{"gpu": 2, "xid": 94}\n')
    recorder = Recorder()
    tail = FakeEventsTail(path, recorder)
    assert tail.poll_once() == 2
    assert [e.gpu_index for e in recorder.events] == [1, 2]
    assert (tail.applied, tail.skipped) == (2, 3)
    assert "line 2 skipped: not JSON" in caplog.text
    assert "line 4 skipped" in caplog.text


def test_only_complete_lines_are_applied(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    recorder = Recorder()
    tail = FakeEventsTail(path, recorder)
    append(path, '{"gpu": 1, ')
    assert tail.poll_once() == 0
    append(path, '"xid": 79}\n{"gpu"')
    assert tail.poll_once() == 1
    assert recorder.events == [HealthEvent(1, HealthEventKind.XID, xid=79)]


def test_truncation_and_replacement_restart_from_the_top(tmp_path: Path) -> None:
    path = tmp_path / "faults.jsonl"
    recorder = Recorder()
    tail = FakeEventsTail(path, recorder)
    append(path, '{"gpu": 1, "xid": 79}\n{"gpu": 1, "xid": 94}\n')
    assert tail.poll_once() == 2
    path.write_text('{"gpu": 4, "lost": true}\n')  # truncated, then a shorter content
    assert tail.poll_once() == 1
    replacement = tmp_path / "next.jsonl"
    replacement.write_text('{"gpu": 5, "lost": true}\n{"gpu": 6, "lost": true}\n')
    replacement.replace(path)
    assert tail.poll_once() == 2
    assert [e.gpu_index for e in recorder.events] == [1, 1, 4, 5, 6]


def test_a_fault_the_fake_refuses_is_skipped(tmp_path: Path, fake: FakeNvml, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "faults.jsonl"
    append(path, '{"gpu": 42, "lost": true}\n{"gpu": 2, "lost": true}\n')
    tail = FakeEventsTail(path, fake.test_hooks.inject)
    assert tail.poll_once() == 1
    assert "no GPU with index 42" in caplog.text
    assert not fake.probe(2).ok


def test_the_thread_feeds_the_fake(tmp_path: Path, fake: FakeNvml) -> None:
    path = tmp_path / "faults.jsonl"
    tail = FakeEventsTail(path, fake.test_hooks.inject, poll_interval_s=0.01)
    watch = fake.open_event_watch(tuple(range(8)))
    tail.start()
    try:
        append(path, 'garbage\n{"gpu": 3, "xid": 79}\n')
        assert watch.wait(WAIT_S) == HealthEvent(3, HealthEventKind.XID, xid=79)
        append(path, '{"gpu": 3, "recovered": true}\n')
        assert watch.wait(WAIT_S) == HealthEvent(3, HealthEventKind.RECOVERED)
        assert fake.probe(3).ok  # recovery clears the sticky fault before the event is delivered
    finally:
        tail.stop()
