"""Hybrid, typed retrieval: BM25 + dense fused, lifted by session, then typed expansion.

Searched tier by tier (HMO, :mod:`memoryd.tiers`): tier 1, then tiers 1-2, then everything,
stopping at the first stage a sufficiency judge (:mod:`memoryd.sufficiency`) calls enough. A
tier's pool is searched exactly (every vector of the pool, BM25 restricted to it); everything is
searched through the HNSW index and BM25 over all.

The read path of DESIGN.md: rank memories by lexical (FTS5 BM25) and dense (hnswlib) evidence,
lift memories whose session ranks well as a whole (sessions beat single turns on long chats),
then expand the hits through the graph: neighbouring episodes and episodes sharing entities,
facts about the hits' entities, rules whose conditions match the query, and open tasks. Every item
says why it was recalled.

Fusion is by min-max normalised score with BM25 weighted 1.0, dense 0.2 and session 1.0 by
default; reciprocal-rank fusion stays selectable (``retrieval.fusion = "rrf"``). On LoCoMo the
score fusion recalled more evidence at k=10 than RRF at any weight we tried, because MiniLM is
much weaker than BM25 on short chat turns and RRF throws the score gaps away
(numbers: `memoryd eval locomo`, and the closing note of issue 2).

Episodic questions (:class:`QueryParams`):

- ``entities`` / ``people``: names, matched by canonical name (``canonical_name``: case, articles,
  possessives, plurals, aliases) against the entities of the user's graph: any type for
  ``entities``, persons only for ``people``. The hits are then only memories about them:
  episodes that mention one, facts whose object is one. They are candidates even when the query's
  words miss them, and are lifted by ``entity_weight`` times the share of names they match; the
  trace says ``mentions Anna``. Typed expansion still runs as usual.
- ``when``: a time in words ("yesterday", "last Friday", "two weeks ago", "last month",
  "in May 2023"), resolved against ``now`` (else the current time) to a window of the
  expression's size (:func:`time_window`). Episodes are kept when their ``event_time`` (the first
  time they mention), else their ``ts``, falls inside; other memories when their ``ts`` does.
  It combines with ``since``/``until``, which keep filtering on ``ts``.
- ``before`` / ``after`` (one of them): "what happened before/after X". The anchor is the episode
  with that id, else the best episodic match for the text over all sessions (only
  ``session_id`` narrows the search) that shares a word with it or is a close paraphrase
  (cosine at least ``ANCHOR_MIN_COSINE``). The answer is the anchor, then up to ``k`` episodes that
  precede (``before``) or follow (``after``) it, nearest first, walked along the user's whole
  timeline (PRECEDES, every session by time) — or, with ``session_id``, along the anchor's
  session (NEXT). The walk looks at most ``MAX_CHAIN_HOPS`` episodes away; ``since``/``until``,
  ``when``, ``entities`` and ``people`` drop episodes from it without closing the gap, so
  "after the dentist, with Anna" is the next episodes mentioning Anna. The trace says
  ``2 after <anchor id> on the timeline``. The caller embeds the anchor text, not ``query``;
  other memory types and the typed expansion are left out. No match: an empty result.

Without ``when`` a time the query text names ("what did I do last week?") lifts the episodes
in its window by ``query_time_weight`` (0.3) and makes them candidates. LoCoMo recall@10 on the
first 3 conversations: 0.6975 without, 0.7131 at 0.1, 0.7183 at 0.3, 0.7014 at 1.0. Lifting the
episodes that mention a known entity the query names lost recall (0.6717 at a lift of 0.1,
0.6243 at 0.3: LoCoMo questions name the speakers, whom other turns greet), so the query text's
names are not used; explicit ``entities``/``people`` are the way to ask about someone.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import numpy as np

from memoryd.errors import InvalidInputError
from memoryd.memory.build import EVIDENCE_RELATIONS as HEALTH_RELATIONS
from memoryd.memory.extract import (
    canonical_name,
    entity_id,
    is_health_related,
    related_drug_terms,
)
from memoryd.memory.models import (
    EntityType,
    Episode,
    Fact,
    Memory,
    MemoryType,
    Rule,
    Task,
    TaskStatus,
    to_payload,
)
from memoryd.memory.timeparse import TimeMention, find_times
from memoryd.store.graph import MAX_CHAIN_HOPS, GraphStore
from memoryd.store.headers import HeaderStore, Tier
from memoryd.store.journal import Journal, StoredMemory
from memoryd.store.lexical import content_tokens
from memoryd.store.vectors import VectorStore
from memoryd.sufficiency import Evidence, ScoreSufficiency, Stage, Sufficiency

log = logging.getLogger(__name__)

EXPANSION_SCORE = 0.0
MAX_OPEN_TASKS = 5
MAX_RECENT_STATES = 5
MAX_RULES = 3
MAX_FACTS = 10
MAX_NAMES = 16
MAX_NAME_CHARS = 128
MAX_ANCHOR_CHARS = 4096
ANCHOR_MIN_COSINE = 0.5


class SearchMode(StrEnum):
    """Which tiers a query searches: ``tiered`` (tier 1, then 1+2 if that is not sufficient,
    then everything), ``all`` (everything at once: the exhaustive search), ``tier1`` or
    ``tier2`` (tier 1 only, tiers 1 and 2 only; for measurement)."""

    TIERED = "tiered"
    ALL = "all"
    TIER1 = "tier1"
    TIER2 = "tier2"


# The pool of each stage: the deepest tier searched, None for everything (the archive is all).
STAGES: dict[SearchMode, tuple[Tier | None, ...]] = {
    SearchMode.TIERED: (Tier.CACHE, Tier.BUFFER, None),
    SearchMode.ALL: (None,),
    SearchMode.TIER1: (Tier.CACHE,),
    SearchMode.TIER2: (Tier.BUFFER,),
}


class Fusion(StrEnum):
    """How a ranking's scores become fusable: by rank (reciprocal rank) or by min-max score."""

    RRF = "rrf"
    SCORE = "score"


@dataclass(frozen=True)
class RetrievalConfig:
    """Fusion knobs (measured with `memoryd eval locomo`)."""

    fusion: Fusion = Fusion.SCORE
    rrf_k: int = 60
    bm25_weight: float = 1.0
    dense_weight: float = 0.2
    session_weight: float = 1.0
    candidates: int = 100
    expand: bool = True
    recent_hours: float = 24.0
    entity_weight: float = 1.0
    query_time_weight: float = 0.3
    sufficiency: Sufficiency = field(default_factory=ScoreSufficiency)


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


@dataclass
class Item:
    """One recalled memory with its provenance."""

    memory: Memory
    type: MemoryType
    score: float
    why: str
    turn_ids: list[str]
    session_id: str
    ts: str
    hit: bool = True
    # Structured reasons beside ``why``; a matched rule: {"branch", "condition", "negated",
    # "actions"} (see _matching_rules). Empty for most items.
    detail: dict[str, Any] = field(default_factory=dict)
    num: int = 0  # the memory's journal num (its vector label)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.memory.id,
            "type": self.type.value,
            "text": self.memory.text,
            "ts": self.ts,
            "session_id": self.session_id,
            "turn_ids": self.turn_ids,
            "score": round(self.score, 6),
            "why": self.why,
            "detail": to_payload(self.detail),
            "record": to_payload(self.memory),
        }


@dataclass(frozen=True)
class Expansion:
    """A memory a typed expansion brings in, why, and any structured detail for its Item."""

    id: str
    why: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class QueryResult:
    """The items, how many records the search considered (``candidates``: the records of the
    deepest pool searched) and the trace of the tier search (``search``)."""

    items: list[Item] = field(default_factory=list)
    candidates: int = 0
    search: dict[str, Any] = field(default_factory=dict)

    def section(self, mtype: MemoryType) -> list[Item]:
        return [i for i in self.items if i.type is mtype]

    def turn_ids(self) -> list[str]:
        """Source turn ids in rank order (hits first, then expansions), without repeats."""
        seen: dict[str, None] = {}
        for item in sorted(self.items, key=lambda i: not i.hit):
            for turn_id in item.turn_ids:
                seen.setdefault(turn_id, None)
        return list(seen)


@dataclass(frozen=True)
class Stores:
    """The read side of one user's stores, bundled for the retrieval functions."""

    journal: Journal
    graph: GraphStore
    vectors: VectorStore
    headers: HeaderStore


def retrieve(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    config: RetrievalConfig,
    executor: Executor | None = None,
) -> QueryResult:
    """Rank, filter, fuse and expand. Read-only: recall counts are the caller's business.

    The tiers of ``params.search`` are searched in turn (tier 1, tiers 1-2, everything); each
    stage ranks its whole pool and the search stops at the first whose hits
    ``config.sufficiency`` judges enough. The judge may skip a pool unsearched, from the counts
    of the query's words in it; a filtered query searches everything at once. Hits are the
    best-ranked memories of ``params.k`` distinct turns (a turn's episode is left out when its
    fact, rule or task is in), then the typed expansions follow. ``result.search`` traces the
    stages.

    ``vector`` embeds ``params.anchor`` when the query has one, else ``params.query``. With an
    ``executor`` the typed expansions run in parallel (each on its own graph reader).
    """
    if params.anchor is not None:
        result = _around_anchor(stores, vector, params, config)
        result.search = {"mode": "timeline", "stages": [], "stopped_at": None}
        return result
    result = _search_tiers(stores, vector, params, config)
    if config.expand:
        _expand(stores, vector, params, config, result, executor)
    return result


def _search_tiers(
    stores: Stores, vector: np.ndarray, params: QueryParams, config: RetrievalConfig
) -> QueryResult:
    mode = params.search or SearchMode.TIERED
    stages = STAGES[mode]
    if mode is SearchMode.TIERED and params.filtered:
        # A filtered query asks for every memory that passes; a tier cannot say it has them all.
        stages = STAGES[SearchMode.ALL]
    store_size = stores.journal.live_count(params.types)
    trace: list[dict[str, Any]] = []
    items: list[Item] = []
    searched = 0
    counts: dict[str, tuple[int, int, int]] | None = None
    for depth, deepest in enumerate(stages, start=1):
        last = depth == len(stages)
        pool = None if deepest is None else set(stores.headers.pool(deepest, params.types))
        size = store_size if pool is None else len(pool)
        step: dict[str, Any] = {"tier": int(deepest or Tier.ARCHIVE), "pool": size}
        trace.append(step)
        if searched and size == searched:
            step["skipped"] = "adds no record to the pool searched before"
            continue
        words: dict[str, tuple[int, int]] = {}
        if not last:
            assert deepest is not None  # only a last stage searches everything
            if counts is None:  # one pass over the index serves every stage
                counts = stores.journal.term_frequencies(content_tokens(params.query), params.types)
            words = _words(counts, deepest)
            before = Stage(params.query, params.k, [], words, store_size, size)
            screened = config.sufficiency.screen(before)
            if screened is not None:
                step.update(skipped=screened.why, value=screened.value)
                continue
        searched = size
        fused, why, cosines = _fuse(stores, vector, params, config, pool, deepest)
        items = _hits(stores, fused, why, params)
        step["hits"] = len(items)
        if last:
            filtered = stages is not STAGES[mode]
            step["stop"] = (
                "a filtered query searches every tier"
                if filtered
                else f"last stage (search: {mode.value})"
            )
            break
        verdict = config.sufficiency(_stage(params, items, cosines, words, store_size, size))
        step.update(sufficient=verdict.sufficient, why=verdict.why, value=verdict.value)
        if verdict.sufficient:
            step["stop"] = f"{config.sufficiency.name} sufficiency"
            break
    stopped_at = [s["tier"] for s in trace if "hits" in s][-1]
    search = {"mode": mode.value, "stages": trace, "stopped_at": stopped_at}
    return QueryResult(items=items, candidates=searched, search=search)


def _words(counts: dict[str, tuple[int, int, int]], deepest: Tier) -> dict[str, tuple[int, int]]:
    """Per content word of the query: records holding it in the store, and in the pool of
    tiers 1 to ``deepest`` (``counts``: :meth:`Journal.term_frequencies`)."""
    return {term: (c[0], c[int(deepest)]) for term, c in counts.items()}


def _stage(
    params: QueryParams,
    items: list[Item],
    cosines: dict[int, float],
    words: dict[str, tuple[int, int]],
    store_size: int,
    pool_size: int,
) -> Stage:
    """What the sufficiency judge sees of a searched stage (see :mod:`memoryd.sufficiency`)."""
    hits = [
        Evidence(i.memory.text, render_line(i), i.memory.turn_id, cosines.get(i.num, 0.0))
        for i in items
        if i.hit
    ]
    return Stage(params.query, params.k, hits, words, store_size, pool_size)


def _hits(
    stores: Stores, fused: dict[int, float], why: dict[int, str], params: QueryParams
) -> list[Item]:
    """The best fused memories of ``params.k`` distinct turns, shadowed episodes dropped."""
    ranked = sorted(fused, key=fused.__getitem__, reverse=True)
    items: list[Item] = []
    turns: set[str] = set()
    while ranked and len(turns) < params.k:
        batch, ranked = ranked[: params.k * 2], ranked[params.k * 2 :]
        stored = stores.journal.memories_by_num(batch)
        for n in batch:
            if n not in stored or (_superseded(stored[n].memory) and not params.history):
                continue
            turn_id = stored[n].memory.turn_id
            if len(turns) >= params.k and turn_id not in turns:
                break
            items.append(_item(stored[n], fused[n], why[n]))
            turns.add(turn_id)
    return _without_shadowed_episodes(items)


def _without_shadowed_episodes(items: list[Item]) -> list[Item]:
    """Drop an episode whose turn is also among the items as a fact, rule or task: the typed
    record says the same thing with more structure, and one turn should not fill two slots."""
    typed = {i.memory.turn_id for i in items if not isinstance(i.memory, Episode)}
    return [i for i in items if not isinstance(i.memory, Episode) or i.memory.turn_id not in typed]


def _superseded(memory: Memory) -> bool:
    """A fact whose validity a later one closed: history, not an answer (unless asked)."""
    return isinstance(memory, Fact) and memory.valid_to is not None


def _fuse(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    config: RetrievalConfig,
    pool: set[int] | None = None,
    deepest: Tier | None = None,
) -> tuple[dict[int, float], dict[int, str], dict[int, float]]:
    """Fused scores and whys of the candidates, and the dense cosines known.

    Without a ``pool`` dense search is the HNSW index and BM25 runs over everything; with one
    (the memories in tiers 1 to ``deepest``) both are restricted to it, dense search being
    exact over the pool's vectors."""
    n = max(config.candidates, params.k)
    focus = _focus(stores, params, config, n)
    if pool is None:
        cosines = {num: cos for num, cos, _ in stores.vectors.search(vector, params.types, n)}
        dense = cosines
        lexical = dict(stores.journal.search_text(params.query, params.types, n))
    else:
        cosines = _exact_cosines(stores, vector, pool)
        dense = dict(sorted(cosines.items(), key=lambda kv: -kv[1])[:n])
        within = None if deepest is None else int(deepest)
        lexical = dict(stores.journal.search_text(params.query, params.types, n, within))
    lifted = focus.lifts.keys() if pool is None else focus.lifts.keys() & pool
    meta = stores.journal.memory_meta(list(dense.keys() | lexical.keys() | lifted))
    allowed = focus.allowed(stores.journal, meta)
    dense_part = _normalise(dense, config)
    lexical_part = _normalise(lexical, config)
    fused: dict[int, float] = {}
    why: dict[int, str] = {}
    for num in meta:
        if not _passes(meta[num], params) or (allowed is not None and num not in allowed):
            continue
        score = config.bm25_weight * lexical_part.get(num, 0.0)
        score += config.dense_weight * dense_part.get(num, 0.0)
        parts = [
            f"{name} {part[num]:.2f}"
            for name, part in (("bm25", lexical_part), ("dense", dense_part))
            if num in part
        ]
        for lift, note in focus.lifts.get(num, ()):
            score += lift
            parts.append(note)
        fused[num], why[num] = score, " + ".join(parts)
    if config.session_weight > 0:
        _boost_sessions(fused, why, meta, config)
    return fused, why, cosines


def _exact_cosines(stores: Stores, vector: np.ndarray, pool: set[int]) -> dict[int, float]:
    """Cosine of every pool memory to the query (vectors are unit length)."""
    vectors = stores.journal.memory_embeddings(sorted(pool))
    if not vectors:
        return {}
    nums = list(vectors)
    scores = np.stack([vectors[n] for n in nums]) @ np.asarray(vector, dtype=np.float32)
    return dict(zip(nums, scores.tolist(), strict=True))


def _normalise(scores: dict[int, float], config: RetrievalConfig) -> dict[int, float]:
    """Map one ranking's scores to [0, 1]: by rank (RRF) or by min-max of the raw scores."""
    if not scores:
        return {}
    ranked = sorted(scores, key=scores.__getitem__, reverse=True)
    if config.fusion is Fusion.RRF:
        return {num: (config.rrf_k + 1) / (config.rrf_k + i + 1) for i, num in enumerate(ranked)}
    top, bottom = scores[ranked[0]], scores[ranked[-1]]
    span = top - bottom
    if span <= 0:
        return dict.fromkeys(ranked, 1.0)
    return {num: (scores[num] - bottom) / span for num in ranked}


def _boost_sessions(
    fused: dict[int, float],
    why: dict[int, str],
    meta: dict[int, tuple[str, str, str]],
    config: RetrievalConfig,
) -> None:
    """Add the (max-normalised) score of each memory's session: the sum of its best 3."""
    members: dict[str, list[float]] = defaultdict(list)
    for num, score in fused.items():
        members[meta[num][1]].append(score)
    session_score = {s: sum(sorted(v, reverse=True)[:3]) for s, v in members.items()}
    best = max(session_score.values(), default=0.0) or 1.0
    for num in fused:
        part = session_score[meta[num][1]] / best
        fused[num] += config.session_weight * part
        why[num] += f" + session {part:.2f}"


def _passes(meta: tuple[str, str, str], params: QueryParams) -> bool:
    _, session_id, ts = meta
    if params.session_id is not None and session_id != params.session_id:
        return False
    if params.since is None and params.until is None:
        return True
    when = datetime.fromisoformat(ts)
    if params.since is not None and when < params.since:
        return False
    return params.until is None or when <= params.until


def _item(stored: StoredMemory, score: float, why: str, hit: bool = True) -> Item:
    memory = stored.memory
    return Item(
        memory,
        stored.type,
        score,
        why,
        [memory.turn_id],
        stored.session_id,
        stored.ts,
        hit,
        num=stored.num,
    )


# -- episodic focus: named entities and time windows -----------------------------------------

SEASON_WORDS = ("spring", "summer", "fall", "autumn", "winter")


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
class _Focus:
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


def _focus(stores: Stores, params: QueryParams, config: RetrievalConfig, limit: int) -> _Focus:
    focus = _Focus()
    now = params.reference_time()
    if params.entities or params.people:
        about = _about(stores, params, limit)
        focus.required = set(about)
        focus.lift(
            {num: (config.entity_weight * share, note) for num, (share, note) in about.items()}
        )
    window = _when(params)
    if window is not None:
        focus.window = window
        focus.in_window = _episodes_in(stores, window, limit)
        note = f"in {window.describe()}"
        focus.lift(dict.fromkeys(focus.in_window, (0.0, note)))
    elif config.query_time_weight > 0 and MemoryType.EPISODIC in params.types:
        window = time_window(params.query, now)
        if window is not None:
            note = (config.query_time_weight, f"in {window.describe()}")
            focus.lift(dict.fromkeys(_episodes_in(stores, window, limit), note))
    return focus


def _when(params: QueryParams) -> TimeWindow | None:
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


def _wanted_entities(params: QueryParams) -> dict[str, str]:
    """Entity id → the name asked for: ``people`` as persons, ``entities`` as any type."""
    wanted = {i: name for name in params.entities for i in _entity_ids(name, tuple(EntityType))}
    wanted |= {i: name for name in params.people for i in _entity_ids(name, (EntityType.PERSON,))}
    return wanted


def _about(stores: Stores, params: QueryParams, limit: int) -> dict[int, tuple[float, str]]:
    """Memories about the wanted entities (episodes mentioning them, facts whose object they
    are), each with the share of the wanted names it matches and a note naming them."""
    wanted = _wanted_entities(params)
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


def _around_anchor(
    stores: Stores, vector: np.ndarray, params: QueryParams, config: RetrievalConfig
) -> QueryResult:
    """The anchor episode, then up to ``k`` episodes before or after it, nearest first."""
    assert params.anchor is not None
    found = _find_anchor(stores, vector, params, config)
    if found is None:
        return QueryResult()
    anchor, score, why, candidates = found
    later = params.after is not None
    session_only = params.session_id is not None
    chain = stores.graph.timeline(
        anchor.memory.id, later=later, hops=MAX_CHAIN_HOPS, session_only=session_only
    )
    keep = _timeline_filter(stores, params, chain)
    side, where = (
        ("after" if later else "before"),
        ("in its session" if session_only else "on the timeline"),
    )
    items = [_item(anchor, score, why)]
    for distance, episode_id in enumerate(chain, start=1):
        if episode_id in keep and len(items) <= params.k:
            note = f"{distance} {side} {anchor.memory.id} {where}"
            items.append(_item(keep[episode_id], 1.0 / distance, note))
    return QueryResult(items=items, candidates=candidates)


def _find_anchor(
    stores: Stores, vector: np.ndarray, params: QueryParams, config: RetrievalConfig
) -> tuple[StoredMemory, float, str, int] | None:
    """The anchor episode: the one with that id, else the best episodic match for the anchor
    text (in ``session_id`` when given); with its score, why and the candidates considered."""
    assert params.anchor is not None
    name = "after" if params.after is not None else "before"
    by_id = stores.journal.memories_by_id([params.anchor])
    stored = by_id.get(params.anchor)
    if (
        stored is not None
        and stored.type is MemoryType.EPISODIC
        and params.session_id in (None, stored.session_id)
    ):
        return stored, 1.0, f"anchor: episode {params.anchor} ({name})", 1
    plain = QueryParams(
        query=params.anchor,
        k=1,
        types=(MemoryType.EPISODIC,),
        session_id=params.session_id,
        now=params.now,
    )
    fused, why, _ = _fuse(stores, vector, plain, config)
    candidates = len(fused)
    episodic = (MemoryType.EPISODIC,)
    # Dense search always finds something: without a shared word, only a close paraphrase
    # may anchor the answer, or "after the zeppelin ride" would walk from a random episode.
    matched = {num for num, _ in stores.journal.search_text(plain.query, episodic, len(fused))}
    matched |= {
        num
        for num, cos, _ in stores.vectors.search(vector, episodic, 1)
        if cos >= ANCHOR_MIN_COSINE
    }
    eligible = [num for num in fused if num in matched]
    if not eligible:
        return None
    best = max(eligible, key=lambda num: (fused[num], -num))
    stored = stores.journal.memories_by_num([best]).get(best)
    if stored is None:
        return None
    return (
        stored,
        fused[best],
        f"anchor: best match for {name}={params.anchor[:60]!r}: {why[best]}",
        candidates,
    )


def _timeline_filter(
    stores: Stores, params: QueryParams, chain: list[str]
) -> dict[str, StoredMemory]:
    """The episodes of ``chain`` that pass the query's filters: since/until on ``ts``, ``when``
    on the event time (``event_time``, else ``ts``), entities and people on mentions."""
    stored = stores.journal.memories_by_id(chain)
    keep = {eid: s for eid, s in stored.items() if _passes(("", s.session_id, s.ts), params)}
    window = _when(params)
    if window is not None:
        keep = {
            eid: s
            for eid, s in keep.items()
            if isinstance(s.memory, Episode) and (s.memory.event_time or s.memory.ts) in window
        }
    if params.entities or params.people:
        wanted = _wanted_entities(params)
        entities = stores.graph.entities_of(list(keep))
        keep = {eid: s for eid, s in keep.items() if any(e.id in wanted for e in entities[eid])}
    return keep


# -- typed expansion -------------------------------------------------------------------------


def _expand(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    config: RetrievalConfig,
    result: QueryResult,
    executor: Executor | None,
) -> None:
    jobs: list[Callable[[], list[Expansion]]] = []
    if MemoryType.EPISODIC in params.types:
        jobs.append(lambda: _episode_neighbours(stores, result, params.k))
    if MemoryType.SEMANTIC in params.types:
        jobs.append(lambda: _facts_of_hits(stores, result))
        if is_health_related(params.query):
            jobs.append(lambda: _health_profile(stores))
    if MemoryType.PROCEDURAL in params.types:
        jobs.append(lambda: _matching_rules(stores, params.query))
    if MemoryType.WORKING in params.types:
        now = params.now or datetime.now(UTC)
        recent = timedelta(hours=config.recent_hours)
        jobs.append(lambda: _working_states(stores, vector, now, recent))
    if executor is None:
        found = [job() for job in jobs]
    else:
        found = [future.result() for future in [executor.submit(job) for job in jobs]]
    hits = {i.memory.id: i for i in result.items}
    added: dict[str, Expansion] = {}
    for x in (x for expansions in found for x in expansions):
        added.setdefault(x.id, x)
    for x in added.values():
        if x.id in hits:
            hit = hits[x.id]
            hit.why, hit.detail = f"{hit.why}; {x.why}", {**x.detail, **hit.detail}
    fresh = [x for x in added.values() if x.id not in hits]
    stored = stores.journal.memories_by_id([x.id for x in fresh])
    for x in fresh:
        if x.id in stored and _passes_filters(stored[x.id], params):
            item = _item(stored[x.id], EXPANSION_SCORE, x.why, hit=False)
            item.detail = dict(x.detail)
            result.items.append(item)


def _passes_filters(stored: StoredMemory, params: QueryParams) -> bool:
    """Expansions honour the session filter for episodes; facts, rules and open tasks hold
    across sessions."""
    if params.session_id is None or stored.type is not MemoryType.EPISODIC:
        return True
    return stored.session_id == params.session_id


def _episode_neighbours(stores: Stores, result: QueryResult, k: int) -> list[Expansion]:
    hits = [i.memory.id for i in result.items if i.type is MemoryType.EPISODIC][: max(1, k // 2)]
    if not hits:
        return []
    out: list[Expansion] = []
    for hit, neighbours in stores.graph.session_neighbours(hits, window=1).items():
        out += [Expansion(n, f"next to {hit} in its session") for n in neighbours]
    for episode_id, shared in stores.graph.episodes_sharing_entities(hits, limit=k):
        why = f"shares {shared} entit{'y' if shared == 1 else 'ies'} with a hit"
        out.append(Expansion(episode_id, why))
    return out


def _facts_of_hits(stores: Stores, result: QueryResult) -> list[Expansion]:
    hit_ids = [i.memory.id for i in result.items]
    entities = {e.id: e for ents in stores.graph.entities_of(hit_ids).values() for e in ents}
    for item in result.items:
        if isinstance(item.memory, Fact):
            entities[item.memory.object.id] = item.memory.object
    if not entities:
        return []
    fact_ids = stores.graph.facts_about(list(entities), current_only=True)[:MAX_FACTS]
    return [Expansion(f, "current fact about an entity in the hits") for f in fact_ids]


def _health_profile(stores: Stores) -> list[Expansion]:
    """Every current allergy, condition and medication: a health question must not be answered
    without them, whether or not its words match them."""
    found = stores.journal.facts(relations=sorted(HEALTH_RELATIONS))[:MAX_FACTS]
    return [Expansion(s.memory.id, "health fact: the query is about health") for s in found]


# Words that deny what follows them within NEGATION_WINDOW words ("I did not take aspirin",
# "no aspirin today"), besides every "…n't".
NEGATIONS = frozenset(
    "not no never without none nothing neither nor cannot skip skipped skipping forgot "
    "forgotten missed".split()
)
NEGATION_WINDOW = 3
THEN = "then"
OTHERWISE = "otherwise"


def _matching_rules(stores: Stores, query: str) -> list[Expansion]:
    """Rules whose conditions share content words with the query, each with its applicable
    branch; at most MAX_RULES, best first.

    A rule scores by its best condition: shared words / the condition's words. The branch is
    ``then`` (the main line) when the query affirms that condition; ``otherwise`` when it
    negates it (a negation word up to NEGATION_WINDOW words before a shared word, "I did not
    take aspirin", "no aspirin today"; a condition that is itself negated, "if I don't sleep
    well", flips this), or None when the rule has no otherwise-branch; for an affirming query
    a named case (a ``when`` other than "otherwise") sharing words with the query wins over
    ``then``, the one sharing most first. The why says "condition '…' matches the query;
    branch: then"; ``Item.detail`` gets the branch, the condition, whether it was negated and
    the branch's actions.
    """
    words = _plain_words(query)
    asked = set(content_tokens(query))
    wanted = asked | related_drug_terms(asked)
    scored: list[tuple[float, str, str, set[str]]] = []
    for rule_id, conditions in stores.graph.rules_with_conditions():
        best: tuple[float, str, set[str]] | None = None
        for condition in conditions:
            tokens = set(content_tokens(condition))
            overlap = wanted & tokens
            if overlap and (best is None or len(overlap) / len(tokens) > best[0]):
                best = (len(overlap) / len(tokens), condition, overlap)
        if best is not None:
            scored.append((best[0], rule_id, best[1], best[2]))
    scored.sort(key=lambda s: (-s[0], s[1]))
    top = scored[:MAX_RULES]
    stored = stores.journal.memories_by_id([rule_id for _, rule_id, _, _ in top])
    out: list[Expansion] = []
    for _, rule_id, condition, overlap in top:
        rule = stored[rule_id].memory if rule_id in stored else None
        if not isinstance(rule, Rule):
            continue
        main, cases = rule.actions, rule.branches
        negated = _denies(words, overlap) != _denies(_plain_words(condition), None)
        branch: str | None = THEN
        if negated:
            branch = OTHERWISE if OTHERWISE in cases else None
        else:
            shared = {w: len(wanted & set(content_tokens(w))) for w in cases if w != OTHERWISE}
            named = sorted((-n, w) for w, n in shared.items() if n > 0)
            if named:
                branch = named[0][1]
        actions = main if branch == THEN else cases.get(branch, []) if branch else []
        why = f"condition '{condition}' matches the query"
        if negated:
            why += ", which negates it"
        why += f"; branch: {branch}" if branch else "; no branch applies"
        detail = {"branch": branch, "condition": condition, "negated": negated, "actions": actions}
        out.append(Expansion(rule_id, why, detail))
    return out


def _plain_words(text: str) -> list[str]:
    """Lower-case words with outer punctuation removed ("don't" stays one word)."""
    words = (w.strip('.,;:!?"()[]{}-') for w in text.lower().replace("\u2019", "'").split())
    return [w for w in words if w]


def _denies(words: list[str], targets: set[str] | None) -> bool:
    """Whether a negation word stands up to NEGATION_WINDOW words before one of ``targets``
    (content tokens; None: anywhere in ``words``)."""
    for i, word in enumerate(words):
        if targets is None:
            if _is_negation(word):
                return True
        elif word.replace("'", "") in targets and any(
            _is_negation(w) for w in words[max(0, i - NEGATION_WINDOW) : i]
        ):
            return True
    return False


def _is_negation(word: str) -> bool:
    return word in NEGATIONS or word.endswith("n't")


def _working_states(
    stores: Stores, vector: np.ndarray, now: datetime, recent: timedelta
) -> list[Expansion]:
    """The open tasks, and the tasks finished within ``recent`` of ``now``: the states that bear
    on what the user asks whether or not the query names them. Each group is capped, the most
    query-like first."""
    open_tasks = list(stores.journal.memories_by_id(stores.graph.open_tasks()).values())
    finished = [
        s
        for s in stores.journal.tasks([TaskStatus.DONE, TaskStatus.CANCELLED])
        if isinstance(s.memory, Task) and now - recent <= s.memory.states[-1].ts <= now
    ]
    out = []
    for s in _most_similar(stores, vector, open_tasks, MAX_OPEN_TASKS):
        task = s.memory
        overdue = isinstance(task, Task) and task.due is not None and task.due < now
        out.append(Expansion(task.id, "open task (overdue)" if overdue else "open task"))
    for s in _most_similar(stores, vector, finished, MAX_RECENT_STATES):
        task = s.memory
        if isinstance(task, Task):
            when = task.states[-1].ts.strftime("%Y-%m-%d %H:%M")
            why = f"{task.status.value} at {when}, within {recent} of now"
            out.append(Expansion(task.id, why))
    return out


def _most_similar(
    stores: Stores, vector: np.ndarray, stored: list[StoredMemory], limit: int
) -> list[StoredMemory]:
    vectors = stores.journal.memory_embeddings([s.num for s in stored])
    return sorted(
        stored,
        key=lambda s: -float(np.dot(vectors[s.num], vector)) if s.num in vectors else 0.0,
    )[:limit]


# -- rendering -------------------------------------------------------------------------------

SECTION_TITLES = {
    MemoryType.EPISODIC: "What happened (episodic)",
    MemoryType.SEMANTIC: "What is known about the user (semantic)",
    MemoryType.PROCEDURAL: "Rules and procedures (procedural)",
    MemoryType.WORKING: "Open tasks and recent states (working)",
}


def render_line(item: Item) -> str:
    memory = item.memory
    if isinstance(memory, Episode):
        when = memory.ts.strftime("%Y-%m-%d %H:%M")
        who = f"{memory.speaker}: " if memory.speaker else ""
        return f"[{when}] {who}{memory.text}"
    if isinstance(memory, Fact):
        negation = "not " if memory.negated else ""
        relation = memory.relation.replace("_", " ").replace(":", ": ")
        return f'{memory.subject} {negation}{relation} {memory.object.name} ("{memory.text}")'
    if isinstance(memory, Rule):
        # "if C then A1; A2 (when W: X) (otherwise B1)", then the branch a query matched, marked
        # "[applies: otherwise]" ("[applies: none]" when it negated a rule with no else).
        conditions = " and ".join(memory.conditions) or memory.title
        line = f"if {conditions} then {'; '.join(memory.actions) or memory.text}"
        for when, actions in memory.branches.items():
            steps = "; ".join(actions)
            line += f" (otherwise {steps})" if when == OTHERWISE else f" (when {when}: {steps})"
        if "branch" in item.detail:
            line += f" [applies: {item.detail['branch'] or 'none'}]"
        return line
    if isinstance(memory, Task):
        due = f" (due {memory.due.strftime('%Y-%m-%d %H:%M')})" if memory.due else ""
        if memory.status is TaskStatus.PENDING or not memory.states:
            return f"[{memory.status.value}] {memory.title}{due}"
        when = memory.states[-1].ts.strftime("%Y-%m-%d %H:%M")
        return f"[{memory.status.value} {when}] {memory.title}{due}"
    return memory.text


def render_context(result: QueryResult) -> str:
    """A compact, typed block for an LLM prompt; empty sections are left out."""
    blocks = []
    for mtype, title in SECTION_TITLES.items():
        items = result.section(mtype)
        if items:
            lines = "\n".join(f"- {render_line(i)}" for i in items)
            blocks.append(f"## {title}\n{lines}")
    return "\n\n".join(blocks)
