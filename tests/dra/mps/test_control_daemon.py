"""One GPU's MPS control daemon, driven through the project's double of nvidia-cuda-mps-control: start,
commands, liveness (a killed daemon, a reused pid, a removed pipe folder) and stop."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from device_plugin.dra.mps.control_daemon import MpsControlDaemon, MpsError, MpsFolders
from tests.dra.mps.conftest import GPU_A, GPU_B, killed


def daemon(program: str, root: Path, uuid: str = GPU_A) -> MpsControlDaemon:
    return MpsControlDaemon(program, root / "mps", uuid, timeout_s=5.0)


def test_a_daemon_per_gpu_in_folders_named_by_uuid_seeing_only_that_gpu(mps_program: str, short_dir: Path) -> None:
    a, b = daemon(mps_program, short_dir, GPU_A), daemon(mps_program, short_dir, GPU_B)
    pid_a, pid_b = a.start(), b.start()
    assert pid_a != pid_b and (a.pid(), b.pid()) == (pid_a, pid_b)
    assert a.folders.pipe_dir == short_dir / "mps" / GPU_A / "pipe"
    log = (a.folders.log_dir / "control.log").read_text()
    assert f"CUDA_VISIBLE_DEVICES={GPU_A}" in log
    assert a.start() == pid_a  # a running daemon is kept, never a second one
    assert a.command("set_default_active_thread_percentage 50").strip() == "50.0"
    a.stop()
    assert (a.pid(), b.pid(), a.folders.pid_file.exists()) == (None, pid_b, False)


def test_a_killed_daemon_is_seen_gone_though_its_pid_file_stays(mps_program: str, short_dir: Path) -> None:
    d = daemon(mps_program, short_dir)
    pid = d.start()
    killed(pid)
    assert d.folders.pid_file.exists()  # SIGKILL leaves it, as the real daemon's would stay
    assert d.trouble() == f"the MPS control daemon of {GPU_A} is not running"
    assert d.start() != pid  # started afresh over the stale file


def test_a_pid_file_naming_someone_elses_process_is_not_believed(mps_program: str, short_dir: Path) -> None:
    d = daemon(mps_program, short_dir)
    d.folders.pipe_dir.mkdir(parents=True)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        d.folders.pid_file.write_text(f"{other.pid}\n")  # a reused pid: alive, but not a daemon of this folder
        assert d.pid() is None
        pid = d.start()
        assert pid != other.pid and other.poll() is None  # the stranger is left alone
    finally:
        other.kill()
        other.wait()


def test_a_removed_pipe_folder_is_trouble_while_the_daemon_runs(mps_program: str, short_dir: Path) -> None:
    d = daemon(mps_program, short_dir)
    d.start()
    pid_file = d.folders.pid_file.read_text()
    shutil.rmtree(d.folders.pipe_dir)
    d.folders.pipe_dir.mkdir()
    d.folders.pid_file.write_text(pid_file)  # the pid file back, the socket still gone
    assert "its pipe folder" in d.trouble() and "is gone" in d.trouble()
    d.stop()  # quit cannot reach it: SIGTERM does
    assert d.pid() is None


@pytest.mark.parametrize(
    ("program", "why"),
    [
        ("/nonexistent/nvidia-cuda-mps-control", "No such file"),
        ("/bin/true", "did not come up within"),
        ("/bin/false", "exit status 1"),
    ],
    ids=["no-such-program", "a-program-that-starts-nothing", "a-program-that-fails"],
)
def test_a_daemon_that_cannot_start_is_an_error_naming_the_gpu(short_dir: Path, program: str, why: str) -> None:
    d = MpsControlDaemon(program, short_dir / "mps", GPU_A, timeout_s=0.5)
    with pytest.raises(MpsError, match=why) as caught:
        d.start()
    assert GPU_A in str(caught.value)


@pytest.mark.parametrize("uuid", ["../etc", "GPU-1/../../x", "", "gpu-0"], ids=["dots", "slashes", "empty", "a-name"])
def test_only_a_uuid_names_a_gpus_folder(short_dir: Path, uuid: str) -> None:
    with pytest.raises(MpsError, match="is not a GPU UUID"):
        MpsFolders(short_dir, uuid)


def test_a_second_start_of_the_double_on_one_folder_is_refused_as_the_real_one_is(
    mps_program: str, short_dir: Path
) -> None:
    d = daemon(mps_program, short_dir)
    d.start()
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(d.folders.pipe_dir), "CUDA_MPS_LOG_DIRECTORY": "/tmp"}
    second = subprocess.run([mps_program, "-d"], env=env, capture_output=True, text=True, timeout=10)
    assert second.returncode == 1 and "already running" in second.stderr
