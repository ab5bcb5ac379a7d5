"""`simulate` on a node with NICs: the NIC-blind variant of our policy is compared, with the close-NIC share."""

from __future__ import annotations

import json

import pytest

from device_plugin.cli import main


def _report(machine: str, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    assert main(["simulate", "--machine", machine, "--pods", "150", "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_nic_machines_compare_ours_with_the_nic_blind_policy(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report("pcie-8gpu-2nic", capsys)
    ours = report["topology-aware (ours)"]["all_gpus_nic_close_share_by_size"]
    blind = report["topology-aware without the NIC criterion"]["all_gpus_nic_close_share_by_size"]
    assert isinstance(ours, dict) and isinstance(blind, dict)
    assert ours["4"] > blind["4"]  # 4-GPU pods get the two NIC switches far more often
    assert ours["8"] == blind["8"] == 0.0  # 8 of 8 GPUs: half of them never have a close NIC
    rings = [
        report[p]["mean_ring_gbps_by_size"]
        for p in ("topology-aware (ours)", "topology-aware without the NIC criterion")
    ]
    assert rings[0] == rings[1]  # on this machine the criterion costs no ring bandwidth


def test_machines_without_nics_compare_three_policies(capsys: pytest.CaptureFixture[str]) -> None:
    report = _report("hgx-h200", capsys)
    assert len(report) == 3
    assert all(r["all_gpus_nic_close_share_by_size"] == {"4": 0.0, "8": 0.0} for r in report.values())


def test_text_output_prints_the_close_nic_share(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--machine", "hgx-h100", "--pods", "60"]) == 0
    out = capsys.readouterr().out
    assert out.count("pods with a GPUDirect-close NIC on every GPU: 4 GPUs 100.0%") == 4
