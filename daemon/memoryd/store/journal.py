"""The per-user journal: an append-only SQLite log that is the source of truth.

Every acknowledged write is a committed row here (WAL, ``synchronous=FULL``). The graph, the
vector index and the FTS5 table are projections: the graph and vectors record the last ``seq``
they applied and replay the log past it; FTS5 lives in this file and is written in the same
transaction as the rows it indexes.

Tables
- ``log(seq, kind, ref, payload)``: the append-only stream. ``kind`` is one of :class:`LogKind`.
  A ``turn`` entry holds the turn, its derived memories and the stored memories it changed
  (``updates``: a closed fact, a completed task); ``memory_patch`` the new record;
  ``memory_delete`` the id; ``memory_change`` memories created and changed by something other
  than a turn (the task API, feedback, expiry, an undo, an abstraction pass), with its reason.
- ``turns``: one row per turn id with its embedding and the first reply (idempotent retries).
- ``memories``: the current state of each memory (derived from the log in the same transaction).
  ``num`` is the integer label the vector index uses.
- ``memory_fts``: FTS5 over memory text (rowid = ``memories.num``).
- ``entities``: the user's canonical entities and the other names they were given (the
  registry entity canonicalisation matches new names against), written with the memories that
  name them.
- ``cursors``: how far a background pass has read (the last episode ``num`` each abstraction
  operator has seen), written in the transaction that journals the pass's result.
- ``router_queue``: turns deferred to the LLM labeller (pending, labelled or failed), with their
  attempts and the earliest time of the next one; written with the turn, so a crash between
  "queued" and "labelled" loses nothing.
- ``router_pool``: the user's LLM labels (the training pool of the self-enhancement loop),
  written in the same transaction as the ``turn_relabel`` entry that re-routes the turn.
- ``router_rounds``: every training round (and rollback) with its report and, when accepted,
  the head's bytes; the user's current head is the last accepted one.
- ``router_decisions``: routing decisions and deferrals per round (the LLM share per round).
- ``headers``, ``tier_moves``, ``tier_runs``, ``persona``: HMO headers and tiers (see
  :mod:`memoryd.store.headers`); a memory's header row is written with the memory.

Concurrency: one writer thread (the caller guarantees it) owns the write connection; each reading
thread gets its own connection, which WAL lets run beside the writer.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.errors import ClosedError, JournalError
from memoryd.memory.models import (
    Entity,
    EntityType,
    Episode,
    Fact,
    Memory,
    MemoryType,
    Rule,
    Task,
    TaskStatus,
    Turn,
    index_text,
    memory_from_payload,
    memory_type,
    to_payload,
    turn_from_payload,
)
from memoryd.store.headers import (
    BACKFILL,
    HEADER_SCHEMA,
    delete_header,
    insert_header,
    set_api_importance,
)
from memoryd.store.lexical import FTS_TOKENIZER, match_expression

log = logging.getLogger(__name__)

EMBEDDING_DTYPE = np.float32
MEMORY_COLUMNS = "num, type, payload, session_id, ts"  # read by Journal._stored

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    turn_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    embedding BLOB NOT NULL,
    reply TEXT NOT NULL,
    relabel_seq INTEGER
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns(session_id, seq);
CREATE TABLE IF NOT EXISTS memories (
    num INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    payload TEXT NOT NULL,
    embedding BLOB,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS memories_by_turn ON memories(turn_id);
CREATE INDEX IF NOT EXISTS facts_by_key ON memories(
    json_extract(payload, '$.subject'), json_extract(payload, '$.relation')
) WHERE type = 'semantic' AND deleted = 0;
CREATE INDEX IF NOT EXISTS memories_by_type ON memories(type, deleted, num);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(text, tokenize='{FTS_TOKENIZER}');
CREATE TABLE IF NOT EXISTS entities (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    aliases TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS cursors (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS router_queue (
    turn_id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before REAL NOT NULL DEFAULT 0,
    error TEXT,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS router_queue_due ON router_queue(status, not_before);
CREATE TABLE IF NOT EXISTS router_pool (
    turn_id TEXT PRIMARY KEY,
    labels TEXT NOT NULL,
    source TEXT NOT NULL,
    holdout INTEGER NOT NULL,
    after_round INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS router_rounds (
    round INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    accepted INTEGER NOT NULL,
    report TEXT NOT NULL,
    head BLOB,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS router_decisions (
    round INTEGER PRIMARY KEY,
    decisions INTEGER NOT NULL,
    deferred INTEGER NOT NULL,
    low_confidence INTEGER NOT NULL
);
"""
MIGRATIONS = (("turns", "relabel_seq", "ALTER TABLE turns ADD COLUMN relabel_seq INTEGER"),)
"""Columns added after a table was first shipped: (table, column, statement)."""


class LogKind(StrEnum):
    TURN = "turn"
    MEMORY_PATCH = "memory_patch"
    MEMORY_DELETE = "memory_delete"
    TURN_RELABEL = "turn_relabel"
    MEMORY_CHANGE = "memory_change"


FEEDBACK_POSITIVE = "feedback_positive"  # the reason of a positive-feedback memory_change


class QueueStatus(StrEnum):
    PENDING = "pending"
    LABELLED = "labelled"
    FAILED = "failed"


class RoundKind(StrEnum):
    TRAIN = "train"
    ROLLBACK = "rollback"


@dataclass(frozen=True)
class Routing:
    """How a turn was routed: the user's training round then, and whether the confidence was
    under τ_t (``low_confidence``) and the turn was queued for the LLM (``deferred``)."""

    round: int
    low_confidence: bool
    deferred: bool


@dataclass(frozen=True)
class TurnEntry:
    """What one ingested turn writes: the turn, its embedding, memories and the reply to replay.

    ``updates`` are stored memories the turn changed (consolidation); ``aliases`` the names
    canonicalisation folded into known entities ({entity id: names}). ``routing`` is None for
    turns that were not routed now (an import)."""

    turn: Turn
    embedding: np.ndarray
    memories: list[Memory]
    reply: dict[str, Any]
    routing: Routing | None = None
    updates: list[Memory] = field(default_factory=list)
    aliases: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class NewMemory:
    """A memory created outside a turn, with the session and time it is filed under and its
    own vector (None: its source turn's)."""

    memory: Memory
    session_id: str
    ts: datetime
    embedding: np.ndarray | None = None


@dataclass(frozen=True)
class MemoryChange:
    """Memories created and changed together, and why (``reason``: "task", "feedback",
    "expiry", "undo", "a_sem", …). ``cursor`` moves a background pass's read position."""

    reason: str
    ref: str
    created: list[NewMemory] = field(default_factory=list)
    updates: list[Memory] = field(default_factory=list)
    cursor: tuple[str, int] | None = None


@dataclass(frozen=True)
class Relabel:
    """An LLM label for a deferred turn: the re-routed turn, its new memories, the stored
    memories of other turns they change (consolidation) and the pool row."""

    turn: Turn
    memories: list[Memory]
    source: str
    holdout: bool
    after_round: int
    updates: list[Memory] = field(default_factory=list)


@dataclass(frozen=True)
class DueLabel:
    """A queued turn whose next labelling attempt is due."""

    turn_id: str
    attempts: int


@dataclass(frozen=True)
class RoundRecord:
    round: int
    kind: RoundKind
    accepted: bool
    report: dict[str, Any]
    created_at: str


@dataclass(frozen=True)
class LogEntry:
    seq: int
    kind: LogKind
    ref: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class StoredMemory:
    """A live memory as stored, with the session and time of the turn it came from."""

    num: int
    memory: Memory
    type: MemoryType
    session_id: str
    ts: str


def memory_record(memory: Memory) -> dict[str, Any]:
    """A memory as the log stores it: its type and its record."""
    return {"type": memory_type(memory).value, "record": to_payload(memory)}


def memory_of_record(record: dict[str, Any]) -> Memory:
    """The inverse of :func:`memory_record`."""
    return memory_from_payload(MemoryType(record["type"]), record["record"])


def turn_of_payload(payload: dict[str, Any]) -> tuple[Turn, list[Memory]]:
    """The turn and memories of a ``turn`` or ``turn_relabel`` log payload."""
    return turn_from_payload(payload["turn"]), [memory_of_record(m) for m in payload["memories"]]


def updates_of_payload(payload: dict[str, Any]) -> list[Memory]:
    """The stored memories a ``turn`` entry changed (none for entries before consolidation)."""
    return [memory_of_record(m) for m in payload.get("updates", ())]


def _new_memory_record(new: NewMemory) -> dict[str, Any]:
    record = memory_record(new.memory) | {"session_id": new.session_id, "ts": new.ts.isoformat()}
    if new.embedding is not None:
        record["embedding"] = np.asarray(new.embedding, dtype=EMBEDDING_DTYPE).tolist()
    return record


def new_memory_of_record(record: dict[str, Any]) -> NewMemory:
    """The inverse of the ``created`` records of a ``memory_change`` payload."""
    vec = record.get("embedding")
    return NewMemory(
        memory_of_record(record),
        record["session_id"],
        datetime.fromisoformat(record["ts"]),
        None if vec is None else np.asarray(vec, dtype=EMBEDDING_DTYPE),
    )


def change_of_payload(ref: str, payload: dict[str, Any]) -> MemoryChange:
    """The :class:`MemoryChange` a ``memory_change`` log payload records."""
    cursor = payload.get("cursor")
    return MemoryChange(
        reason=payload["reason"],
        ref=ref,
        created=[new_memory_of_record(r) for r in payload["created"]],
        updates=[memory_of_record(r) for r in payload["updates"]],
        cursor=None if cursor is None else (cursor[0], int(cursor[1])),
    )


def encode_embedding(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=EMBEDDING_DTYPE).tobytes()


def decode_embedding(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=EMBEDDING_DTYPE).copy()


def _now() -> str:
    return datetime.now(UTC).isoformat()


class Journal:
    """Append-only SQLite journal of one user. See the module docstring for the contract."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._closed = False
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._writer = self._connect()
        with self._writer:
            self._writer.executescript(SCHEMA + HEADER_SCHEMA)
            self._migrate(self._writer)
            self._writer.execute(BACKFILL)

    # -- connections -------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise JournalError(f"cannot open {self.path}: {exc}") from exc
        with self._lock:
            self._connections.append(conn)
        return conn

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        for table, column, statement in MIGRATIONS:
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if column not in columns:
                conn.execute(statement)
                log.info("journal migrated: added %s.%s", table, column)

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise ClosedError("journal")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: BEGIN IMMEDIATE … COMMIT, or ROLLBACK and JournalError."""
        if self._closed:
            raise ClosedError("journal")
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise JournalError(f"write failed: {exc}") from exc
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """A write transaction for the store modules that keep tables in this file."""
        return self._write()

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """A read on this thread's connection, for the store modules that keep tables here."""
        return self._query(sql, params)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        conn = self._reader()
        try:
            return conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            log.error("journal query failed: %s params=%s", sql.split("\n")[0], str(params)[:80])
            raise JournalError(f"read failed: {exc}") from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()

    # -- writes ------------------------------------------------------------------------------

    def append_turns(self, entries: Sequence[TurnEntry]) -> list[int]:
        """Commit all ``entries`` in one transaction; return the log seq of each, in order."""
        seqs: list[int] = []
        with self._write() as conn:
            for entry in entries:
                seqs.append(self._append_turn(conn, entry))
        return seqs

    def _append_turn(self, conn: sqlite3.Connection, entry: TurnEntry) -> int:
        turn = entry.turn
        payload: dict[str, Any] = {
            "turn": to_payload(turn),
            "memories": [memory_record(m) for m in entry.memories],
        }
        if entry.updates:
            payload["updates"] = [memory_record(m) for m in entry.updates]
        if entry.aliases:
            payload["aliases"] = entry.aliases
        seq = self._log(conn, LogKind.TURN, turn.turn_id, payload)
        conn.execute(
            "INSERT INTO turns(turn_id, seq, session_id, ts, embedding, reply)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                turn.turn_id,
                seq,
                turn.session_id,
                turn.ts.isoformat(),
                encode_embedding(entry.embedding),
                json.dumps(entry.reply),
            ),
        )
        for memory in entry.memories:
            self._insert_memory(conn, memory, turn.session_id, turn.ts)
        for memory in entry.updates:
            self._replace_memory(conn, memory)
        self._register_entities(conn, entry.memories, entry.aliases)
        if entry.routing is not None:
            self._count_decision(conn, entry.routing)
            if entry.routing.deferred:
                conn.execute(
                    "INSERT OR IGNORE INTO router_queue(turn_id, status, updated_at)"
                    " VALUES (?, ?, ?)",
                    (turn.turn_id, QueueStatus.PENDING.value, _now()),
                )
        return seq

    @staticmethod
    def _count_decision(conn: sqlite3.Connection, routing: Routing) -> None:
        conn.execute(
            "INSERT INTO router_decisions(round, decisions, deferred, low_confidence)"
            " VALUES (?, 1, ?, ?) ON CONFLICT(round) DO UPDATE SET"
            " decisions = decisions + 1, deferred = deferred + excluded.deferred,"
            " low_confidence = low_confidence + excluded.low_confidence",
            (routing.round, int(routing.deferred), int(routing.low_confidence)),
        )

    def _insert_memory(
        self,
        conn: sqlite3.Connection,
        memory: Memory,
        session_id: str,
        ts: datetime,
        embedding: np.ndarray | None = None,
    ) -> None:
        cur = conn.execute(
            "INSERT INTO memories(id, type, turn_id, session_id, ts, payload, embedding)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                memory.id,
                memory_type(memory).value,
                memory.turn_id,
                session_id,
                ts.isoformat(),
                json.dumps(to_payload(memory)),
                None if embedding is None else encode_embedding(embedding),
            ),
        )
        num = int(cur.lastrowid or 0)
        conn.execute("INSERT INTO memory_fts(rowid, text) VALUES (?, ?)", (num, index_text(memory)))
        insert_header(conn, num, memory.header.importance)

    def _replace_memory(self, conn: sqlite3.Connection, memory: Memory) -> None:
        """Store a live memory's new record (its text, and so its FTS row, may have changed)."""
        num = self._live_num(conn, memory.id)
        conn.execute(
            "UPDATE memories SET payload = ? WHERE num = ?", (json.dumps(to_payload(memory)), num)
        )
        conn.execute("UPDATE memory_fts SET text = ? WHERE rowid = ?", (index_text(memory), num))

    @staticmethod
    def _register_entities(
        conn: sqlite3.Connection, memories: Sequence[Memory], aliases: dict[str, list[str]]
    ) -> None:
        entities = [m.object for m in memories if isinstance(m, Fact)]
        entities += [x.entity for m in memories if isinstance(m, Episode) for x in m.mentions]
        conn.executemany(
            "INSERT OR IGNORE INTO entities(id, name, type) VALUES (?, ?, ?)",
            [(e.id, e.name, e.type.value) for e in entities],
        )
        for entity_id, names in aliases.items():
            row = conn.execute("SELECT aliases FROM entities WHERE id = ?", (entity_id,)).fetchone()
            if row is not None:
                merged = sorted(set(json.loads(row[0])) | set(names))
                conn.execute(
                    "UPDATE entities SET aliases = ? WHERE id = ?", (json.dumps(merged), entity_id)
                )

    def change_memories(self, change: MemoryChange) -> int:
        """Journal a :class:`MemoryChange` in one transaction; return its log seq."""
        payload: dict[str, Any] = {
            "reason": change.reason,
            "created": [_new_memory_record(n) for n in change.created],
            "updates": [memory_record(m) for m in change.updates],
        }
        if change.cursor is not None:
            payload["cursor"] = list(change.cursor)
        with self._write() as conn:
            seq = self._log(conn, LogKind.MEMORY_CHANGE, change.ref, payload)
            for new in change.created:
                self._insert_memory(conn, new.memory, new.session_id, new.ts, new.embedding)
            for memory in change.updates:
                self._replace_memory(conn, memory)
            self._register_entities(conn, [n.memory for n in change.created], {})
            if change.cursor is not None:
                conn.execute(
                    "INSERT INTO cursors(name, value) VALUES (?, ?)"
                    " ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                    change.cursor,
                )
        return seq

    def _log(self, conn: sqlite3.Connection, kind: LogKind, ref: str, payload: Any) -> int:
        cur = conn.execute(
            "INSERT INTO log(kind, ref, payload, created_at) VALUES (?, ?, ?, ?)",
            (kind.value, ref, json.dumps(payload), _now()),
        )
        return int(cur.lastrowid or 0)

    def patch_memory(
        self,
        memory: Memory,
        embedding: np.ndarray | None = None,
        importance: float | None = None,
    ) -> int:
        """Replace a stored memory's record (and its vector, and the importance a client set,
        if given); return the log seq."""
        payload = memory_record(memory)
        if embedding is not None:
            payload["embedding"] = np.asarray(embedding, dtype=EMBEDDING_DTYPE).tolist()
        if importance is not None:
            payload["importance"] = float(importance)
        with self._write() as conn:
            num = self._live_num(conn, memory.id)
            seq = self._log(conn, LogKind.MEMORY_PATCH, memory.id, payload)
            conn.execute(
                "UPDATE memories SET payload = ?, embedding = COALESCE(?, embedding) WHERE num = ?",
                (
                    json.dumps(payload["record"]),
                    None if embedding is None else encode_embedding(embedding),
                    num,
                ),
            )
            conn.execute(
                "UPDATE memory_fts SET text = ? WHERE rowid = ?", (index_text(memory), num)
            )
            if importance is not None:
                set_api_importance(conn, num, importance)
        return seq

    def delete_memory(self, memory_id: str) -> int:
        """Mark a memory deleted (the log keeps the history); return the log seq."""
        with self._write() as conn:
            num = self._live_num(conn, memory_id)
            seq = self._log(conn, LogKind.MEMORY_DELETE, memory_id, {"id": memory_id})
            self._mark_deleted(conn, num)
        return seq

    @staticmethod
    def _live_num(conn: sqlite3.Connection, memory_id: str) -> int:
        """The num of a live memory; JournalError if there is none."""
        row = conn.execute(
            "SELECT num FROM memories WHERE id = ? AND deleted = 0", (memory_id,)
        ).fetchone()
        if row is None:
            raise JournalError(f"memory {memory_id!r} is not stored")
        return int(row[0])

    @staticmethod
    def _mark_deleted(conn: sqlite3.Connection, num: int) -> None:
        conn.execute("UPDATE memories SET deleted = 1 WHERE num = ?", (num,))
        conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (num,))
        delete_header(conn, num)

    def relabel_turn(self, relabel: Relabel) -> int:
        """Re-route a deferred turn under its LLM labels; return the ``turn_relabel`` seq.

        One transaction: the log entry (the new turn, its new memories, the ids of the memories
        it no longer has and the other turns' memories it changed), the memories table and FTS,
        the pool row and the queue status. Memory ids are deterministic, so a memory the turn
        had before and has again keeps its ``num`` (and its vector label).
        """
        turn = relabel.turn
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id, num FROM memories WHERE turn_id = ? AND deleted = 0", (turn.turn_id,)
            ).fetchall()
            new_ids = {m.id for m in relabel.memories}
            removed = dict(sorted((r[0], r[1]) for r in rows if r[0] not in new_ids))
            payload = {
                "turn": to_payload(turn),
                "memories": [memory_record(m) for m in relabel.memories],
                "removed": list(removed),
                "updates": [memory_record(m) for m in relabel.updates],
                "source": relabel.source,
                "holdout": relabel.holdout,
                "after_round": relabel.after_round,
            }
            seq = self._log(conn, LogKind.TURN_RELABEL, turn.turn_id, payload)
            conn.execute("UPDATE turns SET relabel_seq = ? WHERE turn_id = ?", (seq, turn.turn_id))
            for num in removed.values():
                self._mark_deleted(conn, num)
            for memory in relabel.memories:
                self._upsert_memory(conn, memory, turn)
            for memory in relabel.updates:
                self._replace_memory(conn, memory)
            self._register_entities(conn, relabel.memories, {})
            conn.execute(
                "INSERT OR REPLACE INTO router_pool"
                "(turn_id, labels, source, holdout, after_round, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    turn.turn_id,
                    json.dumps([label.value for label in turn.labels]),
                    relabel.source,
                    int(relabel.holdout),
                    relabel.after_round,
                    _now(),
                ),
            )
            self._set_queue(conn, turn.turn_id, QueueStatus.LABELLED, None, 0.0, None)
        return seq

    def _upsert_memory(self, conn: sqlite3.Connection, memory: Memory, turn: Turn) -> None:
        row = conn.execute(
            "SELECT num, deleted FROM memories WHERE id = ?", (memory.id,)
        ).fetchone()
        if row is None:
            self._insert_memory(conn, memory, turn.session_id, turn.ts)
            return
        num, deleted = row
        conn.execute(
            "UPDATE memories SET type = ?, payload = ?, deleted = 0 WHERE num = ?",
            (memory_type(memory).value, json.dumps(to_payload(memory)), num),
        )
        if deleted:
            insert_header(conn, num, memory.header.importance)
        else:
            conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (num,))
        conn.execute("INSERT INTO memory_fts(rowid, text) VALUES (?, ?)", (num, index_text(memory)))

    # -- router queue, pool and rounds -------------------------------------------------------

    @staticmethod
    def _set_queue(
        conn: sqlite3.Connection,
        turn_id: str,
        status: QueueStatus,
        attempts: int | None,
        not_before: float,
        error: str | None,
    ) -> None:
        conn.execute(
            "UPDATE router_queue SET status = ?, attempts = COALESCE(?, attempts),"
            " not_before = ?, error = ?, updated_at = ? WHERE turn_id = ?",
            (status.value, attempts, not_before, error, _now(), turn_id),
        )

    def label_failed(self, turn_id: str, attempts: int, error: str, retry_at: float | None) -> None:
        """Record a failed labelling attempt: due again at ``retry_at`` (unix time), or given
        up on when ``retry_at`` is None (the turn keeps its classifier label)."""
        status = QueueStatus.FAILED if retry_at is None else QueueStatus.PENDING
        with self._write() as conn:
            self._set_queue(conn, turn_id, status, attempts, retry_at or 0.0, error[:500])

    def due_labels(self, now: float, limit: int) -> list[DueLabel]:
        """Pending queued turns whose next attempt is due, oldest first."""
        rows = self._query(
            "SELECT q.turn_id, q.attempts FROM router_queue q JOIN turns t USING (turn_id)"
            " WHERE q.status = ? AND q.not_before <= ? ORDER BY t.seq LIMIT ?",
            (QueueStatus.PENDING.value, now, limit),
        )
        return [DueLabel(r[0], int(r[1])) for r in rows]

    def next_due(self) -> float | None:
        """Unix time of the earliest pending attempt, or None when nothing is pending."""
        row = self._query(
            "SELECT MIN(not_before) FROM router_queue WHERE status = ?",
            (QueueStatus.PENDING.value,),
        )[0]
        return None if row[0] is None else float(row[0])

    def queue_counts(self) -> dict[str, int]:
        rows = self._query("SELECT status, COUNT(*) FROM router_queue GROUP BY status")
        counts = {status.value: 0 for status in QueueStatus}
        counts.update({r[0]: int(r[1]) for r in rows})
        return counts

    def pool(self) -> list[tuple[str, list[str], bool]]:
        """The training pool: (turn id, labels, held out), in the order labels arrived."""
        rows = self._query("SELECT turn_id, labels, holdout FROM router_pool ORDER BY rowid")
        return [(r[0], json.loads(r[1]), bool(r[2])) for r in rows]

    def pool_counts(self, after_round: int) -> tuple[int, int]:
        """(pool size, labels added since training round ``after_round`` was completed)."""
        row = self._query(
            "SELECT COUNT(*), COALESCE(SUM(after_round >= ?), 0) FROM router_pool",
            (after_round,),
        )[0]
        return int(row[0]), int(row[1])

    def record_round(
        self, kind: RoundKind, accepted: bool, report: dict[str, Any], head: bytes | None
    ) -> int:
        """Journal a training round or rollback; an accepted one carries the head in use from
        now on. Returns the round number."""
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO router_rounds(kind, accepted, report, head, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (kind.value, int(accepted), json.dumps(report), head, _now()),
            )
        return int(cur.lastrowid or 0)

    def rounds(self) -> list[RoundRecord]:
        rows = self._query(
            "SELECT round, kind, accepted, report, created_at FROM router_rounds ORDER BY round"
        )
        return [
            RoundRecord(r[0], RoundKind(r[1]), bool(r[2]), json.loads(r[3]), r[4]) for r in rows
        ]

    def head(self, round_: int) -> bytes | None:
        """The head bytes journaled with round ``round_`` (None if it has none)."""
        rows = self._query("SELECT head FROM router_rounds WHERE round = ?", (round_,))
        return bytes(rows[0][0]) if rows and rows[0][0] is not None else None

    def decisions(self) -> dict[int, tuple[int, int, int]]:
        """round → (routing decisions, deferred to the LLM, under τ_t)."""
        rows = self._query(
            "SELECT round, decisions, deferred, low_confidence FROM router_decisions"
        )
        return {int(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}

    # -- reads: turns ------------------------------------------------------------------------

    def replies(self, turn_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored first reply of each already-journaled turn id (absent ids are left out)."""
        if not turn_ids:
            return {}
        marks = ",".join("?" * len(turn_ids))
        rows = self._query(f"SELECT turn_id, reply FROM turns WHERE turn_id IN ({marks})", turn_ids)
        return {r[0]: json.loads(r[1]) for r in rows}

    def turn(self, turn_id: str) -> tuple[Turn, np.ndarray, dict[str, Any]] | None:
        """The turn, its embedding and its first reply, or None."""
        rows = self._query(
            "SELECT l.payload, t.embedding, t.reply FROM turns t"
            " JOIN log l ON l.seq = COALESCE(t.relabel_seq, t.seq) WHERE t.turn_id = ?",
            (turn_id,),
        )
        if not rows:
            return None
        payload, blob, reply = rows[0]
        return (
            turn_from_payload(json.loads(payload)["turn"]),
            decode_embedding(blob),
            json.loads(reply),
        )

    def turns(
        self, session_id: str | None, limit: int, after_seq: int = 0
    ) -> list[tuple[int, Turn]]:
        """Turns in journal order after ``after_seq`` (optionally one session), with their seq."""
        where, params = "t.seq > ?", [after_seq]
        if session_id is not None:
            where += " AND t.session_id = ?"
            params.append(session_id)
        rows = self._query(
            "SELECT t.seq, l.payload FROM turns t"
            " JOIN log l ON l.seq = COALESCE(t.relabel_seq, t.seq)"
            f" WHERE {where} ORDER BY t.seq LIMIT ?",
            [*params, limit],
        )
        return [(r[0], turn_from_payload(json.loads(r[1])["turn"])) for r in rows]

    def turn_texts(self, turn_ids: Sequence[str]) -> dict[str, str]:
        """turn id → text, for stored turns."""
        out: dict[str, str] = {}
        for start in range(0, len(turn_ids), 500):
            chunk = list(turn_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = self._query(
                "SELECT t.turn_id, l.payload FROM turns t JOIN log l ON l.seq = t.seq"
                f" WHERE t.turn_id IN ({marks})",
                chunk,
            )
            out.update({r[0]: json.loads(r[1])["turn"]["text"] for r in rows})
        return out

    def turn_embeddings(self, turn_ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not turn_ids:
            return {}
        marks = ",".join("?" * len(turn_ids))
        rows = self._query(
            f"SELECT turn_id, embedding FROM turns WHERE turn_id IN ({marks})", turn_ids
        )
        return {r[0]: decode_embedding(r[1]) for r in rows}

    # -- reads: memories ---------------------------------------------------------------------

    def _stored(self, row: sqlite3.Row) -> StoredMemory:
        num, kind, payload, session_id, ts = row
        mtype = MemoryType(kind)
        memory = memory_from_payload(mtype, json.loads(payload))
        return StoredMemory(num, memory, mtype, session_id, ts)

    def memory(self, memory_id: str) -> StoredMemory | None:
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ? AND deleted = 0",
            (memory_id,),
        )
        return self._stored(rows[0]) if rows else None

    def memories_by_id(self, memory_ids: Sequence[str]) -> dict[str, StoredMemory]:
        if not memory_ids:
            return {}
        marks = ",".join("?" * len(memory_ids))
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({marks}) AND deleted = 0",
            list(memory_ids),
        )
        return {s.memory.id: s for s in map(self._stored, rows)}

    def memories_by_num(self, nums: Sequence[int]) -> dict[int, StoredMemory]:
        if not nums:
            return {}
        marks = ",".join("?" * len(nums))
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE num IN ({marks}) AND deleted = 0",
            [int(n) for n in nums],
        )
        return {s.num: s for s in map(self._stored, rows)}

    def current_facts(self, subject: str, relations: Sequence[str]) -> list[Fact]:
        """Live, still valid facts of ``subject`` with one of ``relations`` (indexed lookup)."""
        marks = ",".join("?" * len(relations))
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories INDEXED BY facts_by_key"
            " WHERE type = 'semantic' AND deleted = 0"
            " AND json_extract(payload, '$.subject') = ?"
            f" AND json_extract(payload, '$.relation') IN ({marks})"
            " AND json_extract(payload, '$.valid_to') IS NULL ORDER BY num",
            [subject, *relations],
        )
        return [f for f in (self._stored(r).memory for r in rows) if isinstance(f, Fact)]

    def facts(
        self,
        subject: str | None = None,
        history: bool = False,
        relations: Sequence[str] | None = None,
    ) -> list[StoredMemory]:
        """Live facts (of ``subject``, with one of ``relations``, if given), oldest first: the
        current ones, and with ``history`` the superseded ones too."""
        where = "type = 'semantic' AND deleted = 0"
        params: list[Any] = []
        if subject is not None:
            where += " AND json_extract(payload, '$.subject') = ?"
            params.append(subject)
        if relations is not None:
            marks = ",".join("?" * len(relations))
            where += f" AND json_extract(payload, '$.relation') IN ({marks})"
            params += list(relations)
        if not history:
            where += " AND json_extract(payload, '$.valid_to') IS NULL"
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE {where} ORDER BY num", params
        )
        return [self._stored(r) for r in rows]

    def fact_weights(self) -> list[tuple[float, np.ndarray]]:
        """(confidence, vector) of every current fact, without decoding the records."""
        rows = self._query(
            "SELECT json_extract(m.payload, '$.confidence'), COALESCE(m.embedding, t.embedding)"
            " FROM memories m LEFT JOIN turns t ON t.turn_id = m.turn_id"
            " WHERE m.type = 'semantic' AND m.deleted = 0"
            " AND json_extract(m.payload, '$.valid_to') IS NULL"
            " AND COALESCE(m.embedding, t.embedding) IS NOT NULL ORDER BY m.num"
        )
        return [(float(r[0] or 0.0), decode_embedding(r[1])) for r in rows]

    def top_facts(self, limit: int) -> list[Fact]:
        """The ``limit`` most confident current facts, most confident first."""
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE type = 'semantic' AND deleted = 0"
            " AND json_extract(payload, '$.valid_to') IS NULL"
            " ORDER BY json_extract(payload, '$.confidence') DESC, num LIMIT ?",
            (limit,),
        )
        return [f for f in (self._stored(r).memory for r in rows) if isinstance(f, Fact)]

    def tasks(self, statuses: Sequence[TaskStatus]) -> list[StoredMemory]:
        """Live tasks whose current (last) state is one of ``statuses``, oldest first."""
        marks = ",".join("?" * len(statuses))
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE type = 'working' AND deleted = 0"
            f" AND json_extract(payload, '$.states[#-1].status') IN ({marks}) ORDER BY num",
            [s.value for s in statuses],
        )
        return [self._stored(r) for r in rows]

    def open_tasks(self) -> list[Task]:
        stored = self.tasks([TaskStatus.PENDING])
        return [s.memory for s in stored if isinstance(s.memory, Task)]

    def rules_titled(self, title: str) -> list[Rule]:
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE type = 'procedural' AND deleted = 0"
            " AND json_extract(payload, '$.title') = ? ORDER BY num",
            (title,),
        )
        return [r for r in (self._stored(row).memory for row in rows) if isinstance(r, Rule)]

    def episodes_after(self, num: int, limit: int) -> list[StoredMemory]:
        """Live episodes stored after memory ``num``, in order (a background pass's next batch)."""
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE type = 'episodic' AND deleted = 0"
            " AND num > ? ORDER BY num LIMIT ?",
            (num, limit),
        )
        return [self._stored(r) for r in rows]

    def liked_episodes(self, after_seq: int, limit: int) -> list[tuple[int, StoredMemory]]:
        """Live episodes that got positive feedback after log ``after_seq``, with the seq of
        that feedback, in log order (an episode voted twice comes twice)."""
        rows = self._query(
            "SELECT l.seq, m.num, m.type, m.payload, m.session_id, m.ts FROM log l"
            " JOIN memories m ON m.id = l.ref AND m.type = 'episodic' AND m.deleted = 0"
            " WHERE l.seq > ? AND l.kind = ? AND json_extract(l.payload, '$.reason') = ?"
            " ORDER BY l.seq LIMIT ?",
            (after_seq, LogKind.MEMORY_CHANGE.value, FEEDBACK_POSITIVE, limit),
        )
        return [(int(r[0]), self._stored(r[1:])) for r in rows]

    def known_entities(self) -> list[tuple[Entity, list[str]]]:
        """The entity registry: each canonical entity and its other names."""
        rows = self._query("SELECT id, name, type, aliases FROM entities ORDER BY rowid")
        return [(Entity(r[0], r[1], EntityType(r[2])), json.loads(r[3])) for r in rows]

    def cursor(self, name: str) -> int:
        rows = self._query("SELECT value FROM cursors WHERE name = ?", (name,))
        return int(rows[0][0]) if rows else 0

    def memories_of_turn(self, turn_id: str) -> list[StoredMemory]:
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE turn_id = ? AND deleted = 0 ORDER BY num",
            (turn_id,),
        )
        return [self._stored(r) for r in rows]

    def list_memories(
        self, types: Sequence[MemoryType], limit: int, after_num: int = 0
    ) -> list[StoredMemory]:
        """Live memories of the given types in insertion order, after ``after_num``."""
        marks = ",".join("?" * len(types))
        rows = self._query(
            f"SELECT {MEMORY_COLUMNS} FROM memories"
            f" WHERE deleted = 0 AND num > ? AND type IN ({marks}) ORDER BY num LIMIT ?",
            [after_num, *[t.value for t in types], limit],
        )
        return [self._stored(r) for r in rows]

    def search_text(
        self,
        query: str,
        types: Sequence[MemoryType],
        limit: int,
        within_tier: int | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 over live memories of ``types`` (in tiers 1 to ``within_tier``, if given):
        (memory num, score), best first.

        Scores are positive (higher is better). An empty or all-stopword query returns [].
        """
        expression = match_expression(query)
        if expression is None or not types:
            return []
        marks = ",".join("?" * len(types))
        params: list[Any] = [expression, *[t.value for t in types]]
        join, tiers = "", ""
        if within_tier is not None:
            # CROSS JOIN keeps the full-text match as the outer loop: driven from the headers'
            # tier index instead, SQLite re-runs the match for every row (50 ms, not 1).
            join, tiers = " CROSS JOIN headers h ON h.num = f.rowid", " AND h.tier <= ?"
            params.append(within_tier)
        rows = self._query(
            "SELECT f.rowid, -bm25(memory_fts) AS score FROM memory_fts f"
            f" CROSS JOIN memories m ON m.num = f.rowid{join}"
            f" WHERE memory_fts MATCH ? AND m.type IN ({marks}) AND m.deleted = 0{tiers}"
            " ORDER BY score DESC LIMIT ?",
            [*params, limit],
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    def term_frequencies(
        self, terms: Sequence[str], types: Sequence[MemoryType]
    ) -> dict[str, tuple[int, int, int]]:
        """For each term: how many live memories of ``types`` hold it (the index's posting list,
        stemmed like the index), and how many of those are in tier 1 and in tiers 1-2."""
        if not types:
            return {}
        marks = ",".join("?" * len(types))
        kinds = [t.value for t in types]
        base = (
            "SELECT COUNT(*), SUM(h.tier <= 1), SUM(h.tier <= 2) FROM memory_fts f"
            " CROSS JOIN memories m ON m.num = f.rowid"
            " CROSS JOIN headers h ON h.num = f.rowid"
            f" WHERE memory_fts MATCH ? AND m.type IN ({marks}) AND m.deleted = 0"
        )
        out: dict[str, tuple[int, int, int]] = {}
        for term in terms:
            row = self._query(base, [f'"{term}"', *kinds])[0]
            out[term] = (int(row[0]), int(row[1] or 0), int(row[2] or 0))
        return out

    def live_count(self, types: Sequence[MemoryType]) -> int:
        """How many live memories of ``types`` there are."""
        if not types:
            return 0
        marks = ",".join("?" * len(types))
        rows = self._query(
            f"SELECT COUNT(*) FROM memories WHERE deleted = 0 AND type IN ({marks})",
            [t.value for t in types],
        )
        return int(rows[0][0])

    def nums(self, memory_ids: Sequence[str]) -> dict[str, int]:
        """memory id → num for stored memories, deleted ones included."""
        if not memory_ids:
            return {}
        marks = ",".join("?" * len(memory_ids))
        rows = self._query(f"SELECT id, num FROM memories WHERE id IN ({marks})", list(memory_ids))
        return {r[0]: int(r[1]) for r in rows}

    def memory_embeddings(self, nums: Sequence[int]) -> dict[int, np.ndarray]:
        """num → the memory's vector: its own if patched, else its source turn's."""
        if not nums:
            return {}
        marks = ",".join("?" * len(nums))
        rows = self._query(
            "SELECT m.num, COALESCE(m.embedding, t.embedding) FROM memories m"
            f" LEFT JOIN turns t ON t.turn_id = m.turn_id WHERE m.num IN ({marks})"
            " AND COALESCE(m.embedding, t.embedding) IS NOT NULL",
            [int(n) for n in nums],
        )
        return {int(r[0]): decode_embedding(r[1]) for r in rows}

    def memory_meta(self, nums: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """num → (turn_id, session_id, ts) for filtering without decoding payloads."""
        if not nums:
            return {}
        marks = ",".join("?" * len(nums))
        rows = self._query(
            f"SELECT num, turn_id, session_id, ts FROM memories WHERE num IN ({marks})",
            [int(n) for n in nums],
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    # -- reads: log --------------------------------------------------------------------------

    def max_seq(self) -> int:
        return int(self._query("SELECT COALESCE(MAX(seq), 0) FROM log")[0][0])

    def entries(self, after_seq: int = 0, batch: int = 500) -> Iterator[LogEntry]:
        """The log after ``after_seq`` in order, read in batches."""
        while True:
            rows = self._query(
                "SELECT seq, kind, ref, payload FROM log WHERE seq > ? ORDER BY seq LIMIT ?",
                (after_seq, batch),
            )
            for seq, kind, ref, payload in rows:
                yield LogEntry(seq, LogKind(kind), ref, json.loads(payload))
            if len(rows) < batch:
                return
            after_seq = rows[-1][0]

    def counts(self) -> dict[str, int]:
        turns = self._query("SELECT COUNT(*) FROM turns")[0][0]
        rows = self._query("SELECT type, COUNT(*) FROM memories WHERE deleted = 0 GROUP BY type")
        out = {"turns": int(turns), "log": self.max_seq()}
        out.update({f"memories_{r[0]}": int(r[1]) for r in rows})
        return out
