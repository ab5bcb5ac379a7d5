"""Names are matched whole and numbers are ASCII digits (issue 30 items 7 and 8).

`re.match` with `$` let a trailing newline through (`DRA_DRIVER_NAME=$'gpu.example.com\\n'` ran and published
that name); str.isdigit() let a superscript two reach int() (a traceback, exit 1) and int() read an
Arabic-Indic zero as channel 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from device_plugin.config.loader import load_config
from device_plugin.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SUPERSCRIPT_TWO = "\u00b2"
ARABIC_INDIC_ZERO = "\u0660"
FULLWIDTH_FIVE = "\uff15"

REFUSED_AT_LOAD = [
    ("driver-name-trailing-newline", {"DRA_DRIVER_NAME": "gpu.example.com\n"}, "gpuDevicePlugin.driverName"),
    ("own-domain-trailing-newline", {"OWN_DOMAIN": "example.com\n"}, "gpuDevicePlugin.ownDomain"),
    ("imex-superscript-two", {"IMEX_CHANNEL_IDS": SUPERSCRIPT_TWO}, "imex.channelIDs"),
    ("imex-arabic-indic-zero", {"IMEX_CHANNEL_IDS": ARABIC_INDIC_ZERO}, "imex.channelIDs"),
    ("imex-fullwidth-five", {"IMEX_CHANNEL_IDS": FULLWIDTH_FIVE}, "imex.channelIDs"),
    ("rescan-arabic-indic-zero-in-seconds", {"RESCAN_INTERVAL_SECONDS": "6" + ARABIC_INDIC_ZERO}, "rescanInterval"),
]


@pytest.mark.parametrize(("env", "field"), [c[1:] for c in REFUSED_AT_LOAD], ids=[c[0] for c in REFUSED_AT_LOAD])
def test_refused_at_load_naming_the_field(env: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(env=env)
    assert field in str(refused.value)


def test_ascii_digits_still_load() -> None:
    config = load_config(env={"IMEX_CHANNEL_IDS": "0", "RESCAN_INTERVAL_SECONDS": "60", "OWN_DOMAIN": "example.com"})
    assert config.imex.channel_ids == (0,)
    assert config.daemon.rescan_interval_s == 60.0


def sharing_devices(tmp_path: Path, device: str) -> dict[str, str]:
    path = tmp_path / "config.yaml"
    path.write_text(
        "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
        f'    - {{name: nvidia.com/gpu, replicas: 2, devices: ["{device}"]}}\n',
        encoding="utf-8",
    )
    return {"CONFIG_FILE": str(path)}


EnvMaker = Callable[[Path], dict[str, str]]
ARABIC_PORT = ARABIC_INDIC_ZERO * 4
EXIT_2: list[tuple[str, EnvMaker, str]] = [
    ("metrics-port-superscript-two", lambda _: {"METRICS_ADDRESS": f"127.0.0.1:{SUPERSCRIPT_TWO}"}, "metricsAddress"),
    ("metrics-port-arabic-indic", lambda _: {"METRICS_ADDRESS": f"127.0.0.1:{ARABIC_PORT}"}, "metricsAddress"),
    ("sharing-device-superscript-two", lambda p: sharing_devices(p, SUPERSCRIPT_TWO), "devices[0]"),
    ("sharing-device-fullwidth-five", lambda p: sharing_devices(p, FULLWIDTH_FIVE), "devices[0]"),
]


@pytest.mark.parametrize(("make_env", "words"), [c[1:] for c in EXIT_2], ids=[c[0] for c in EXIT_2])
def test_run_exits_2_with_a_config_error_not_a_traceback(tmp_path: Path, make_env: EnvMaker, words: str) -> None:
    (tmp_path / "plugins").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CONFIG_FILE", "DEVICE_PLUGIN_DIR", "LABELS_FILE")}
    env |= make_env(tmp_path)
    command = [sys.executable, "-m", "device_plugin.cli", "run", "--machine", "dgx1-v100"]
    command += ["--device-plugin-dir", str(tmp_path / "plugins")]
    # The timeout only turns a hang (a wrong value served) into a failure.
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "config error" in done.stderr and words in done.stderr, done.stderr[-2000:]
