"""The journal writes of one user: each in one transaction across the stores of the journal
file, then projected onto the graph and vectors.

A write journals the log entry and the memories (:class:`memoryd.store.Journal`), the header
rows of the memories it adds or removes (:class:`memoryd.store.HeaderStore`: headers are
journaled, not projected) and, for a turn, its routing decision and queue row
(:class:`memoryd.store.RouterStore`), all committed together: that commit is the
acknowledgement. The projections catch up after it, and a write that creates, changes or
removes a fact has the persona rebuilt next on the writer (:mod:`memoryd.workspace.tiering`).
Every method runs on the user's writer thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memoryd.models import Memory
from memoryd.store import MemoryChange, Relabel, TurnEntry, Written

if TYPE_CHECKING:
    from memoryd.workspace import Workspace

__all__ = ["Writes"]


class Writes:
    """The journal writes of ``ws`` (see the module docstring)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def _headers(self, written: Sequence[Written]) -> None:
        added = [row for w in written for row in w.added]
        removed = [num for w in written for num in w.removed]
        if added:
            self.ws.headers.add(added)
        if removed:
            self.ws.headers.drop(removed)

    def turns(self, entries: Sequence[TurnEntry]) -> list[Written]:
        """Journal new turns in one transaction, then project them."""
        ws = self.ws
        with ws.db.transaction():
            written = ws.journal.append_turns(entries)
            self._headers(written)
            ws.router_state.note_routing(
                [(e.turn.turn_id, e.routing) for e in entries if e.routing is not None]
            )
        ws.projection.after_turns(entries, written)
        ws.tiers.facts_changed([m for e in entries for m in (*e.memories, *e.updates)])
        return written

    def change(self, change: MemoryChange) -> Written:
        """Journal memories created or changed outside a turn, then project them."""
        ws = self.ws
        with ws.db.transaction():
            written = ws.journal.change_memories(change)
            self._headers([written])
        ws.projection.catch_up()
        ws.tiers.facts_changed([n.memory for n in change.created] + change.updates)
        return written

    def patch(
        self, memory: Memory, embedding: np.ndarray | None, importance: float | None = None
    ) -> Written:
        """Journal a memory's new record (its new vector, and the importance a client set)."""
        ws = self.ws
        with ws.db.transaction():
            written = ws.journal.patch_memory(memory, embedding, importance)
            if importance is not None:
                ws.headers.set_api_importance(memory.id, importance)
        ws.projection.catch_up()
        ws.tiers.facts_changed([memory])
        return written

    def delete(self, memory_id: str) -> Written:
        ws = self.ws
        stored = ws.journal.memory(memory_id)
        with ws.db.transaction():
            written = ws.journal.delete_memory(memory_id)
            self._headers([written])
        ws.projection.catch_up()
        ws.tiers.facts_changed([stored.memory] if stored else [])
        return written

    def relabel(self, relabel: Relabel) -> Written:
        """Journal an LLM label for a deferred turn (its memories move to their new types and
        the label joins the training pool), then move its memories in the projections."""
        ws = self.ws
        turn = relabel.turn
        with ws.db.transaction():
            written = ws.journal.relabel_turn(relabel)
            self._headers([written])
            ws.router_state.add_label(
                turn.turn_id, turn.labels, relabel.source, relabel.holdout, relabel.after_round
            )
        ws.projection.catch_up()
        ws.tiers.facts_changed([], always=True)  # it may have removed the turn's facts
        return written
