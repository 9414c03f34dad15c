"""The records and closed sets every layer of memoryd shares: a leaf that imports nothing of it.

- Turns and the four memory types (:class:`Episode`, :class:`Fact`, :class:`Rule`,
  :class:`Task`) with their parts: plain data, no engine code. The journal writes them as JSON
  (:mod:`memoryd.store.codec`), the graph maps them onto its schema.
- The :class:`Receipt` of an ingested turn (what it became, what it changed).
- Every closed set of choices as a ``StrEnum`` whose values are the strings used in settings,
  JSON and the journal (a setting's allowed values are its enum's members).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import IntEnum, StrEnum
from typing import Any

# A user id names a directory: match it whole with USER_ID.fullmatch (``$`` would let a
# trailing newline through). USER_ID_PATTERN is the same rule for JSON schemas.
USER_ID_CHARS = "[A-Za-z0-9_-]{1,64}"
USER_ID = re.compile(USER_ID_CHARS)
USER_ID_PATTERN = f"^{USER_ID_CHARS}$"


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


class Parse(StrEnum):
    """How a fact, rule or task was read from its turn: by the learned fact ``reader``
    (facts), a specific ``pattern`` ("if it rains, I cycle"; facts of stores written before the
    reader), the ``clause`` the router's label asked for when no pattern matched (a trigger and
    an action, an action and a due time, a verb and its object), or ``generic`` (the sentence
    itself, when even the clause could not be read); an ending of a stored fact the turn names
    again is the fact ``judge``'s (:mod:`memoryd.memory.hearing`)."""

    PATTERN = "pattern"
    CLAUSE = "clause"
    GENERIC = "generic"
    READER = "reader"
    JUDGE = "judge"


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
    """One ingested trace, as journaled. ``ts`` is timezone-aware UTC; ``utc_offset`` is the
    client's offset from UTC in minutes when it sent one ("…T21:00-04:00" → -240), so that
    "tonight at 9" is read on the speaker's clock (:attr:`local_ts`)."""

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
    utc_offset: int = 0

    @property
    def local_ts(self) -> datetime:
        """``ts`` on the speaker's clock."""
        return self.ts.astimezone(timezone(timedelta(minutes=self.utc_offset)))


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


OTHER_ATTRIBUTE = "other"
"""The attribute of a fact the inventory has no name for (compared by meaning, not by slot)."""


@dataclass
class Fact:
    """``(subject) -[relation]-> (object)``; a fact is current while ``valid_to`` is None.

    ``relation`` names the attribute (an inventory name such as ``manager`` or ``home_city``, or
    ``other`` for one the inventory lacks; stores written before the fact reader hold the old
    extractors' relations until ``facts reread``); ``label`` is how a reply names it ("lives
    in", "does not like"). ``subject`` is ``user`` (or the speaker's name) or the person, pet or
    thing the fact is about. ``kind`` is what the statement did: ``state``, ``change``, ``add``
    or ``end`` (stored closed); ``old`` the value the statement said it replaced.
    ``sources`` are the turn ids that stated it (``turn_id`` first); ``superseded_by`` is the id
    of the fact that closed it; ``doubted_by`` the id of a later fact that may have replaced it
    (the judge was unsure: both stay current)."""

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
    parse: Parse = Parse.PATTERN
    kind: str = "state"
    old: str | None = None
    label: str = ""
    doubted_by: str | None = None
    header: Header = field(default_factory=Header)

    @property
    def statement(self) -> str:
        """What the fact says of its subject: "manager: Marcus Lee", "does not like: olives";
        a fact of an attribute the inventory lacks, its value and sentence. A fact stored
        before the reader names its old relation."""
        if self.relation == OTHER_ATTRIBUTE:
            return f'{self.object.name}: "{self.text}"'
        label = self.label or (
            ("not " if self.negated else "") + self.relation.replace("_", " ").replace(":", " ")
        )
        return f"{label}: {self.object.name}"


OTHERWISE = "otherwise"  # the ``when`` of a rule's else-branch


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
    parse: Parse = Parse.PATTERN
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
    parse: Parse = Parse.PATTERN
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


def memory_type(memory: Memory) -> MemoryType:
    return MEMORY_TYPE_OF[type(memory)]


def index_text(memory: Memory) -> str:
    """The text lexical search indexes: an episode is prefixed by who said it; a fact of an
    inventory attribute is its subject and statement ("Tom lives in: Edinburgh"), not its
    sentence, which the turn's Episode holds when the fact does not say all of it (two facts
    of one sentence repeating its words made each of them weigh less in every other turn)."""
    if isinstance(memory, Episode) and memory.speaker:
        return f"{memory.speaker}: {memory.text}"
    if isinstance(memory, Fact) and memory.relation != OTHER_ATTRIBUTE:
        return f"{memory.subject} {memory.statement}"
    return memory.text


# -- ingest receipts -------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryRef:
    """A memory by id and type (what a turn became)."""

    id: str
    type: MemoryType


@dataclass(frozen=True)
class Effect:
    """One change a turn made to stored memory: ``effect`` is "superseded", "reinforced",
    "completed" or "supported"; ``by`` the id of the record (or turn) that caused it."""

    id: str
    effect: str
    by: str


@dataclass(frozen=True)
class Receipt:
    """What ingesting one turn did: its labels and confidence, how it was routed, the memories
    stored from it and the stored memories it changed. The journal keeps the first receipt of
    each turn id; a retry gets it back with ``duplicate`` set."""

    turn_id: str
    labels: tuple[Label, ...]
    confidence: float
    routed_by: RoutedBy
    low_confidence: bool = False
    memories: tuple[MemoryRef, ...] = ()
    effects: tuple[Effect, ...] = ()
    duplicate: bool = False


# -- tiers -----------------------------------------------------------------------------------


class Tier(IntEnum):
    """Where a record sits: the cache searched first, the buffer, the archive."""

    CACHE = 1
    BUFFER = 2
    ARCHIVE = 3


class ImportanceSource(StrEnum):
    """Who set a record's importance: the heuristic, the LLM job, or a client (which wins)."""

    HEURISTIC = "heuristic"
    LLM = "llm"
    API = "api"


# -- closed sets of settings -----------------------------------------------------------------


class McpTools(StrEnum):
    """Which tools the MCP server offers (``mcp.tools``)."""

    DEFAULT = "default"
    ALL = "all"


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class GraphEngine(StrEnum):
    """The Kùzu-family engine behind the graph store (:mod:`memoryd.store.graph`); the value is
    the Python module to import (never both in one process)."""

    LADYBUG = "ladybug"
    KUZU = "kuzu"


class LLMBackend(StrEnum):
    """none (no LLM: deferral off), llamacpp (a local GGUF), openai (an OpenAI-compatible
    server such as Ollama, llama-server or vLLM)."""

    NONE = "none"
    LLAMACPP = "llamacpp"
    OPENAI = "openai"


class Fusion(StrEnum):
    """How a ranking's scores become fusable: by rank (reciprocal rank) or by min-max score."""

    RRF = "rrf"
    SCORE = "score"


class SearchMode(StrEnum):
    """Which tiers a query searches: ``tiered`` (tier 1, then 1+2 if that is not sufficient,
    then everything), ``all`` (everything at once: the exhaustive search), ``tier1`` or
    ``tier2`` (tier 1 only, tiers 1 and 2 only; for measurement)."""

    TIERED = "tiered"
    ALL = "all"
    TIER1 = "tier1"
    TIER2 = "tier2"


class SufficiencyJudge(StrEnum):
    """Who decides that a tier's hits suffice (see :mod:`memoryd.retrieve.sufficiency`)."""

    SCORE = "score"
    LLM = "llm"
