"""The host process of one NVML mock profile: RealNvml, the project's real pynvml backend, answering calls that
arrive over a socket from the test process (tests/nvml_mock/remote.py).

Why a process: the mock takes its profile from the environment the process started with (mock_folder.py), and
the test process serves many profiles and the fake backend besides. Boundary: this module only carries calls.
Every answer is RealNvml's own value (its frozen value objects, pickled); an event watch it opens stays here
and is named by a number; an NvmlError travels as its parts and is rebuilt on the other side. When the test
process goes away (end of file on the socket) every backend still open is closed and the process exits.

Run as `python -m tests.nvml_mock.host FD` from the repository root, FD being its end of a socket pair.
"""

from __future__ import annotations

import itertools
import sys
import traceback
from collections.abc import Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from device_plugin.core.errors import NvmlError
from device_plugin.nvml.real.backend import RealNvml
from device_plugin.nvml.real.health import RealEventWatch

# Requests: ("open", sys_root) | ("call", object_id, name, args)
# Answers:  ("value", v) | ("object", object_id) | ("nvml_error", class_name, text, call, device, code)
#           | ("crash", traceback_text)


class Host:
    def __init__(self) -> None:
        self._objects: dict[int, Any] = {}
        self._ids = itertools.count(1)

    def answer(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        try:
            return self._answer(request)
        except NvmlError as exc:
            return ("nvml_error", type(exc).__name__, str(exc), exc.call, exc.device, exc.code)
        except Exception:
            return ("crash", traceback.format_exc())

    def _answer(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        kind = request[0]
        if kind == "open":
            return self._keep(RealNvml(Path(request[1])))
        if kind != "call":
            raise ValueError(f"unknown request {request!r}")
        _, object_id, name, args = request
        attribute = getattr(self._objects[object_id], name)
        value = attribute(*args) if callable(attribute) else attribute  # registration_failures is a property
        if isinstance(value, RealEventWatch):
            return self._keep(value)
        if isinstance(value, Mapping):
            value = dict(value)  # a read-only mapping proxy does not pickle
        return ("value", value)

    def _keep(self, value: object) -> tuple[str, int]:
        object_id = next(self._ids)
        self._objects[object_id] = value
        return ("object", object_id)

    def close_all(self) -> None:
        for value in self._objects.values():
            try:
                value.close()
            except NvmlError as exc:  # a shutdown failure at exit has nobody left to tell but the log
                print(f"nvml mock host: {exc}", file=sys.stderr)
        self._objects.clear()


def main(argv: list[str]) -> int:
    connection = Connection(int(argv[1]))
    host = Host()
    try:
        while True:
            try:
                request = connection.recv()
            except EOFError:
                return 0
            connection.send(host.answer(request))
    finally:
        host.close_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
