"""Precision and recall of a user's semantic facts against LoCoMo's ``observation`` field.

LoCoMo lists, per session and speaker, generated fact sentences with the dialogue id of the turn
each comes from (``{"session_3_observation": {"Caroline": [["Caroline loves art.", "D3:5"]]}}``).
Each conversation is ingested into a fresh user as :mod:`memoryd.eval.locomo` does (turn id =
dia_id, speaker kept, so a fact's subject is the speaker who stated it); with ``with_llm`` the
service's LLM abstraction runs for that user afterwards. Every semantic fact of the user (current
and superseded) is rendered as a sentence (:func:`render_fact`: ``Caroline likes: painting``,
``Melanie sibling: Anna``, ``Jon does not live in: Paris``).

Matching rule: a fact matches an observation when

1. the observation's speaker equals the fact's subject, and
2. one of the observation's dialogue ids is one of the fact's source turns, or lies in the same
   session as one of them (same session: in LoCoMo every observation's dia_id is in its own
   session, and the generator often pins a fact to a neighbouring turn — the question before the
   answer, or the second time it is said — while across sessions the same topic recurs, so a
   cross-session match would credit one fact with observations it was not extracted from), and
3. the cosine similarity of the encoder embeddings of the fact sentence and the observation
   sentence is at least ``threshold`` (default :data:`DEFAULT_THRESHOLD`, 0.70). Chosen by reading
   the best pair of every fact of the ten conversations (``--show``, no LLM): with the subject's
   name in both sentences, same-speaker pairs about unrelated things already score 0.55-0.65 with
   this encoder; of the pairs at 0.70-0.75 about five in six are right ("Joanna likes reading" ~
   "Joanna also enjoys reading, watching movies…"), at 0.65-0.70 about two in three and near 0.67
   a coin toss ("Nate likes Nintendo games" ~ "Nate practices and competes on his computer for
   gaming"), below 0.65 mostly wrong.

Metrics: precision = matched facts / facts; recall = observations matched by at least one fact /
observations; F1 of the two. Recall is also given over *fact-like* observations: those whose
sentence holds a stative cue of the kind the fact vocabulary covers (:data:`FACT_CUES`: likes,
dislikes, loves, hates, enjoys, fan of, passionate about, favourite, prefers, allergic, lives in,
works as/at/for, is a/an, has a/an, owns, married); the rest are mostly events and feelings
("Melanie went camping last week") that no fact relation is meant to hold.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, cast

import numpy as np
from tqdm import tqdm

from memoryd.errors import ConflictError
from memoryd.eval.locomo import INGEST_BATCH, load_locomo, normalise_dia_id, parse_evidence
from memoryd.ingest import NewTurn
from memoryd.models import Fact, Memory, MemoryType
from memoryd.service import MemoryService

DEFAULT_THRESHOLD = 0.70
SWEEP = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
PAGE = 500
FACT_CUES = re.compile(
    r"\b(?:(?:dis)?likes?|loves?|hates?|enjoys?|fan of|passionate about|favou?rite|prefers?|"
    r"allergic|lives in|works (?:as|at|for)|is an?|has an?|owns|married)\b",
    re.IGNORECASE,
)
_OBSERVATION_KEY = re.compile(r"^session_\d+_observation$")


@dataclass(frozen=True)
class Observation:
    speaker: str
    text: str
    dia_ids: tuple[str, ...]

    @property
    def sessions(self) -> set[int]:
        return _sessions(self.dia_ids)

    @property
    def fact_like(self) -> bool:
        return FACT_CUES.search(self.text) is not None


@dataclass(frozen=True)
class RenderedFact:
    id: str
    subject: str
    relation: str
    sentence: str
    sources: tuple[str, ...]
    origin: str
    parse: str

    @property
    def sessions(self) -> set[int]:
        return _sessions(self.sources)

    @property
    def base_relation(self) -> str:
        return self.relation.split(":", 1)[0]


def _sessions(turn_ids: Sequence[str]) -> set[int]:
    """Session numbers of the ids that are LoCoMo dia ids ("D3:5" → 3); others are skipped."""
    normalised = (normalise_dia_id(t) for t in turn_ids)
    return {int(n[1:].split(":")[0]) for n in normalised if n}


# -- rendering -----------------------------------------------------------------------------


def render_fact(fact: Fact) -> str:
    """The fact as a plain sentence: its subject, attribute and value, "Melanie sibling: Anna",
    "Caroline does not like: horror films" (the words of the reply's line)."""
    return f"{fact.subject} {fact.statement}"


def _rendered(fact: Fact) -> RenderedFact:
    return RenderedFact(
        id=fact.id,
        subject=fact.subject,
        relation=fact.relation,
        sentence=render_fact(fact),
        sources=tuple(fact.sources or [fact.turn_id]),
        origin=fact.origin.value,
        parse=fact.parse.value,
    )


# -- data ----------------------------------------------------------------------------------


def _observation_ids(raw: str | list[str]) -> list[str]:
    """Dia ids of one observation: a string, a comma-separated string or a list of them."""
    items = raw if isinstance(raw, list) else [raw]
    return parse_evidence([i.replace(",", ";") for i in items])[0]


def load_observations(path: Path) -> dict[str, list[Observation]]:
    """sample_id → observations of every session and speaker (those without a dia id dropped)."""
    out: dict[str, list[Observation]] = {}
    for sample in json.loads(path.read_text()):
        observations = []
        for key, by_speaker in sample.get("observation", {}).items():
            if not _OBSERVATION_KEY.match(key):
                continue
            for speaker, items in by_speaker.items():
                for text, raw in items:
                    ids = _observation_ids(raw)
                    if ids:
                        observations.append(Observation(speaker, text, tuple(ids)))
        out[sample["sample_id"]] = observations
    return out


def all_memories(
    service: MemoryService, user_id: str, types: Sequence[MemoryType] = ()
) -> list[Memory]:
    """Every live memory of the user of the given types (all when none), page by page."""
    out: list[Memory] = []
    cursor: int | None = 0
    while cursor is not None:
        page = service.list_memories(user_id, types, PAGE, cursor)
        out += [s.memory for s in page.memories]
        cursor = page.next_cursor
    return out


def collect_facts(service: MemoryService, user_id: str) -> list[RenderedFact]:
    """Every semantic fact the user has."""
    memories = all_memories(service, user_id, [MemoryType.SEMANTIC])
    return [_rendered(m) for m in memories if isinstance(m, Fact)]


# -- matching ------------------------------------------------------------------------------


def eligible(fact: RenderedFact, obs: Observation) -> bool:
    """Rules 1 and 2 of the matching rule (speaker, and source turn or same session)."""
    if fact.subject != obs.speaker:
        return False
    return bool(set(fact.sources) & set(obs.dia_ids)) or bool(fact.sessions & obs.sessions)


def _embed(service: MemoryService, texts: Sequence[str]) -> np.ndarray:
    dim = service.encoder.dim
    return np.stack([service.encoder.embed(t) for t in texts]) if texts else np.zeros((0, dim))


@dataclass
class ConversationResult:
    """One conversation: facts × observations cosine, and which pairs rules 1-2 allow."""

    sample_id: str
    turns: int
    facts: list[RenderedFact]
    observations: list[Observation]
    scores: np.ndarray  # (facts, observations)
    allowed: np.ndarray  # bool, same shape

    def matches(self, threshold: float) -> np.ndarray:
        return self.allowed & (self.scores >= threshold)


def score_conversation(
    service: MemoryService,
    sample_id: str,
    turns: int,
    facts: list[RenderedFact],
    observations: list[Observation],
) -> ConversationResult:
    fact_vecs = _embed(service, [f.sentence for f in facts])
    obs_vecs = _embed(service, [o.text for o in observations])
    allowed = np.array([[eligible(f, o) for o in observations] for f in facts], dtype=bool).reshape(
        len(facts), len(observations)
    )
    return ConversationResult(
        sample_id, turns, facts, observations, fact_vecs @ obs_vecs.T, allowed
    )


# -- report --------------------------------------------------------------------------------


def _ratio(num: int, den: int) -> float:
    return num / den if den else 0.0


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r else 0.0


@dataclass(frozen=True)
class Totals:
    facts: int
    matched_facts: int
    observations: int
    matched_observations: int
    fact_like: int
    matched_fact_like: int

    @property
    def precision(self) -> float:
        return _ratio(self.matched_facts, self.facts)

    @property
    def recall(self) -> float:
        return _ratio(self.matched_observations, self.observations)

    @property
    def f1(self) -> float:
        return _f1(self.precision, self.recall)

    @property
    def fact_like_recall(self) -> float:
        return _ratio(self.matched_fact_like, self.fact_like)


def _totals(result: ConversationResult, threshold: float) -> Totals:
    hits = result.matches(threshold)
    obs_hit = hits.any(axis=0)
    like = np.array([o.fact_like for o in result.observations], dtype=bool)
    return Totals(
        facts=len(result.facts),
        matched_facts=int(hits.any(axis=1).sum()),
        observations=len(result.observations),
        matched_observations=int(obs_hit.sum()),
        fact_like=int(like.sum()),
        matched_fact_like=int((obs_hit & like).sum()),
    )


@dataclass(frozen=True)
class Pair:
    """A fact and its best-scoring allowed observation."""

    sample_id: str
    fact: RenderedFact
    observation: Observation | None
    score: float


@dataclass
class Report:
    threshold: float
    with_llm: bool
    results: list[ConversationResult]

    def totals(self, threshold: float | None = None) -> Totals:
        parts = [
            _totals(r, self.threshold if threshold is None else threshold) for r in self.results
        ]
        return Totals(*(sum(getattr(p, f.name) for p in parts) for f in fields(Totals)))

    def by_key(self, key: str) -> dict[str, tuple[int, int]]:
        """``key`` ("base_relation", "origin" or "parse") → (facts, matched facts)."""
        facts: Counter[str] = Counter()
        matched: Counter[str] = Counter()
        for result in self.results:
            hit = cast(np.ndarray, result.matches(self.threshold).any(axis=1))
            for fact, ok in zip(result.facts, hit, strict=True):
                facts[getattr(fact, key)] += 1
                matched[getattr(fact, key)] += int(ok)
        return {k: (facts[k], matched[k]) for k in sorted(facts, key=lambda k: -facts[k])}

    def best_pairs(self) -> list[Pair]:
        pairs = []
        for result in self.results:
            masked = np.where(result.allowed, result.scores, -np.inf)
            for i, fact in enumerate(result.facts):
                j = int(np.argmax(masked[i])) if masked.shape[1] else -1
                best = float(masked[i, j]) if j >= 0 else -np.inf
                obs = result.observations[j] if np.isfinite(best) else None
                pairs.append(Pair(result.sample_id, fact, obs, best))
        return pairs

    def near_threshold(self, n: int) -> tuple[list[Pair], list[Pair]]:
        """The ``n`` matched and ``n`` unmatched facts whose best score is closest to the line."""
        pairs = [p for p in self.best_pairs() if p.observation is not None]
        above = sorted((p for p in pairs if p.score >= self.threshold), key=lambda p: p.score)
        below = sorted((p for p in pairs if p.score < self.threshold), key=lambda p: -p.score)
        return above[:n], below[:n]

    def format(self, show: int = 0) -> str:
        t = self.totals()
        mode = "with LLM abstraction" if self.with_llm else "no LLM"
        lines = [
            f"LoCoMo observations vs semantic facts ({len(self.results)} conversations, {mode}, "
            f"threshold {self.threshold:.2f})",
            "match: speaker == subject AND (observation turn in fact sources OR same session) "
            f"AND cosine >= {self.threshold:.2f}",
            "",
            f"{'conversation':14} {'turns':>6} {'observations':>13} {'facts':>6} "
            f"{'matched facts':>14} {'matched obs':>12}",
        ]
        for r in self.results:
            c = _totals(r, self.threshold)
            lines.append(
                f"{r.sample_id:14} {r.turns:>6} {c.observations:>13} {c.facts:>6} "
                f"{c.matched_facts:>14} {c.matched_observations:>12}"
            )
        lines += [
            "",
            f"precision {t.precision:.4f} ({t.matched_facts}/{t.facts})   "
            f"recall {t.recall:.4f} ({t.matched_observations}/{t.observations})   "
            f"F1 {t.f1:.4f}",
            f"recall on fact-like observations {t.fact_like_recall:.4f} "
            f"({t.matched_fact_like}/{t.fact_like})",
            "",
            f"{'relation':18} {'facts':>6} {'matched':>8}",
            *(f"{k:18} {n:>6} {m:>8}" for k, (n, m) in self.by_key("base_relation").items()),
            "",
            f"{'origin':18} {'facts':>6} {'matched':>8}",
            *(f"{k:18} {n:>6} {m:>8}" for k, (n, m) in self.by_key("origin").items()),
            "",
            f"{'parse':18} {'facts':>6} {'matched':>8} {'precision':>10}",
            *(f"{k:18} {n:>6} {m:>8} {m / n:>10.4f}" for k, (n, m) in self.by_key("parse").items()),
            "",
            f"{'threshold':>9} {'precision':>10} {'recall':>8} {'F1':>8}",
            *self._sweep_lines(),
        ]
        if show:
            lines += self._show_lines(show)
        return "\n".join(lines)

    def _sweep_lines(self) -> list[str]:
        out = []
        for thr in SWEEP:
            s = self.totals(thr)
            out.append(f"{thr:>9.2f} {s.precision:>10.4f} {s.recall:>8.4f} {s.f1:>8.4f}")
        return out

    def _show_lines(self, n: int) -> list[str]:
        above, below = self.near_threshold(n)
        lines = ["", f"matched pairs closest to {self.threshold:.2f} (fact ~ best observation):"]
        lines += [_pair_line(p) for p in above]
        lines += ["", f"unmatched facts closest to {self.threshold:.2f}:"]
        return lines + [_pair_line(p) for p in below]

    def to_json(self) -> dict[str, Any]:
        t = self.totals()
        return {
            "threshold": self.threshold,
            "with_llm": self.with_llm,
            "rule": "speaker == subject AND (observation turn in fact sources OR same session) "
            "AND cosine >= threshold",
            "fact_cues": FACT_CUES.pattern,
            "totals": {
                **asdict(t),
                "precision": t.precision,
                "recall": t.recall,
                "f1": t.f1,
                "fact_like_recall": t.fact_like_recall,
            },
            "conversations": [
                {"sample_id": r.sample_id, "turns": r.turns, **asdict(_totals(r, self.threshold))}
                for r in self.results
            ],
            "relations": {
                k: {"facts": n, "matched": m} for k, (n, m) in self.by_key("base_relation").items()
            },
            "origins": {
                k: {"facts": n, "matched": m} for k, (n, m) in self.by_key("origin").items()
            },
            "parses": {k: {"facts": n, "matched": m} for k, (n, m) in self.by_key("parse").items()},
            "sweep": [
                {"threshold": thr, "precision": s.precision, "recall": s.recall, "f1": s.f1}
                for thr in SWEEP
                for s in [self.totals(thr)]
            ],
            "facts": [_pair_json(p, self.threshold) for p in self.best_pairs()],
        }


def _pair_line(p: Pair) -> str:
    obs = p.observation
    assert obs is not None
    return f"  {p.score:.3f} [{p.sample_id} {','.join(p.fact.sources)}] {p.fact.sentence!r} ~ " + (
        f"[{','.join(obs.dia_ids)}] {obs.text!r}"
    )


def _pair_json(p: Pair, threshold: float) -> dict[str, Any]:
    obs = p.observation
    return {
        "sample_id": p.sample_id,
        "id": p.fact.id,
        "sentence": p.fact.sentence,
        "relation": p.fact.relation,
        "origin": p.fact.origin,
        "parse": p.fact.parse,
        "sources": list(p.fact.sources),
        "matched": obs is not None and p.score >= threshold,
        "best_score": p.score if obs is not None else None,
        "best_observation": obs.text if obs else None,
        "best_observation_ids": list(obs.dia_ids) if obs else None,
    }


# -- run -----------------------------------------------------------------------------------


def _ingest(service: MemoryService, user_id: str, turns: list[NewTurn]) -> None:
    for start in tqdm(
        range(0, len(turns), INGEST_BATCH), desc=f"ingest {user_id}", file=sys.stderr
    ):
        service.ingest(user_id, turns[start : start + INGEST_BATCH])


def run_facts(
    service: MemoryService,
    path: Path,
    threshold: float = DEFAULT_THRESHOLD,
    limit: int | None = None,
    with_llm: bool = False,
) -> Report:
    """Ingest each conversation into user ``locomo-<sample_id>`` (abstracting with the LLM if
    ``with_llm``), collect its facts and score them against the observations."""
    if with_llm and service.llm is None:
        raise ConflictError("--llm needs an LLM: set llm.backend (see `memoryd doctor`)")
    observations = load_observations(path)
    results = []
    for conv in load_locomo(path)[:limit]:
        user = f"locomo-{conv.sample_id}"
        _ingest(service, user, conv.turns)
        if with_llm:
            service.abstract_now(user)
        facts = collect_facts(service, user)
        obs = observations[conv.sample_id]
        results.append(score_conversation(service, conv.sample_id, len(conv.turns), facts, obs))
    return Report(threshold, with_llm, results)
