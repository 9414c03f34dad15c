"""Before / after: the timeline around an anchor episode ("what happened after the dentist?").

The anchor is the episode with that id, else the best episodic match for the text over all
sessions (only ``session_id`` narrows the search) that shares a word with it or is a close
paraphrase (cosine at least ``ANCHOR_MIN_COSINE``). The answer is the anchor, then up to ``k``
episodes that precede (``before``) or follow (``after``) it, nearest first, walked along the
user's whole timeline (PRECEDES, every session by time) — or, with ``session_id``, along the
anchor's session (NEXT). The walk looks at most ``MAX_CHAIN_HOPS`` episodes away;
``since``/``until``, ``when``, ``entities`` and ``people`` drop episodes from it without closing
the gap, so "after the dentist, with Anna" is the next episodes mentioning Anna. The trace says
``2 after <anchor id> on the timeline``. The caller embeds the anchor text, not ``query``; other
memory types and the typed expansion are left out. No match: an empty result.
"""

from __future__ import annotations

import numpy as np

from memoryd.config import RetrievalConfig
from memoryd.models import Episode, MemoryType
from memoryd.retrieve.focus import wanted_entities, when_window
from memoryd.retrieve.fusion import fuse, passes
from memoryd.retrieve.params import QueryParams
from memoryd.retrieve.result import QueryResult, Stores, item_of
from memoryd.store import MAX_CHAIN_HOPS, StoredMemory

__all__ = ["ANCHOR_MIN_COSINE", "around_anchor"]

ANCHOR_MIN_COSINE = 0.5


def around_anchor(
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
    items = [item_of(anchor, score, why)]
    for distance, episode_id in enumerate(chain, start=1):
        if episode_id in keep and len(items) <= params.k:
            note = f"{distance} {side} {anchor.memory.id} {where}"
            items.append(item_of(keep[episode_id], 1.0 / distance, note))
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
    fused, why, _ = fuse(stores, vector, plain, config)
    candidates = len(fused)
    episodic = (MemoryType.EPISODIC,)
    # Dense search always finds something: without a shared word, only a close paraphrase
    # may anchor the answer, or "after the zeppelin ride" would walk from a random episode.
    matched = {num for num, _ in stores.text.search(plain.query, episodic, len(fused))}
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
    keep = {eid: s for eid, s in stored.items() if passes(("", s.session_id, s.ts), params)}
    window = when_window(params)
    if window is not None:
        keep = {
            eid: s
            for eid, s in keep.items()
            if isinstance(s.memory, Episode) and (s.memory.event_time or s.memory.ts) in window
        }
    if params.entities or params.people:
        wanted = wanted_entities(params)
        entities = stores.graph.entities_of(list(keep))
        keep = {eid: s for eid, s in keep.items() if any(e.id in wanted for e in entities[eid])}
    return keep


# -- typed expansion -------------------------------------------------------------------------
