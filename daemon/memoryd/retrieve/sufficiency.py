"""Is what a tier returned enough to answer the query? The tiered search stops when it is.

Two judges, chosen by ``tiers.sufficiency``; both first need a full top-k (``k`` distinct
turns among the hits):

- :class:`ScoreSufficiency` (``score``, the default, no LLM): the pool must hold most of what the
  store has on the query's words. For each content word of the query the full-text index gives
  how many records hold it in the whole store and how many of those are in the pool; the *word
  share* is the mean of pool/store over the words, weighted by their BM25 idf (a rare word
  counts more than "said"). It must reach ``tiers.threshold`` (0.80, calibrated on LoCoMo with
  ``make bench-tiers``), and the pool must hold ``MIN_POOL_PER_HIT`` records per hit asked for.
  Reading posting-list lengths scores no record, and both are known before the pool is
  searched: a pool that fails them is skipped unsearched (``screen``).

  Why not "the best fused score clears a threshold": fused scores are min-max normalised within
  the pool, so the best hit of any pool scores the same. An absolute evidence score (the share
  of query words the best hit holds, averaged with its cosine) separated the questions tier 1
  could answer from the others less well: at ≤ 1 point of recall@10 lost on LoCoMo it saved
  5 % of candidates, the word share 10 % (``docs/decisions.md``, "Word-share sufficiency judge").
- :class:`LLMSufficiency` (``llm``): the LLM reads the query and the hits and answers with a
  trigger token, ``{"verdict": "sufficient"}`` or ``{"verdict": "search_more"}`` (schema
  constrained). A failed call says "search more": a missing answer must not hide the archive.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memoryd.errors import LLMError
from memoryd.llm import LLM, SUFFICIENT, sufficiency_prompt, sufficiency_schema

log = logging.getLogger(__name__)

# A pool smaller than this many records per hit asked for is not searched alone: at k = 50 the
# deep ranks of a small pool lost 1.9 points of LoCoMo recall@50 (``docs/decisions.md``, "Ten
# records per hit before a pool may suffice").
MIN_POOL_PER_HIT = 10


@dataclass(frozen=True)
class Evidence:
    """One hit as a judge sees it: its text, its line in the rendered context, its turn and its
    cosine to the query."""

    text: str
    line: str
    turn_id: str
    cosine: float


@dataclass(frozen=True)
class Stage:
    """What a judge sees of one stage: the query, the hits (none yet when it screens), and for
    each content word of the query (records holding it in the store, of which in the pool);
    ``store_size`` and ``pool_size`` count records."""

    query: str
    k: int
    hits: Sequence[Evidence]
    words: Mapping[str, tuple[int, int]]
    store_size: int
    pool_size: int


@dataclass(frozen=True)
class Verdict:
    sufficient: bool
    why: str
    value: float | None = None


class Sufficiency(Protocol):
    """A judge. ``screen`` runs before a stage's search, on the word counts alone: a verdict
    skips the stage (not sufficient, no search), None searches it. ``__call__`` judges the
    stage's hits."""

    @property
    def name(self) -> str: ...

    def screen(self, stage: Stage) -> Verdict | None: ...

    def __call__(self, stage: Stage) -> Verdict: ...


def idf(store_size: int, holding: int) -> float:
    """BM25's idf, always positive."""
    return math.log((store_size - holding + 0.5) / (holding + 0.5) + 1.0)


def word_share(words: Mapping[str, tuple[int, int]], store_size: int) -> float | None:
    """The idf-weighted mean share of each query word's records that are in the pool; None
    when no record of the store holds any of the words."""
    held = [(idf(store_size, n), pooled / n) for n, pooled in words.values() if n > 0]
    if not held:
        return None
    return sum(w * share for w, share in held) / sum(w for w, _ in held)


def _short(stage: Stage) -> Verdict | None:
    turns = len({h.turn_id for h in stage.hits})
    if turns < stage.k:
        return Verdict(False, f"top-k not full ({turns} of {stage.k} turns)")
    return None


@dataclass(frozen=True)
class ScoreSufficiency:
    threshold: float
    name: str = "score"

    def screen(self, stage: Stage) -> Verdict | None:
        """Skip a pool that could not be sufficient: one holding too little of what the store
        has on the query's words, or smaller than MIN_POOL_PER_HIT records per hit asked for."""
        share = word_share(stage.words, stage.store_size)
        if share is None:
            return Verdict(False, "no record holds a word of the query: searching everything")
        if share < self.threshold:
            return Verdict(False, f"word share {share:.3f} < {self.threshold}", share)
        least = min(stage.store_size, MIN_POOL_PER_HIT * stage.k)
        if stage.pool_size < least:
            return Verdict(False, f"pool of {stage.pool_size} < {least} records", share)
        return None

    def __call__(self, stage: Stage) -> Verdict:
        screened = self.screen(stage)
        if screened is not None:
            return screened
        share = word_share(stage.words, stage.store_size)
        short = _short(stage)
        if short is not None:
            return Verdict(False, short.why, share)
        return Verdict(True, f"word share {share:.3f} >= {self.threshold}", share)


@dataclass(frozen=True)
class LLMSufficiency:
    llm: LLM
    timeout: float | None = None
    name: str = "llm"

    def screen(self, stage: Stage) -> Verdict | None:
        return None  # the LLM judges hits: every stage is searched

    def __call__(self, stage: Stage) -> Verdict:
        short = _short(stage)
        if short is not None:
            return short
        try:
            answer: dict[str, Any] = self.llm.generate_json(
                sufficiency_prompt(stage.query, [h.line for h in stage.hits]),
                sufficiency_schema(),
                timeout=self.timeout,
            )
        except LLMError as exc:
            log.warning("sufficiency check failed, searching on: %s", exc)
            return Verdict(False, f"LLM check failed ({type(exc).__name__}): searching on")
        return Verdict(answer["verdict"] == SUFFICIENT, f"LLM says {answer['verdict']}")
