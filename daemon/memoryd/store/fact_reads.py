"""The journal's reads of facts: the current facts of a slot, of a subject, of a value, and
the facts a listing or a query's fact weights read (:class:`FactReads`, a part of
:class:`memoryd.store.journal.Journal`). Each goes through the partial index named for it
(``facts_by_key``, ``facts_by_value``, ``facts_by_relation``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from memoryd.models import Fact, MemoryType
from memoryd.store.codec import decode_embedding, memory_from_payload
from memoryd.store.records import StoredMemory
from memoryd.store.sqlite import Database, placeholders

__all__ = ["MEMORY_COLUMNS", "FactReads", "stored_row"]

MEMORY_COLUMNS = "num, type, payload, session_id, ts"  # read by stored_row


def stored_row(row: Sequence[Any]) -> StoredMemory:
    """A ``memories`` row of :data:`MEMORY_COLUMNS` as its record."""
    num, kind, payload, session_id, ts = row
    mtype = MemoryType(kind)
    memory = memory_from_payload(mtype, json.loads(payload))
    return StoredMemory(num, memory, mtype, session_id, ts)


class FactReads:
    """Fact reads of the journal file ``db``."""

    db: Database

    def current_facts(self, subject: str, relations: Sequence[str]) -> list[Fact]:
        """Live, still valid facts of ``subject`` with one of ``relations`` (indexed lookup)."""
        where = (
            "json_extract(payload, '$.subject') = ? AND json_extract(payload, '$.relation')"
            f" IN ({placeholders(len(relations))})"
        )
        return self._current_facts("facts_by_key", where, [subject, *relations])

    def _current_facts(self, index: str, where: str, params: Sequence[Any]) -> list[Fact]:
        """Live, still valid facts read through ``index`` that meet ``where``, oldest first."""
        rows = self.db.read(
            f"SELECT {MEMORY_COLUMNS} FROM memories INDEXED BY {index}"
            f" WHERE type = 'semantic' AND deleted = 0 AND {where}"
            " AND json_extract(payload, '$.valid_to') IS NULL ORDER BY num",
            params,
        )
        return [f for f in (stored_row(r).memory for r in rows) if isinstance(f, Fact)]

    def facts(
        self,
        subject: str | None = None,
        history: bool = False,
        relations: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[StoredMemory]:
        """Live facts (of ``subject``, with one of ``relations``, if given), oldest first: the
        current ones, and with ``history`` the superseded ones too; the first ``limit``."""
        where = "type = 'semantic' AND deleted = 0"
        params: list[Any] = []
        source = "memories"
        if subject is None and relations is not None:
            # by type the planner reads every fact for a few relations: 5 ms at 10k turns, not 0.01
            source += " INDEXED BY facts_by_relation"
        if subject is not None:
            where += " AND json_extract(payload, '$.subject') = ?"
            params.append(subject)
        if relations is not None:
            marks = placeholders(len(relations))
            where += f" AND json_extract(payload, '$.relation') IN ({marks})"
            params += list(relations)
        if not history:
            where += " AND json_extract(payload, '$.valid_to') IS NULL"
        where += " ORDER BY num"
        if limit is not None:
            where += " LIMIT ?"
            params.append(limit)
        rows = self.db.read(f"SELECT {MEMORY_COLUMNS} FROM {source} WHERE {where}", params)
        return [stored_row(r) for r in rows]

    def fact_weights(
        self, memory_ids: Sequence[str] | None = None
    ) -> dict[str, tuple[int, float, np.ndarray | None]]:
        """memory id → (num, confidence, vector) of every current fact, or of those of
        ``memory_ids`` that are current (a superseded, deleted or unknown id is left out),
        without decoding the records. The vector is the fact's own if patched, else its turn's.
        """
        where, args = "", []
        if memory_ids is not None:
            where, args = f" AND m.id IN ({placeholders(len(memory_ids))})", list(memory_ids)
        rows = self.db.read(
            "SELECT m.id, m.num, json_extract(m.payload, '$.confidence'),"
            " COALESCE(m.embedding, t.embedding)"
            " FROM memories m LEFT JOIN turns t ON t.turn_id = m.turn_id"
            " WHERE m.type = 'semantic' AND m.deleted = 0"
            f" AND json_extract(m.payload, '$.valid_to') IS NULL{where}",
            args,
        )
        return {
            r[0]: (int(r[1]), float(r[2] or 0.0), None if r[3] is None else decode_embedding(r[3]))
            for r in rows
        }

    def current_facts_of(self, subject: str) -> list[Fact]:
        """Live, still valid facts of ``subject``, any relation (an update's candidates)."""
        return self._current_facts(
            "facts_by_key", "json_extract(payload, '$.subject') = ?", [subject]
        )

    def current_facts_named(self, entity_ids: Sequence[str]) -> list[Fact]:
        """Live, still valid facts of any subject whose value is one of ``entity_ids``
        (indexed: the names a turn says)."""
        where = f"json_extract(payload, '$.object.id') IN ({placeholders(len(entity_ids))})"
        return self._current_facts("facts_by_value", where, list(entity_ids))
