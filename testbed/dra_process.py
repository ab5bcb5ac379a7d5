"""What a test or benchmark that runs `gpu-device-plugin run --mode dra` as a process needs around it: a
kubeconfig naming the API stand-in, and the tear-down it leaves behind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from testbed.api_standin import ApiStandin


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: s, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: s, user: u}}]\n"
    )
    return path


def torn_down(process: subprocess.Popen[str], api: ApiStandin, root: Path) -> None:
    """What a test leaves: its process killed if it still runs, its API stand-in down, its folder gone."""
    if process.poll() is None:
        process.kill()
        process.wait()
    api.down()
    shutil.rmtree(root, ignore_errors=True)
