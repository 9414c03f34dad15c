"""Backups of a data directory: made while the daemon serves, checked by replaying them, restored
while it is stopped.

    DEST/manifest.json                  format, memoryd version, time; per user: counts and the
                                        sha256 of the journal's log (Journal.digest)
    DEST/users/<user>/journal.sqlite    the journal, copied with SQLite's backup API: one
                                        consistent snapshot, however busy the daemon is
    DEST/users/<user>/export.jsonl      the same snapshot as a portable export (data-format.md)

The graph and vectors are left out: they are projections of the journal, rebuilt from it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd.config import Config, LLMConfig
from memoryd.errors import ConflictError, InvalidInputError, UserNotFoundError
from memoryd.files import fsync_dir, fsync_file, write_private
from memoryd.portability import export_records, read_records
from memoryd.service import MemoryService, check_user_id
from memoryd.store import Database, HeaderStore, Journal, copy_database, integrity_problems
from memoryd.workspace import JOURNAL_FILE

__all__ = ["BACKUP_FORMAT", "backup", "restore", "verify"]

BACKUP_FORMAT = "memoryd.backup"
BACKUP_VERSION = 1
MANIFEST = "manifest.json"
EXPORT_FILE = "export.jsonl"
USERS_DIR = "users"

Progress = Callable[[str], None]


@contextmanager
def _journal(path: Path) -> Iterator[Journal]:
    db = Database(path)
    try:
        yield Journal(db)
    finally:
        db.close()


def _summary(path: Path) -> dict[str, Any]:
    """What a journal holds, to compare copies: counts and the log's digest."""
    with _journal(path) as journal:
        return {"counts": journal.counts(), "log_sha256": journal.digest()}


def _write_export(journal_path: Path, user_id: str, target: Path) -> int:
    with _journal(journal_path) as journal:
        records = export_records(
            journal, HeaderStore(journal.db), user_id, __version__, datetime.now(UTC)
        )
        lines = 0
        with target.open("w") as f:
            for record in records:
                f.write(json.dumps(record) + "\n")
                lines += 1
    fsync_file(target)
    return lines


def backup(
    config: Config, dest: Path, users: Sequence[str] = (), progress: Progress = print
) -> dict[str, Any]:
    """Copy ``users`` (all with data by default) of ``config.data_dir`` into ``dest`` (new or
    empty), with an export each and the manifest; returns the manifest."""
    source = config.data_dir / USERS_DIR
    found = sorted(p.name for p in source.iterdir() if p.is_dir()) if source.is_dir() else []
    chosen = list(users) or found
    if not chosen:
        raise InvalidInputError(f"{config.data_dir} holds no user to back up")
    for user in chosen:
        if not (source / check_user_id(user) / JOURNAL_FILE).is_file():
            raise UserNotFoundError(user)
    if dest.exists() and any(dest.iterdir()):
        raise ConflictError(f"{dest} is not empty: back up into a new directory")
    manifest: dict[str, Any] = {
        "format": BACKUP_FORMAT,
        "version": BACKUP_VERSION,
        "memoryd": __version__,
        "created_at": datetime.now(UTC).isoformat(),
        "users": {},
    }
    for user in chosen:
        target = dest / USERS_DIR / user
        target.mkdir(parents=True, mode=0o700)
        copy_database(source / user / JOURNAL_FILE, target / JOURNAL_FILE)
        fsync_file(target / JOURNAL_FILE)
        summary = _summary(target / JOURNAL_FILE)
        summary["export_lines"] = _write_export(target / JOURNAL_FILE, user, target / EXPORT_FILE)
        manifest["users"][user] = summary
        fsync_dir(target)
        progress(f"{user}: {summary['counts']['turns']} turns, log {summary['log_sha256'][:12]}")
    write_private(dest / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def read_manifest(src: Path) -> dict[str, Any]:
    path = src / MANIFEST
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{src} is not a memoryd backup: {exc}") from exc
    if manifest.get("format") != BACKUP_FORMAT or manifest.get("version") != BACKUP_VERSION:
        raise InvalidInputError(f"{path} is not a memoryd backup of version {BACKUP_VERSION}")
    return manifest


@dataclass(frozen=True)
class Verdict:
    """One user of a backup checked: ``problems`` is empty when it restores as recorded."""

    user_id: str
    turns: int
    problems: list[str]


def _check_copy(copy: Path, recorded: dict[str, Any]) -> list[str]:
    """What is wrong with a backup journal copied to ``copy`` (a file this module may open
    for writing: opening a journal applies its schema) against the manifest's record."""
    problems = [f"integrity_check: {p}" for p in integrity_problems(copy)]
    if problems:
        return problems
    found = _summary(copy)
    if found["log_sha256"] != recorded["log_sha256"]:
        problems.append("the journal's log differs from the manifest's checksum")
    if found["counts"] != recorded["counts"]:
        problems.append(f"counts {found['counts']} differ from the manifest's {recorded['counts']}")
    return problems


def _copy_user(src: Path, user: str, target: Path) -> Path:
    """The backup's journal of ``user`` copied into the directory ``target``."""
    journal = src / USERS_DIR / user / JOURNAL_FILE
    if not journal.is_file():
        raise InvalidInputError(f"{journal} is missing")
    target.mkdir(parents=True, mode=0o700, exist_ok=True)
    shutil.copy2(journal, target / JOURNAL_FILE)
    fsync_file(target / JOURNAL_FILE)
    fsync_dir(target)
    return target / JOURNAL_FILE


def _replay(service: MemoryService, src: Path, user: str, recorded: dict[str, Any]) -> list[str]:
    """The user's journal, already in ``service``'s data directory, opened (its graph and
    vectors rebuilt from the log), and the export imported as a second user: both must hold
    what the manifest says."""
    problems = []
    counts = service.counts(user)
    want = recorded["counts"]
    if counts["graph_Turn"] != want["turns"]:
        problems.append(f"replayed graph holds {counts['graph_Turn']} of {want['turns']} turns")
    memories = {k: v for k, v in want.items() if k.startswith("memories_")}
    vectors = {k.replace("memories_", "vectors_"): v for k, v in memories.items()}
    if any(counts.get(k, 0) != v for k, v in vectors.items()):
        problems.append(f"replayed vectors {counts} differ from the memories {memories}")
    with (src / USERS_DIR / user / EXPORT_FILE).open() as f:
        imported = service.import_user(f"{user[:56]}-import", read_records(f))
    for key in ("turns", *memories):
        if imported.get(key, 0) != want.get(key, 0):
            problems.append(f"the export imports {key} {imported.get(key, 0)}, not {want[key]}")
    return problems


def verify(
    config: Config, src: Path, users: Sequence[str] = (), progress: Progress = print
) -> list[Verdict]:
    """Check a backup: each journal copy passes integrity_check and matches the manifest's
    counts and log checksum, replays into a scratch data directory (graph and vectors rebuilt
    with ``config``'s settings, no LLM) and its export imports to the same counts."""
    manifest = read_manifest(src)
    chosen = _chosen(manifest, users)
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="memoryd-verify-") as scratch:
        scratch_config = dataclasses.replace(
            config, data_dir=Path(scratch), llm=LLMConfig.defaults()
        )
        service = MemoryService.from_config(scratch_config)
        try:
            for user in chosen:
                recorded = manifest["users"][user]
                copy = _copy_user(src, user, service.users_dir / user)
                problems = _check_copy(copy, recorded) or _replay(service, src, user, recorded)
                verdicts.append(Verdict(user, recorded["counts"]["turns"], problems))
                progress(f"{user}: {'ok' if not problems else '; '.join(problems)}")
        finally:
            service.close()
    return verdicts


def _chosen(manifest: dict[str, Any], users: Sequence[str]) -> list[str]:
    for user in users:
        if user not in manifest["users"]:
            raise UserNotFoundError(user)
    return list(users) or sorted(manifest["users"])


def restore(
    config: Config,
    src: Path,
    users: Sequence[str] = (),
    replace: bool = False,
    progress: Progress = print,
) -> list[str]:
    """Put the backup's journals of ``users`` (all by default) in ``config.data_dir``; the
    daemon must be stopped (the caller holds the data directory). A user that has data is
    refused unless ``replace``; a copy that fails integrity_check or the manifest's checksum is
    refused and nothing of that user is changed. The graph and vectors are rebuilt from the
    journal when the daemon next opens the user."""
    manifest = read_manifest(src)
    chosen = _chosen(manifest, users)
    users_dir = config.data_dir / USERS_DIR
    users_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for user in chosen:
        if (users_dir / user).exists() and not replace:
            raise ConflictError(f"user {user!r} has data: pass --replace to overwrite it")
    for user in chosen:
        staged = config.data_dir / f".restore-{user}"  # same file system, outside users/
        shutil.rmtree(staged, ignore_errors=True)
        problems = _check_copy(_copy_user(src, user, staged), manifest["users"][user])
        if problems:
            shutil.rmtree(staged)
            raise InvalidInputError(f"the backup of user {user!r} is damaged: {problems[0]}")
        if (users_dir / user).exists():
            shutil.rmtree(users_dir / user)
        staged.rename(users_dir / user)
        fsync_dir(users_dir)
        progress(f"{user}: restored {manifest['users'][user]['counts']['turns']} turns")
    return chosen
