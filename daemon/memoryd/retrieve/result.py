"""What a query returns: the recalled items with their provenance, and the stores it reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memoryd.models import Memory, MemoryType
from memoryd.store import (
    ActivePool,
    GraphStore,
    HeaderStore,
    Journal,
    MentionIndex,
    StoredMemory,
    TextSearch,
    VectorStore,
)

__all__ = ["Expansion", "Item", "QueryResult", "Stores", "item_of"]


@dataclass
class Item:
    """One recalled memory with its provenance."""

    memory: Memory
    type: MemoryType
    score: float
    why: str
    turn_ids: list[str]
    session_id: str
    ts: str
    hit: bool = True
    # Structured reasons beside ``why``; a matched rule: {"branch", "condition", "negated",
    # "actions"} (see :func:`memoryd.retrieve.expand.matching_rules`). Empty for most items.
    detail: dict[str, Any] = field(default_factory=dict)
    num: int = 0  # the memory's journal num (its vector label)


@dataclass(frozen=True)
class Expansion:
    """A memory a typed expansion brings in, why, and any structured detail for its Item."""

    id: str
    why: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class QueryResult:
    """The items, how many records the search considered (``candidates``: the records of the
    deepest pool searched) and the trace of the tier search (``search``)."""

    items: list[Item] = field(default_factory=list)
    candidates: int = 0
    search: dict[str, Any] = field(default_factory=dict)

    def section(self, mtype: MemoryType) -> list[Item]:
        return [i for i in self.items if i.type is mtype]

    def turn_ids(self) -> list[str]:
        """Source turn ids in rank order (hits first, then expansions), without repeats."""
        seen: dict[str, None] = {}
        for item in sorted(self.items, key=lambda i: not i.hit):
            for turn_id in item.turn_ids:
                seen.setdefault(turn_id, None)
        return list(seen)


@dataclass(frozen=True)
class Stores:
    """The read side of one user's stores, bundled for the retrieval functions."""

    journal: Journal
    graph: GraphStore
    vectors: VectorStore
    headers: HeaderStore
    text: TextSearch
    mentions: MentionIndex
    pool: ActivePool


def item_of(stored: StoredMemory, score: float, why: str, hit: bool = True) -> Item:
    """The item of a stored memory, filed under its turn, session and time."""
    memory = stored.memory
    return Item(
        memory,
        stored.type,
        score,
        why,
        [memory.turn_id],
        stored.session_id,
        stored.ts,
        hit,
        num=stored.num,
    )


# -- episodic focus: named entities and time windows -----------------------------------------
