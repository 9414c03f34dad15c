"""The per-user journal: an append-only log that is the source of truth, in the journal file.

Every acknowledged write is a committed row here (see :mod:`memoryd.store.sqlite`). The graph
and the vector index are projections: they record the last ``seq`` they applied and replay the
log past it. The full-text index lives in this file and is written in the same transaction as
the rows it indexes.

Its tables are in :mod:`memoryd.store.journal_schema`, its reads of facts in
:mod:`memoryd.store.fact_reads`.

Each write returns a :class:`Written` (its seq, the memories that became live, the nums that
stopped being live): the caller writes the other stores' rows for them (header rows, router
queue) inside the same :meth:`Database.transaction`.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

import numpy as np

from memoryd.errors import JournalError
from memoryd.models import (
    Entity,
    EntityType,
    Episode,
    Fact,
    Memory,
    MemoryType,
    Receipt,
    Rule,
    Task,
    TaskStatus,
    Turn,
    index_text,
    memory_type,
)
from memoryd.store.codec import (
    change_payload,
    decode_embedding,
    encode_embedding,
    patch_payload,
    receipt_of_payload,
    receipt_payload,
    relabel_payload,
    to_payload,
    turn_from_payload,
    turn_payload,
)
from memoryd.store.fact_reads import MEMORY_COLUMNS, FactReads, stored_row
from memoryd.store.journal_schema import BACKFILLS, MIGRATIONS, SCHEMA
from memoryd.store.mentions import drop_mentions, index_mentions
from memoryd.store.records import (
    FEEDBACK_POSITIVE,
    LogEntry,
    LogKind,
    MemoryChange,
    Relabel,
    StoredMemory,
    TaskHead,
    TurnEntry,
    Written,
)
from memoryd.store.sqlite import Database, placeholders, utc_now

__all__ = ["Journal"]


T = TypeVar("T")


class Journal(FactReads):
    """Append-only journal of one user, in its journal file. See the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.apply(SCHEMA, MIGRATIONS, BACKFILLS)
        self._kept: dict[Hashable, tuple[int, Any]] = {}  # see _kept_until_logged

    # -- writes (the user's writer thread) ---------------------------------------------------

    def append_turns(self, entries: Sequence[TurnEntry]) -> list[Written]:
        """Commit all ``entries`` in one transaction; what each wrote, in order."""
        with self.db.transaction() as conn:
            return [self._append_turn(conn, entry) for entry in entries]

    def _append_turn(self, conn: sqlite3.Connection, entry: TurnEntry) -> Written:
        turn = entry.turn
        seq = self._log(conn, LogKind.TURN, turn.turn_id, turn_payload(entry))
        conn.execute(
            "INSERT INTO turns(turn_id, seq, session_id, ts, embedding, reply)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                turn.turn_id,
                seq,
                turn.session_id,
                turn.ts.isoformat(),
                encode_embedding(entry.embedding),
                json.dumps(receipt_payload(entry.receipt)),
            ),
        )
        added = [self._insert_memory(conn, m, turn.session_id, turn.ts) for m in entry.memories]
        for memory in entry.updates:
            self._replace_memory(conn, memory)
        self._register_entities(conn, entry.memories, entry.aliases)
        return Written(seq, added)

    def _insert_memory(
        self,
        conn: sqlite3.Connection,
        memory: Memory,
        session_id: str,
        ts: datetime,
        embedding: np.ndarray | None = None,
    ) -> tuple[int, float]:
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
        index_mentions(conn, num, memory, replace=False)
        return num, memory.header.importance

    def _replace_memory(self, conn: sqlite3.Connection, memory: Memory) -> None:
        """Store a live memory's new record (its text, and so its FTS row, may have changed)."""
        num = self._live_num(conn, memory.id)
        conn.execute(
            "UPDATE memories SET payload = ? WHERE num = ?", (json.dumps(to_payload(memory)), num)
        )
        conn.execute("UPDATE memory_fts SET text = ? WHERE rowid = ?", (index_text(memory), num))
        index_mentions(conn, num, memory)

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

    def change_memories(self, change: MemoryChange) -> Written:
        """Journal a :class:`MemoryChange` in one transaction."""
        with self.db.transaction() as conn:
            seq = self._log(conn, LogKind.MEMORY_CHANGE, change.ref, change_payload(change))
            added = [
                self._insert_memory(conn, new.memory, new.session_id, new.ts, new.embedding)
                for new in change.created
            ]
            for memory in change.updates:
                self._replace_memory(conn, memory)
            self._register_entities(conn, [n.memory for n in change.created], {})
            if change.cursor is not None:
                conn.execute(
                    "INSERT INTO cursors(name, value) VALUES (?, ?)"
                    " ON CONFLICT(name) DO UPDATE SET value = excluded.value",
                    change.cursor,
                )
        return Written(seq, added)

    def _log(self, conn: sqlite3.Connection, kind: LogKind, ref: str, payload: Any) -> int:
        cur = conn.execute(
            "INSERT INTO log(kind, ref, payload, created_at) VALUES (?, ?, ?, ?)",
            (kind.value, ref, json.dumps(payload), utc_now()),
        )
        return int(cur.lastrowid or 0)

    def patch_memory(
        self,
        memory: Memory,
        embedding: np.ndarray | None = None,
        importance: float | None = None,
    ) -> Written:
        """Replace a stored memory's record (and its vector, if given); the importance a client
        set is journaled with it (its header is the caller's)."""
        payload = patch_payload(memory, embedding, importance)
        with self.db.transaction() as conn:
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
            index_mentions(conn, num, memory)
        return Written(seq)

    def delete_memory(self, memory_id: str) -> Written:
        """Mark a memory deleted (the log keeps the history)."""
        with self.db.transaction() as conn:
            num = self._live_num(conn, memory_id)
            seq = self._log(conn, LogKind.MEMORY_DELETE, memory_id, {"id": memory_id})
            self._mark_deleted(conn, num)
        return Written(seq, removed=[num])

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
        drop_mentions(conn, num)

    def relabel_turn(self, relabel: Relabel) -> Written:
        """Re-route a deferred turn under its LLM labels (the ``turn_relabel`` entry).

        One transaction: the log entry (the new turn, its new memories, the ids of the memories
        it no longer has and the other turns' memories it changed), the memories table and FTS.
        Memory ids are deterministic, so a memory the turn had before and has again keeps its
        ``num`` (and its vector label).
        """
        turn = relabel.turn
        with self.db.transaction() as conn:
            rows = conn.execute(
                "SELECT id, num FROM memories WHERE turn_id = ? AND deleted = 0", (turn.turn_id,)
            ).fetchall()
            new_ids = {m.id for m in relabel.memories}
            removed = dict(sorted((r[0], r[1]) for r in rows if r[0] not in new_ids))
            payload = relabel_payload(relabel, list(removed))
            seq = self._log(conn, LogKind.TURN_RELABEL, turn.turn_id, payload)
            conn.execute("UPDATE turns SET relabel_seq = ? WHERE turn_id = ?", (seq, turn.turn_id))
            for num in removed.values():
                self._mark_deleted(conn, num)
            added = [self._upsert_memory(conn, memory, turn) for memory in relabel.memories]
            for memory in relabel.updates:
                self._replace_memory(conn, memory)
            self._register_entities(conn, relabel.memories, {})
        return Written(seq, [a for a in added if a is not None], list(removed.values()))

    def _upsert_memory(
        self, conn: sqlite3.Connection, memory: Memory, turn: Turn
    ) -> tuple[int, float] | None:
        """Store a re-routed memory; returns (num, importance) when it became live."""
        row = conn.execute(
            "SELECT num, deleted FROM memories WHERE id = ?", (memory.id,)
        ).fetchone()
        if row is None:
            return self._insert_memory(conn, memory, turn.session_id, turn.ts)
        num, deleted = row
        conn.execute(
            "UPDATE memories SET type = ?, payload = ?, deleted = 0 WHERE num = ?",
            (memory_type(memory).value, json.dumps(to_payload(memory)), num),
        )
        if not deleted:
            conn.execute("DELETE FROM memory_fts WHERE rowid = ?", (num,))
        conn.execute("INSERT INTO memory_fts(rowid, text) VALUES (?, ?)", (num, index_text(memory)))
        index_mentions(conn, num, memory, replace=not deleted)
        return (int(num), memory.header.importance) if deleted else None

    # -- reads: turns ------------------------------------------------------------------------

    def receipts(self, turn_ids: Sequence[str]) -> dict[str, Receipt]:
        """The first receipt of each already-journaled turn id (absent ids are left out)."""
        if not turn_ids:
            return {}
        marks = placeholders(len(turn_ids))
        rows = self.db.read(
            f"SELECT turn_id, reply FROM turns WHERE turn_id IN ({marks})", turn_ids
        )
        return {r[0]: receipt_of_payload(r[0], json.loads(r[1])) for r in rows}

    def turn(self, turn_id: str) -> tuple[Turn, np.ndarray, Receipt] | None:
        """The turn, its embedding and its first receipt, or None."""
        rows = self.db.read(
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
            receipt_of_payload(turn_id, json.loads(reply)),
        )

    def turns(
        self, session_id: str | None, limit: int, after_seq: int = 0
    ) -> list[tuple[int, Turn]]:
        """Turns in journal order after ``after_seq`` (optionally one session), with their seq."""
        where, params = "t.seq > ?", list[Any]([after_seq])
        if session_id is not None:
            where += " AND t.session_id = ?"
            params.append(session_id)
        rows = self.db.read(
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
            marks = placeholders(len(chunk))
            rows = self.db.read(
                "SELECT t.turn_id, l.payload FROM turns t JOIN log l ON l.seq = t.seq"
                f" WHERE t.turn_id IN ({marks})",
                chunk,
            )
            out.update({r[0]: json.loads(r[1])["turn"]["text"] for r in rows})
        return out

    def turn_embeddings(self, turn_ids: Sequence[str]) -> dict[str, np.ndarray]:
        if not turn_ids:
            return {}
        marks = placeholders(len(turn_ids))
        rows = self.db.read(
            f"SELECT turn_id, embedding FROM turns WHERE turn_id IN ({marks})", turn_ids
        )
        return {r[0]: decode_embedding(r[1]) for r in rows}

    # -- reads: memories ---------------------------------------------------------------------

    def _stored(self, row: Sequence[Any]) -> StoredMemory:
        return stored_row(row)

    def was_deleted(self, memory_id: str) -> bool:
        """Whether ``memory_id`` named a memory that was deleted (its id stays taken)."""
        return bool(self.db.read("SELECT 1 FROM memories WHERE id = ? AND deleted", (memory_id,)))

    def memory(self, memory_id: str) -> StoredMemory | None:
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ? AND deleted = 0",
            (memory_id,),
        )
        return self._stored(rows[0]) if rows else None

    def memories_by_id(self, memory_ids: Sequence[str]) -> dict[str, StoredMemory]:
        if not memory_ids:
            return {}
        marks = placeholders(len(memory_ids))
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id IN ({marks}) AND deleted = 0",
            list(memory_ids),
        )
        return {s.memory.id: s for s in map(self._stored, rows)}

    def memories_by_num(self, nums: Sequence[int]) -> dict[int, StoredMemory]:
        if not nums:
            return {}
        marks = placeholders(len(nums))
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE num IN ({marks}) AND deleted = 0",
            [int(n) for n in nums],
        )
        return {s.num: s for s in map(self._stored, rows)}

    def tasks(self, statuses: Sequence[TaskStatus]) -> list[StoredMemory]:
        """Live tasks whose current (last) state is one of ``statuses``, oldest first."""
        marks = placeholders(len(statuses))
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE type = 'working' AND deleted = 0"
            f" AND json_extract(payload, '$.states[#-1].status') IN ({marks}) ORDER BY num",
            [s.value for s in statuses],
        )
        return [self._stored(r) for r in rows]

    def task_heads(self) -> tuple[TaskHead, ...]:
        """Where every live task stands, oldest first, without decoding the tasks (a query
        ranks hundreds of them and shows a few; 312 at 10k turns took 1.1 ms to read)."""

        def read() -> tuple[TaskHead, ...]:
            rows = self.db.read(
                "SELECT id, num, json_extract(payload, '$.states[#-1].status'),"
                " json_extract(payload, '$.states[#-1].ts') FROM memories"
                " WHERE type = 'working' AND deleted = 0 ORDER BY num"
            )
            return tuple(
                TaskHead(
                    memory_id,
                    int(num),
                    TaskStatus(status) if status else TaskStatus.PENDING,
                    datetime.fromisoformat(ts) if ts else None,
                )
                for memory_id, num, status, ts in rows
            )

        return self._kept_until_logged("task_heads", read)

    def open_tasks(self) -> list[Task]:
        stored = self.tasks([TaskStatus.PENDING])
        return [s.memory for s in stored if isinstance(s.memory, Task)]

    def rules_titled(self, title: str) -> list[Rule]:
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE type = 'procedural' AND deleted = 0"
            " AND json_extract(payload, '$.title') = ? ORDER BY num",
            (title,),
        )
        return [r for r in (self._stored(row).memory for row in rows) if isinstance(r, Rule)]

    def episodes_after(self, num: int, limit: int) -> list[StoredMemory]:
        """Live episodes stored after memory ``num``, in order (a background pass's next batch)."""
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE type = 'episodic' AND deleted = 0"
            " AND num > ? ORDER BY num LIMIT ?",
            (num, limit),
        )
        return [self._stored(r) for r in rows]

    def liked_episodes(self, after_seq: int, limit: int) -> list[tuple[int, StoredMemory]]:
        """Live episodes that got positive feedback after log ``after_seq``, with the seq of
        that feedback, in log order (an episode voted twice comes twice)."""
        rows = self.db.read(
            "SELECT l.seq, m.num, m.type, m.payload, m.session_id, m.ts FROM log l"
            " JOIN memories m ON m.id = l.ref AND m.type = 'episodic' AND m.deleted = 0"
            " WHERE l.seq > ? AND l.kind = ? AND json_extract(l.payload, '$.reason') = ?"
            " ORDER BY l.seq LIMIT ?",
            (after_seq, LogKind.MEMORY_CHANGE.value, FEEDBACK_POSITIVE, limit),
        )
        return [(int(r[0]), self._stored(r[1:])) for r in rows]

    def known_entities(self) -> list[tuple[Entity, list[str]]]:
        """The entity registry: each canonical entity and its other names."""
        rows = self.db.read("SELECT id, name, type, aliases FROM entities ORDER BY rowid")
        return [(Entity(r[0], r[1], EntityType(r[2])), json.loads(r[3])) for r in rows]

    def cursor(self, name: str) -> int:
        rows = self.db.read("SELECT value FROM cursors WHERE name = ?", (name,))
        return int(rows[0][0]) if rows else 0

    def memories_of_turn(self, turn_id: str) -> list[StoredMemory]:
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories WHERE turn_id = ? AND deleted = 0 ORDER BY num",
            (turn_id,),
        )
        return [self._stored(r) for r in rows]

    def neighbour_episodes(self, turn_ids: Sequence[str]) -> dict[str, list[tuple[int, str]]]:
        """turn id → the (num, id) of the live episodes of the turns just before and just after
        it in its session (by journal order), earlier first. Two indexed reads: the neighbours'
        turn ids, then their episodes."""
        if not turn_ids:
            return {}
        marks = placeholders(len(turn_ids))
        rows = self.db.read(
            "SELECT t.turn_id,"
            " (SELECT p.turn_id FROM turns p WHERE p.session_id = t.session_id"
            "  AND p.seq < t.seq ORDER BY p.seq DESC LIMIT 1),"
            " (SELECT n.turn_id FROM turns n WHERE n.session_id = t.session_id"
            "  AND n.seq > t.seq ORDER BY n.seq LIMIT 1)"
            f" FROM turns t WHERE t.turn_id IN ({marks})",
            list(turn_ids),
        )
        beside: dict[str, list[str]] = defaultdict(list)
        for turn_id, before, after in rows:
            for other in (before, after):
                if other is not None:
                    beside[other].append(turn_id)
        if not beside:
            return {}
        marks = placeholders(len(beside))
        episodes = self.db.read(
            # by turn: the planner would otherwise walk every episode by type
            "SELECT turn_id, num, id FROM memories INDEXED BY memories_by_turn"
            f" WHERE turn_id IN ({marks}) AND deleted = 0 AND type = ? ORDER BY num",
            [*beside, MemoryType.EPISODIC.value],
        )
        out: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for other, num, memory_id in episodes:
            for turn_id in beside[other]:
                out[turn_id].append((int(num), memory_id))
        return dict(out)

    def list_memories(
        self, types: Sequence[MemoryType], limit: int, after_num: int = 0
    ) -> list[StoredMemory]:
        """Live memories of the given types in insertion order, after ``after_num``."""
        marks = placeholders(len(types))
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories"
            f" WHERE deleted = 0 AND num > ? AND type IN ({marks}) ORDER BY num LIMIT ?",
            [after_num, *[t.value for t in types], limit],
        )
        return [self._stored(r) for r in rows]

    def live_count(self, types: Sequence[MemoryType]) -> int:
        """How many live memories of ``types`` there are (counting 13k took 0.4-0.7 ms)."""
        if not types:
            return 0
        marks = placeholders(len(types))
        sql = f"SELECT COUNT(*) FROM memories WHERE deleted = 0 AND type IN ({marks})"
        values = [t.value for t in types]

        def count() -> int:
            return int(self.db.read(sql, values)[0][0])

        return self._kept_until_logged(("live_count", *values), count)

    def _kept_until_logged(self, key: Hashable, read: Callable[[], T]) -> T:
        """``read()``, kept under ``key`` until the log grows: every change to a memory is
        logged, and every query would otherwise read the same thing again. The result is
        read after the log's end, so it is never older than the seq it is kept under; callers
        must not change it."""
        seq = self.max_seq()
        kept = self._kept.get(key)
        if kept is not None and kept[0] == seq:
            return cast(T, kept[1])
        value = read()
        self._kept[key] = (seq, value)
        return value

    def nums(self, memory_ids: Sequence[str]) -> dict[str, int]:
        """memory id → num for stored memories, deleted ones included."""
        if not memory_ids:
            return {}
        marks = placeholders(len(memory_ids))
        rows = self.db.read(f"SELECT id, num FROM memories WHERE id IN ({marks})", list(memory_ids))
        return {r[0]: int(r[1]) for r in rows}

    def memory_embeddings(self, nums: Sequence[int]) -> dict[int, np.ndarray]:
        """num → the memory's vector: its own if patched, else its source turn's."""
        if not nums:
            return {}
        marks = placeholders(len(nums))
        rows = self.db.read(
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
        marks = placeholders(len(nums))
        rows = self.db.read(
            f"SELECT num, turn_id, session_id, ts FROM memories WHERE num IN ({marks})",
            [int(n) for n in nums],
        )
        return {r[0]: (r[1], r[2], r[3]) for r in rows}

    # -- reads: log --------------------------------------------------------------------------

    def max_seq(self) -> int:
        return int(self.db.read("SELECT COALESCE(MAX(seq), 0) FROM log")[0][0])

    def digest(self) -> str:
        """sha256 of the log (every entry's seq, kind, ref and payload, in order): equal for
        two journals with the same history, whatever their files' page layout."""
        h = hashlib.sha256()
        for e in self.entries():
            h.update(json.dumps([e.seq, e.kind.value, e.ref, e.payload], sort_keys=True).encode())
        return h.hexdigest()

    def entries(self, after_seq: int = 0, batch: int = 500) -> Iterator[LogEntry]:
        """The log after ``after_seq`` in order, read in batches."""
        while True:
            rows = self.db.read(
                "SELECT seq, kind, ref, payload FROM log WHERE seq > ? ORDER BY seq LIMIT ?",
                (after_seq, batch),
            )
            for seq, kind, ref, payload in rows:
                yield LogEntry(seq, LogKind(kind), ref, json.loads(payload))
            if len(rows) < batch:
                return
            after_seq = rows[-1][0]

    def embedded_counts(self) -> dict[MemoryType, int]:
        """Live memories with a vector (own or their turn's) by type: what the indexes hold."""
        rows = self.db.read(
            "SELECT m.type, COUNT(*) FROM memories m LEFT JOIN turns t ON t.turn_id = m.turn_id"
            " WHERE m.deleted = 0 AND COALESCE(m.embedding, t.embedding) IS NOT NULL"
            " GROUP BY m.type"
        )
        return {MemoryType(r[0]): int(r[1]) for r in rows}

    def counts(self) -> dict[str, int]:
        turns = self.db.read("SELECT COUNT(*) FROM turns")[0][0]
        rows = self.db.read("SELECT type, COUNT(*) FROM memories WHERE deleted = 0 GROUP BY type")
        out = {"turns": int(turns), "log": self.max_seq()}
        out.update({f"memories_{r[0]}": int(r[1]) for r in rows})
        return out
