"""short_text.one_line's fast path (short printable text returned as is) answers what the escaping path does."""

from __future__ import annotations

import pytest

from device_plugin.core.short_text import ELLIPSIS, one_line


def escaped(text: str, limit: int) -> str:
    """The escaping path alone: every character looked at (what one_line did before its fast path)."""
    head = text[: limit * 4 + 1]
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)
    if len(flat) > limit or len(text) > len(head):
        return flat[: max(0, limit - len(ELLIPSIS))] + ELLIPSIS
    return flat


TEXTS = ["", "claim ns/c1 (u1)", "x" * 9, "x" * 10, "x" * 11, "a\nb", "tab\there", "\x00", "é✓", "\u200b", "y" * 100]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("limit", [0, 1, 10, 64])
def test_one_line_is_the_escaping_path(text: str, limit: int) -> None:
    assert one_line(text, limit) == escaped(text, limit)
