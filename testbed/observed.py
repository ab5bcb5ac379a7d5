"""Product classes with what only tests ask of them: the product keeps no method for its tests alone.

- ObservedPluginManager: a PluginManager that can wait until its Register calls have succeeded so far.
- ObservedPreparer: a Preparer that says how many claims have a Prepare or Unprepare in flight.
"""

from __future__ import annotations

from device_plugin.dp_helper.lifecycle import PluginManager
from device_plugin.dra_helper.claims.prepare import Preparer


class ObservedPluginManager(PluginManager):
    def wait_for_registrations(self, count: int, timeout_s: float) -> bool:
        """Until `count` Register calls have succeeded so far (False when `timeout_s` passed first)."""
        return self._registration.wait_for(count, timeout_s)


class ObservedPreparer(Preparer):
    def in_flight(self) -> int:
        """Claims with a Prepare or Unprepare running now (their lock entries; 0 when idle)."""
        return len(self._locks)
