"""Hybrid, typed retrieval: BM25 + dense fused, lifted by session, then typed expansion.

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

from memoryd.memory.models import (
    Episode,
    Fact,
    Memory,
    MemoryType,
    Rule,
    Task,
    TaskStatus,
    to_payload,
)
from memoryd.store.graph import GraphStore
from memoryd.store.journal import Journal, StoredMemory
from memoryd.store.lexical import content_tokens
from memoryd.store.vectors import VectorStore

log = logging.getLogger(__name__)

EXPANSION_SCORE = 0.0
MAX_OPEN_TASKS = 5
MAX_RECENT_STATES = 5
MAX_RULES = 3
MAX_FACTS = 10


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


@dataclass(frozen=True)
class QueryParams:
    query: str
    k: int = 10
    types: tuple[MemoryType, ...] = tuple(MemoryType)
    since: datetime | None = None
    until: datetime | None = None
    session_id: str | None = None
    now: datetime | None = None
    history: bool = False


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
            "record": to_payload(self.memory),
        }


@dataclass
class QueryResult:
    items: list[Item] = field(default_factory=list)
    candidates: int = 0

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


def retrieve(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    config: RetrievalConfig,
    executor: Executor | None = None,
) -> QueryResult:
    """Rank, filter, fuse and expand. Read-only: recall counts are the caller's business.

    With an ``executor`` the typed expansions run in parallel (each on its own graph reader).
    """
    fused, why, candidates = _fuse(stores, vector, params, config)
    ranked = sorted(fused, key=fused.__getitem__, reverse=True)
    items: list[Item] = []
    while ranked and len(items) < params.k:
        batch, ranked = ranked[: params.k * 2], ranked[params.k * 2 :]
        stored = stores.journal.memories_by_num(batch)
        items += [
            _item(stored[n], fused[n], why[n])
            for n in batch
            if n in stored and (params.history or not _superseded(stored[n].memory))
        ]
    result = QueryResult(items=items[: params.k], candidates=candidates)
    if config.expand:
        _expand(stores, vector, params, config, result, executor)
    return result


def _superseded(memory: Memory) -> bool:
    """A fact whose validity a later one closed: history, not an answer (unless asked)."""
    return isinstance(memory, Fact) and memory.valid_to is not None


def _fuse(
    stores: Stores, vector: np.ndarray, params: QueryParams, config: RetrievalConfig
) -> tuple[dict[int, float], dict[int, str], int]:
    n = max(config.candidates, params.k)
    dense = {num: cos for num, cos, _ in stores.vectors.search(vector, params.types, n)}
    lexical = dict(stores.journal.search_text(params.query, params.types, n))
    meta = stores.journal.memory_meta(list(dense.keys() | lexical.keys()))
    dense_part = _normalise(dense, config)
    lexical_part = _normalise(lexical, config)
    fused: dict[int, float] = {}
    why: dict[int, str] = {}
    for num in meta:
        if not _passes(meta[num], params):
            continue
        score = config.bm25_weight * lexical_part.get(num, 0.0)
        score += config.dense_weight * dense_part.get(num, 0.0)
        parts = [
            f"{name} {part[num]:.2f}"
            for name, part in (("bm25", lexical_part), ("dense", dense_part))
            if num in part
        ]
        fused[num], why[num] = score, " + ".join(parts)
    if config.session_weight > 0:
        _boost_sessions(fused, why, meta, config)
    return fused, why, len(meta)


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
        memory, stored.type, score, why, [memory.turn_id], stored.session_id, stored.ts, hit
    )


# -- typed expansion -------------------------------------------------------------------------


def _expand(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    config: RetrievalConfig,
    result: QueryResult,
    executor: Executor | None,
) -> None:
    jobs: list[Callable[[], list[tuple[str, str]]]] = []
    if MemoryType.EPISODIC in params.types:
        jobs.append(lambda: _episode_neighbours(stores, result, params.k))
    if MemoryType.SEMANTIC in params.types:
        jobs.append(lambda: _facts_of_hits(stores, result))
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
    seen = {i.memory.id for i in result.items}
    added = dict(pair for pairs in found for pair in pairs)
    fresh = [(mid, why) for mid, why in added.items() if mid not in seen]
    stored = stores.journal.memories_by_id([mid for mid, _ in fresh])
    for mid, why in fresh:
        if mid in stored and _passes_filters(stored[mid], params):
            result.items.append(_item(stored[mid], EXPANSION_SCORE, why, hit=False))


def _passes_filters(stored: StoredMemory, params: QueryParams) -> bool:
    """Expansions honour the session filter for episodes; facts, rules and open tasks hold
    across sessions."""
    if params.session_id is None or stored.type is not MemoryType.EPISODIC:
        return True
    return stored.session_id == params.session_id


def _episode_neighbours(stores: Stores, result: QueryResult, k: int) -> list[tuple[str, str]]:
    hits = [i.memory.id for i in result.items if i.type is MemoryType.EPISODIC][: max(1, k // 2)]
    if not hits:
        return []
    out: list[tuple[str, str]] = []
    for hit, neighbours in stores.graph.session_neighbours(hits, window=1).items():
        out += [(n, f"next to {hit} in its session") for n in neighbours]
    for episode_id, shared in stores.graph.episodes_sharing_entities(hits, limit=k):
        out.append((episode_id, f"shares {shared} entit{'y' if shared == 1 else 'ies'} with a hit"))
    return out


def _facts_of_hits(stores: Stores, result: QueryResult) -> list[tuple[str, str]]:
    hit_ids = [i.memory.id for i in result.items]
    entities = {e.id: e for ents in stores.graph.entities_of(hit_ids).values() for e in ents}
    for item in result.items:
        if isinstance(item.memory, Fact):
            entities[item.memory.object.id] = item.memory.object
    if not entities:
        return []
    fact_ids = stores.graph.facts_about(list(entities), current_only=True)[:MAX_FACTS]
    return [(f, "current fact about an entity in the hits") for f in fact_ids]


def _matching_rules(stores: Stores, query: str) -> list[tuple[str, str]]:
    wanted = set(content_tokens(query))
    scored: list[tuple[float, str, str]] = []
    for rule_id, conditions in stores.graph.rules_with_conditions():
        for condition in conditions:
            tokens = set(content_tokens(condition))
            overlap = wanted & tokens
            if overlap:
                score = len(overlap) / len(tokens)
                scored.append((score, rule_id, f"condition '{condition}' matches the query"))
    scored.sort(reverse=True)
    return [(rule_id, why) for _, rule_id, why in scored[:MAX_RULES]]


def _working_states(
    stores: Stores, vector: np.ndarray, now: datetime, recent: timedelta
) -> list[tuple[str, str]]:
    """The open tasks, and the tasks finished within ``recent`` of ``now``: the states that bear
    on what the user asks whether or not the query names them. Each group is capped, the most
    query-like first."""
    open_tasks = stores.journal.tasks([TaskStatus.PENDING])
    finished = [
        s
        for s in stores.journal.tasks([TaskStatus.DONE, TaskStatus.CANCELLED])
        if isinstance(s.memory, Task) and now - recent <= s.memory.states[-1].ts <= now
    ]
    out = []
    for s in _most_similar(stores, vector, open_tasks, MAX_OPEN_TASKS):
        task = s.memory
        overdue = isinstance(task, Task) and task.due is not None and task.due < now
        out.append((task.id, "open task (overdue)" if overdue else "open task"))
    for s in _most_similar(stores, vector, finished, MAX_RECENT_STATES):
        task = s.memory
        if isinstance(task, Task):
            when = task.states[-1].ts.strftime("%Y-%m-%d %H:%M")
            out.append((task.id, f"{task.status.value} at {when}, within {recent} of now"))
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
        conditions = " and ".join(memory.conditions) or memory.title
        return f"if {conditions} then {'; '.join(memory.actions) or memory.text}"
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
