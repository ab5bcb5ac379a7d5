"""What the driver concludes about CDI from the runtime version a Node reports (dra_helper/runtime_cdi.py)."""

from __future__ import annotations

import pytest

from device_plugin.dra_helper.runtime_cdi import DROPPED, NEEDS_CONFIG, SUPPORTED, UNKNOWN, cdi_verdict


@pytest.mark.parametrize(
    ("reported", "runtime", "cdi"),
    [
        ("containerd://1.6.20~ds1", "containerd", DROPPED),  # Debian bookworm's, seen on the real node
        ("containerd://1.6.9", "containerd", DROPPED),
        ("containerd://1.7.2", "containerd", NEEDS_CONFIG),
        ("containerd://v1.7.27", "containerd", UNKNOWN),  # not a version we can read: no guess
        ("containerd://2.0.0", "containerd", SUPPORTED),
        ("containerd://2.1.4-k3s1", "containerd", SUPPORTED),
        ("cri-o://1.22.5", "cri-o", DROPPED),
        ("cri-o://1.31.0", "cri-o", SUPPORTED),
        ("docker://28.2.2", "docker", UNKNOWN),
        ("", "", UNKNOWN),
        ("containerd://", "containerd", UNKNOWN),
    ],
    ids=[
        "containerd-1.6-debian",
        "containerd-1.6",
        "containerd-1.7-needs-enable-cdi",
        "a-v-prefix-is-unknown",
        "containerd-2.0",
        "containerd-2.1-k3s",
        "cri-o-1.22",
        "cri-o-1.31",
        "docker",
        "not-reported",
        "no-version",
    ],
)
def test_the_verdict_of_each_runtime(reported: str, runtime: str, cdi: str) -> None:
    verdict = cdi_verdict(reported)
    assert (verdict.runtime, verdict.cdi) == (runtime, cdi)
    assert bool(verdict.detail) is (cdi != SUPPORTED)
    if cdi == DROPPED:
        assert "dropped" in verdict.detail


def test_a_hostile_report_is_cut_short() -> None:
    verdict = cdi_verdict("containerd://" + "9" * 10_000)
    assert len(verdict.version) <= 64 and len(verdict.detail) < 400
