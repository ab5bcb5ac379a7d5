"""Rolling-update chaos, short (issue 42): seeded runs of testbed/chaos.py, two and three instances, kills with
SIGKILL and SIGTERM, the same and new pod UIDs, conflicting pairs at two instances, batches. Every invariant
holds on every seed. The long form is benchmarks/bench_dra_chaos.py (20 seeds of 60 s)."""

from __future__ import annotations

import pytest

from testbed.chaos import run


@pytest.mark.parametrize(
    ("seed", "instances"),
    [(1, 2), (2, 2), (3, 3)],
    ids=["seed-1-two-instances", "seed-2-two-instances", "seed-3-three-instances"],
)
def test_no_confirmed_claim_is_lost_brought_back_doubled_or_haunted(seed: int, instances: int) -> None:
    report = run(seed, seconds=10.0, instances=instances)
    assert report.kills >= 1 and report.prepares_confirmed > 50 and report.checks >= 2
    assert report.violations == 0, report
