"""Which of the driver's instances on a node writes its pool now: the answer the publisher asks for.

Boundary: no I/O of its own; `owner()` and `catch_up()` are the plugin's (dra_helper/plugin.py: the
newest registration socket served, the other instance's claim changes read). With one instance the
answer is always yes. While two serve (a rolling update), only the one the kubelet registered last
writes, so two views of the held devices never write over each other (on the real node they did:
120-250 writes per claim change). An instance that becomes the owner catches up first; `ask` says
when that happened, so the publisher reconciles once even if nothing was requested since (the pool
holds the other's view).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

OWNER_POLL_S = 0.5  # how soon an instance notices that it publishes the pool now (or no longer)


class PoolOwner:
    def __init__(self, pool: str, owner: Callable[[], bool], catch_up: Callable[[], None]) -> None:
        self._pool = pool
        self._owner = owner
        self._catch_up = catch_up
        self.owns = False  # as the last `ask` found

    def ask(self) -> tuple[bool, bool]:
        """(whether we write the pool now, whether we just became its writer). Catches up while we
        own it. A failure counts as "not now" and is logged: the next poll asks again."""
        try:
            owner = self._owner()
            if owner:
                self._catch_up()
        except Exception:
            log.exception("deciding whether this instance publishes pool %s failed", self._pool)
            owner = False
        became = owner and not self.owns
        if became:
            log.info("pool %s: this instance publishes it now", self._pool)
        elif self.owns and not owner:
            log.info(
                "pool %s: a newer instance of this driver publishes it now; leaving it to that one",
                self._pool,
            )
        self.owns = owner
        return owner, became
