"""Request bodies (pydantic) and their conversion to the façade's parameters.

Bad input is a 422 that names the field (pydantic's validation, or an ``InvalidInputError`` from
the parameters' own checks); unknown fields are refused.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from memoryd.ingest import NewTurn
from memoryd.models import MemoryType, Role, SearchMode, TaskStatus
from memoryd.retrieve import MAX_ANCHOR_CHARS, MAX_NAME_CHARS, MAX_NAMES, QueryParams
from memoryd.workspace import MemoryPatch

__all__ = [
    "MAX_CURSOR",
    "FeedbackIn",
    "IngestRequest",
    "MemoryPatchIn",
    "QueryRequest",
    "TaskIn",
    "TaskPatchIn",
    "TurnIn",
]

MAX_TEXT_CHARS = 32 * 1024
MAX_CURSOR = 2**63 - 1  # a page cursor is a journal row number: SQLite's largest integer
ID = Field(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f]+$")
NAME = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]
# Some character that is neither white space as str.isspace() has it (what the service's empty
# check strips) nor a byte-order mark: the same set under Python's, Rust's (pydantic's) and
# ECMA's (the fuzzer's) regex engines, whose \s differ on \x1c-\x1f, \x85 and \ufeff.
NOT_BLANK = r"[^\s\x1c-\x1f\x85\ufeff]"
_NUMBER = re.compile(r"\s*[-+]?\d+(\.\d*)?\s*")


def _iso_text(value: object) -> object:
    """A time is ISO-8601 text (or a datetime, from Python callers). Not a number: pydantic
    would read one as a Unix time, and the schema promises a date-time string."""
    if value is None or isinstance(value, datetime):
        return value
    if not isinstance(value, str) or _NUMBER.fullmatch(value):
        raise ValueError("give an ISO-8601 date and time, e.g. 2026-10-14T12:00:00-04:00")
    return value


Timestamp = Annotated[datetime, BeforeValidator(_iso_text)]


def _not_blank(value: str) -> str:
    if not value.replace("\ufeff", "").strip():
        raise ValueError("is empty: it holds only white space")
    return value


# Text that must say something: the schema states it as a pattern, the check says it plainly.
NotBlank = Annotated[
    str, AfterValidator(_not_blank), Field(json_schema_extra={"pattern": NOT_BLANK})
]


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class TurnIn(Strict):
    turn_id: str | None = Field(None, min_length=1, max_length=128, pattern=r"^[^\x00-\x1f]+$")
    session_id: str = ID
    role: Literal["user", "assistant", "log"]
    text: NotBlank = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    ts: Timestamp | None = Field(
        None,
        description="ISO-8601; naive means UTC. Send the speaker's own offset "
        '("2026-10-14T12:00:00-04:00"): times in the text ("tonight at 9") are read on it',
    )
    speaker: str | None = Field(None, max_length=128)
    metadata: dict[str, Any] | None = None

    @field_validator("ts")
    @classmethod
    def _ts_aware(cls, value: datetime | None) -> datetime | None:
        """Naive means UTC; an offset is kept until the turn is stored (``Turn.utc_offset``)."""
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    @classmethod
    def of(cls, turn: NewTurn) -> TurnIn:
        """The request body of a turn (the CLI sends files' turns to the daemon)."""
        return cls(
            turn_id=turn.turn_id,
            session_id=turn.session_id,
            role=turn.role.value,
            text=turn.text,
            ts=turn.ts,
            speaker=turn.speaker,
            metadata=turn.metadata or None,
        )

    def to_new_turn(self) -> NewTurn:
        return NewTurn(
            session_id=self.session_id,
            role=Role(self.role),
            text=self.text,
            ts=self.ts,
            speaker=self.speaker,
            metadata=self.metadata or {},
            turn_id=self.turn_id,
        )


class IngestRequest(Strict):
    turns: list[TurnIn] = Field(min_length=1, max_length=256)


class QueryRequest(Strict):
    # before and after are exclusive (to_params says so); the schema says it too
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["before", "after"],
                "properties": {"before": {"type": "string"}, "after": {"type": "string"}},
            }
        }
    )

    query: NotBlank = Field(min_length=1, max_length=4096)
    k: int = Field(10, ge=1, le=200)
    types: list[MemoryType] | None = Field(None, min_length=1)
    since: Timestamp | None = None
    until: Timestamp | None = None
    session_id: str | None = Field(None, min_length=1, max_length=128)
    now: Timestamp | None = Field(None, description="reference time for relative dates and recency")
    history: bool = Field(False, description="also rank facts that later facts superseded")
    entities: list[NAME] = Field(
        default_factory=list, max_length=MAX_NAMES, description="entity names, any type"
    )
    people: list[NAME] = Field(
        default_factory=list, max_length=MAX_NAMES, description="names of persons"
    )
    when: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="time in words: 'yesterday', 'last Friday', 'two weeks ago', 'in May 2023'",
    )
    before: str | None = Field(
        None, min_length=1, max_length=MAX_ANCHOR_CHARS, description="anchor event text or id"
    )
    after: str | None = Field(
        None, min_length=1, max_length=MAX_ANCHOR_CHARS, description="anchor event text or id"
    )
    search: SearchMode | None = Field(
        None,
        description="tiered (tier 1, then 1+2, then all, stopping when sufficient), all "
        "(exhaustive), tier1 or tier2 (those tiers only); default: the tiers.search setting",
    )
    recall: bool = Field(
        True, description="count this retrieval in the hits' headers (recall count, last access)"
    )

    @field_validator("since", "until", "now")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)

    @model_validator(mode="after")
    def _window(self) -> QueryRequest:
        if self.since and self.until and self.since > self.until:
            raise ValueError("since is after until")
        return self

    def to_params(self) -> QueryParams:
        """The service's parameters; a bad ``when``, an empty name or both ``before`` and
        ``after`` raise :class:`InvalidInputError` (422 with a message naming the field)."""
        return QueryParams(
            query=self.query,
            k=self.k,
            types=tuple(dict.fromkeys(self.types)) if self.types else tuple(MemoryType),
            since=self.since,
            until=self.until,
            session_id=self.session_id,
            now=self.now,
            history=self.history,
            entities=tuple(self.entities),
            people=tuple(self.people),
            when=self.when,
            before=self.before,
            after=self.after,
            search=self.search,
            recall=self.recall,
        )


class MemoryPatchIn(Strict):
    """Give ``text``, ``importance`` or both; a field left out stays as it is."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    text: (
        Annotated[NotBlank, Field(min_length=1, max_length=MAX_TEXT_CHARS)] | SkipJsonSchema[None]
    ) = None
    importance: Annotated[float, Field(ge=1.0, le=10.0)] | SkipJsonSchema[None] = None

    @field_validator("text", "importance", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:
            raise ValueError("leave the field out to keep it; null is not a value")
        return value

    @classmethod
    def of(cls, text: str | None = None, importance: float | None = None) -> MemoryPatchIn:
        """The patch of the parts given (None: leave that part), as Python callers have it."""
        given: dict[str, Any] = {"text": text, "importance": importance}
        return cls.model_validate({k: v for k, v in given.items() if v is not None})

    @model_validator(mode="after")
    def _something(self) -> MemoryPatchIn:
        if self.text is None and self.importance is None:
            raise ValueError("give text and/or importance")
        return self

    def to_patch(self) -> MemoryPatch:
        return MemoryPatch(text=self.text, importance=self.importance)


class TaskIn(Strict):
    title: NotBlank = Field(min_length=1, max_length=1024)
    due: Timestamp | None = Field(None, description="ISO-8601; naive means UTC")
    task_id: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=r"^[^\x00-\x1f]+$",
        description="idempotency key",
    )

    @field_validator("due")
    @classmethod
    def _due_utc(cls, value: datetime | None) -> datetime | None:
        return _utc(value)


class TaskPatchIn(Strict):
    status: TaskStatus
    note: str = Field("", max_length=1024)


class FeedbackIn(Strict):
    value: Literal["positive", "negative"]
