"""One query's parameters and their checks (a bad value is an :class:`InvalidInputError`
whose message names the field)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from memoryd.errors import InvalidInputError
from memoryd.memory import canonical_name, find_times
from memoryd.models import MemoryType, SearchMode

__all__ = [
    "MAX_ANCHOR_CHARS",
    "MAX_NAMES",
    "MAX_NAME_CHARS",
    "QueryParams",
    "check_anchor",
    "check_names",
    "check_when",
]

MAX_NAMES = 16
MAX_NAME_CHARS = 128
MAX_ANCHOR_CHARS = 4096


@dataclass(frozen=True)
class QueryParams:
    """One query. ``entities``/``people`` are names, ``when`` a time expression in words and
    ``before``/``after`` an anchor (text or episode id); see the module docstring. Bad values
    raise :class:`InvalidInputError`."""

    query: str
    k: int = 10
    types: tuple[MemoryType, ...] = tuple(MemoryType)
    since: datetime | None = None
    until: datetime | None = None
    session_id: str | None = None
    now: datetime | None = None
    history: bool = False
    entities: tuple[str, ...] = ()
    people: tuple[str, ...] = ()
    when: str | None = None
    before: str | None = None
    after: str | None = None
    search: SearchMode | None = None
    recall: bool = True

    def __post_init__(self) -> None:
        if self.before is not None and self.after is not None:
            raise InvalidInputError("give before or after, not both")
        for name, value in (("before", self.before), ("after", self.after)):
            if value is not None:
                check_anchor(name, value)
        check_names("entities", self.entities)
        check_names("people", self.people)
        if self.when is not None:
            check_when(self.when)

    @property
    def filtered(self) -> bool:
        """Whether the query restricts its hits by session, time, entity or person."""
        return bool(
            self.session_id or self.since or self.until or self.when or self.entities or self.people
        )

    @property
    def anchor(self) -> str | None:
        """The before/after anchor, if any: the text the caller embeds instead of ``query``."""
        return self.before if self.before is not None else self.after

    def reference_time(self) -> datetime:
        """What relative times resolve against: ``now``, else the current time."""
        return self.now if self.now is not None else datetime.now(UTC)


def check_names(field_name: str, names: tuple[str, ...]) -> None:
    """Raise :class:`InvalidInputError` unless every name is a usable entity name."""
    if len(names) > MAX_NAMES:
        raise InvalidInputError(f"{field_name}: at most {MAX_NAMES} names, got {len(names)}")
    for name in names:
        if len(name) > MAX_NAME_CHARS or not canonical_name(name):
            raise InvalidInputError(
                f"{field_name}: {name[:MAX_NAME_CHARS]!r} is not a name "
                f"(1-{MAX_NAME_CHARS} characters with a letter or digit)"
            )


def check_when(text: str) -> None:
    """Raise :class:`InvalidInputError` unless ``text`` holds a time expression."""
    if not find_times(text, datetime.now(UTC)):
        raise InvalidInputError(
            f"when: {text[:80]!r} is not a time expression memoryd understands "
            "(e.g. 'yesterday', 'last Friday', 'two weeks ago', 'last month', 'in May 2023')"
        )


def check_anchor(field_name: str, text: str) -> None:
    """Raise :class:`InvalidInputError` for an empty or oversized anchor."""
    if not text.strip() or len(text) > MAX_ANCHOR_CHARS:
        raise InvalidInputError(
            f"{field_name}: give the anchor event as 1-{MAX_ANCHOR_CHARS} characters of text "
            "or an episode id"
        )
