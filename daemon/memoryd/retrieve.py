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

from memoryd.memory.build import EVIDENCE_RELATIONS as HEALTH_RELATIONS
from memoryd.memory.extract import is_health_related, related_drug_terms
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
    # Structured reasons beside ``why``; a matched rule: {"branch", "condition", "negated",
    # "actions"} (see _matching_rules). Empty for most items.
    detail: dict[str, Any] = field(default_factory=dict)

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

    Hits are the best-ranked memories of ``params.k`` distinct turns (a turn's episode is left
    out when its fact, rule or task is in), then the typed expansions follow.

    With an ``executor`` the typed expansions run in parallel (each on its own graph reader).
    """
    fused, why, candidates = _fuse(stores, vector, params, config)
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
    result = QueryResult(items=_without_shadowed_episodes(items), candidates=candidates)
    if config.expand:
        _expand(stores, vector, params, config, result, executor)
    return result


def _without_shadowed_episodes(items: list[Item]) -> list[Item]:
    """Drop an episode whose turn is also among the items as a fact, rule or task: the typed
    record says the same thing with more structure, and one turn should not fill two slots."""
    typed = {i.memory.turn_id for i in items if not isinstance(i.memory, Episode)}
    return [i for i in items if not isinstance(i.memory, Episode) or i.memory.turn_id not in typed]


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
    found = [
        s.memory
        for s in stores.journal.facts()
        if isinstance(s.memory, Fact) and s.memory.relation in HEALTH_RELATIONS
    ]
    return [Expansion(f.id, "health fact: the query is about health") for f in found[:MAX_FACTS]]


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
