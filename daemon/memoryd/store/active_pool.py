"""The active tiers (1 and 2) mirrored in memory while they hold at most :data:`POOL_CAP`
records: their nums, tiers, types and vectors, and their texts in an in-memory FTS5 index with
the journal's tokenizer.

The tiered search's screen asks, for each word of a query, how many records of tier 1 and of
tiers 1-2 hold it; its pool stages rank the pool's vectors. Read from the journal, the first is
a pass over every posting of the word (thousands for a common one) and the second a decode of
every pool vector, on every query. Here both cost what the pool's size costs
(docs/decisions.md, "The active tiers in memory").

The mirror follows the journal lazily: a query that finds the log or the placements changed
since the last sync reads the pool's rows again (a few hundred, or only a bounded count when
there are more than :data:`POOL_CAP`) and applies the difference. Larger active tiers, as after a
bulk import until the next reshuffle, are not mirrored: :meth:`ActivePool.snapshot` returns None
and the tiered search goes to everything (a pool that large costs no less to search).

    pool = ActivePool(journal, headers)
    snap = pool.snapshot(types)        # None: the active tiers are larger than POOL_CAP
    snap.size(Tier.CACHE), snap.word_counts(["camping"]), snap.cosines(vector, Tier.BUFFER)
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memoryd.models import MemoryType, Tier
from memoryd.store.headers import HeaderStore
from memoryd.store.journal import Journal
from memoryd.store.lexical import FTS_TOKENIZER

__all__ = ["POOL_CAP", "ActivePool", "PoolSnapshot"]

# The most records the active tiers may hold and be mirrored; beyond it no pool stage is
# cheaper than searching everything (docs/decisions.md, "The active tiers in memory").
POOL_CAP = 1024


@dataclass(frozen=True)
class _Member:
    tier: int
    type: str
    text: str


class PoolSnapshot:
    """The mirrored active tiers' records of some memory types, as one query sees them."""

    def __init__(
        self,
        members: dict[int, _Member],
        vectors: dict[int, np.ndarray],
        counts: dict[str, list[int]],
    ) -> None:
        self._members = members
        self._vectors = vectors
        self._counts = counts

    def nums(self, deepest: Tier) -> set[int]:
        """The nums of the records in tiers 1 to ``deepest``."""
        return {n for n, m in self._members.items() if m.tier <= deepest}

    def size(self, deepest: Tier) -> int:
        return sum(1 for m in self._members.values() if m.tier <= deepest)

    def word_counts(self) -> dict[str, tuple[int, int]]:
        """Per word asked for: records holding it in tier 1, and in tiers 1-2."""
        return {word: (c[0], c[1]) for word, c in self._counts.items()}

    def cosines(self, vector: np.ndarray, deepest: Tier) -> dict[int, float]:
        """Cosine of every record in tiers 1 to ``deepest`` to ``vector`` (all unit length)."""
        nums = [n for n in self.nums(deepest) if n in self._vectors]
        if not nums:
            return {}
        matrix = np.stack([self._vectors[n] for n in nums])
        scores = matrix @ np.asarray(vector, dtype=np.float32)
        return dict(zip(nums, scores.tolist(), strict=True))


class ActivePool:
    """One user's active tiers in memory (any thread; syncs and reads take one lock)."""

    def __init__(self, journal: Journal, headers: HeaderStore) -> None:
        self.journal = journal
        self.headers = headers
        self._lock = threading.Lock()
        self._index = sqlite3.connect(":memory:", check_same_thread=False)
        self._index.execute(
            f"CREATE VIRTUAL TABLE pool USING fts5(text, tokenize='{FTS_TOKENIZER}')"
        )
        self._members: dict[int, _Member] = {}
        self._vectors: dict[int, np.ndarray] = {}
        self._stamp: tuple[int, int] | None = None
        self._overflow = False

    def snapshot(
        self, types: Sequence[MemoryType], words: Sequence[str] = ()
    ) -> PoolSnapshot | None:
        """The active tiers' records of ``types``, with the pool counts of ``words``; None
        when the active tiers hold more than :data:`POOL_CAP` records."""
        with self._lock:
            self._sync()
            if self._overflow:
                return None
            kept = {t.value for t in types}
            members = {n: m for n, m in self._members.items() if m.type in kept}
            counts = {word: self._count(word, members) for word in words}
            return PoolSnapshot(members, self._vectors, counts)

    def close(self) -> None:
        with self._lock:
            self._index.close()

    def _count(self, word: str, members: dict[int, _Member]) -> list[int]:
        rows = self._index.execute("SELECT rowid FROM pool WHERE pool MATCH ?", (f'"{word}"',))
        tiers = [members[n].tier for (n,) in rows if n in members]
        return [tiers.count(int(Tier.CACHE)), len(tiers)]

    def _sync(self) -> None:
        stamp = self.headers.placement_stamp()  # read before the rows it stands for
        if stamp == self._stamp:
            return
        try:
            if self.headers.active_count(POOL_CAP + 1) > POOL_CAP:
                self._reset(overflow=True)
            else:
                self._apply(self.headers.active_rows())
        except BaseException:
            self._reset(overflow=False)  # half applied: the next sync starts from nothing
            self._stamp = None
            raise
        self._stamp = stamp

    def _reset(self, overflow: bool) -> None:
        self._index.execute("DELETE FROM pool")
        self._members, self._vectors = {}, {}
        self._overflow = overflow

    def _apply(self, rows: list[tuple[int, int, str, str]]) -> None:
        if self._overflow:
            self._reset(overflow=False)
        old = self._members
        now = {num: _Member(tier, mtype, text) for num, tier, mtype, text in rows}
        gone = [n for n in old if n not in now]
        retext = [n for n, m in now.items() if n in old and m.text != old[n].text]
        new = [n for n in now if n not in old]
        self._index.executemany("DELETE FROM pool WHERE rowid = ?", [(n,) for n in gone + retext])
        self._index.executemany(
            "INSERT INTO pool(rowid, text) VALUES (?, ?)", [(n, now[n].text) for n in new + retext]
        )
        # New dicts, not changed ones: a snapshot handed out before keeps what it was given.
        # A patch that changes a memory's text may change its vector too.
        vectors = {n: v for n, v in self._vectors.items() if n in now}
        vectors.update(self.journal.memory_embeddings(new + retext))
        self._members, self._vectors = now, vectors
