"""HMO headers, tier placement, tier moves and the persona, in the user's journal file.

Every live memory has one row in ``headers``: its importance ``I_m`` and who set it
(heuristic | llm | api), its persona similarity ``Sim(m, P)`` (NULL until computed against the
current persona), its recall count ``C_m`` and last access ``t_last`` (NULL: never recalled, so
Δt counts from the memory's time), its tier and its score ``S_m`` when last scored. The caller
adds a row (:meth:`HeaderStore.add`) in the transaction that journals the memory and drops it
(:meth:`HeaderStore.drop`) in the one that deletes it; every write here runs on the user's
writer.

Why here and not on the graph nodes: a header changes on every query that recalls its memory.
SQLite updates a row in place for a few microseconds inside the transaction; the graph engine's
in-place updates of one node fill its buffer pool after about 1,200 updates
(``docs/decisions.md``, "Headers in the journal file not on graph nodes"). The headers are not a
projection: recall counts and LLM importance cannot be recomputed from the log, so they live
beside it, in the same durable file, and an export carries them. The graph's header columns keep
the header a record was journaled with (its creation or last patch); records the API returns
carry the live one.

Tables
- ``headers(num, importance, importance_by, persona_sim, recall_count, last_access, tier,
  score, scored_at)``, ``num`` = ``memories.num``.
- ``tier_moves``: every promotion and demotion (from, to, score, reason, time), the newest
  ``MOVES_KEPT`` kept.
- ``tier_runs``: reshuffles, drift-gate checks and promotions with what they did (the newest
  ``RUNS_KEPT`` kept).
- ``persona``: the current persona ``P`` and the anchor ``P_anchor`` of the drift gate, each a
  vector with the readable profile it was built from.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

import numpy as np

from memoryd.models import ImportanceSource, MemoryType, Tier
from memoryd.store.sqlite import Database, placeholders

__all__ = [
    "HeaderRow",
    "HeaderStore",
    "Move",
    "PersonaSlot",
    "Placement",
    "RunKind",
    "StoredPersona",
]

MOVES_KEPT = 10_000
RUNS_KEPT = 1_000

HEADER_SCHEMA = """
CREATE TABLE IF NOT EXISTS headers (
    num INTEGER PRIMARY KEY,
    importance REAL NOT NULL,
    importance_by TEXT NOT NULL DEFAULT 'heuristic',
    persona_sim REAL,
    recall_count INTEGER NOT NULL DEFAULT 0,
    last_access TEXT,
    tier INTEGER NOT NULL DEFAULT 1,
    pinned INTEGER NOT NULL DEFAULT 1,
    score REAL,
    scored_at TEXT
);
CREATE INDEX IF NOT EXISTS headers_by_tier ON headers(tier, score);
CREATE TABLE IF NOT EXISTS tier_moves (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    num INTEGER NOT NULL,
    from_tier INTEGER NOT NULL,
    to_tier INTEGER NOT NULL,
    score REAL,
    reason TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tier_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS persona (
    name TEXT PRIMARY KEY,
    vector BLOB,
    profile TEXT NOT NULL,
    facts INTEGER NOT NULL,
    updated_at TEXT NOT NULL
);
"""

# Memories stored before headers existed get one when the journal opens (tier 1 until the next
# reshuffle places them).
BACKFILL = (
    "INSERT OR IGNORE INTO headers(num, importance)"
    " SELECT num, COALESCE(json_extract(payload, '$.header.importance'), 5.0)"
    " FROM memories WHERE deleted = 0"
)


class RunKind(StrEnum):
    RESHUFFLE = "reshuffle"
    DRIFT = "drift"
    PROMOTION = "promotion"


class PersonaSlot(StrEnum):
    CURRENT = "current"
    ANCHOR = "anchor"


@dataclass(frozen=True)
class HeaderRow:
    """One live memory's header, with the type, session and time it is filed under."""

    num: int
    importance: float
    importance_by: ImportanceSource
    persona_sim: float | None
    recall_count: int
    last_access: datetime | None
    tier: Tier
    pinned: bool
    score: float | None
    type: MemoryType
    session_id: str
    ts: datetime


@dataclass(frozen=True)
class Placement:
    """A header's new tier (``pinned``: held in tier 1 by a recent session rather than by its
    score), its score and persona similarity (None: leave it as it is)."""

    num: int
    tier: Tier
    score: float
    pinned: bool = False
    persona_sim: float | None = None


@dataclass(frozen=True)
class Move:
    num: int
    from_tier: Tier
    to_tier: Tier
    score: float | None
    reason: str
    at: datetime


@dataclass(frozen=True)
class StoredPersona:
    vector: np.ndarray | None
    profile: str
    facts: int
    updated_at: datetime


_ROW_COLUMNS = (
    "h.num, h.importance, h.importance_by, h.persona_sim, h.recall_count, h.last_access,"
    " h.tier, h.pinned, h.score, m.type, m.session_id, m.ts"
)
_ROW_FROM = " FROM headers h JOIN memories m ON m.num = h.num AND m.deleted = 0"


def _row(r: Sequence[Any]) -> HeaderRow:
    return HeaderRow(
        num=int(r[0]),
        importance=float(r[1]),
        importance_by=ImportanceSource(r[2]),
        persona_sim=None if r[3] is None else float(r[3]),
        recall_count=int(r[4]),
        last_access=None if r[5] is None else datetime.fromisoformat(r[5]),
        tier=Tier(int(r[6])),
        pinned=bool(r[7]),
        score=None if r[8] is None else float(r[8]),
        type=MemoryType(r[9]),
        session_id=r[10],
        ts=datetime.fromisoformat(r[11]),
    )


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat()


class HeaderStore:
    """Reads and writes of the header tables; writes only on the user's writer thread.

    Opening applies the schema and gives every live memory without a header row one (journals
    from before headers existed)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.apply(HEADER_SCHEMA, backfills=[BACKFILL])

    # -- reads -------------------------------------------------------------------------------

    def rows(
        self,
        tiers: Sequence[Tier] | None = None,
        nums: Sequence[int] | None = None,
        sessions: Sequence[str] | None = None,
    ) -> list[HeaderRow]:
        """Headers of live memories, in ``tiers``, with ``nums`` and in ``sessions`` when given."""
        where, params = "", list[Any]()
        if tiers is not None:
            where += f" AND h.tier IN ({placeholders(len(tiers))})"
            params += [int(t) for t in tiers]
        for column, values in (("h.num", nums), ("m.session_id", sessions)):
            if values is not None:
                if not values:
                    return []
                where += f" AND {column} IN ({placeholders(len(values))})"
                params += list(values)
        rows = self.db.read(f"SELECT {_ROW_COLUMNS}{_ROW_FROM} WHERE 1 = 1{where}", params)
        return [_row(r) for r in rows]

    def pool(self, deepest: Tier, types: Sequence[MemoryType]) -> list[int]:
        """The nums of live memories of ``types`` in tier 1 through ``deepest``."""
        return [int(r[0]) for r in self._pool("h.num", deepest, types)]

    def pool_size(self, deepest: Tier, types: Sequence[MemoryType]) -> int:
        """How many nums :meth:`pool` would return."""
        return int(self._pool("COUNT(*)", deepest, types)[0][0]) if types else 0

    def _pool(self, what: str, deepest: Tier, types: Sequence[MemoryType]) -> list[Any]:
        # Driven from the tier index: a pool is usually a few hundred records of a large store
        # (left to itself SQLite walks every memory of the types and looks its header up).
        if not types:
            return []
        marks = placeholders(len(types))
        return self.db.read(
            f"SELECT {what} FROM headers h INDEXED BY headers_by_tier CROSS JOIN memories m"
            f" ON m.num = h.num AND m.deleted = 0 WHERE h.tier <= ? AND m.type IN ({marks})",
            [int(deepest), *[t.value for t in types]],
        )

    def placement_stamp(self) -> tuple[int, int]:
        """The last log entry and the last tier move: unchanged, so are the headers' tiers and
        the memories' texts (every tier change is a move, every add, drop or edit is logged)."""
        row = self.db.read(
            "SELECT (SELECT COALESCE(MAX(seq), 0) FROM log),"
            " (SELECT COALESCE(MAX(id), 0) FROM tier_moves)"
        )[0]
        return int(row[0]), int(row[1])

    def active_count(self, limit: int) -> int:
        """How many headers are in tiers 1-2, counting up to ``limit`` (the tier index only)."""
        rows = self.db.read(
            "SELECT COUNT(*) FROM (SELECT 1 FROM headers WHERE tier <= ? LIMIT ?)",
            (int(Tier.BUFFER), limit),
        )
        return int(rows[0][0])

    def active_rows(self) -> list[tuple[int, int, str, str]]:
        """(num, tier, type, indexed text) of every live memory in tiers 1-2."""
        rows = self.db.read(
            "SELECT h.num, h.tier, m.type, COALESCE(f.text, '') FROM headers h"
            " INDEXED BY headers_by_tier CROSS JOIN memories m ON m.num = h.num AND m.deleted = 0"
            " LEFT JOIN memory_fts f ON f.rowid = h.num WHERE h.tier <= ?",
            (int(Tier.BUFFER),),
        )
        return [(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]

    def any_beyond(self, deepest: Tier) -> bool:
        """Whether any header is in a tier past ``deepest`` (none: tiers 1 to ``deepest`` hold
        every record, as they do after a bulk import until the next reshuffle)."""
        rows = self.db.read("SELECT EXISTS(SELECT 1 FROM headers WHERE tier > ?)", (int(deepest),))
        return bool(rows[0][0])

    def sizes(self) -> dict[Tier, int]:
        rows = self.db.read("SELECT h.tier, COUNT(*)" + _ROW_FROM + " GROUP BY h.tier", ())
        out = dict.fromkeys(Tier, 0)
        out.update({Tier(int(r[0])): int(r[1]) for r in rows})
        return out

    def recent_sessions(self, count: int) -> list[str]:
        """The ``count`` sessions with the latest memories, latest first."""
        rows = self.db.read(
            "SELECT session_id FROM memories WHERE deleted = 0 GROUP BY session_id"
            " ORDER BY MAX(ts) DESC LIMIT ?",
            (count,),
        )
        return [r[0] for r in rows]

    def ranked(self, tier: Tier) -> tuple[int, tuple[float, int] | None]:
        """How many records ``tier`` holds by score, and the (score, num) of the lowest of them.

        Records pinned to tier 1 because their session is recent are not ranked: a promotion
        cannot displace them."""
        where = _ROW_FROM + " WHERE h.tier = ? AND h.pinned = 0 AND h.score IS NOT NULL"
        count = self.db.read("SELECT COUNT(*)" + where, (int(tier),))[0][0]
        rows = self.db.read(
            "SELECT h.score, h.num" + where + " ORDER BY h.score, h.num LIMIT 1", (int(tier),)
        )
        return int(count), ((float(rows[0][0]), int(rows[0][1])) if rows else None)

    def activity(self) -> tuple[int, int, int]:
        """What a reshuffle depends on besides time: the last log entry, the recalls counted and
        the importances an LLM or client set. Unchanged: a reshuffle would change little."""
        row = self.db.read(
            "SELECT (SELECT COALESCE(MAX(seq), 0) FROM log),"
            " (SELECT COALESCE(SUM(recall_count), 0) FROM headers),"
            " (SELECT COUNT(*) FROM headers WHERE importance_by != ?)",
            (ImportanceSource.HEURISTIC.value,),
        )[0]
        return int(row[0]), int(row[1]), int(row[2])

    def moves(self, limit: int) -> list[tuple[Move, str]]:
        """The newest ``limit`` moves, newest first, each with its memory's id."""
        rows = self.db.read(
            "SELECT v.num, v.from_tier, v.to_tier, v.score, v.reason, v.at, m.id"
            " FROM tier_moves v LEFT JOIN memories m ON m.num = v.num"
            " ORDER BY v.id DESC LIMIT ?",
            (limit,),
        )
        return [
            (
                Move(
                    int(r[0]),
                    Tier(r[1]),
                    Tier(r[2]),
                    r[3],
                    r[4],
                    datetime.fromisoformat(r[5]),
                ),
                r[6] or "",
            )
            for r in rows
        ]

    def runs(self, kind: RunKind, limit: int) -> list[dict[str, Any]]:
        rows = self.db.read(
            "SELECT at, detail FROM tier_runs WHERE kind = ? ORDER BY id DESC LIMIT ?",
            (kind.value, limit),
        )
        return [{"at": r[0], **json.loads(r[1])} for r in rows]

    def unscored_importance(self, limit: int) -> list[int]:
        """Nums whose importance is still the heuristic's, active tiers and newest first."""
        rows = self.db.read(
            "SELECT h.num" + _ROW_FROM + " WHERE h.importance_by = ?"
            " ORDER BY h.tier, h.num DESC LIMIT ?",
            (ImportanceSource.HEURISTIC.value, limit),
        )
        return [int(r[0]) for r in rows]

    def persona(self, slot: PersonaSlot) -> StoredPersona | None:
        rows = self.db.read(
            "SELECT vector, profile, facts, updated_at FROM persona WHERE name = ?", (slot.value,)
        )
        if not rows:
            return None
        blob, profile, facts, updated_at = rows[0]
        vector = None if blob is None else np.frombuffer(blob, dtype=np.float32).copy()
        return StoredPersona(vector, profile, int(facts), datetime.fromisoformat(updated_at))

    def export(self) -> list[dict[str, Any]]:
        """What an export must carry that the log does not: importance set by an LLM or the
        API, recall counts and last accesses, by memory id."""
        rows = self.db.read(
            "SELECT m.id, h.importance, h.importance_by, h.recall_count, h.last_access"
            + _ROW_FROM
            + " WHERE h.importance_by != ? OR h.recall_count > 0 ORDER BY h.num",
            (ImportanceSource.HEURISTIC.value,),
        )
        return [
            {
                "id": r[0],
                "importance": r[1],
                "importance_by": r[2],
                "recall_count": r[3],
                "last_access": r[4],
            }
            for r in rows
        ]

    # -- writes (writer thread) --------------------------------------------------------------

    def add(self, rows: Sequence[tuple[int, float]]) -> None:
        """Headers for memories that became live, (num, importance) each: tier 1, pinned."""
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO headers(num, importance) VALUES (?, ?)",
                [(num, float(importance)) for num, importance in rows],
            )

    def drop(self, nums: Sequence[int]) -> None:
        """Remove the headers of memories that are no longer live."""
        with self.db.transaction() as conn:
            conn.executemany("DELETE FROM headers WHERE num = ?", [(n,) for n in nums])

    def set_api_importance(self, memory_id: str, importance: float) -> None:
        """An importance a client set (a memory patch): it wins over heuristic and LLM scores."""
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE headers SET importance = ?, importance_by = ?"
                " WHERE num = (SELECT num FROM memories WHERE id = ? AND deleted = 0)",
                (float(importance), ImportanceSource.API.value, memory_id),
            )

    def place(self, placements: Sequence[Placement], moves: Sequence[Move], now: datetime) -> None:
        """Set tiers, scores and persona similarities and record the moves, in one transaction:
        a crash leaves the placement before or after, never half of it."""
        at = _iso(now)
        with self.db.transaction() as conn:
            conn.executemany(
                "UPDATE headers SET tier = ?, pinned = ?, score = ?, scored_at = ?,"
                " persona_sim = COALESCE(?, persona_sim) WHERE num = ?",
                [
                    (int(p.tier), int(p.pinned), p.score, at, p.persona_sim, p.num)
                    for p in placements
                ],
            )
            self._record_moves(conn, moves)

    @staticmethod
    def _record_moves(conn: sqlite3.Connection, moves: Sequence[Move]) -> None:
        conn.executemany(
            "INSERT INTO tier_moves(num, from_tier, to_tier, score, reason, at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [
                (m.num, int(m.from_tier), int(m.to_tier), m.score, m.reason, _iso(m.at))
                for m in moves
            ],
        )
        if moves:
            conn.execute(
                "DELETE FROM tier_moves WHERE id <= (SELECT MAX(id) FROM tier_moves) - ?",
                (MOVES_KEPT,),
            )

    def record_recalls(self, nums: Sequence[int], at: datetime) -> None:
        """Retrievals recalled these memories (a num once per retrieval): C_m + 1 each time,
        and t_last = ``at`` unless a later access is stored (UTC ISO strings sort by time)."""
        with self.db.transaction() as conn:
            conn.executemany(
                "UPDATE headers SET recall_count = recall_count + 1,"
                " last_access = MAX(COALESCE(last_access, ''), ?) WHERE num = ?",
                [(_iso(at), int(n)) for n in nums],
            )

    def set_persona_sims(self, sims: dict[int, float]) -> None:
        with self.db.transaction() as conn:
            conn.executemany(
                "UPDATE headers SET persona_sim = ? WHERE num = ?",
                [(float(s), int(n)) for n, s in sims.items()],
            )

    def forget_persona_sims(self, tier: Tier) -> None:
        """Mark the similarities of ``tier`` stale: they are recomputed when next scored."""
        with self.db.transaction() as conn:
            conn.execute("UPDATE headers SET persona_sim = NULL WHERE tier = ?", (int(tier),))

    def set_importance(self, scores: dict[int, float], source: ImportanceSource) -> int:
        """Store importance scores unless a client set the importance; returns how many."""
        with self.db.transaction() as conn:
            cur = conn.executemany(
                "UPDATE headers SET importance = ?, importance_by = ? WHERE num = ?"
                " AND importance_by != ?",
                [
                    (float(v), source.value, int(n), ImportanceSource.API.value)
                    for n, v in scores.items()
                ],
            )
        return int(cur.rowcount)

    def save_persona(
        self, slot: PersonaSlot, vector: np.ndarray | None, profile: str, facts: int, now: datetime
    ) -> None:
        blob = None if vector is None else np.asarray(vector, dtype=np.float32).tobytes()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO persona(name, vector, profile, facts, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (slot.value, blob, profile, facts, _iso(now)),
            )

    def record_run(self, kind: RunKind, detail: dict[str, Any], now: datetime) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO tier_runs(kind, at, detail) VALUES (?, ?, ?)",
                (kind.value, _iso(now), json.dumps(detail)),
            )
            conn.execute(
                "DELETE FROM tier_runs WHERE id <= (SELECT MAX(id) FROM tier_runs) - ?",
                (RUNS_KEPT,),
            )

    def restore(self, records: Sequence[dict[str, Any]]) -> int:
        """Apply an export's header records (by memory id); returns how many matched."""
        with self.db.transaction() as conn:
            restored = 0
            for r in records:
                cur = conn.execute(
                    "UPDATE headers SET importance = ?, importance_by = ?, recall_count = ?,"
                    " last_access = ? WHERE num = (SELECT num FROM memories WHERE id = ?"
                    " AND deleted = 0)",
                    (
                        float(r["importance"]),
                        ImportanceSource(r["importance_by"]).value,
                        int(r["recall_count"]),
                        r.get("last_access"),
                        r["id"],
                    ),
                )
                restored += cur.rowcount
        return restored
