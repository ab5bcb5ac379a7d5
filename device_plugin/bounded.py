"""Bounded text for messages that echo client input: a hostile request must not become a huge message.

A kubelet request carries at most a node's devices, but any local client of the plugin socket can send
10,000 IDs; error messages and log lines show the first few and say how many were left out.
"""

from __future__ import annotations

from collections.abc import Iterable

SHOWN_IDS = 5
MAX_MESSAGE_CHARS = 1024


def bounded_ids(ids: Iterable[str], shown: int = SHOWN_IDS) -> str:
    """'a, b, c' for short lists; 'a, b, c, d, e … (9995 more)' for long ones (each ID cut too)."""
    items = list(ids)
    head = ", ".join(bounded_text(i, 80) for i in items[:shown])
    rest = len(items) - shown
    return f"{head} … ({rest} more)" if rest > 0 else head


def bounded_text(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """`text` cut to about `limit` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"
