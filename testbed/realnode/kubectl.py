"""The client the real-node tests speak through: the real kubectl with the admin kubeconfig.

Failures raise KubectlError with kubectl's own message, so a test that expects a refusal can read why.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class KubectlError(Exception):
    def __init__(self, argv: list[str], stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(argv)}: {stderr.strip()}")
        self.stderr = stderr


@dataclass(frozen=True)
class Kubectl:
    program: Path
    kubeconfig: Path

    def run(self, *argv: str, stdin: str | None = None, timeout_s: float = 60) -> str:
        done = subprocess.run(
            [str(self.program), f"--kubeconfig={self.kubeconfig}", *argv],
            input=stdin, capture_output=True, text=True, timeout=timeout_s,
        )  # fmt: skip
        if done.returncode != 0:
            raise KubectlError(list(argv), done.stderr)
        return done.stdout

    def apply(self, manifest: str, *extra: str) -> str:
        return self.run("apply", "--server-side", "--force-conflicts", "-f", "-", *extra, stdin=manifest)

    def create(self, manifest: str, *extra: str) -> str:
        return self.run("create", "-f", "-", *extra, stdin=manifest)

    def get(self, *argv: str) -> Any:
        return json.loads(self.run("get", *argv, "-o", "json"))

    def items(self, *argv: str) -> list[dict[str, Any]]:
        return list(self.get(*argv).get("items", []))

    def delete(self, *argv: str) -> None:
        self.run("delete", "--ignore-not-found", "--wait=false", *argv)

    def wait_for(self, what: str, check: Callable[[], Any], timeout_s: float = 60, every_s: float = 0.2) -> Any:
        """Poll `check` until it returns something truthy, and return that; TimeoutError naming `what`."""
        deadline = time.monotonic() + timeout_s
        last: Any = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(every_s)
        raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what} (last: {last!r})")

    def pod_phase(self, namespace: str, name: str) -> str:
        try:
            return str(self.get("pod", "-n", namespace, name).get("status", {}).get("phase", ""))
        except KubectlError:
            return ""

    def wait_pod_done(self, namespace: str, name: str, timeout_s: float = 90) -> dict[str, Any]:
        """Wait until the pod Succeeded or Failed; return the pod."""
        self.wait_for(
            f"pod {namespace}/{name} to finish",
            lambda: self.pod_phase(namespace, name) in ("Succeeded", "Failed"),
            timeout_s,
        )
        pod: dict[str, Any] = self.get("pod", "-n", namespace, name)
        return pod

    def logs(self, namespace: str, name: str, container: str | None = None) -> str:
        argv = ["logs", "-n", namespace, name]
        if container:
            argv += ["-c", container]
        return self.run(*argv)
