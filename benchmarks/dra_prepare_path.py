"""Which of the DRA packages' modules one NodePrepareResources runs, from the socket to the checkpoint on disk.

Prints a figure, never fails (issue 34's "followed in at most 10 modules"). The running driver on dgx1-v100
(benchmarks/dra_driver.py), one one-claim NodePrepareResources from the DRA kubelet stand-in; while it runs,
a profile hook on every thread records the module of each Python function called. Only the DRA packages
count (the driver, the kubelet-plugin helper): the serving loop, core/ helpers, gRPC and the standard
library are below them; the stand-ins and the publisher's, watch's and hints' threads are not the prepare's,
nor is the work the serving loop does for them (the watch's stream and the publisher's requests run there
as tasks of their own, told apart by the coroutine each task was started with). A module counts
when any of its functions ran (a value type whose constructor ran counts too); the list is printed, so
the figure can be checked by reading it.
Run: .venv/bin/python benchmarks/dra_prepare_path.py
"""

from __future__ import annotations

import asyncio
import sys
import threading
from types import FrameType
from typing import Any

import _common  # noqa: F401  (puts the checkout on sys.path for the package imports below)
from dra_driver import DRIVER, NODE, driver_on

from device_plugin.standins.api_objects import allocated_claim
from device_plugin.standins.kubelet_dra import DraKubeletStandin

COUNTED = ("device_plugin.dra", "device_plugin.dra_helper")
# Not the prepare's: the stand-ins are the caller and the API server, the publisher's own thread may
# reconcile meanwhile (the kubelet's registration asks it to), and the hint thread recomputes the placement
# hints after the Prepare (woken by it, never waited for).
NOT_COUNTED = ("device_plugin.standins",)
# Tasks the serving loop runs for the threads below: the watch's stream, and a request a thread sent with call().
OTHER_TASKS = ("SliceWatch._follow", "ApiTransport.send")
FOR_ANOTHER_THREAD = "a loop task of another thread"
OTHER_THREADS = ("dra-publisher", "dra-slice-watch", "dra-hints", FOR_ANOTHER_THREAD)
MACHINE = "dgx1-v100"

_seen: set[tuple[str, str]] = set()  # (thread name, module)
_functions: dict[str, set[str]] = {}  # module -> the functions of it that ran (any thread)
_recording = threading.Event()


def _hook(frame: FrameType, event: str, _arg: Any) -> None:
    if event == "call" and _recording.is_set():
        module = frame.f_globals.get("__name__", "?")
        _seen.add((_caller(), module))
        _functions.setdefault(module, set()).add(frame.f_code.co_qualname)


def _caller() -> str:
    """The thread's name, or on the serving loop the task's first coroutine when it is another thread's."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no loop on this thread
        task = None
    coroutine = getattr(task.get_coro(), "__qualname__", "") if task is not None else ""
    return FOR_ANOTHER_THREAD if coroutine in OTHER_TASKS else threading.current_thread().name


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _counted(thread: str, module: str) -> bool:
    return thread not in OTHER_THREADS and _within(module, COUNTED) and not _within(module, NOT_COUNTED)


def main() -> None:
    threading.setprofile(_hook)  # before the driver starts: its threads (loop, workers) inherit the hook
    sys.setprofile(_hook)
    with driver_on(MACHINE) as run:
        kubelet = DraKubeletStandin(run.root / "plugins_registry")
        plugin = kubelet.wait_for_plugin()
        for n in range(2):
            result = {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": f"gpu-{n}"}
            run.api.claims[("ns", f"c{n}")] = allocated_claim("ns", f"c{n}", f"u{n}", [result])
        warm = kubelet.prepare(plugin, [("ns", "u1", "c1")])  # the first claim read's one-time work is not the path
        assert not any(getattr(a, "error", "") for a in warm.values()), warm
        _recording.set()
        answers = kubelet.prepare(plugin, [("ns", "u0", "c0")])
        _recording.clear()
    sys.setprofile(None)
    threading.setprofile(None)  # type: ignore[arg-type]
    errors = [getattr(a, "error", "") for a in answers.values() if getattr(a, "error", "")]
    modules = sorted({m for t, m in _seen if _counted(t, m)})
    print(f"one NodePrepareResources on {MACHINE} ran {len(modules)} modules of {', '.join(COUNTED)}")
    print(f"claim errors: {len(errors)} {errors}")
    for module in modules:
        print(f"  {module}: {', '.join(sorted(_functions.get(module, ())))}")


if __name__ == "__main__":
    main()
