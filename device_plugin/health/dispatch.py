"""TransitionDispatcher: hands health transitions to listeners on one thread of its own, in queue
order.

Boundary: delivery only. The HealthWatcher decides transitions under its lock and queues them here;
the listeners (resources, metrics, a DRA front-end's republish) then run on this thread, never under
the watcher's lock, so a slow listener delays only later deliveries, never the event and probe
threads, a probe, `states()` or a rescan's `set_gpus`. One queue, one thread: transitions reach
every listener in the order the watcher decided them, so two transitions of one GPU never arrive
swapped. A listener that raises is logged and the delivery goes on.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

Delivery = Callable[[], None]
_STOP = object()


class TransitionDispatcher:
    def __init__(self, name: str = "health-dispatch") -> None:
        self._name = name
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lock = threading.Lock()  # guards starting and stopping the thread
        self._thread: threading.Thread | None = None
        self._stopped = False

    def put(self, delivery: Delivery) -> None:
        """Queue `delivery` behind every earlier one; after stop() it runs on the caller's thread
        instead."""
        with self._lock:
            if self._stopped:
                inline = True
            else:
                inline = False
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                    self._thread.start()
                self._queue.put(delivery)
        if inline:
            _run_one(delivery)

    def on_dispatch_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def wait_delivered(self, timeout_s: float) -> bool:
        """True once every delivery queued before this call has run (at once on the dispatch thread
        itself)."""
        if self.on_dispatch_thread():
            return True  # waiting here for our own queue would never end
        done = threading.Event()
        self.put(done.set)
        return done.wait(timeout_s)

    def stop(self, timeout_s: float) -> bool:
        """Deliver what is queued (within `timeout_s`), then end the thread. True if it ended in
        time."""
        with self._lock:
            if self._stopped:
                return True
            self._stopped = True
            thread = self._thread
            if thread is not None:
                self._queue.put(_STOP)
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout_s)
        if thread.is_alive():
            log.warning(
                "a health listener is still running after %.1f s; stopping without it", timeout_s
            )
            return False
        return True

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            _run_one(item)  # type: ignore[arg-type]


def _run_one(delivery: Delivery) -> None:
    try:
        delivery()
    except Exception:  # a broken listener must not end the delivery thread
        log.exception("health transition delivery failed")
