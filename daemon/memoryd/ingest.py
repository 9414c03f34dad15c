"""The one pipeline from a turn to typed memories, used by turn ingest, relabelling and the
LLM abstraction pass alike.

1. **Build** (:func:`build`): the facts the reader read of the turn (:mod:`memoryd.reader`),
   and the rules, tasks and mentions the extractors find in its text, as the records its labels
   ask for (:mod:`memoryd.memory.extract`, :mod:`memoryd.memory.build`).
2. **Fold** (:func:`fold`), on the user's writer: canonicalise the records' entities against the
   user's registry and consolidate them with what the memory already holds (a fact superseded,
   a task completed, a rule supported). The decisions are data (:class:`Folded`): the journal
   keeps them with the turn, so a rebuild replays them without deciding again.
3. **Commit** (:class:`memoryd.workspace.writes.Writes`): journal, in one transaction across the
   stores of the journal file, then project onto the graph and vectors.

A new turn is embedded, routed and read before step 1 (:func:`prepare`, which also lists the
stored values the turn may name, for the fact judge: :mod:`memoryd.memory.hearing`); a
relabelled turn keeps its vector and facts and takes the LLM's labels (:func:`relabelled`); an
abstraction pass brings records an LLM derived from episodes and starts at step 2. ``slots``
(the inventory) says how facts fold.

    prepared = prepare(turn, vector, routing, facts, slots, named)     # off the writer
    entries = fold_entries([prepared, ...], journal, resolver, slots)  # on the writer
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memoryd.memory import (
    BatchView,
    EntityResolver,
    MemoryView,
    Named,
    build_memories,
    build_reports,
    consolidate,
    extract,
    fact_values,
)
from memoryd.models import (
    Effect,
    Fact,
    Label,
    Memory,
    MemoryRef,
    Parse,
    Receipt,
    Role,
    RoutedBy,
    Turn,
    memory_type,
)
from memoryd.reader import ReadFact, Slots
from memoryd.store import Journal, Relabel, Routing, TurnEntry

__all__ = [
    "Folded",
    "NewTurn",
    "Prepared",
    "build",
    "fold",
    "fold_entries",
    "prepare",
    "relabelled",
]


@dataclass(frozen=True)
class NewTurn:
    """A turn as a client sends it. ``turn_id`` defaults to a hash of session, role, ts, text."""

    session_id: str
    role: Role
    text: str
    ts: datetime | None = None
    speaker: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    turn_id: str | None = None

    def resolved_id(self) -> str:
        if self.turn_id:
            return self.turn_id
        ts = self.ts.astimezone(UTC).isoformat() if self.ts else ""
        key = "\x1f".join((self.session_id, self.role.value, ts, self.text))
        return "t_" + hashlib.sha256(key.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Folded:
    """Records after :func:`fold`: those to store, the stored ones they change, what each change
    was, and the names folded into known entities ({entity id: sorted names})."""

    memories: list[Memory]
    updates: list[Memory]
    effects: list[Effect]
    aliases: dict[str, list[str]]


@dataclass(frozen=True)
class Prepared:
    """A turn ready to fold: its entry, and the stored values it may name (None: an assistant's
    turn, whose words end nothing)."""

    entry: TurnEntry
    named: Named | None = None


def build(turn: Turn, facts: Sequence[ReadFact], slots: Slots) -> list[Memory]:
    """The records ``turn``'s labels ask for, filled from its extraction, the facts the reader
    read of it (``facts``), and the completions it reports outside working memory, which fold
    only into the open tasks they name (step 1)."""
    extraction = extract(turn.text, turn.local_ts, fact_values(facts, slots))
    return [
        *build_memories(turn, extraction, facts, slots),
        *build_reports(turn, extraction, facts),
    ]


def _refs(memories: Sequence[Memory]) -> tuple[MemoryRef, ...]:
    return tuple(MemoryRef(m.id, memory_type(m)) for m in memories)


def prepare(
    turn: Turn,
    vector: np.ndarray,
    routing: Routing,
    facts: Sequence[ReadFact],
    slots: Slots,
    named: Named | None = None,
) -> Prepared:
    """A routed and read turn (labels, confidence and ``routed_by`` set; ``facts`` the reader
    read of it, ``named`` the stored values it may name) and its built records."""
    memories = build(turn, facts, slots)
    receipt = Receipt(
        turn_id=turn.turn_id,
        labels=turn.labels,
        confidence=round(turn.confidence, 4),
        routed_by=turn.routed_by,
        low_confidence=routing.low_confidence,
        memories=_refs(memories),
    )
    return Prepared(TurnEntry(turn, vector, memories, receipt, routing), named)


def fold(
    turn: Turn | None,
    memories: Sequence[Memory],
    view: MemoryView,
    resolver: EntityResolver,
    slots: Slots,
    named: Named | None = None,
) -> Folded:
    """Step 2 for one turn's records (or an abstraction batch's, ``turn`` None)."""
    aliases = resolver.resolve_memories(memories)
    result = consolidate(turn, memories, view, slots, named)
    names = {entity_id: sorted(found) for entity_id, found in aliases.items()}
    return Folded(result.memories, result.updates, result.effects, names)


def fold_entries(
    prepared: Iterable[Prepared], journal: Journal, resolver: EntityResolver, slots: Slots
) -> list[TurnEntry]:
    """Fold each entry in order, each seeing what the ones before it did; the receipts list the
    records stored and the effects. ``prepared`` may be a stream: each is folded as it comes."""
    view = BatchView(journal)
    out = []
    for entry, named in ((p.entry, p.named) for p in prepared):
        folded = fold(entry.turn, entry.memories, view, resolver, slots, named)
        view.stage([*folded.memories, *folded.updates])
        receipt = dataclasses.replace(
            entry.receipt, memories=_refs(folded.memories), effects=tuple(folded.effects)
        )
        out.append(
            dataclasses.replace(
                entry,
                memories=folded.memories,
                updates=folded.updates,
                receipt=receipt,
                aliases=folded.aliases,
            )
        )
    return out


def relabelled(
    turn: Turn,
    labels: tuple[Label, ...],
    facts: Sequence[ReadFact],
    journal: Journal,
    resolver: EntityResolver,
    slots: Slots,
    *,
    source: str,
    holdout: bool,
    after_round: int,
) -> Relabel:
    """A deferred turn re-routed under the LLM's ``labels``: rebuilt (with the ``facts`` the
    reader reads of it) and folded like a new turn, against the stored memory without the
    turn's own records."""
    turn = dataclasses.replace(turn, labels=labels, routed_by=RoutedBy.LLM)
    judged = [  # the judge's endings do not depend on the labels: they stand
        m
        for m in (s.memory for s in journal.memories_of_turn(turn.turn_id))
        if isinstance(m, Fact) and m.parse is Parse.JUDGE
    ]
    memories = [*build(turn, facts, slots), *judged]
    folded = fold(turn, memories, BatchView(journal, turn.turn_id), resolver, slots)
    return Relabel(turn, folded.memories, source, holdout, after_round, updates=folded.updates)
