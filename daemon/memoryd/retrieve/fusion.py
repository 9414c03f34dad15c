"""Score fusion: BM25 and dense rankings normalised and weighted, the query's focus lifts
added, then each memory lifted by its session's score, then the episodes of the turns beside the
best hits lifted by a share of theirs.

Fusion is by min-max normalised score with BM25 weighted 1.0, dense 0.2 and session 1.0 by
default; reciprocal-rank fusion stays selectable (``retrieval.fusion = "rrf"``). MiniLM is much
weaker than BM25 on short chat turns and RRF throws the score gaps away (``docs/decisions.md``,
"Score fusion over reciprocal-rank fusion"). A reply often echoes the words of the turn it
answers, or the turn that holds the answer follows the one that matches ("What did you paint?"
→ "A sunset over the lake"), so a hit lends its neighbours ``retrieval.neighbour_weight`` of its
score (``docs/decisions.md``, "Neighbour lift").
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import numpy as np

from memoryd.config import RetrievalConfig
from memoryd.models import Fusion, MemoryType, Tier
from memoryd.retrieve.focus import focus_of
from memoryd.retrieve.params import QueryParams
from memoryd.retrieve.result import Stores

__all__ = ["fuse", "passes"]

# A tier's pool of at most EXACT_POOL vectors, or under EXACT_SHARE of the indexed ones, is
# searched exactly; a larger one through the HNSW index with a filter.
EXACT_POOL = 1024
EXACT_SHARE = 0.05
# The best NEIGHBOUR_HITS fused candidates lift the episodes of the turns beside theirs.
NEIGHBOUR_HITS = 20


def fuse(
    stores: Stores,
    vector: np.ndarray,
    params: QueryParams,
    config: RetrievalConfig,
    pool: set[int] | None = None,
    deepest: Tier | None = None,
    exact: dict[int, float] | None = None,
) -> tuple[dict[int, float], dict[int, str], dict[int, float]]:
    """Fused scores and whys of the candidates, and the dense cosines known.

    Without a ``pool`` dense search is the HNSW index and BM25 runs over everything; with one
    (the memories in tiers 1 to ``deepest``) both are restricted to it, dense search being
    exact over the pool's vectors (``exact``, the pool's cosines when the caller has them)."""
    n = max(config.candidates, params.k)
    focus = focus_of(stores, params, n)
    if pool is None:
        cosines = {num: cos for num, cos, _ in stores.vectors.search(vector, params.types, n)}
        dense = cosines
        lexical = dict(stores.text.search(params.query, params.types, n))
    else:
        if exact is None and not _searched_exactly(len(pool), stores.vectors.size(params.types)):
            hits = stores.vectors.search(vector, params.types, n, pool)
            cosines = dense = {num: cos for num, cos, _ in hits}
        else:
            cosines = exact if exact is not None else _exact_cosines(stores, vector, pool)
            dense = dict(sorted(cosines.items(), key=lambda kv: -kv[1])[:n])
        within = None if deepest is None else int(deepest)
        lexical = dict(stores.text.search(params.query, params.types, n, within))
    lifted = focus.lifts.keys() if pool is None else focus.lifts.keys() & pool
    meta = stores.journal.memory_meta(list(dense.keys() | lexical.keys() | lifted))
    allowed = focus.allowed(stores.journal, meta)
    dense_part = _normalise(dense, config)
    lexical_part = _normalise(lexical, config)
    fused: dict[int, float] = {}
    why: dict[int, str] = {}
    for num in meta:
        if not _admitted(num, meta, params, allowed):
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
    if config.neighbour_weight > 0 and MemoryType.EPISODIC in params.types:
        beside = _neighbour_lifts(stores, fused, meta, config.neighbour_weight)
        new = [n for n in beside if n not in fused and (pool is None or n in pool)]
        meta.update(stores.journal.memory_meta(new))
        for num, lift in beside.items():
            if num not in fused:
                if num not in meta or not _admitted(num, meta, params, allowed):
                    continue
                fused[num], why[num] = 0.0, ""
            fused[num] += lift
            why[num] += f" + beside a hit {lift:.2f}" if why[num] else f"beside a hit {lift:.2f}"
    return fused, why, cosines


def _admitted(
    num: int, meta: dict[int, tuple[str, str, str]], params: QueryParams, allowed: set[int] | None
) -> bool:
    """Whether a candidate passes the query's filters and is one its focus allows."""
    return passes(meta[num], params) and (allowed is None or num in allowed)


def _searched_exactly(pool: int, indexed: int) -> bool:
    """Whether a pool of ``pool`` vectors out of ``indexed`` is searched exactly (its vectors
    read from the journal, ~7 µs each) rather than through the HNSW index filtered to it.
    A filtered walk must pass the pool's outsiders to find its members, so it costs more as
    the pool's share falls (docs/decisions.md,
    "HNSW for the archive and exact search for tier pools")."""
    return pool <= EXACT_POOL or pool < EXACT_SHARE * indexed


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
    """Add the (max-normalised) score of each memory's session: the sum of its best 3 turns
    (a turn scoring as its best record, so one turn stored twice does not count twice)."""
    turns: dict[str, dict[str, float]] = defaultdict(dict)
    for num, score in fused.items():
        turn_id, session_id, _ = meta[num]
        of_session = turns[session_id]
        of_session[turn_id] = max(score, of_session.get(turn_id, score))
    session_score = {s: sum(sorted(v.values(), reverse=True)[:3]) for s, v in turns.items()}
    best = max(session_score.values(), default=0.0) or 1.0
    for num in fused:
        part = session_score[meta[num][1]] / best
        fused[num] += config.session_weight * part
        why[num] += f" + session {part:.2f}"


def _neighbour_lifts(
    stores: Stores, fused: dict[int, float], meta: dict[int, tuple[str, str, str]], weight: float
) -> dict[int, float]:
    """Episode num → ``weight`` × the fused score of the best hit among the
    :data:`NEIGHBOUR_HITS` best whose turn it is just before or after (in the same session)."""
    top = sorted(fused, key=fused.__getitem__, reverse=True)[:NEIGHBOUR_HITS]
    beside = stores.journal.neighbour_episodes(list({meta[n][0] for n in top}))
    lifts: dict[int, float] = {}
    for num in top:
        for other, _ in beside.get(meta[num][0], ()):
            lifts[other] = max(lifts.get(other, 0.0), weight * fused[num])
    return lifts


def passes(meta: tuple[str, str, str], params: QueryParams) -> bool:
    _, session_id, ts = meta
    if params.session_id is not None and session_id != params.session_id:
        return False
    if params.since is None and params.until is None:
        return True
    when = datetime.fromisoformat(ts)
    if params.since is not None and when < params.since:
        return False
    return params.until is None or when <= params.until
