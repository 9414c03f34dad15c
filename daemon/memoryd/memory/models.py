"""Plain data records for turns and typed memories.

These are what the service passes between the router, the extractors and the stores. They carry
no engine code: the journal serialises them with :func:`to_payload`/:func:`from_payload`, the
graph maps them onto its schema.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Label(StrEnum):
    """What the router may say a turn is (multi-label)."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    WORKING = "working"
    FRAGMENTED = "fragmented"


LABELS: tuple[Label, ...] = tuple(Label)


class MemoryType(StrEnum):
    """The four stored memory types (fragmented turns are kept in the journal only)."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"
    WORKING = "working"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    LOG = "log"


class RoutedBy(StrEnum):
    CLASSIFIER = "classifier"
    DEFERRED = "deferred"
    LLM = "llm"


class Origin(StrEnum):
    """What made a memory: the hot-path extractors, an LLM abstraction operator, or the API."""

    EXTRACTOR = "extractor"
    LLM = "llm"
    API = "api"


class EntityType(StrEnum):
    PERSON = "person"
    PLACE = "place"
    ORGANISATION = "organisation"
    OBJECT = "object"
    TIME = "time"
    OTHER = "other"


class RuleNodeKind(StrEnum):
    CONDITION = "condition"
    ACTION = "action"
    BRANCH = "branch"
    SEQUENCE = "sequence"


class TaskStatus(StrEnum):
    PENDING = "pending"
    DONE = "done"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


@dataclass
class Header:
    """HMO header carried by every memory record. A journaled record holds the header it was
    created with; the live one (recalls, tier, LLM importance) is kept in the journal's headers
    table and put on records the API returns (see :mod:`memoryd.store.headers`)."""

    importance: float = 5.0
    persona_sim: float = 0.0
    recall_count: int = 0
    last_access: datetime | None = None
    tier: int = 1
    importance_by: str = "heuristic"


@dataclass(frozen=True)
class Turn:
    """One ingested trace, as journaled. ``ts`` is timezone-aware UTC."""

    turn_id: str
    session_id: str
    role: Role
    text: str
    ts: datetime
    speaker: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    labels: tuple[Label, ...] = ()
    confidence: float = 0.0
    routed_by: RoutedBy = RoutedBy.CLASSIFIER


@dataclass(frozen=True)
class Entity:
    """A canonical entity; ``id`` is derived from the normalised name and type."""

    id: str
    name: str
    type: EntityType = EntityType.OTHER


@dataclass(frozen=True)
class Mention:
    entity: Entity
    role: str = "mention"


@dataclass
class Episode:
    id: str
    turn_id: str
    session_id: str
    text: str
    ts: datetime
    speaker: str | None = None
    mentions: list[Mention] = field(default_factory=list)
    event_time: datetime | None = None
    positive: int = 0
    negative: int = 0
    header: Header = field(default_factory=Header)


@dataclass
class Fact:
    """``(subject) -[relation]-> (object)``; a fact is current while ``valid_to`` is None.

    ``sources`` are the turn ids that stated it (``turn_id`` first); ``superseded_by`` is the id
    of the fact that closed it."""

    id: str
    turn_id: str
    relation: str
    object: Entity
    text: str
    subject: str = "user"
    confidence: float = 0.7
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    negated: bool = False
    sources: list[str] = field(default_factory=list)
    superseded_by: str | None = None
    origin: Origin = Origin.EXTRACTOR
    header: Header = field(default_factory=Header)


@dataclass
class RuleNode:
    id: str
    kind: RuleNodeKind
    text: str
    ord: int = 0
    when: str | None = None


@dataclass
class Rule:
    """An if/when-then rule: condition nodes lead to a sequence of action nodes."""

    id: str
    turn_id: str
    title: str
    text: str
    nodes: list[RuleNode] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    support: int = 1
    positive: int = 0
    negative: int = 0
    origin: Origin = Origin.EXTRACTOR
    header: Header = field(default_factory=Header)

    @property
    def conditions(self) -> list[str]:
        return [n.text for n in self.nodes if n.kind is RuleNodeKind.CONDITION]

    @property
    def actions(self) -> list[str]:
        """The main line's actions (not those of a ``when`` branch)."""
        return [n.text for n in self.nodes if n.kind is RuleNodeKind.ACTION and n.when is None]

    @property
    def branches(self) -> dict[str, list[str]]:
        """Each ``when`` case's actions, in order ({"otherwise": [...]})."""
        cases: dict[str, list[str]] = {}
        for n in self.nodes:
            if n.kind is RuleNodeKind.ACTION and n.when is not None:
                cases.setdefault(n.when, []).append(n.text)
        return cases


@dataclass
class State:
    id: str
    status: TaskStatus
    ts: datetime
    note: str = ""
    turn_id: str | None = None


@dataclass
class Task:
    """A to-do, reminder or pending constraint with its trajectory of states (oldest first)."""

    id: str
    turn_id: str
    title: str
    text: str
    due: datetime | None = None
    states: list[State] = field(default_factory=list)
    origin: Origin = Origin.EXTRACTOR
    header: Header = field(default_factory=Header)

    @property
    def status(self) -> TaskStatus:
        return self.states[-1].status if self.states else TaskStatus.PENDING


Memory = Episode | Fact | Rule | Task

MEMORY_TYPE_OF: dict[type, MemoryType] = {
    Episode: MemoryType.EPISODIC,
    Fact: MemoryType.SEMANTIC,
    Rule: MemoryType.PROCEDURAL,
    Task: MemoryType.WORKING,
}
MEMORY_CLASS_OF: dict[MemoryType, type] = {v: k for k, v in MEMORY_TYPE_OF.items()}


def memory_type(memory: Memory) -> MemoryType:
    return MEMORY_TYPE_OF[type(memory)]


def index_text(memory: Memory) -> str:
    """The text lexical search indexes: an episode is prefixed by who said it."""
    if isinstance(memory, Episode) and memory.speaker:
        return f"{memory.speaker}: {memory.text}"
    return memory.text


def to_payload(obj: Any) -> Any:
    """Turn a record (or nested records) into JSON-ready data; datetimes become ISO strings."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_payload(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, list | tuple):
        return [to_payload(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_payload(v) for k, v in obj.items()}
    return obj


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _header(data: dict[str, Any]) -> Header:
    return Header(**{**data, "last_access": _dt(data.get("last_access"))})


def _entity(data: dict[str, Any]) -> Entity:
    return Entity(data["id"], data["name"], EntityType(data["type"]))


def memory_from_payload(kind: MemoryType, data: dict[str, Any]) -> Memory:
    """Inverse of :func:`to_payload` for the four memory classes."""
    d = dict(data)
    d["header"] = _header(d.get("header", {}))
    if kind is MemoryType.EPISODIC:
        d["ts"] = _dt(d["ts"])
        d["event_time"] = _dt(d.get("event_time"))
        d["mentions"] = [Mention(_entity(m["entity"]), m["role"]) for m in d.get("mentions", [])]
        return Episode(**d)
    if kind is MemoryType.SEMANTIC:
        d["object"] = _entity(d["object"])
        d["valid_from"], d["valid_to"] = _dt(d.get("valid_from")), _dt(d.get("valid_to"))
        d["origin"] = Origin(d.get("origin", Origin.EXTRACTOR))
        return Fact(**d)
    if kind is MemoryType.PROCEDURAL:
        d["nodes"] = [
            RuleNode(**{**n, "kind": RuleNodeKind(n["kind"])}) for n in d.get("nodes", [])
        ]
        d["origin"] = Origin(d.get("origin", Origin.EXTRACTOR))
        return Rule(**d)
    d["due"] = _dt(d.get("due"))
    d["states"] = [
        State(**{**s, "status": TaskStatus(s["status"]), "ts": _dt(s["ts"])})
        for s in d.get("states", [])
    ]
    d["origin"] = Origin(d.get("origin", Origin.EXTRACTOR))
    return Task(**d)


def turn_from_payload(data: dict[str, Any]) -> Turn:
    """Inverse of :func:`to_payload` for a :class:`Turn`."""
    return Turn(
        turn_id=data["turn_id"],
        session_id=data["session_id"],
        role=Role(data["role"]),
        text=data["text"],
        ts=datetime.fromisoformat(data["ts"]),
        speaker=data.get("speaker"),
        metadata=data.get("metadata") or {},
        labels=tuple(Label(v) for v in data.get("labels", ())),
        confidence=float(data.get("confidence", 0.0)),
        routed_by=RoutedBy(data.get("routed_by", RoutedBy.CLASSIFIER)),
    )
