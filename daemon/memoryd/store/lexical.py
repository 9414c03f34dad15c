"""Lexical search: BM25 over the journal's full-text index (``memory_fts``, written by the
journal with the memories it indexes), and the query text → FTS5 MATCH expression.

The query side lowercases and drops stopwords (:mod:`memoryd.text`) and ORs the rest; the index
side gets lowercasing and Porter stemming from the FTS5 tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd.models import MemoryType, Tier
from memoryd.store.sqlite import Database, placeholders
from memoryd.text import content_tokens

__all__ = ["FTS_TOKENIZER", "TextSearch", "match_expression"]

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"


def match_expression(text: str) -> str | None:
    """An FTS5 MATCH string OR-ing the content tokens, or None when nothing is left to match."""
    tokens = content_tokens(text)
    if not tokens:
        return None
    return " OR ".join(f'"{t}"' for t in tokens)


class TextSearch:
    """BM25 reads of one user's journal file (any thread)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def search(
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
        marks = placeholders(len(types))
        params: list[Any] = [expression, *[t.value for t in types]]
        join, tiers = "", ""
        if within_tier is not None:
            # CROSS JOIN keeps the full-text match as the outer loop: driven from the headers'
            # tier index instead, SQLite re-runs the match for every row (50 ms, not 1).
            join, tiers = " CROSS JOIN headers h ON h.num = f.rowid", " AND h.tier <= ?"
            params.append(within_tier)
        rows = self.db.read(
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
        stemmed like the index), and how many of those are in tier 1 and in tiers 1-2.

        The postings are read bare and counted against the (small) tier 1-2 pool in Python:
        joining every posting to its memory and header costs ~1.3 µs each, and a common word
        has thousands."""
        if not types:
            return {}
        rows = self.db.read(
            "SELECT num, tier FROM headers INDEXED BY headers_by_tier WHERE tier <= ?",
            (int(Tier.BUFFER),),
        )
        pool: dict[int, int] = {int(r[0]): int(r[1]) for r in rows}
        out: dict[str, tuple[int, int, int]] = {}
        for term in terms:
            nums = self._postings(f'"{term}"', types)
            tiers = [pool[n] for n in nums if n in pool]
            out[term] = (len(nums), tiers.count(int(Tier.CACHE)), len(tiers))
        return out

    def _postings(self, expression: str, types: Sequence[MemoryType]) -> list[int]:
        """The nums of live memories of ``types`` matching ``expression``."""
        if set(types) == set(MemoryType):  # the index holds live memories only
            sql, params = "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ?", [expression]
        else:
            sql = (
                "SELECT f.rowid FROM memory_fts f CROSS JOIN memories m ON m.num = f.rowid"
                f" WHERE memory_fts MATCH ? AND m.type IN ({placeholders(len(types))})"
            )
            params = [expression, *[t.value for t in types]]
        return [int(r[0]) for r in self.db.read(sql, params)]
