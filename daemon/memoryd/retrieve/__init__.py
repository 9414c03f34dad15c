"""Hybrid, typed retrieval: BM25 + dense fused, lifted by session, searched tier by tier, then
expanded along the memory's types. Every item says why it was recalled.

The read path, module by module:

1. :mod:`~memoryd.retrieve.search`: tier 1, then tiers 1-2, then everything (HMO tiers,
   :mod:`memoryd.tiers`), stopping at the first stage a sufficiency judge
   (:mod:`~memoryd.retrieve.sufficiency`) calls enough; a filtered query searches everything.
2. :mod:`~memoryd.retrieve.fusion`: per stage, lexical (FTS5 BM25) and dense (hnswlib, or exact
   over a tier's pool) rankings fused by score, the query's focus
   (:mod:`~memoryd.retrieve.focus`: entities, people, time windows) lifted, then each memory
   lifted by its session (sessions beat single turns on long chats). Hits are the best memories
   of ``k`` distinct turns (a turn's episode is left out when its fact, rule or task is in).
3. :mod:`~memoryd.retrieve.expand`: neighbouring episodes and episodes sharing entities, facts
   about the hits' entities, rules whose conditions match the query, open and recent tasks.
4. :mod:`~memoryd.retrieve.render`: the typed context block for the prompt.

``before``/``after`` queries walk the timeline around an anchor episode instead
(:mod:`~memoryd.retrieve.timeline`).

    judge = ScoreSufficiency(0.8)
    retriever = Retriever(config.retrieval, judge, timedelta(hours=24), SearchMode.TIERED)
    result = retriever.retrieve(stores, encoder.embed(params.query), params)
    render_context(result)
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from memoryd.config import RetrievalConfig
from memoryd.models import SearchMode
from memoryd.retrieve.expand import expand
from memoryd.retrieve.params import MAX_ANCHOR_CHARS, MAX_NAME_CHARS, MAX_NAMES, QueryParams
from memoryd.retrieve.render import fact_line, render_context, render_line
from memoryd.retrieve.result import Item, QueryResult, Stores
from memoryd.retrieve.search import search_tiers
from memoryd.retrieve.sufficiency import LLMSufficiency, ScoreSufficiency, Sufficiency
from memoryd.retrieve.timeline import around_anchor

__all__ = [
    "MAX_ANCHOR_CHARS",
    "MAX_NAMES",
    "MAX_NAME_CHARS",
    "Item",
    "LLMSufficiency",
    "QueryParams",
    "QueryResult",
    "Retriever",
    "ScoreSufficiency",
    "Stores",
    "Sufficiency",
    "fact_line",
    "render_context",
    "render_line",
]


@dataclass(frozen=True)
class Retriever:
    """The read path with its knobs: ``config`` (fusion, ``[retrieval]``), ``judge`` (the
    tiered search's sufficiency judge), ``recent`` (how long a finished task still shows with
    the open ones, ``memory.recent_hours``) and ``default_search`` (for queries that name no
    ``search``, ``tiers.search``)."""

    config: RetrievalConfig
    judge: Sufficiency
    recent: timedelta
    default_search: SearchMode

    def retrieve(
        self,
        stores: Stores,
        vector: np.ndarray,
        params: QueryParams,
        executor: Executor | None = None,
    ) -> QueryResult:
        """Rank, filter, fuse and expand. Read-only: recall counts are the caller's business.

        ``vector`` embeds ``params.anchor`` when the query has one, else ``params.query``. With
        an ``executor`` the typed expansions run in parallel. ``result.search`` traces the
        stages of the tier search."""
        if params.anchor is not None:
            result = around_anchor(stores, vector, params, self.config)
            result.search = {"mode": "timeline", "stages": [], "stopped_at": None}
            return result
        search = params.search or self.default_search
        result = search_tiers(stores, vector, params, search, self.config, self.judge)
        expand(stores, vector, params, self.recent, result, executor)
        return result
