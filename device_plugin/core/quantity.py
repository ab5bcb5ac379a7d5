"""Kubernetes resource quantities ("20Gi", "81559Mi", "21474836480", "1.5G", "2e9") read as whole
MiB.

Boundary: pure parsing of the serialized form the API server writes (a number, an optional binary or
decimal suffix or a decimal exponent); ValueError names the text. Used for what the scheduler writes
into a claim's allocation (`consumedCapacity`), rounded up: a share is never counted smaller than it
is.
"""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from device_plugin.core.short_text import short

MIB = 1 << 20
_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(
    r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPE]|[eE][+-]?[0-9]+)?"
)
MAX_CHARS = 64  # longer than any quantity the API server writes


def quantity_bytes(text: str) -> Decimal:
    """The quantity's value (in the unit the quantity counts: bytes for memory). ValueError if it is
    not one."""
    match = _QUANTITY.fullmatch(text) if isinstance(text, str) and len(text) <= MAX_CHARS else None
    if match is None:
        raise ValueError(f"{short(text)} is not a Kubernetes quantity")
    number, suffix = match.group(1), match.group(2) or ""
    try:
        value = Decimal(number)
        if suffix[:1] in ("e", "E"):
            exponent = int(suffix[1:])
            if abs(exponent) > 30:
                raise ValueError(f"{short(text)}: the exponent is out of range")
            return value.scaleb(exponent)
    except InvalidOperation:
        raise ValueError(f"{short(text)} is not a Kubernetes quantity") from None
    return value * (_BINARY.get(suffix) or _DECIMAL[suffix])


def quantity_mib(text: str) -> int:
    """Whole MiB, rounded up; ValueError if `text` is not a quantity or is negative."""
    value = quantity_bytes(text)
    if value < 0:
        raise ValueError(f"{short(text)} is negative")
    return int((value / MIB).to_integral_value(rounding=ROUND_CEILING))
