"""The DRA checkpoint's on-disk shapes: one file per claim (version 2) and the old single file
(version 1).

Boundary: values <-> JSON-ready values and file names; no file access, no locks. Every shape check
says what is wrong in a bounded line (EntryError), so a broken entry is set aside with a reason and
never raises anything else (a list where a mapping belongs, a number where a string belongs).

One claim file holds {"version": 2, "uid": ..., "claim": {namespace, name, devices: [...]}}; its
name is the claim UID plus ".json" when the UID is a plain token (Kubernetes UIDs are), and "_" plus
a hash of the UID otherwise, so no UID can name a path outside the folder, a temp file or a
set-aside file. The old format is {"version": 1, "claims": {uid: claim, ...}} in one
checkpoint.json.

Every entry written (a claim file, a journal record) ends in "crc32": the CRC-32 of the entry's
other keys as encode writes them (sorted keys, no spaces), so a torn or edited entry is told from a
good one even when it is still JSON of the right shape: verify() raises EntryError and the loader
sets the entry aside. An entry without "crc32" was written by the release before (it wrote none): it
is taken unchecked as long as it holds only that release's keys (a bit flipped in the "crc32" key
itself does not pass), and gains a checksum when its claim is next written.
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from typing import Any

from device_plugin.core.short_text import short
from device_plugin.dra_helper.checkpoint.values import PreparedClaim, PreparedDevice, Share

FORMAT_VERSION = 2
LEGACY_VERSION = 1
SUFFIX = ".json"
# one claim: a few hundred bytes; a claim has at most 32 results upstream
MAX_ENTRY_BYTES = 64 * 1024
MAX_LEGACY_BYTES = 32 * 1024 * 1024  # the old single file: ~300 bytes a claim, 100,000 claims

CHECKSUM = "crc32"
# before crc32
_UNCHECKED_KEYS = (frozenset({"version", "uid", "claim"}), frozenset({"version", "uid", "deleted"}))
_PLAIN_UID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


class EntryError(ValueError):
    """A checkpoint entry of the wrong shape; the message says where and what, in one short line."""


def file_name(uid: str) -> str:
    """The claim's file name in the claims folder (see the module docstring)."""
    if _PLAIN_UID.fullmatch(uid):
        return uid + SUFFIX
    return "_" + hashlib.sha256(uid.encode("utf-8", "surrogatepass")).hexdigest()[:40] + SUFFIX


def encode(uid: str, claim: PreparedClaim) -> bytes:
    return sealed({"version": FORMAT_VERSION, "uid": uid, "claim": _claim_value(claim)})


def sealed(body: dict[str, Any]) -> bytes:
    """`body` as one line of JSON (ASCII: non-ASCII is escaped), its checksum appended as the last
    key."""
    raw = _canonical(body)
    return b'%s,"%s":"%08x"}' % (raw[:-1], CHECKSUM.encode(), zlib.crc32(raw))


def verify(body: dict[str, Any]) -> None:
    """EntryError unless `body` (an entry's parsed JSON) carries the checksum of the rest of it, or
    is an entry of the release before checksums (see the module docstring)."""
    if CHECKSUM not in body:
        if frozenset(body) not in _UNCHECKED_KEYS:
            raise EntryError(
                f"no {CHECKSUM} and keys {short(sorted(body))}: neither a checked nor an old entry"
            )
        return
    stated = body[CHECKSUM]
    actual = f"{zlib.crc32(_canonical({k: v for k, v in body.items() if k != CHECKSUM})):08x}"
    if stated != actual:
        raise EntryError(
            f"{CHECKSUM} {short(stated)} does not match its content ({actual}): torn or edited"
        )


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")


def _claim_value(claim: PreparedClaim) -> dict[str, Any]:
    """dataclasses.asdict(claim), written out: asdict deep-copies every field, and encode runs once
    per put, on the prepare path (a third of a put's CPU went there)."""
    devices = []
    for d in claim.devices:
        device: dict[str, Any] = {
            "request_names": list(d.request_names),
            "pool_name": d.pool_name,
            "device_name": d.device_name,
            "cdi_device_ids": list(d.cdi_device_ids),
            "admin_access": d.admin_access,
        }
        # only then: a whole device's entry is what the release before wrote
        if d.share is not None:
            share = d.share
            device["share"] = {
                "share_id": share.share_id,
                "memory_mib": share.memory_mib,
                "of_mib": share.of_mib,
            }
            if share.compute_percent:
                device["share"]["compute_percent"] = share.compute_percent
        devices.append(device)
    return {"namespace": claim.namespace, "name": claim.name, "devices": devices}


def decode(value: Any) -> tuple[str, PreparedClaim]:
    """(uid, claim) from one claim file's JSON value."""
    body = _mapping(value, "the file")
    if body.get("version") != FORMAT_VERSION:
        raise EntryError(f"version {short(body.get('version'))}, expected {FORMAT_VERSION}")
    verify(body)
    return _string(body.get("uid"), "uid"), claim_from(body.get("claim"), "claim")


def decode_legacy(value: Any) -> tuple[dict[str, PreparedClaim], list[str]]:
    """The old file's good claims and a problem line for each bad one; EntryError if the file is
    unusable."""
    body = _mapping(value, "the file")
    if body.get("version") != LEGACY_VERSION:
        raise EntryError(f"version {short(body.get('version'))}, expected {LEGACY_VERSION}")
    claims = _mapping(body.get("claims"), "claims")
    good, problems = {}, []
    for uid, raw in claims.items():
        try:
            good[uid] = claim_from(raw, f"claims.{short(uid)}")
        except EntryError as error:
            problems.append(str(error))
    return good, problems


def claim_from(value: Any, where: str) -> PreparedClaim:
    claim = _mapping(value, where)
    devices = _list(claim.get("devices"), f"{where}.devices")
    return PreparedClaim(
        _string(claim.get("namespace"), f"{where}.namespace"),
        _string(claim.get("name"), f"{where}.name"),
        tuple(_device(d, f"{where}.devices[{i}]") for i, d in enumerate(devices)),
    )


def _device(value: Any, where: str) -> PreparedDevice:
    device = _mapping(value, where)
    return PreparedDevice(
        _strings(device.get("request_names"), f"{where}.request_names"),
        _string(device.get("pool_name"), f"{where}.pool_name"),
        _string(device.get("device_name"), f"{where}.device_name"),
        _strings(device.get("cdi_device_ids"), f"{where}.cdi_device_ids"),
        device.get("admin_access", False) is True,  # absent in files written before it was recorded
        None if device.get("share") is None else _share(device["share"], f"{where}.share"),
    )


def _share(value: Any, where: str) -> Share:
    share = _mapping(value, where)
    return Share(
        _string(share.get("share_id"), f"{where}.share_id"),
        _count(share.get("memory_mib"), f"{where}.memory_mib"),
        _count(share.get("of_mib"), f"{where}.of_mib"),
        _count(share.get("compute_percent", 0), f"{where}.compute_percent"),
    )


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise EntryError(f"{where}: expected a whole number >= 0, got {short(value)}")
    return value


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise EntryError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise EntryError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise EntryError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_string(item, f"{where}[{i}]") for i, item in enumerate(_list(value, where)))
