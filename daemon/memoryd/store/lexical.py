"""Lexical search: BM25 over the journal's full-text index (``memory_fts``, written by the
journal with the memories it indexes), and the query text → FTS5 MATCH expression.

The query side lowercases and drops stopwords (:mod:`memoryd.text`) and ORs the rest; the index
side gets lowercasing and Porter stemming from the FTS5 tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd.models import MemoryType
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
        # The index holds live memories only. Every matching row is scored, and a join costs
        # more than the score (~1.4 µs a row, a memory's row in its own page): join what a
        # filter needs, the memory for its type and the header for its tier (``bm25`` is
        # computed for the rows that pass; docs/decisions.md, "BM25 without the memories join").
        joins, where, params = self._filters(types, within_tier)
        rows = self.db.read(
            f"SELECT f.rowid, -bm25(memory_fts) AS score FROM memory_fts f{joins}"
            f" WHERE memory_fts MATCH ?{where} ORDER BY score DESC LIMIT ?",
            [expression, *params, limit],
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    @staticmethod
    def _filters(
        types: Sequence[MemoryType], within_tier: int | None
    ) -> tuple[str, str, list[Any]]:
        """The joins, conditions and their parameters that keep ``types`` (all: nothing to
        join) in tiers 1 to ``within_tier``. CROSS JOIN keeps the full-text match the outer
        loop: driven from the headers' tier index, SQLite re-runs the match for every row
        (50 ms, not 1)."""
        joins, where = "", ""
        params: list[Any] = []
        if set(types) != set(MemoryType):
            joins = " CROSS JOIN memories m ON m.num = f.rowid"
            where = f" AND m.type IN ({placeholders(len(types))})"
            params = [t.value for t in types]
        if within_tier is not None:
            joins += " CROSS JOIN headers h ON h.num = f.rowid"
            where += " AND h.tier <= ?"
            params.append(within_tier)
        return joins, where, params

    def term_counts(self, terms: Sequence[str], types: Sequence[MemoryType]) -> dict[str, int]:
        """For each term: how many live memories of ``types`` hold it (its posting list,
        stemmed like the index), counted inside SQLite: a common word has thousands."""
        if not types:
            return {}
        joins, where, params = self._filters(types, None)
        sql = f"SELECT COUNT(*) FROM memory_fts f{joins} WHERE memory_fts MATCH ?{where}"
        return {term: int(self.db.read(sql, [f'"{term}"', *params])[0][0]) for term in terms}
