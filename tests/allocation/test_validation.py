"""Invalid requests raise InvalidRequestError with a clear message, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from device_plugin.core.errors import InvalidRequestError
from tests.allocation.machines import allocator_of

BAD = [
    ([0, 1, 2], [], 0, "at least 1 GPU"),
    ([0, 1, 2], [], -1, "at least 1 GPU"),
    ([0, 1], [], 3, "only 2 available"),
    ([0, 1, 2], [3], 2, "not available"),
    ([0, 1, 2], [0, 1, 2], 2, "do not fit"),
    ([0, 8], [], 1, "does not exist"),
    ([-1, 0], [], 1, "does not exist"),
    ([0, 0, 1], [], 1, "more than once"),
    ([0, "1"], [], 1, "is not a GPU index"),
    ([0, True], [], 1, "is not a GPU index"),
    ([0, 1], [], 1.5, "not a whole number"),
    (None, [], 1, "list of GPU indices"),
]
IDS = [
    "size zero",
    "negative size",
    "size above available",
    "must_include not available",
    "must_include larger than size",
    "index past the last GPU",
    "negative index",
    "duplicate index",
    "string index",
    "bool index",
    "fractional size",
    "available not a list",
]


@pytest.mark.parametrize(("available", "must", "size", "message"), BAD, ids=IDS)
def test_invalid_request(available: Any, must: Any, size: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        allocator_of("dgx1-v100").allocate(available, must, size)
