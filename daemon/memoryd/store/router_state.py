"""The self-enhancing router's state, in the user's journal file.

Tables
- ``router_queue``: turns deferred to the LLM labeller (pending, labelled or failed), with their
  attempts and the earliest time of the next one; written with the turn, so a crash between
  "queued" and "labelled" loses nothing.
- ``router_pool``: the user's LLM labels (the training pool of the self-enhancement loop),
  written in the same transaction as the ``turn_relabel`` entry that re-routes the turn.
- ``router_rounds``: every training round (and rollback) with its report and, when accepted,
  the head's bytes; the user's current head is the last accepted one.
- ``router_decisions``: routing decisions and deferrals per round (the LLM share per round).

Writes run on the user's writer, inside the caller's transaction when it holds one
(:meth:`memoryd.store.sqlite.Database.transaction`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from memoryd.models import Label
from memoryd.store.records import Routing
from memoryd.store.sqlite import Database, utc_now

__all__ = ["DueLabel", "QueueStatus", "RoundKind", "RoundRecord", "RouterStore"]

SCHEMA = """
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


class QueueStatus(StrEnum):
    PENDING = "pending"
    LABELLED = "labelled"
    FAILED = "failed"


class RoundKind(StrEnum):
    TRAIN = "train"
    ROLLBACK = "rollback"


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


class RouterStore:
    """Queue, pool, rounds and decision counts of one user's router."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.apply(SCHEMA)

    def note_routing(self, routed: Sequence[tuple[str, Routing]]) -> None:
        """Count each (turn id, routing) decision in its round; queue the deferred turns."""
        with self.db.transaction() as conn:
            for turn_id, routing in routed:
                conn.execute(
                    "INSERT INTO router_decisions(round, decisions, deferred, low_confidence)"
                    " VALUES (?, 1, ?, ?) ON CONFLICT(round) DO UPDATE SET"
                    " decisions = decisions + 1, deferred = deferred + excluded.deferred,"
                    " low_confidence = low_confidence + excluded.low_confidence",
                    (routing.round, int(routing.deferred), int(routing.low_confidence)),
                )
                if routing.deferred:
                    conn.execute(
                        "INSERT OR IGNORE INTO router_queue(turn_id, status, updated_at)"
                        " VALUES (?, ?, ?)",
                        (turn_id, QueueStatus.PENDING.value, utc_now()),
                    )

    def add_label(
        self,
        turn_id: str,
        labels: Sequence[Label],
        source: str,
        holdout: bool,
        after_round: int,
    ) -> None:
        """A turn's LLM label joins the pool and its queue row is done."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO router_pool"
                "(turn_id, labels, source, holdout, after_round, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    turn_id,
                    json.dumps([label.value for label in labels]),
                    source,
                    int(holdout),
                    after_round,
                    utc_now(),
                ),
            )
            self._set_queue(conn, turn_id, QueueStatus.LABELLED, None, 0.0, None)

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
            (status.value, attempts, not_before, error, utc_now(), turn_id),
        )

    def label_failed(self, turn_id: str, attempts: int, error: str, retry_at: float | None) -> None:
        """Record a failed labelling attempt: due again at ``retry_at`` (unix time), or given
        up on when ``retry_at`` is None (the turn keeps its classifier label)."""
        status = QueueStatus.FAILED if retry_at is None else QueueStatus.PENDING
        with self.db.transaction() as conn:
            self._set_queue(conn, turn_id, status, attempts, retry_at or 0.0, error[:500])

    def due_labels(self, now: float, limit: int) -> list[DueLabel]:
        """Pending queued turns whose next attempt is due, oldest first."""
        rows = self.db.read(
            "SELECT q.turn_id, q.attempts FROM router_queue q JOIN turns t USING (turn_id)"
            " WHERE q.status = ? AND q.not_before <= ? ORDER BY t.seq LIMIT ?",
            (QueueStatus.PENDING.value, now, limit),
        )
        return [DueLabel(r[0], int(r[1])) for r in rows]

    def next_due(self) -> float | None:
        """Unix time of the earliest pending attempt, or None when nothing is pending."""
        row = self.db.read(
            "SELECT MIN(not_before) FROM router_queue WHERE status = ?",
            (QueueStatus.PENDING.value,),
        )[0]
        return None if row[0] is None else float(row[0])

    def queue_counts(self) -> dict[str, int]:
        rows = self.db.read("SELECT status, COUNT(*) FROM router_queue GROUP BY status")
        counts = {status.value: 0 for status in QueueStatus}
        counts.update({r[0]: int(r[1]) for r in rows})
        return counts

    def pool(self) -> list[tuple[str, list[str], bool]]:
        """The training pool: (turn id, labels, held out), in the order labels arrived."""
        rows = self.db.read("SELECT turn_id, labels, holdout FROM router_pool ORDER BY rowid")
        return [(r[0], json.loads(r[1]), bool(r[2])) for r in rows]

    def pool_counts(self, after_round: int) -> tuple[int, int]:
        """(pool size, labels added since training round ``after_round`` was completed)."""
        row = self.db.read(
            "SELECT COUNT(*), COALESCE(SUM(after_round >= ?), 0) FROM router_pool",
            (after_round,),
        )[0]
        return int(row[0]), int(row[1])

    def record_round(
        self, kind: RoundKind, accepted: bool, report: dict[str, Any], head: bytes | None
    ) -> int:
        """Journal a training round or rollback; an accepted one carries the head in use from
        now on. Returns the round number."""
        with self.db.transaction() as conn:
            cur = conn.execute(
                "INSERT INTO router_rounds(kind, accepted, report, head, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (kind.value, int(accepted), json.dumps(report), head, utc_now()),
            )
        return int(cur.lastrowid or 0)

    def rounds(self) -> list[RoundRecord]:
        rows = self.db.read(
            "SELECT round, kind, accepted, report, created_at FROM router_rounds ORDER BY round"
        )
        return [
            RoundRecord(r[0], RoundKind(r[1]), bool(r[2]), json.loads(r[3]), r[4]) for r in rows
        ]

    def head(self, round_: int) -> bytes | None:
        """The head bytes journaled with round ``round_`` (None if it has none)."""
        rows = self.db.read("SELECT head FROM router_rounds WHERE round = ?", (round_,))
        return bytes(rows[0][0]) if rows and rows[0][0] is not None else None

    def decisions(self) -> dict[int, tuple[int, int, int]]:
        """round → (routing decisions, deferred to the LLM, under τ_t)."""
        rows = self.db.read(
            "SELECT round, decisions, deferred, low_confidence FROM router_decisions"
        )
        return {int(r[0]): (int(r[1]), int(r[2]), int(r[3])) for r in rows}
