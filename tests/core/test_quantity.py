"""Kubernetes quantities as the scheduler writes them, read as whole MiB rounded up; anything else refused."""

from __future__ import annotations

import pytest

from device_plugin.core.quantity import quantity_mib

READ = [
    ("20Gi", 20480, "binary-suffix"),
    ("81559Mi", 81559, "mebibytes"),
    ("21474836480", 20480, "plain-bytes"),
    ("1.5G", 1431, "decimal-suffix-rounded-up"),
    ("2e9", 1908, "exponent"),
    ("1", 1, "one-byte-is-a-whole-mib"),
    ("0", 0, "zero"),
    ("0.5Gi", 512, "fraction"),
]
REFUSED = [
    ("", "is not a Kubernetes quantity", "empty"),
    ("lots", "is not a Kubernetes quantity", "a-word"),
    ("1.2.3", "is not a Kubernetes quantity", "two-points"),
    ("-1Gi", "is negative", "negative"),
    ("1e99", "the exponent is out of range", "a-huge-exponent"),
    ("\u0661Gi", "is not a Kubernetes quantity", "a-non-ascii-digit"),
    ("9" * 65, "is not a Kubernetes quantity", "longer-than-any-quantity"),
]


@pytest.mark.parametrize(("text", "mib"), [r[:2] for r in READ], ids=[r[2] for r in READ])
def test_a_quantity_is_read_as_whole_mib_rounded_up(text: str, mib: int) -> None:
    assert quantity_mib(text) == mib


@pytest.mark.parametrize(("text", "why"), [r[:2] for r in REFUSED], ids=[r[2] for r in REFUSED])
def test_anything_else_is_refused_naming_it(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        quantity_mib(text)
