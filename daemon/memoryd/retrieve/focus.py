"""What a query selects beyond its words: named entities and time windows (episodic focus).

- ``entities`` / ``people``: names, matched by canonical name (``canonical_name``: case,
  articles, possessives, plurals, aliases) against the entities of the user's graph: any type
  for ``entities``, persons only for ``people``. The hits are then only memories about them:
  episodes that mention one, facts whose object is one. They are candidates even when the
  query's words miss them, and are lifted by ``ENTITY_WEIGHT`` times the share of names they
  match; the trace says ``mentions Anna``.
- ``when``: a time in words ("yesterday", "last Friday", "two weeks ago", "last month",
  "in May 2023"), resolved against ``now`` (else the current time) to a window of the
  expression's size (:func:`time_window`). Episodes are kept when their ``event_time`` (the
  first time they mention), else their ``ts``, falls inside; other memories when their ``ts``
  does. It combines with ``since``/``until``, which keep filtering on ``ts``.

Without ``when`` a time the query text names ("what did I do last week?") lifts the episodes
in its window by ``QUERY_TIME_WEIGHT`` (0.3) and makes them candidates. Names the query text
mentions are not used: lifting them lost recall on LoCoMo, whose questions name the speakers
(``docs/decisions.md``, "No lift for entities named in the query text").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from memoryd.errors import InvalidInputError
from memoryd.memory import TimeMention, entity_id, find_times
from memoryd.models import EntityType, MemoryType
from memoryd.retrieve.params import QueryParams
from memoryd.retrieve.result import Stores
from memoryd.store import Journal

__all__ = [
    "Focus",
    "TimeWindow",
    "focus_of",
    "time_window",
    "wanted_entities",
    "when_window",
]


SEASON_WORDS = ("spring", "summer", "fall", "autumn", "winter")
ENTITY_WEIGHT = 1.0  # lift of a memory about every name asked for (entities / people)
QUERY_TIME_WEIGHT = 0.3  # lift of an episode in a time the query text names (see above)


@dataclass(frozen=True)
class TimeWindow:
    """The half-open UTC interval [start, end) a time expression names."""

    text: str
    start: datetime
    end: datetime

    def __contains__(self, when: datetime) -> bool:
        aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        return self.start <= aware < self.end

    def describe(self) -> str:
        """``'last Friday' (2024-05-03)`` or ``'last week' (2024-04-29..2024-05-05)``."""
        first, last = self.start.date(), (self.end - timedelta(microseconds=1)).date()
        span = first.isoformat() if first == last else f"{first}..{last}"
        return f"{self.text!r} ({span})"


def time_window(text: str, now: datetime) -> TimeWindow | None:
    """The window named by the first time expression in ``text``, resolved against ``now``;
    None when ``text`` names no time.

    The window follows the expression: "yesterday", "last Friday", "two days ago" and clock times
    give that day; "last week", "two weeks ago" the Monday-to-Sunday week holding that day;
    "last weekend" Saturday and Sunday; "last month", "in May 2023" the month; a season its three
    months; "in 2022" the year.
    """
    mentions = find_times(text, now)
    return _window_of(mentions[0]) if mentions else None


def _window_of(mention: TimeMention) -> TimeWindow:
    words, text = mention.text.lower(), mention.text
    day = mention.value.replace(hour=0, minute=0, second=0, microsecond=0)
    if mention.granularity == "year":
        return TimeWindow(text, day, day.replace(year=day.year + 1))
    if mention.granularity == "month":
        months = 3 if any(season in words for season in SEASON_WORDS) else 1
        return TimeWindow(text, day, _months_later(day, months))
    if "weekend" in words:
        return TimeWindow(text, day, day + timedelta(days=2))
    if "week" in words:
        monday = day - timedelta(days=day.weekday())
        return TimeWindow(text, monday, monday + timedelta(days=7))
    return TimeWindow(text, day, day + timedelta(days=1))


def _months_later(first: datetime, months: int) -> datetime:
    year, month = divmod(first.year * 12 + first.month - 1 + months, 12)
    return first.replace(year=year, month=month + 1)


def _entity_ids(name: str, types: tuple[EntityType, ...]) -> list[str]:
    """The ids an entity of this name has under each of ``types`` (ids key on canonical name)."""
    return [entity_id(name, t) for t in types]


@dataclass
class Focus:
    """What a query selects beyond its words, as memory nums.

    ``lifts`` adds score (with a note for the trace) and makes a memory a candidate even when
    lexical and dense search missed it; ``required`` (explicit entities or people) and
    ``window`` (an explicit ``when``) restrict the hits.
    """

    lifts: dict[int, list[tuple[float, str]]] = field(default_factory=dict)
    required: set[int] | None = None
    window: TimeWindow | None = None
    in_window: set[int] = field(default_factory=set)

    def lift(self, found: dict[int, tuple[float, str]]) -> None:
        for num, lift in found.items():
            self.lifts.setdefault(num, []).append(lift)

    def allowed(self, journal: Journal, meta: dict[int, tuple[str, str, str]]) -> set[int] | None:
        """The candidates a hit may come from; None when nothing restricts them."""
        allowed = self.required
        if self.window is not None:
            in_window = self.in_window | _recorded_in(self.window, journal, meta, self.in_window)
            allowed = in_window if allowed is None else allowed & in_window
        return allowed


def _recorded_in(
    window: TimeWindow, journal: Journal, meta: dict[int, tuple[str, str, str]], episodes: set[int]
) -> set[int]:
    """Candidates other than episodes recorded inside the window (episodes go by event time)."""
    inside = [
        num
        for num, (_, _, ts) in meta.items()
        if num not in episodes and datetime.fromisoformat(ts) in window
    ]
    stored = journal.memories_by_num(inside)
    return {num for num, s in stored.items() if s.type is not MemoryType.EPISODIC}


def focus_of(stores: Stores, params: QueryParams, limit: int) -> Focus:
    focus = Focus()
    now = params.reference_time()
    if params.entities or params.people:
        about = _about(stores, params, limit)
        focus.required = set(about)
        focus.lift({num: (ENTITY_WEIGHT * share, note) for num, (share, note) in about.items()})
    window = when_window(params)
    if window is not None:
        focus.window = window
        focus.in_window = _episodes_in(stores, window, limit)
        focus.lift(dict.fromkeys(focus.in_window, (0.0, f"in {window.describe()}")))
    elif QUERY_TIME_WEIGHT > 0 and MemoryType.EPISODIC in params.types:
        window = time_window(params.query, now)
        if window is not None:
            lift = (QUERY_TIME_WEIGHT, f"in {window.describe()}")
            focus.lift(dict.fromkeys(_episodes_in(stores, window, limit), lift))
    return focus


def when_window(params: QueryParams) -> TimeWindow | None:
    """The window of ``params.when`` (None without one), against the query's reference time."""
    if params.when is None:
        return None
    window = time_window(params.when, params.reference_time())
    if window is None:  # checked on construction; only a clock-dependent parse could get here
        raise InvalidInputError(f"when: {params.when!r} names no time")
    return window


def _episodes_in(stores: Stores, window: TimeWindow, limit: int) -> set[int]:
    ids = stores.graph.episodes_in_window(window.start, window.end, limit)
    return set(stores.journal.nums(ids).values())


def wanted_entities(params: QueryParams) -> dict[str, str]:
    """Entity id → the name asked for: ``people`` as persons, ``entities`` as any type."""
    wanted = {i: name for name in params.entities for i in _entity_ids(name, tuple(EntityType))}
    wanted |= {i: name for name in params.people for i in _entity_ids(name, (EntityType.PERSON,))}
    return wanted


def _about(stores: Stores, params: QueryParams, limit: int) -> dict[int, tuple[float, str]]:
    """Memories about the wanted entities (episodes mentioning them, facts whose object they
    are), each with the share of the wanted names it matches and a note naming them."""
    wanted = wanted_entities(params)
    found: dict[str, list[str]] = {}
    if MemoryType.EPISODIC in params.types:
        found |= stores.graph.episodes_mentioning(list(wanted), limit)
    if MemoryType.SEMANTIC in params.types:
        facts = stores.graph.facts_about(list(wanted))[:limit]
        objects = stores.graph.entities_of(facts)
        found |= {f: [e.id for e in objects[f] if e.id in wanted] for f in facts}
    asked = len(set(wanted.values()))
    nums = stores.journal.nums(list(found))
    out: dict[int, tuple[float, str]] = {}
    for memory_id, entity_ids in found.items():
        names = sorted({wanted[i] for i in entity_ids})
        if memory_id in nums and names:
            out[nums[memory_id]] = (len(names) / asked, f"mentions {', '.join(names)}")
    return out


# -- before / after: the timeline around an anchor episode -----------------------------------
