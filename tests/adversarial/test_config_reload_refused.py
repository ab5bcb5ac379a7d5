"""A hot reload that breaks any config limit keeps the running config and logs why, without hanging.

Reproduces issue 11: hot-reloading labelsFile into the device-plugin directory overwrote
kubelet_internal_checkpoint, and an alias bomb or a FIFO at the config path stuck the reload.
The daemon runs on a simulated machine with a kubelet stand-in (tests/daemon/harness.py).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.config.model import Config
from device_plugin.dp.front_end import DevicePluginFrontEnd, device_plugin_runtime
from device_plugin.node.runtime import NodeRuntime
from device_plugin.nvml.fake.machine import FakeNvml
from device_plugin.standins.kubelet_device_plugin import KubeletStandIn
from testbed.hostile_yaml import alias_bomb, indented
from tests.daemon.harness import FAST_HEALTH, TIMING

CHECKPOINT = "kubelet_internal_checkpoint"
HANG_GUARD_S = 20.0  # a hang fails the test instead of stopping the suite


@dataclass
class Running:
    daemon: NodeRuntime[DevicePluginFrontEnd]
    config_file: Path
    plugin_dir: Path


@pytest.fixture
def running() -> Iterator[Running]:
    """A daemon whose reloads read the file alone: devicePluginDir may differ from the running one."""
    plugin_dir = Path(tempfile.mkdtemp(prefix="gdp-r-", dir="/tmp"))
    (plugin_dir / CHECKPOINT).write_text("the kubelet's")
    config_file = plugin_dir.parent / f"{plugin_dir.name}.yaml"
    config_file.write_text("version: v1\n")

    def load() -> Config:
        config = load_config(config_file=config_file, env={"METRICS_ADDRESS": ""})
        return replace(config, daemon=replace(config.daemon, health=FAST_HEALTH, rescan_interval_s=3600.0))

    first = load()
    first = replace(first, daemon=replace(first.daemon, device_plugin_dir=plugin_dir))
    kubelet = KubeletStandIn(plugin_dir)
    kubelet.start()
    daemon = device_plugin_runtime(
        FakeNvml.from_machine("dgx1-v100"), first, load_config=load, config_file=config_file, timing=TIMING
    )
    daemon.start()
    yield Running(daemon, config_file, plugin_dir)
    daemon.stop()
    kubelet.stop()
    shutil.rmtree(plugin_dir, ignore_errors=True)
    config_file.unlink(missing_ok=True)


def labels_into_the_running_plugin_dir(r: Running) -> None:
    # The new file also moves devicePluginDir, which only applies after a restart: the running one counts.
    r.config_file.write_text(
        f"version: v1\ngpuDevicePlugin:\n  devicePluginDir: /tmp/elsewhere\n  labelsFile: {r.plugin_dir / CHECKPOINT}\n"
    )


def an_alias_bomb(r: Running) -> None:
    r.config_file.write_text(f"version: v1\nflags:\n  gfd:\n{indented(alias_bomb(), 4)}\n  migStrategy: mixed\n")


def a_fifo(r: Running) -> None:
    r.config_file.unlink()
    os.mkfifo(r.config_file)


def a_never_expiring_event_wait(r: Running) -> None:
    r.config_file.write_text("version: v1\ngpuDevicePlugin:\n  health:\n    eventWaitSeconds: 1.0e+10\n")


def a_duplicate_key(r: Running) -> None:
    r.config_file.write_text("version: v1\nflags:\n  migStrategy: none\n  migStrategy: mixed\n")


RELOADS: list[tuple[str, Callable[[Running], None], str]] = [
    ("labels-file-into-the-running-plugin-dir", labels_into_the_running_plugin_dir, "gpuDevicePlugin.labelsFile"),
    ("alias-bomb", an_alias_bomb, "anchors"),
    ("fifo-at-the-config-path", a_fifo, "FIFO"),
    ("event-wait-1e10", a_never_expiring_event_wait, "between 0.01 and 1 seconds"),
    ("duplicate-key", a_duplicate_key, "duplicate key"),
]


@pytest.mark.parametrize(("breaks", "reason"), [c[1:] for c in RELOADS], ids=[c[0] for c in RELOADS])
def test_a_refused_reload_keeps_the_running_config(
    running: Running, breaks: Callable[[Running], None], reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    before = running.daemon.front_end.node.layout()
    breaks(running)
    outcome: dict[str, object] = {}
    with caplog.at_level(logging.ERROR, logger="device_plugin.node.runtime"):
        thread = threading.Thread(target=lambda: outcome.update(changed=running.daemon.rebuild()), daemon=True)
        thread.start()
        thread.join(HANG_GUARD_S)
    assert not thread.is_alive(), "the reload hung"
    assert outcome == {"changed": False}
    assert running.daemon.front_end.node.layout() == before
    assert (running.plugin_dir / CHECKPOINT).read_text() == "the kubelet's"
    refused = [r.getMessage() for r in caplog.records if "keeping the running config" in r.getMessage()]
    assert len(refused) == 1 and reason in refused[0], caplog.text[-2000:]
    assert len(refused[0]) < 500
