"""What the stores of the journal file take and give back: plain records, no SQL.

A write to the journal is one of the log entry kinds of :class:`LogKind`, described by the
record that carries it (:class:`TurnEntry`, :class:`MemoryChange`, :class:`Relabel`, or a memory
patch or delete). Each journal write returns a :class:`Written` so that the caller can keep the
other stores of the file (headers, router state) in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

import numpy as np

from memoryd.models import Memory, MemoryType, Receipt, TaskStatus, Turn

__all__ = [
    "FEEDBACK_POSITIVE",
    "LogEntry",
    "LogKind",
    "MemoryChange",
    "NewMemory",
    "Relabel",
    "Routing",
    "StoredMemory",
    "TaskHead",
    "TurnEntry",
    "Written",
]


class LogKind(StrEnum):
    TURN = "turn"
    MEMORY_PATCH = "memory_patch"
    MEMORY_DELETE = "memory_delete"
    TURN_RELABEL = "turn_relabel"
    MEMORY_CHANGE = "memory_change"


FEEDBACK_POSITIVE = "feedback_positive"  # the reason of a positive-feedback memory_change


@dataclass(frozen=True)
class Routing:
    """How a turn was routed: the user's training round then, and whether the confidence was
    under τ_t (``low_confidence``) and the turn was queued for the LLM (``deferred``)."""

    round: int
    low_confidence: bool
    deferred: bool


@dataclass(frozen=True)
class TurnEntry:
    """What one ingested turn writes: the turn, its embedding, memories and its receipt.

    ``updates`` are stored memories the turn changed (consolidation); ``aliases`` the names
    canonicalisation folded into known entities ({entity id: names}). ``routing`` is None for
    turns that were not routed now (an import)."""

    turn: Turn
    embedding: np.ndarray
    memories: list[Memory]
    receipt: Receipt
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
class Written:
    """What one journal write did: its log ``seq``, the memories that became live (num and
    importance, for their header rows) and the nums that stopped being live."""

    seq: int
    added: list[tuple[int, float]] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class LogEntry:
    seq: int
    kind: LogKind
    ref: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class TaskHead:
    """Where a live task stands, read without decoding it: its current (last) state's status
    and time (a task with no state yet is pending, ``ts`` None)."""

    id: str
    num: int
    status: TaskStatus
    ts: datetime | None


@dataclass(frozen=True)
class StoredMemory:
    """A live memory as stored, with the session and time of the turn it came from."""

    num: int
    memory: Memory
    type: MemoryType
    session_id: str
    ts: str
