"""Fixtures of the daemon tests (the harness is tests/daemon/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import Node, daemon_node


@pytest.fixture
def node(request: pytest.FixtureRequest) -> Iterator[Node]:
    yield from daemon_node(request)
