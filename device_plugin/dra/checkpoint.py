"""Prepared claims on disk: what NodePrepareResources answered, per claim UID, written atomically.

Boundary: a JSON file and nothing else. Every change writes a temp file in the same directory, fsyncs
it, renames it over the old file and fsyncs the directory, so a crash leaves either the old or the
new content, never a mix. A restarted driver reloads it: a claim prepared before the restart is
answered from here (not prepared twice) and can still be unprepared.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from device_plugin.core.errors import ConfigError

FORMAT_VERSION = 1


@dataclass(frozen=True)
class PreparedDevice:
    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]


@dataclass(frozen=True)
class PreparedClaim:
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]


class Checkpoint:
    """Thread-safe map claim UID -> PreparedClaim, persisted on every change."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._claims = self._load()

    def _load(self) -> dict[str, PreparedClaim]:
        try:
            raw = json.loads(self._path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise ConfigError(str(self._path), f"unreadable DRA checkpoint: {error}") from error
        version = raw.get("version") if isinstance(raw, dict) else None
        if version != FORMAT_VERSION:
            raise ConfigError(str(self._path), f"checkpoint version {version!r}, expected {FORMAT_VERSION}")
        try:
            return self._parse(raw["claims"])
        except (KeyError, TypeError, AttributeError) as error:  # valid JSON of the wrong shape
            raise ConfigError(str(self._path), f"malformed DRA checkpoint: {type(error).__name__} {error}") from error

    @staticmethod
    def _parse(claims: dict[str, Any]) -> dict[str, PreparedClaim]:
        return {
            uid: PreparedClaim(
                claim["namespace"],
                claim["name"],
                tuple(
                    PreparedDevice(
                        tuple(d["request_names"]), d["pool_name"], d["device_name"], tuple(d["cdi_device_ids"])
                    )
                    for d in claim["devices"]
                ),
            )
            for uid, claim in claims.items()
        }

    def get(self, uid: str) -> PreparedClaim | None:
        with self._lock:
            return self._claims.get(uid)

    def uids(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted(self._claims))

    def put(self, uid: str, claim: PreparedClaim) -> None:
        with self._lock:
            self._commit({**self._claims, uid: claim})

    def remove(self, uid: str) -> bool:
        with self._lock:
            if uid not in self._claims:
                return False
            self._commit({k: v for k, v in self._claims.items() if k != uid})
            return True

    def _commit(self, claims: dict[str, PreparedClaim]) -> None:
        """Write `claims`, then adopt them: a failed write leaves memory as the disk has it."""
        self._write(claims)
        self._claims = claims

    def _write(self, claims: dict[str, PreparedClaim]) -> None:
        body = {"version": FORMAT_VERSION, "claims": {uid: asdict(c) for uid, c in sorted(claims.items())}}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix=".checkpoint-", dir=self._path.parent)
        try:
            with os.fdopen(fd, "w") as handle:
                json.dump(body, handle, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, self._path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        directory = os.open(self._path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
