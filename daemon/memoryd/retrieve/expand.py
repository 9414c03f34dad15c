"""Typed expansion: what else the hits bring in, through the graph and the journal.

Neighbouring episodes and episodes sharing entities with the hits, current facts about the hits'
entities (and the whole health profile for a health question), rules whose conditions match the
query with the branch that applies, and the open tasks with the ones finished recently. Each
expansion says why it was recalled.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor
from datetime import UTC, datetime, timedelta
from functools import lru_cache

import numpy as np

from memoryd.memory import HEALTH_ATTRIBUTES, is_health_related, related_drug_terms
from memoryd.models import OTHERWISE, Episode, Fact, MemoryType, Rule, Task, TaskStatus
from memoryd.retrieve.params import QueryParams
from memoryd.retrieve.result import Expansion, QueryResult, Stores, item_of
from memoryd.store import StoredMemory
from memoryd.text import content_tokens

__all__ = ["THEN", "expand", "matching_rules"]

EXPANSION_SCORE = 0.0
MAX_OPEN_TASKS = 5
MAX_RECENT_STATES = 5
MAX_RULES = 3
MAX_FACTS = 10
CONDITION_CACHE = 8192  # rule conditions whose words are kept between queries
FINISHED = (TaskStatus.DONE, TaskStatus.CANCELLED)  # shown for a while after they happen


def expand(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    recent: timedelta,
    result: QueryResult,
    executor: Executor | None,
) -> None:
    """Add the typed evidence of the hits to ``result`` (see the module docstring); with an
    ``executor`` the expansions run in parallel (each on its own graph reader)."""
    jobs: list[Callable[[], list[Expansion]]] = []
    if MemoryType.EPISODIC in params.types:
        jobs.append(lambda: _episode_neighbours(stores, result, params.k))
    if MemoryType.SEMANTIC in params.types:
        jobs.append(lambda: _facts_of_hits(stores, result))
        if is_health_related(params.query):
            jobs.append(lambda: _health_profile(stores))
    if MemoryType.PROCEDURAL in params.types:
        jobs.append(lambda: matching_rules(stores, params.query))
    if MemoryType.WORKING in params.types:
        now = params.now or datetime.now(UTC)
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
            item = item_of(stored[x.id], EXPANSION_SCORE, x.why, hit=False)
            item.detail = dict(x.detail)
            result.items.append(item)


def _passes_filters(stored: StoredMemory, params: QueryParams) -> bool:
    """Expansions honour the session filter for episodes; facts, rules and open tasks hold
    across sessions."""
    if params.session_id is None or stored.type is not MemoryType.EPISODIC:
        return True
    return stored.session_id == params.session_id


def _episode_neighbours(stores: Stores, result: QueryResult, k: int) -> list[Expansion]:
    """The episodes of the turns beside the best episodic hits in their sessions (journal
    order), and the episodes that mention most of the entities these hits mention."""
    best = [(i.num, i.memory) for i in result.items if isinstance(i.memory, Episode)]
    best = best[: max(1, k // 2)]
    if not best:
        return []
    hits = [hit for _, hit in best]
    beside = stores.journal.neighbour_episodes([hit.turn_id for hit in hits])
    out: list[Expansion] = []
    for hit in hits:
        why = f"next to {hit.id} in its session"
        out += [Expansion(other, why) for _, other in beside.get(hit.turn_id, ())]
    entities = sorted({m.entity.id for hit in hits for m in hit.mentions})
    shared = stores.mentions.episodes_sharing(entities, [num for num, _ in best], limit=k)
    for episode_id, count in shared:
        why = f"shares {count} entit{'y' if count == 1 else 'ies'} with a hit"
        out.append(Expansion(episode_id, why))
    return out


def _facts_of_hits(stores: Stores, result: QueryResult) -> list[Expansion]:
    """Current facts about the entities the hits are about: an episode's mentions, a fact's
    object (read from the hits themselves)."""
    entities: set[str] = set()
    for item in result.items:
        if isinstance(item.memory, Episode):
            entities.update(m.entity.id for m in item.memory.mentions)
        elif isinstance(item.memory, Fact):
            entities.add(item.memory.object.id)
    if not entities:
        return []
    fact_ids = stores.graph.facts_about(sorted(entities), current_only=True)[:MAX_FACTS]
    return [Expansion(f, "current fact about an entity in the hits") for f in fact_ids]


HEALTH_PROFILE = sorted(HEALTH_ATTRIBUTES | {"dose"})
"""The attributes of the health profile: allergies, conditions, medications and their doses."""


def _health_profile(stores: Stores) -> list[Expansion]:
    """Every current allergy, condition, medication and dose: a health question must not be
    answered without them, whether or not its words match them."""
    found = stores.journal.facts(relations=HEALTH_PROFILE, limit=MAX_FACTS)
    return [Expansion(s.memory.id, "health fact: the query is about health") for s in found]


# Words that deny what follows them within NEGATION_WINDOW words ("I did not take aspirin",
# "no aspirin today"), besides every "…n't".
NEGATIONS = frozenset(
    "not no never without none nothing neither nor cannot skip skipped skipping forgot "
    "forgotten missed".split()
)
NEGATION_WINDOW = 3
THEN = "then"


def matching_rules(stores: Stores, query: str) -> list[Expansion]:
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
            tokens = _condition_tokens(condition)
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


@lru_cache(maxsize=CONDITION_CACHE)
def _condition_tokens(condition: str) -> frozenset[str]:
    """A rule condition's content words: every query reads every condition, and they rarely
    change."""
    return frozenset(content_tokens(condition))


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
    query-like first; only the tasks shown are decoded."""
    heads = stores.journal.task_heads()
    open_nums = {h.num: h.id for h in heads if h.status is TaskStatus.PENDING}
    finished = {
        h.num: h.id
        for h in heads
        if h.status in FINISHED and h.ts is not None and now - recent <= h.ts <= now
    }
    open_ids = _nearest(stores, vector, open_nums, MAX_OPEN_TASKS)
    finished_ids = _nearest(stores, vector, finished, MAX_RECENT_STATES)
    stored = stores.journal.memories_by_id([*open_ids, *finished_ids])
    out = []
    for task in (stored[i].memory for i in open_ids if i in stored):
        overdue = isinstance(task, Task) and task.due is not None and task.due < now
        out.append(Expansion(task.id, "open task (overdue)" if overdue else "open task"))
    for task in (stored[i].memory for i in finished_ids if i in stored):
        if isinstance(task, Task):
            when = task.states[-1].ts.strftime("%Y-%m-%d %H:%M")
            why = f"{task.status.value} at {when}, within {recent} of now"
            out.append(Expansion(task.id, why))
    return out


def _nearest(stores: Stores, vector: np.ndarray, ids: dict[int, str], limit: int) -> list[str]:
    """The ``limit`` tasks of ``ids`` (num → id) closest to ``vector``, searched in the working
    memories' vector index among those nums: no payload or vector is read from the journal
    (there may be hundreds of open tasks and a reply shows five). Tasks the index does not
    hold yet (a projection catching up) follow the ranked ones, oldest first."""
    found = stores.vectors.search(vector, [MemoryType.WORKING], limit, set(ids))
    ranked = [ids[num] for num, _, _ in found]
    unranked = [ids[num] for num in sorted(ids.keys() - {num for num, _, _ in found})]
    return (ranked + unranked)[:limit]


# -- rendering -------------------------------------------------------------------------------
