"""The tiered search: tier 1, then tiers 1-2, then everything, stopping at the first stage a
sufficiency judge (:mod:`memoryd.retrieve.sufficiency`) calls enough; everything is searched
through the HNSW index and BM25 over all.

While tiers 1-2 hold at most :data:`~memoryd.store.POOL_CAP` records they are mirrored in memory
(:mod:`memoryd.store.active_pool`): the judge's screen counts the query's words there, and a
pool is searched exactly over the mirrored vectors, BM25 restricted to it. Larger active tiers
(a bulk import that crossed a reshuffle) are skipped, as searching a pool that large costs no
less than searching everything; a search asked of one tier reads them from the headers, exactly
when small, else through the HNSW index filtered to them. A stage whose pool holds every
record (nothing reshuffled since a bulk import) is searched as everything and ends the
search."""

from __future__ import annotations

from typing import Any

import numpy as np

from memoryd.config import RetrievalConfig
from memoryd.models import Episode, Fact, Memory, Parse, SearchMode, Tier
from memoryd.retrieve.fusion import fuse
from memoryd.retrieve.params import QueryParams
from memoryd.retrieve.render import render_line
from memoryd.retrieve.result import Item, QueryResult, Stores, item_of
from memoryd.retrieve.sufficiency import Evidence, Stage, Sufficiency
from memoryd.store import POOL_CAP
from memoryd.text import content_tokens

__all__ = ["OVERFLOW", "STAGES", "search_tiers"]

OVERFLOW = (
    f"tiers 1-2 hold over {POOL_CAP} records: searching a pool that large costs no less than"
    " searching everything"
)

# The pool of each stage: the deepest tier searched, None for everything (the archive is all).
STAGES: dict[SearchMode, tuple[Tier | None, ...]] = {
    SearchMode.TIERED: (Tier.CACHE, Tier.BUFFER, None),
    SearchMode.ALL: (None,),
    SearchMode.TIER1: (Tier.CACHE,),
    SearchMode.TIER2: (Tier.BUFFER,),
}


def search_tiers(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    mode: SearchMode,
    config: RetrievalConfig,
    judge: Sufficiency,
) -> QueryResult:
    """Rank the query's hits tier by tier, stopping at the first stage ``judge`` calls
    sufficient (see the package docstring); the result traces every stage."""
    stages = STAGES[mode]
    if mode is SearchMode.TIERED and params.filtered:
        # A filtered query asks for every memory that passes; a tier cannot say it has them all.
        stages = STAGES[SearchMode.ALL]
    store_size = stores.journal.live_count(params.types)
    trace: list[dict[str, Any]] = []
    items: list[Item] = []
    searched = 0
    active: _Active | None = None
    for depth, deepest in enumerate(stages, start=1):
        step: dict[str, Any] = {"tier": int(deepest or Tier.ARCHIVE)}
        trace.append(step)
        snapshot = None
        if deepest is None or not stores.headers.any_beyond(deepest):
            size = store_size
        else:
            active = active or _Active(stores, params, mode)
            snapshot = active.snapshot
            if snapshot is None and mode is SearchMode.TIERED:
                step["skipped"] = OVERFLOW
                continue
            size = active.size(deepest)
        step["pool"] = size
        # A pool of every record (nothing reshuffled since a bulk import) is the last stage.
        whole = size >= store_size
        last = depth == len(stages) or whole
        if searched and size == searched:
            step["skipped"] = "adds no record to the pool searched before"
            continue
        words: dict[str, tuple[int, int]] = {}
        if not last:
            assert deepest is not None and active is not None  # only a last stage is everything
            words = active.words(deepest)
            before = Stage(params.query, params.k, [], words, store_size, size)
            screened = judge.screen(before)
            if screened is not None:
                step.update(skipped=screened.why, value=screened.value)
                continue
        searched = size
        if whole:
            fused, why, cosines = fuse(stores, vector, params, config)
        elif snapshot is not None:
            assert deepest is not None
            exact = snapshot.cosines(vector, deepest)
            pool = snapshot.nums(deepest)
            fused, why, cosines = fuse(stores, vector, params, config, pool, deepest, exact)
        else:
            assert deepest is not None
            pool = set(stores.headers.pool(deepest, params.types))
            fused, why, cosines = fuse(stores, vector, params, config, pool, deepest)
        items = _hits(stores, fused, why, params)
        step["hits"] = len(items)
        if last:
            step["stop"] = _last_stop(mode, stages, depth)
            break
        verdict = judge(_stage(params, items, cosines, words, store_size, size))
        step.update(sufficient=verdict.sufficient, why=verdict.why, value=verdict.value)
        if verdict.sufficient:
            step["stop"] = f"{judge.name} sufficiency"
            break
    stopped_at = [s["tier"] for s in trace if "hits" in s][-1]
    search = {"mode": mode.value, "stages": trace, "stopped_at": stopped_at}
    return QueryResult(items=items, candidates=searched, search=search)


def _last_stop(mode: SearchMode, stages: tuple[Tier | None, ...], depth: int) -> str:
    """Why the search ended at stage ``depth`` without a judge."""
    if stages is not STAGES[mode]:
        return "a filtered query searches every tier"
    if depth < len(stages):
        return "the pool holds every record"
    return f"last stage (search: {mode.value})"


class _Active:
    """The active tiers as one query sees them: mirrored in memory while small
    (:class:`~memoryd.store.active_pool.PoolSnapshot`), else read from the headers (an explicit tier
    search of large tiers)."""

    def __init__(self, stores: Stores, params: QueryParams, mode: SearchMode) -> None:
        self.stores, self.params = stores, params
        self.terms = content_tokens(params.query) if mode is SearchMode.TIERED else []
        self.snapshot = stores.pool.snapshot(params.types, self.terms)
        self._store_counts: dict[str, int] | None = None

    def size(self, deepest: Tier) -> int:
        if self.snapshot is not None:
            return self.snapshot.size(deepest)
        return self.stores.headers.pool_size(deepest, self.params.types)

    def words(self, deepest: Tier) -> dict[str, tuple[int, int]]:
        """Per content word of the query: records holding it in the store, and in the pool of
        tiers 1 to ``deepest`` (only a mirrored pool is screened)."""
        assert self.snapshot is not None
        if self._store_counts is None:
            self._store_counts = self.stores.text.term_counts(self.terms, self.params.types)
        pool = self.snapshot.word_counts()
        column = 0 if deepest is Tier.CACHE else 1
        return {w: (n, pool[w][column]) for w, n in self._store_counts.items()}


def _stage(
    params: QueryParams,
    items: list[Item],
    cosines: dict[int, float],
    words: dict[str, tuple[int, int]],
    store_size: int,
    pool_size: int,
) -> Stage:
    """What the sufficiency judge sees of a searched stage (:mod:`memoryd.retrieve.sufficiency`)."""
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
            items.append(item_of(stored[n], fused[n], why[n]))
            turns.add(turn_id)
    return _without_shadowed_episodes(items)


def _without_shadowed_episodes(items: list[Item]) -> list[Item]:
    """Drop an episode whose turn is also among the items as a fact, rule or task a pattern
    read: the typed record says the same thing with more structure, and one turn should not
    fill two slots. A record read from the clause or kept as the sentence may say less than
    the episode ("always → Went for a night run…"), so it shadows nothing."""
    typed = {
        i.memory.turn_id
        for i in items
        if not isinstance(i.memory, Episode) and i.memory.parse is Parse.PATTERN
    }
    return [i for i in items if not isinstance(i.memory, Episode) or i.memory.turn_id not in typed]


def _superseded(memory: Memory) -> bool:
    """A fact whose validity a later one closed: history, not an answer (unless asked)."""
    return isinstance(memory, Fact) and memory.valid_to is not None
