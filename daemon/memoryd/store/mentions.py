"""Which live episodes mention which entities: the journal's ``mentions`` table, written by the
journal in the transaction that writes the episode, and read by a query's expansion (the
episodes that share the most entities with its hits).

The graph holds the same edges (``MENTIONS``). The query reads them here, from the file it
already reads, in bounded time: each entity gives its latest :data:`MENTIONS_READ` mentions, so
a name said in thousands of turns costs no more than one said in a hundred (docs/decisions.md,
"Shared entities from the journal's mentions").

    index_mentions(conn, num, episode)             # inside a journal transaction
    MentionIndex(db).episodes_sharing(["person:ann"], exclude={7}, limit=10)
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Collection, Sequence

from memoryd.models import Episode, Memory
from memoryd.store.sqlite import Database, placeholders

__all__ = ["MENTIONS_READ", "MentionIndex", "drop_mentions", "index_mentions"]

# The latest mentions of each entity a query reads.
MENTIONS_READ = 128


def index_mentions(
    conn: sqlite3.Connection, num: int, memory: Memory, replace: bool = True
) -> None:
    """Index the entities the memory ``num`` mentions (an episode's; other memories mention
    none), replacing what it mentioned before unless it is new (``replace=False``)."""
    if replace:
        drop_mentions(conn, num)
    if isinstance(memory, Episode) and memory.mentions:
        conn.executemany(
            "INSERT OR IGNORE INTO mentions(entity_id, num) VALUES (?, ?)",
            [(m.entity.id, num) for m in memory.mentions],
        )


def drop_mentions(conn: sqlite3.Connection, num: int) -> None:
    """The memory ``num`` mentions nothing any more (it was deleted or re-read)."""
    conn.execute("DELETE FROM mentions WHERE num = ?", (num,))


class MentionIndex:
    """Reads of one user's ``mentions`` table (any thread)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def episodes_sharing(
        self, entity_ids: Sequence[str], exclude: Collection[int], limit: int
    ) -> list[tuple[str, int]]:
        """Live episodes, other than the nums in ``exclude``, that mention any of the entities,
        each with how many of them it mentions: most first, then the latest first; at most
        ``limit``. Each entity counts its latest :data:`MENTIONS_READ` mentions only."""
        if not entity_ids or limit < 1:
            return []
        shared: Counter[int] = Counter()
        for entity_id in dict.fromkeys(entity_ids):
            rows = self.db.read(
                "SELECT num FROM mentions WHERE entity_id = ? ORDER BY num DESC LIMIT ?",
                (entity_id, MENTIONS_READ),
            )
            shared.update(int(r[0]) for r in rows)
        for num in exclude:
            shared.pop(num, None)
        best = sorted(shared, key=lambda n: (-shared[n], -n))[:limit]
        if not best:
            return []
        rows = self.db.read(
            f"SELECT num, id FROM memories WHERE num IN ({placeholders(len(best))})", best
        )
        ids = {int(r[0]): str(r[1]) for r in rows}
        return [(ids[n], shared[n]) for n in best if n in ids]
