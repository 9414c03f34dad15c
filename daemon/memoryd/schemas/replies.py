"""Reply bodies (pydantic): how the façade's typed results look in JSON, decided here only.

Records (receipts, turns, memories, facts, query results) become replies through each model's
``of`` constructor; reports the domain already keeps as plain data (tier and router status,
reshuffles, rounds) are validated against their model. The HTTP routes declare these models as
their response models (so ``/openapi.json`` documents every reply), and the CLI prints the same
models (:func:`dump`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memoryd.models import (
    Effect,
    Fact,
    Label,
    Memory,
    MemoryRef,
    MemoryType,
    Parse,
    Receipt,
    RoutedBy,
    Turn,
    memory_type,
)
from memoryd.retrieve import Item, QueryResult, fact_line, render_context
from memoryd.service import MemoryPage, TurnPage, TurnView
from memoryd.store import StoredMemory, to_payload
from memoryd.workspace import RereadReport, UndoneFact

__all__ = [
    "DeletedMemory",
    "ErrorInfo",
    "ErrorReply",
    "FactList",
    "FactReply",
    "HealthReply",
    "IngestReply",
    "MemoryPageReply",
    "MemoryReply",
    "QueryReply",
    "ReadyReply",
    "ReshuffleReply",
    "RollbackReply",
    "RoundReply",
    "RouterStatusReply",
    "TaskList",
    "TierStatusReply",
    "TurnDetail",
    "TurnPageReply",
    "TurnReply",
    "UndoneFactReply",
    "UserCounts",
    "UserList",
    "UserRemoved",
    "dump",
]


def dump(reply: BaseModel) -> str:
    """A reply as the API sends it, indented for a terminal."""
    return reply.model_dump_json(indent=2, by_alias=True)


# -- ingest ----------------------------------------------------------------------------------


class MemoryRefReply(BaseModel):
    id: str
    type: MemoryType

    @classmethod
    def of(cls, ref: MemoryRef) -> MemoryRefReply:
        return cls(id=ref.id, type=ref.type)


class EffectReply(BaseModel):
    id: str = Field(description="the stored memory the turn changed")
    effect: str = Field(description="superseded, reinforced, completed, cancelled or supported")
    by: str = Field(description="the record (or turn) that changed it")

    @classmethod
    def of(cls, effect: Effect) -> EffectReply:
        return cls(id=effect.id, effect=effect.effect, by=effect.by)


class _ReceiptReply(BaseModel):
    turn_id: str
    labels: list[Label]
    confidence: float
    routed_by: RoutedBy
    memories: list[MemoryRefReply]
    effects: list[EffectReply] = []


class TurnReply(_ReceiptReply):
    """What ingesting one turn did (``duplicate``: the turn id was stored before, and this is
    its first reply)."""

    duplicate: bool

    @classmethod
    def of(cls, receipt: Receipt) -> TurnReply:
        return cls(**_receipt_fields(receipt), duplicate=receipt.duplicate)


class StoredReceipt(_ReceiptReply):
    """A turn's first receipt as journaled (``low_confidence``: under the router's τ_t)."""

    low_confidence: bool

    @classmethod
    def of(cls, receipt: Receipt) -> StoredReceipt:
        return cls(**_receipt_fields(receipt), low_confidence=receipt.low_confidence)


def _receipt_fields(receipt: Receipt) -> dict[str, Any]:
    return {
        "turn_id": receipt.turn_id,
        "labels": list(receipt.labels),
        "confidence": receipt.confidence,
        "routed_by": receipt.routed_by,
        "memories": [MemoryRefReply.of(m) for m in receipt.memories],
        "effects": [EffectReply.of(e) for e in receipt.effects],
    }


class IngestReply(BaseModel):
    turns: list[TurnReply]

    @classmethod
    def of(cls, receipts: Sequence[Receipt]) -> IngestReply:
        return cls(turns=[TurnReply.of(r) for r in receipts])


# -- turns -----------------------------------------------------------------------------------


class TurnRecord(BaseModel):
    """A journaled turn (``ts``: ISO-8601 UTC)."""

    turn_id: str
    session_id: str
    role: str
    text: str
    ts: str
    speaker: str | None
    metadata: dict[str, Any]
    labels: list[Label]
    confidence: float
    routed_by: RoutedBy

    @classmethod
    def of(cls, turn: Turn) -> TurnRecord:
        return cls(**to_payload(turn))


class TurnDetail(TurnRecord):
    """A turn, the memories made from it and its first reply."""

    memories: list[MemoryRefReply]
    reply: StoredReceipt

    @classmethod
    def of_view(cls, view: TurnView) -> TurnDetail:
        refs = [MemoryRefReply(id=s.memory.id, type=s.type) for s in view.memories]
        return cls(**to_payload(view.turn), memories=refs, reply=StoredReceipt.of(view.receipt))


class TurnPageReply(BaseModel):
    turns: list[TurnRecord]
    next_cursor: int | None

    @classmethod
    def of(cls, page: TurnPage) -> TurnPageReply:
        return cls(turns=[TurnRecord.of(t) for t in page.turns], next_cursor=page.next_cursor)


# -- memories --------------------------------------------------------------------------------


class MemoryReply(BaseModel):
    """A memory: its id, type and text, and the whole record (``record.header`` is its live
    HMO header)."""

    id: str
    type: MemoryType
    text: str
    record: dict[str, Any]

    @classmethod
    def of(cls, memory: Memory) -> MemoryReply:
        return cls(**_memory_fields(memory))


def _memory_fields(memory: Memory) -> dict[str, Any]:
    return {
        "id": memory.id,
        "type": memory_type(memory),
        "text": memory.text,
        "record": to_payload(memory),
    }


class MemoryPageReply(BaseModel):
    memories: list[MemoryReply]
    next_cursor: int | None

    @classmethod
    def of(cls, page: MemoryPage) -> MemoryPageReply:
        memories = [MemoryReply.of(s.memory) for s in page.memories]
        return cls(memories=memories, next_cursor=page.next_cursor)


class DeletedMemory(BaseModel):
    id: str
    deleted: bool = True


class FactReply(MemoryReply):
    """A fact; ``current`` is false once a later fact superseded it; ``line`` is what a reply
    says of it ("manager: Marcus Lee (since 2026-02-20)"), ``text`` the sentence it was read
    from."""

    current: bool
    session_id: str
    line: str

    @classmethod
    def of_stored(cls, stored: StoredMemory) -> FactReply:
        fact = stored.memory
        if not isinstance(fact, Fact):
            raise TypeError(f"{fact.id} is not a fact")
        current = fact.valid_to is None
        return cls(
            **_memory_fields(fact),
            current=current,
            session_id=stored.session_id,
            line=fact_line(fact),
        )


class FactList(BaseModel):
    facts: list[FactReply]

    @classmethod
    def of(cls, stored: Sequence[StoredMemory]) -> FactList:
        return cls(facts=[FactReply.of_stored(s) for s in stored])


class RereadReply(BaseModel):
    """What a reread of the user's facts did (or its undo, ``undo: true``): the turns read, the
    facts it closed and made, and how many of those are current."""

    user_id: str
    turns: int
    closed: int
    created: int
    current: int
    undo: bool

    @classmethod
    def of(cls, report: RereadReport) -> RereadReply:
        return cls(**dataclasses.asdict(report))


class UndoneFactReply(MemoryReply):
    was_superseded_by: str | None

    @classmethod
    def of_undone(cls, undone: UndoneFact) -> UndoneFactReply:
        return cls(**_memory_fields(undone.fact), was_superseded_by=undone.was_superseded_by)


class TaskList(BaseModel):
    """Tasks with their state trajectories."""

    tasks: list[MemoryReply]

    @classmethod
    def of(cls, stored: Sequence[StoredMemory]) -> TaskList:
        return cls(tasks=[MemoryReply.of(s.memory) for s in stored])


# -- query -----------------------------------------------------------------------------------


class ItemReply(BaseModel):
    """One recalled memory with its provenance: the turns it came from, its fused score and
    why it was recalled (``detail``: structured reasons, e.g. the rule branch that applies).
    A fact's ``text`` is its line ("manager: Marcus Lee (since 2026-02-20)"); the sentence it
    was read from is its record's ``text`` and the trace's ``source``."""

    id: str
    type: MemoryType
    text: str
    ts: str
    session_id: str
    turn_ids: list[str]
    score: float
    why: str
    detail: dict[str, Any]
    record: dict[str, Any]

    @classmethod
    def of(cls, item: Item) -> ItemReply:
        return cls(
            id=item.memory.id,
            type=item.type,
            text=fact_line(item.memory) if isinstance(item.memory, Fact) else item.memory.text,
            ts=item.ts,
            session_id=item.session_id,
            turn_ids=item.turn_ids,
            score=round(item.score, 6),
            why=item.why,
            detail=to_payload(item.detail),
            record=to_payload(item.memory),
        )


class TraceReply(BaseModel):
    id: str
    type: MemoryType
    turn_ids: list[str]
    score: float
    why: str
    hit: bool = Field(description="ranked by the search (false: brought in by an expansion)")
    parse: Parse | None = Field(
        default=None,
        description="how a fact, rule or task was read from its turn: reader, pattern, clause "
        "or generic",
    )
    source: str | None = Field(
        default=None, description="a fact's source: the sentence it was read from"
    )


class QueryReply(BaseModel):
    """Typed sections, the rendered context block for the prompt, the source turns in rank
    order, why each item is there, and how the tier search went (``search``: mode, stages with
    their pools, verdicts and why they stopped or were skipped)."""

    query: str
    sections: dict[MemoryType, list[ItemReply]]
    context: str
    turn_ids: list[str]
    trace: list[TraceReply]
    candidates: int
    search: dict[str, Any]

    @classmethod
    def of(cls, query: str, result: QueryResult) -> QueryReply:
        return cls(
            query=query,
            sections={t: [ItemReply.of(i) for i in result.section(t)] for t in MemoryType},
            context=render_context(result),
            turn_ids=result.turn_ids(),
            trace=[
                TraceReply(
                    id=i.memory.id,
                    type=i.type,
                    turn_ids=i.turn_ids,
                    score=round(i.score, 6),
                    why=i.why,
                    hit=i.hit,
                    parse=getattr(i.memory, "parse", None),
                    source=i.memory.text if isinstance(i.memory, Fact) else None,
                )
                for i in result.items
            ],
            candidates=result.candidates,
            search=result.search,
        )


# -- users -----------------------------------------------------------------------------------


class UserList(BaseModel):
    """The users with data, by id."""

    users: list[str]


class UserCounts(BaseModel):
    user_id: str
    counts: dict[str, int]


class Removed(BaseModel):
    turns: int
    memories: int
    vectors: int
    graph_nodes: int
    files: int


class UserRemoved(BaseModel):
    user_id: str
    removed: Removed


class ImportReply(BaseModel):
    """An export loaded into an empty user: the records applied after its header, and the
    user's store sizes after it."""

    user_id: str
    records: int
    counts: dict[str, int]

    @classmethod
    def of(cls, user_id: str, counts: dict[str, int]) -> ImportReply:
        rest = {k: v for k, v in counts.items() if k != "records"}
        return cls(user_id=user_id, records=counts["records"], counts=rest)


# -- tiers -----------------------------------------------------------------------------------


class TierCapacity(BaseModel):
    recent_sessions: int
    tier1_by_score: int
    tier2: int


class PersonaReply(BaseModel):
    facts: int
    profile: str
    drift: float
    drift_threshold: float
    anchored_at: str | None


class MoveReply(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str
    from_tier: int = Field(alias="from")
    to: int
    score: float | None
    reason: str
    at: str


class TierStatusReply(BaseModel):
    """Tier sizes, the persona and its drift, the last reshuffle and drift-gate runs (free-form
    run records), and the recent promotions and demotions."""

    user_id: str
    sizes: dict[str, int]
    capacity: TierCapacity
    persona: PersonaReply
    moves: list[MoveReply]
    last_reshuffle: dict[str, Any] | None
    last_drift: dict[str, Any] | None


class ReshuffleReply(BaseModel):
    scored: int
    promoted: int
    demoted: int
    sizes: dict[str, int]
    seconds: float


# -- router ----------------------------------------------------------------------------------


class HeadReply(BaseModel):
    round: int
    source: str
    temperature: float


class PoolReply(BaseModel):
    size: int
    new: int
    retrain_every: int


class DecisionsReply(BaseModel):
    round: int
    decisions: int
    deferred: int
    low_confidence: int
    llm_share: float


class RoundSummary(BaseModel):
    round: int
    kind: str
    accepted: bool
    created_at: str
    macro_f1_before: float | None
    macro_f1_after: float | None


class RouterStatusReply(BaseModel):
    """The user's self-enhancing router: training round ``t`` and ``τ_t``, the head in use,
    the label pool and queue, the LLM share of routing decisions per round, the last
    validation report and the recent rounds."""

    user_id: str
    llm: str | None
    deferral: bool
    round: int
    tau: float
    head: HeadReply
    pool: PoolReply
    queue: dict[str, int]
    decisions: list[DecisionsReply]
    last_validation: dict[str, Any] | None
    rounds: list[RoundSummary]


class RoundReply(BaseModel):
    """A training round: whether validation accepted its head, and its report."""

    model_config = ConfigDict(extra="allow")

    round: int
    accepted: bool


class RollbackReply(BaseModel):
    from_round: int
    to_round: int


# -- operations ------------------------------------------------------------------------------


class HealthReply(BaseModel):
    status: str


class ReadyReply(BaseModel):
    status: str = Field(description="ready, or starting / recovering (with status 503)")
    open_users: int | None = None


class ErrorInfo(BaseModel):
    type: str = Field(description="the error's class, e.g. ValidationError, UserNotFoundError")
    message: str = Field(description="what was wrong, naming the field or record")
    details: list[dict[str, Any]] | None = Field(
        None, description="for validation errors: each problem's location, message and type"
    )


class ErrorReply(BaseModel):
    """Every error reply (4xx and 5xx) has this shape."""

    error: ErrorInfo
