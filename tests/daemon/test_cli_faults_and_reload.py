"""The daemon as operators run it: faults appended to --fake-events reach the kubelet, and the config
file watch notices edits (watchdog) so a valid edit is applied without a restart."""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
import threading
from pathlib import Path

from device_plugin.config.watch import ConfigFileWatch
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from tests.integration.test_sigterm import start_daemon

from .harness import WAIT_S

GPU = "nvidia.com/gpu"


def test_fake_events_file_faults_reach_the_kubelet_through_the_cli() -> None:
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-f-", dir="/tmp"))
    faults = plugin_dir.parent / f"{plugin_dir.name}.jsonl"
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = start_daemon(plugin_dir, "--machine", "dgx1-v100", "--fake-events", str(faults))
    uuid = FakeNvml.from_machine("dgx1-v100").gpus()[5].uuid
    try:
        kubelet.wait_for_connection(GPU, timeout_s=WAIT_S + 10)
        with faults.open("a") as out:
            out.write("this line is not JSON\n")  # logged and skipped, never fatal
            out.write(json.dumps({"gpu": 5, "xid": 79}) + "\n")
        listed = kubelet.wait_for(
            lambda: {d.id: d.health for d in kubelet.latest_devices(GPU)}.get(uuid) == "Unhealthy" or None,
            WAIT_S,
        )
        assert listed
        daemon.send_signal(signal.SIGTERM)
        output, _ = daemon.communicate(timeout=10)
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        kubelet.stop()
        shutil.rmtree(plugin_dir, ignore_errors=True)
        faults.unlink(missing_ok=True)
    assert daemon.returncode == 0, output
    assert "line 1 skipped" in output  # the malformed line, named
    assert "Xid 79" in output  # the transition's reason, logged


def test_config_file_watch_reports_an_edit(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\n")
    changed = threading.Event()
    watch = ConfigFileWatch(config, changed.set)
    watch.start()
    try:
        config.write_text("version: v1\nflags: {migStrategy: mixed}\n")
        assert changed.wait(WAIT_S)
    finally:
        watch.stop()
