"""Read the DRA checkpoint at start: the claims folder, its journals, the old single file
(migrated), stale temp files.

Boundary: disk -> {uid: PreparedClaim}, once, before the driver serves. Every file is read with the
config reader's limits (core.bounded_json: a regular file only, O_NONBLOCK, a size cap, a depth
cap), so a FIFO, a symlink to /dev/zero or `[` x 100,000 is refused at once. A bad entry is not
fatal: it is renamed to `<name>.bad` (kept for whoever investigates) and logged, and the driver
starts without it; the kubelet's next NodePrepareResources for that claim prepares it afresh. A
claim file whose checksum does not match (format.verify: torn or edited) is such a bad entry. The
journals are replayed over the files, oldest first (a torn last line ignored); they are handed to
the Checkpoint, which compacts them. A bad complete line is skipped and counted, the journal is kept
aside as `<journal>.bad` (a hard link: the original still replays and is compacted), and the claim
the line names is set aside unless a later good record settles it: dropped from the claims, its file
(if any) renamed `.bad`. Temp files left by a crash (ours, and the old format's `.checkpoint-*`) are
removed. Fatal (ConfigError) only when the folder itself cannot be made or listed, or the old file's
claims cannot be written out: starting then would forget prepared claims.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import NamedTuple

from device_plugin.core.bounded_json import load_json_file
from device_plugin.core.errors import ConfigError
from device_plugin.core.short_text import one_line, short_path
from device_plugin.dra_helper.checkpoint.commit import GroupSync, replace_files
from device_plugin.dra_helper.checkpoint.files import (
    BAD_SUFFIX,
    TEMP_PREFIX,
    ClaimsFolder,
    keep_aside,
    set_aside,
)
from device_plugin.dra_helper.checkpoint.format import (
    MAX_ENTRY_BYTES,
    MAX_LEGACY_BYTES,
    SUFFIX,
    EntryError,
    PreparedClaim,
    decode,
    decode_legacy,
    encode,
    file_name,
)
from device_plugin.dra_helper.checkpoint.journal import journal_number, replay

log = logging.getLogger(__name__)

FIELD = "DRA checkpoint"
LEGACY_TEMP_PREFIX = ".checkpoint-"  # the single-file format's temp files, beside checkpoint.json
LOGGED_PROBLEMS = 10  # bad entries logged one by one; the rest are counted


class Leftover(NamedTuple):
    """A journal not yet compacted: its path and the claims it has records of."""

    path: Path
    uids: frozenset[str]


class Loaded(NamedTuple):
    claims: dict[str, PreparedClaim]
    leftovers: list[Leftover]  # the journals replayed, to compact
    next_journal: int
    damaged: int  # entries and journal records set aside: claims that may be missing from `claims`


def load(folder: ClaimsFolder, group: GroupSync, legacy: Path) -> Loaded:
    """The checkpointed claims, the journals replayed (to compact), the next journal's number and
    how much was set aside; the folder made if missing, `legacy` (checkpoint.json) migrated into
    it."""
    try:
        folder.open()
        claims, bad_files = _read_folder(folder)
        leftovers, number, bad_records = _replay_journals(folder, claims)
    except OSError as error:
        raise ConfigError(
            FIELD, f"cannot use {short_path(folder.path)}: {error.strerror or error}"
        ) from error
    _remove_legacy_temps(legacy.parent)
    _migrate(folder, group, legacy, claims)
    return Loaded(claims, leftovers, number, bad_files + bad_records)


def _replay_journals(
    folder: ClaimsFolder, claims: dict[str, PreparedClaim]
) -> tuple[list[Leftover], int, int]:
    with os.scandir(folder.path) as entries:
        found = sorted(
            (n, e.name, e.is_symlink())
            for e in entries
            if (n := journal_number(e.name)) is not None
        )
    leftovers = []
    damaged = 0
    # uid -> the journal of its last record, a bad one: its state is unknown
    spoiled: dict[str, str] = {}

    def apply(uid: str, claim: PreparedClaim | None) -> None:
        spoiled.pop(uid, None)
        if claim is None:
            claims.pop(uid, None)
        else:
            claims[uid] = claim

    for _, name, is_symlink in found:
        path = folder.path / name
        if is_symlink:
            set_aside(path, "is a symbolic link")
            continue

        def spoil(uid: str, journal: str = name) -> None:
            claims.pop(uid, None)
            spoiled[uid] = journal

        try:
            uids, bad = replay(path, apply, spoil)
        except ConfigError as error:
            set_aside(path, _why(path, error))
            damaged += 1
            continue
        if bad:
            keep_aside(path, f"has {bad} bad records (skipped)")
            damaged += bad
        leftovers.append(Leftover(path, frozenset(uids)))
    _set_aside_spoiled(folder, spoiled)
    if leftovers:
        log.info("DRA checkpoint: replayed %d journals", len(leftovers))
    return leftovers, (found[-1][0] + 1 if found else 1), damaged + len(spoiled)


def _set_aside_spoiled(folder: ClaimsFolder, spoiled: dict[str, str]) -> None:
    """The claims whose last record was bad: not loaded (the kubelet's next Prepare prepares them
    afresh), their older files set aside, each named in the log (the first LOGGED_PROBLEMS)."""
    for count, (uid, journal) in enumerate(sorted(spoiled.items())):
        path = folder.path / file_name(uid)
        kept = path.exists() and set_aside(path, "", logged=False) != path
        if count < LOGGED_PROBLEMS:
            log.warning(
                "DRA checkpoint: claim %s has a bad record in %s; set aside%s",
                one_line(uid, 64),
                journal,
                f" (its older file as {path.name}{BAD_SUFFIX})" if kept else "",
            )
    if len(spoiled) > LOGGED_PROBLEMS:
        log.warning(
            "DRA checkpoint: %d claims set aside for bad journal records in all", len(spoiled)
        )


def _read_folder(folder: ClaimsFolder) -> tuple[dict[str, PreparedClaim], int]:
    claims: dict[str, PreparedClaim] = {}
    bad, stale = 0, 0
    with os.scandir(folder.path) as entries:
        for entry in entries:
            name, path = entry.name, folder.path / entry.name
            if name.startswith(TEMP_PREFIX):
                stale += _unlink(path)
                continue
            if name.endswith(BAD_SUFFIX) or not name.endswith(SUFFIX):
                continue  # set aside earlier, or not ours: left alone
            problem = _problem_or_claim(path, entry.is_symlink(), claims)
            if problem:
                set_aside(path, problem, logged=bad < LOGGED_PROBLEMS)
                bad += 1
    if bad > LOGGED_PROBLEMS:
        log.warning(
            "DRA checkpoint: %d bad entries set aside in all (the first %d logged)",
            bad,
            LOGGED_PROBLEMS,
        )
    if stale:
        log.info("DRA checkpoint: removed %d temp files left by an interrupted write", stale)
    log.info("DRA checkpoint: %d prepared claims in %s", len(claims), short_path(folder.path))
    return claims, bad


def _problem_or_claim(path: Path, is_symlink: bool, claims: dict[str, PreparedClaim]) -> str:
    """Add the claim in `path` to `claims`, or say what is wrong with it."""
    if is_symlink:
        return "is a symbolic link"
    try:
        uid, claim = decode(load_json_file(path, limit=MAX_ENTRY_BYTES, field=FIELD))
    except (ConfigError, EntryError) as error:
        return _why(path, error)
    if file_name(uid) != path.name:
        return "is named for another claim"
    claims[uid] = claim
    return ""


def _migrate(
    folder: ClaimsFolder, group: GroupSync, legacy: Path, claims: dict[str, PreparedClaim]
) -> None:
    """Write the old file's claims (those the folder lacks) to the folder, then remove the old
    file."""
    try:
        mode = os.lstat(legacy).st_mode
    except FileNotFoundError:
        return
    except OSError as error:
        log.error("DRA checkpoint: cannot look at %s: %s", short_path(legacy), error.strerror)
        return
    if stat.S_ISLNK(mode):
        set_aside(legacy, "is a symbolic link")
        return
    try:
        good, problems = decode_legacy(load_json_file(legacy, limit=MAX_LEGACY_BYTES, field=FIELD))
    except (ConfigError, EntryError) as error:
        set_aside(legacy, _why(legacy, error))
        return
    fresh = {uid: claim for uid, claim in good.items() if uid not in claims}
    try:
        replace_files(folder, group, {file_name(u): encode(u, c) for u, c in fresh.items()}, {})
    except OSError as error:
        where = f"{short_path(legacy)} -> {short_path(folder.path)}"
        raise ConfigError(FIELD, f"cannot migrate {where}: {error.strerror or error}") from error
    claims.update(fresh)
    for problem in problems[:LOGGED_PROBLEMS]:
        log.warning(
            "DRA checkpoint: %s: a bad claim was not migrated: %s", short_path(legacy), problem
        )
    if problems:
        set_aside(legacy, f"is migrated except {len(problems)} bad claims")
    else:
        _unlink(legacy)
    log.info(
        "DRA checkpoint: migrated %d claims from %s to %s",
        len(fresh),
        legacy.name,
        folder.path.name,
    )


def _why(path: Path, error: ConfigError | EntryError) -> str:
    """What is wrong, as "is ...": bounded_json's messages start with the path, which the log
    names."""
    if isinstance(error, EntryError):
        return f"is malformed: {error}"
    return error.message.removeprefix(f"{short_path(path)} ")


def _remove_legacy_temps(directory: Path) -> None:
    try:
        with os.scandir(directory) as listing:
            entries = [e for e in listing if e.name.startswith(LEGACY_TEMP_PREFIX)]
    except OSError:
        return
    removed = sum(
        _unlink(Path(e.path)) for e in entries if e.is_file(follow_symlinks=False) or e.is_symlink()
    )
    if removed:
        log.info(
            "DRA checkpoint: removed %d temp files of the old format in %s",
            removed,
            short_path(directory),
        )


def _unlink(path: Path) -> int:
    try:
        os.unlink(path)
    except OSError as error:
        log.warning("DRA checkpoint: cannot remove %s: %s", short_path(path), error.strerror)
        return 0
    return 1
