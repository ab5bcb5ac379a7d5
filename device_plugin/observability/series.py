"""SeriesCache: a metric's label children bound once per label combination, then found by one dict
lookup.

Why: GetPreferredAllocation and Allocate run on the kubelet's admission path, and each reports a
latency, a result and (whole GPUs) a decision. prometheus_client's `.labels(...)` takes the metric's
lock, stringifies and validates the values on every call; an event that touches four series paid
that four times. The cache binds every child an event needs together, at its first occurrence, so an
event is one `dict.get` and then the children's own observe/inc.

Boundary: caching only. Which children belong together is the caller's `bind`
(device_plugin/observability/ metrics.py). A cached child stays valid as long as its series is never
removed from the metric; the series cached here (RPC latency and results, decisions) are never
removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SeriesCache(Generic[K, V]):
    """key -> bind(key), bound once. Thread-safe: a miss binds under a lock, a hit reads without
    one."""

    def __init__(self, bind: Callable[[K], V]) -> None:
        self._bind = bind
        self._bound: dict[K, V] = {}
        self._lock = threading.Lock()

    def __call__(self, key: K) -> V:
        bound = self._bound.get(key)
        if bound is None:
            with self._lock:
                bound = self._bound.get(key)
                if bound is None:
                    bound = self._bound[key] = self._bind(key)
        return bound

    def __len__(self) -> int:
        return len(self._bound)
