"""One user's journal file: the SQLite connections, pragmas and transactions its stores share.

Several stores keep tables in this one file (:class:`memoryd.store.journal.Journal`,
:class:`memoryd.store.headers.HeaderStore`, :class:`memoryd.store.router_state.RouterStore`).
Each takes the :class:`Database`, applies its own schema on open (``CREATE … IF NOT EXISTS``,
then its migrations and backfills) and writes only its own tables; reads may join the tables of
another store of the file.

- Durability: WAL, ``synchronous=FULL``; a committed transaction is on disk.
- Writes: :meth:`Database.transaction` on the one write connection, ``BEGIN IMMEDIATE`` …
  ``COMMIT`` (or ``ROLLBACK`` and :class:`JournalError`). A transaction opened inside another
  joins it, so the caller that opens the outer one makes several stores' writes atomic. Only the
  user's writer thread writes (the caller guarantees it).
- Reads: :meth:`Database.read` on a connection of the calling thread's own, which WAL lets run
  beside the writer.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryd.errors import ClosedError, DiskFullError, JournalError

__all__ = ["Database", "Migration", "placeholders", "utc_now"]

log = logging.getLogger(__name__)

Migration = tuple[str, str, str]
"""A column added after its table first shipped: (table, column, ALTER TABLE statement)."""


def utc_now() -> str:
    """The current time as the stores of the journal file write it (ISO-8601, UTC)."""
    return datetime.now(UTC).isoformat()


def placeholders(count: int) -> str:
    """``?, ?, ?`` for an ``IN (…)`` of ``count`` values."""
    return ",".join("?" * count)


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)


def integrity_problems(path: Path, limit: int = 5) -> list[str]:
    """What ``PRAGMA integrity_check`` finds wrong with the SQLite file at ``path`` (up to
    ``limit`` lines; [] when it is sound), read-only. A file SQLite cannot read is one problem."""
    try:
        conn = _read_only(path)
        try:
            found = [row[0] for row in conn.execute(f"PRAGMA integrity_check({int(limit)})")]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    return [] if found == ["ok"] else found


def copy_database(source: Path, target: Path) -> None:
    """A consistent copy of a live SQLite file (SQLite's backup API, in one step, read-only on
    the source): whatever another process writes meanwhile, one committed state."""
    src, dst = _read_only(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


class Database:
    """The journal file of one user. ``close()`` closes every connection it opened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._closed = False
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._depth = 0  # open transactions on the write connection (nested ones join)
        self.writer = self._connect()

    def _error(self, what: str, exc: sqlite3.Error) -> JournalError:
        """The error to raise for ``exc``: DiskFullError when the disk is full."""
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_FULL:
            return DiskFullError(str(self.path.parent))
        return JournalError(f"{what}: {exc}")

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise self._error(f"cannot open {self.path}", exc) from exc
        with self._lock:
            self._connections.append(conn)
        return conn

    def apply(
        self, schema: str, migrations: Sequence[Migration] = (), backfills: Sequence[str] = ()
    ) -> None:
        """Create a store's tables if missing (each statement is idempotent), then add the
        columns its migrations name and run its backfills (each safe to repeat) in one
        transaction."""
        if self._closed:
            raise ClosedError("journal")
        try:
            self.writer.executescript(schema)
        except sqlite3.Error as exc:
            raise JournalError(f"cannot create the tables of {self.path}: {exc}") from exc
        with self.transaction() as conn:
            for table, column, statement in migrations:
                columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                if column not in columns:
                    conn.execute(statement)
                    log.info("journal migrated: added %s.%s", table, column)
            for statement in backfills:
                conn.execute(statement)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; inside another one, part of it (see the module docstring)."""
        if self._closed:
            raise ClosedError("journal")
        conn = self.writer
        if self._depth:
            self._depth += 1
            try:
                yield conn
            finally:
                self._depth -= 1
            return
        self._depth = 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:  # SQLite may have rolled back already (a full disk)
                conn.execute("ROLLBACK")
            raise self._error("write failed", exc) from exc
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            self._depth = 0

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Rows of one query, on this thread's read connection; JournalError on failure."""
        conn = self._reader()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            # the statement, not its parameters: they hold what users said
            log.error("journal query failed: %s (%d parameters)", sql.split("\n")[0], len(params))
            raise JournalError(f"read failed: {exc}") from exc

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise ClosedError("journal")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
