"""Is what a tier returned enough to answer the query? The tiered search stops when it is.

Two judges, chosen by ``tiers.sufficiency``:

- :class:`ScoreSufficiency` (``score``, the default, no LLM): the top-k must be full (``k``
  distinct turns) and the best hit's *evidence* must clear a threshold calibrated on LoCoMo
  (``make bench-tiers``). Fused scores cannot serve: they are min-max normalised within the
  pool, so the best hit of any pool scores the same. Evidence is absolute:
  ``(coverage + max(0, cosine)) / 2``, where coverage is the share of the query's content words
  (stopwords dropped, a plural "s" folded) that the hit's text holds, and cosine the hit's
  similarity to the query.
- :class:`LLMSufficiency` (``llm``): the LLM reads the query and the hits and answers with a
  trigger token, ``{"verdict": "sufficient"}`` or ``{"verdict": "search_more"}`` (schema
  constrained). A failed call says "search more": a missing answer must not hide the archive.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memoryd.errors import LLMError
from memoryd.llm.base import LLM
from memoryd.llm.prompts import SUFFICIENT, sufficiency_prompt, sufficiency_schema
from memoryd.store.lexical import content_tokens

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.6


@dataclass(frozen=True)
class Evidence:
    """One hit as a judge sees it: its text, its line in the rendered context, its turn and its
    cosine to the query."""

    text: str
    line: str
    turn_id: str
    cosine: float


@dataclass(frozen=True)
class Verdict:
    sufficient: bool
    why: str
    evidence: float | None = None


class Sufficiency(Protocol):
    name: str

    def __call__(self, query: str, k: int, hits: Sequence[Evidence]) -> Verdict: ...


def _fold(token: str) -> str:
    return token[:-1] if len(token) > 3 and token.endswith("s") else token


def coverage(query: str, text: str) -> float:
    """Share of the query's content words found in ``text`` (0.0 for a query without any)."""
    wanted = {_fold(t) for t in content_tokens(query)}
    if not wanted:
        return 0.0
    found = {_fold(t) for t in content_tokens(text)}
    return len(wanted & found) / len(wanted)


def evidence_score(query: str, hit: Evidence) -> float:
    return (coverage(query, hit.text) + max(0.0, hit.cosine)) / 2


def _full(k: int, hits: Sequence[Evidence]) -> Verdict | None:
    turns = len({h.turn_id for h in hits})
    if turns < k:
        return Verdict(False, f"top-k not full ({turns} of {k} turns)")
    return None


@dataclass(frozen=True)
class ScoreSufficiency:
    threshold: float = DEFAULT_THRESHOLD
    name: str = "score"

    def __call__(self, query: str, k: int, hits: Sequence[Evidence]) -> Verdict:
        short = _full(k, hits)
        if short is not None:
            return short
        best = max(evidence_score(query, h) for h in hits)
        relation = ">=" if best >= self.threshold else "<"
        return Verdict(
            best >= self.threshold, f"best evidence {best:.3f} {relation} {self.threshold}", best
        )


@dataclass(frozen=True)
class LLMSufficiency:
    llm: LLM
    timeout: float | None = None
    name: str = "llm"

    def __call__(self, query: str, k: int, hits: Sequence[Evidence]) -> Verdict:
        short = _full(k, hits)
        if short is not None:
            return short
        try:
            answer: dict[str, Any] = self.llm.generate_json(
                sufficiency_prompt(query, [h.line for h in hits]),
                sufficiency_schema(),
                timeout=self.timeout,
            )
        except LLMError as exc:
            log.warning("sufficiency check failed, searching on: %s", exc)
            return Verdict(False, f"LLM check failed ({type(exc).__name__}): searching on")
        sufficient = answer["verdict"] == SUFFICIENT
        return Verdict(sufficient, f"LLM says {answer['verdict']}")
