"""One MPS control daemon per shared GPU: counted by shares, started with the first, stopped after the last
(also when two releases race), restarted by the watch when it dies or loses its pipe folder (its shares
reported in trouble meanwhile), adopted or cleaned up after a driver restart."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from device_plugin.dra.mps.control_daemon import MpsError
from device_plugin.dra.mps.gpu_daemons import GpuDaemons
from tests.dra.mps.conftest import GPU_A, GPU_B, killed


class Reports:
    """What on_trouble was told, in turn."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    def __call__(self, uuid: str, why: str) -> None:
        self.told.append((uuid, why))


def daemons(program: str, root: Path, reports: Reports | None = None) -> GpuDaemons:
    return GpuDaemons(program, root / "mps", on_trouble=reports or Reports(), timeout_s=5.0)


def test_one_daemon_per_gpu_for_all_its_shares_stopped_after_the_last(mps_program: str, short_dir: Path) -> None:
    set_ = daemons(mps_program, short_dir)
    set_.acquire(GPU_A, "u1/0")
    pid = set_.daemon(GPU_A).pid()
    set_.acquire(GPU_A, "u2/0")
    set_.acquire(GPU_B, "u3/0")
    assert set_.daemon(GPU_A).pid() == pid  # the second share uses the first one's daemon
    assert set_.users() == {GPU_A: frozenset({"u1/0", "u2/0"}), GPU_B: frozenset({"u3/0"})}
    set_.release(GPU_A, "u1/0")
    assert set_.daemon(GPU_A).pid() == pid
    set_.release(GPU_A, "u2/0")
    assert (set_.daemon(GPU_A).pid(), set_.daemon(GPU_B).pid() is not None) == (None, True)
    set_.release(GPU_A, "u2/0")  # told twice: nothing more to do, no error
    assert set_.users() == {GPU_B: frozenset({"u3/0"})}


def test_two_releases_racing_on_one_gpu_stop_its_daemon_once_and_leave_no_share(
    mps_program: str, short_dir: Path
) -> None:
    set_ = daemons(mps_program, short_dir)
    keys = [f"u{n}/0" for n in range(8)]
    for key in keys:
        set_.acquire(GPU_A, key)
    barrier = threading.Barrier(len(keys))

    def release(key: str) -> None:
        barrier.wait()
        set_.release(GPU_A, key)

    threads = [threading.Thread(target=release, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (set_.users(), set_.daemon(GPU_A).pid()) == ({}, None)


def test_a_share_whose_daemon_cannot_start_is_not_counted(short_dir: Path) -> None:
    set_ = GpuDaemons("/bin/false", short_dir / "mps", timeout_s=0.5)
    with pytest.raises(MpsError, match=GPU_A):
        set_.acquire(GPU_A, "u1/0")
    assert set_.users() == {}


def test_the_watch_restarts_a_killed_daemon_and_reports_its_shares_meanwhile(mps_program: str, short_dir: Path) -> None:
    reports = Reports()
    set_ = daemons(mps_program, short_dir, reports)
    set_.acquire(GPU_A, "u1/0")
    set_.acquire(GPU_B, "u2/0")
    old = set_.daemon(GPU_A).pid()
    assert old is not None
    killed(old)
    set_.check()
    new = set_.daemon(GPU_A).pid()
    assert new not in (None, old)
    assert reports.told == [(GPU_A, f"the MPS control daemon of {GPU_A} is not running"), (GPU_A, "")]
    assert len(set_.restarts_s) == 1
    set_.check()  # all well: nothing more said
    assert len(reports.told) == 2


def test_a_removed_pipe_folder_gets_the_daemon_replaced(mps_program: str, short_dir: Path) -> None:
    reports = Reports()
    set_ = daemons(mps_program, short_dir, reports)
    set_.acquire(GPU_A, "u1/0")
    old = set_.daemon(GPU_A).pid()
    shutil.rmtree(set_.folders(GPU_A).pipe_dir)
    set_.check()
    daemon = set_.daemon(GPU_A)
    assert (daemon.trouble(), daemon.pid() != old) == ("", True)
    assert [why != "" for _, why in reports.told] == [True, False]


def test_a_daemon_that_cannot_be_restarted_stays_reported_and_is_tried_again(mps_program: str, short_dir: Path) -> None:
    reports = Reports()
    set_ = daemons(mps_program, short_dir, reports)
    set_.acquire(GPU_A, "u1/0")
    killed(set_.daemon(GPU_A).pid() or 0)
    set_._program = "/bin/false"  # the program broke meanwhile (a driver upgrade gone wrong)
    set_.check()
    assert [why != "" for _, why in reports.told] == [True]
    set_._program = mps_program
    set_.check()
    assert [why != "" for _, why in reports.told] == [True, True, False]  # reported again, then recovered
    assert set_.daemon(GPU_A).pid() is not None


def test_a_restarted_driver_adopts_running_daemons_starts_missing_ones_and_stops_orphans(
    mps_program: str, short_dir: Path
) -> None:
    before = daemons(mps_program, short_dir)
    for uuid, key in ((GPU_A, "u1/0"), (GPU_B, "u2/0")):
        before.acquire(uuid, key)
    kept = before.daemon(GPU_A).pid()
    killed(before.daemon(GPU_B).pid() or 0)
    orphan = "GPU-cccccccc-0000-0000-0000-000000000003"  # its share was unprepared while the driver was down
    before.acquire(orphan, "u3/0")
    after = daemons(mps_program, short_dir)  # the restarted driver: its shares come from the checkpoint
    assert after.adopt({GPU_A: {"u1/0"}, GPU_B: {"u2/0"}}) == {}
    assert after.daemon(GPU_A).pid() == kept
    assert after.daemon(GPU_B).pid() is not None
    assert after.daemon(orphan).pid() is None  # no daemon left running without a share
    assert after.users() == {GPU_A: frozenset({"u1/0"}), GPU_B: frozenset({"u2/0"})}
