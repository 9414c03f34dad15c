"""LongMemEval retrieval metrics (recall_any, recall_all, ndcg_any @k) on memoryd's query path.

Input is the official LongMemEval JSON (longmemeval_s, _m, _oracle): a list of instances with
``question_id``, ``question_type``, ``question``, ``question_date``, ``haystack_session_ids``,
``haystack_dates`` and ``haystack_sessions`` (lists of ``{role, content, has_answer?}`` turns).
Dates read "2023/05/20 (Sat) 02:21" and are taken as UTC.

The corpus is the official turn-granularity one (xiaowu0162/LongMemEval,
src/retrieval/run_retrieval.py, ``process_item_flat_index``): only user turns are indexed. A turn's
id is ``<session_id>_<n>``, n its 1-based position in the session counting every turn; in a
session whose id contains "answer", a user turn without ``has_answer`` gets "noans" for "answer"
in its id. A corpus id is relevant when it contains "answer". Each instance's user turns go into a
fresh user (its own ranking, as the official retriever ranks one haystack per question), a
session's turns at its haystack date plus n-1 seconds; the tiers are reshuffled at the
``question_date`` (as the daemon's job would leave them) and the question is asked with ``now`` =
its ``question_date`` and k = the largest k.

Metrics, as src/retrieval/eval_utils.py (``evaluate_retrieval``) computes them on a ranked list:

    recall_any@k  1 if some relevant item is in the top k, else 0
    recall_all@k  1 if every relevant item is in the top k, else 0
    ndcg_any@k    DCG / ideal DCG, binary relevance, DCG = rel_1 + sum_{i>=2} rel_i / log2(i);
                  the ideal ranking puts every relevant corpus item first, truncated at k

Session level comes from the same turn ranking, as ``evaluate_retrieval_turn2session`` derives it:
a turn id maps to its session by dropping its last ``_<n>`` (so a "noans" turn of an answer
session maps to a "noans" session, which is not relevant); the window grows from k turns until its
turns cover k distinct sessions or the ranking ends. recall_any/recall_all look at the sessions in
that window (the first k distinct sessions of the ranking). ndcg_any is taken over the window's
turns, each gaining 1 when its session is relevant, against an ideal of every relevant turn: two
turns of one answer session both add gain, and the ideal counts relevant turns, not sessions.

Where this differs from the official run:

- the official retriever orders the whole corpus; here the ranking is what ``query`` returns
  (``QueryResult.turn_ids()``), so turns it leaves out count as not retrieved and the session
  window stops where the returned ranking ends;
- skipped, and not ingested: abstention questions (``_abs`` in the id; the official averages skip
  them too) and questions with no relevant user turn (the evidence is in assistant turns, as in
  single-session-assistant), which the official script scores recall_any 0, recall_all 1, ndcg 0;
- a user turn with no ``has_answer`` counts as ``has_answer: false`` (the official asserts it is
  there); blank turns are not ingested (the daemon refuses them) and a turn over
  ``limits.max_turn_bytes`` is cut to it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memoryd.ingest import NewTurn
from memoryd.models import Role
from memoryd.retrieve import QueryParams, QueryResult
from memoryd.service import MemoryService

__all__ = [
    "DEFAULT_KS",
    "LEVELS",
    "METRICS",
    "Instance",
    "OnQuery",
    "QuestionScores",
    "Report",
    "corpus_session_id",
    "corpus_turn_id",
    "dcg",
    "load_longmemeval",
    "ndcg_any",
    "parse_lme_date",
    "recall_all",
    "recall_any",
    "run_longmemeval",
    "score_question",
    "session_metrics",
    "session_of",
    "session_turns",
    "session_window",
    "turn_metrics",
    "user_id_for",
]

DEFAULT_KS = (1, 3, 5, 10)
LEVELS = ("session", "turn")
METRICS = ("recall_any", "recall_all", "ndcg_any")
ABSTENTION = "abstention"
NO_USER_EVIDENCE = "no user evidence"
INGEST_BATCH = 64
_DATE = re.compile(r"^(\d{4}/\d{1,2}/\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}:\d{2})$")
_NOT_IN_USER_ID = re.compile(r"[^A-Za-z0-9_-]")

OnQuery = Callable[[str, QueryResult], None]
"""Called with each scored question's id and its :class:`QueryResult`, before the user goes."""


# -- loading -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instance:
    """One question with its haystack's user turns under their official corpus ids."""

    question_id: str
    question_type: str
    question: str
    question_date: datetime
    turns: tuple[NewTurn, ...]
    relevant: frozenset[str]

    @property
    def skip_reason(self) -> str | None:
        if "_abs" in self.question_id:
            return ABSTENTION
        return None if self.relevant else NO_USER_EVIDENCE


def parse_lme_date(text: str) -> datetime:
    """``"2023/05/20 (Sat) 02:21"`` as an aware UTC datetime (the weekday is not checked)."""
    match = _DATE.match(text.strip())
    if match is None:
        raise ValueError(f"date {text!r} is not in the LongMemEval form '2023/05/20 (Sat) 02:21'")
    value = datetime.strptime(f"{match[1]} {match[2]}", "%Y/%m/%d %H:%M")
    return value.replace(tzinfo=UTC)


def corpus_turn_id(session_id: str, position: int, has_answer: bool) -> str:
    """The official id of the user turn at 1-based ``position`` of ``session_id``."""
    turn_id = f"{session_id}_{position}"
    return turn_id if has_answer else turn_id.replace("answer", "noans")


def corpus_session_id(session_id: str, turns: Sequence[Mapping[str, Any]]) -> str:
    """An answer session none of whose user turns has the answer is a "noans" session."""
    if any(t["role"] == "user" and t.get("has_answer") for t in turns):
        return session_id
    return session_id.replace("answer", "noans")


def session_turns(
    session_id: str, turns: Sequence[Mapping[str, Any]], start: datetime
) -> list[NewTurn]:
    """The session's user turns as ingestable turns (ids and times as the module says)."""
    sid = corpus_session_id(session_id, turns)
    return [
        NewTurn(
            session_id=sid,
            role=Role.USER,
            text=turn["content"],
            ts=start + timedelta(seconds=i),
            turn_id=corpus_turn_id(session_id, i + 1, bool(turn.get("has_answer"))),
        )
        for i, turn in enumerate(turns)
        if turn["role"] == "user"
    ]


def _instance(raw: Mapping[str, Any]) -> Instance:
    turns: list[NewTurn] = []
    sessions = zip(
        raw["haystack_session_ids"], raw["haystack_sessions"], raw["haystack_dates"], strict=True
    )
    for session_id, session, date in sessions:
        turns += session_turns(session_id, session, parse_lme_date(date))
    return Instance(
        question_id=raw["question_id"],
        question_type=raw["question_type"],
        question=raw["question"],
        question_date=parse_lme_date(raw["question_date"]),
        turns=tuple(turns),
        relevant=frozenset(t.resolved_id() for t in turns if "answer" in t.resolved_id()),
    )


def load_longmemeval(path: Path) -> list[Instance]:
    """Read the official LongMemEval JSON into instances, in file order."""
    return [_instance(raw) for raw in json.loads(path.read_text())]


def user_id_for(question_id: str) -> str:
    """``lme-<question_id>``; a hash keeps ids apart that sanitizing or cutting would merge."""
    clean = _NOT_IN_USER_ID.sub("_", question_id)
    if clean == question_id and len(clean) <= 60:
        return f"lme-{clean}"
    digest = hashlib.sha1(question_id.encode()).hexdigest()[:8]
    return f"lme-{clean[:51]}-{digest}"


# -- metrics -------------------------------------------------------------------------------


def recall_any(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    top = set(ranking[:k])
    return float(any(item in top for item in relevant))


def recall_all(ranking: Sequence[str], relevant: Collection[str], k: int) -> float:
    top = set(ranking[:k])
    return float(all(item in top for item in relevant))


def dcg(gains: Sequence[float]) -> float:
    """``rel_1 + sum_{i>=2} rel_i / log2(i)``: the official form, where ranks 1 and 2 weigh 1."""
    return sum(gain if rank == 1 else gain / math.log2(rank) for rank, gain in enumerate(gains, 1))


def ndcg_any(
    ranking: Sequence[str],
    relevant: Collection[str],
    k: int,
    relevant_in_corpus: int | None = None,
) -> float:
    """NDCG@k with binary relevance; 0 when nothing is relevant.

    ``relevant_in_corpus`` is how many corpus items the ideal ranking puts first (default
    ``len(relevant)``); ``ranking`` may repeat an id, and each repeat gains again.
    """
    count = len(relevant) if relevant_in_corpus is None else relevant_in_corpus
    ideal = dcg([1.0] * min(count, k))
    if ideal == 0:
        return 0.0
    return dcg([float(item in relevant) for item in ranking[:k]]) / ideal


def session_of(turn_id: str) -> str:
    """The official turn → session mapping: drop the last ``_<n>``."""
    return turn_id.rsplit("_", 1)[0]


def session_window(sessions: Sequence[str], k: int) -> int:
    """How many ranked turns session-level @k reads: from k on, until they cover k sessions.

    ``sessions`` holds each ranked turn's session. Stops past the end when the ranking never
    covers k sessions, as the official loop does at the end of its corpus.
    """
    window = k
    while window <= len(sessions) and len(set(sessions[:window])) < k:
        window += 1
    return window


def _metrics(
    ranking: Sequence[str], relevant: Collection[str], k: int, relevant_in_corpus: int
) -> dict[str, float]:
    return {
        "recall_any": recall_any(ranking, relevant, k),
        "recall_all": recall_all(ranking, relevant, k),
        "ndcg_any": ndcg_any(ranking, relevant, k, relevant_in_corpus),
    }


def turn_metrics(ranking: Sequence[str], relevant: Collection[str], k: int) -> dict[str, float]:
    """The three metrics @k on ranked turn ids; ``relevant`` = every relevant corpus turn id."""
    return _metrics(ranking, relevant, k, len(relevant))


def session_metrics(ranking: Sequence[str], relevant: Collection[str], k: int) -> dict[str, float]:
    """The three session-level metrics @k derived from ranked turn ids (see the module doc)."""
    sessions = [session_of(t) for t in ranking]
    wanted = {session_of(t) for t in relevant}
    return _metrics(sessions, wanted, session_window(sessions, k), len(relevant))


def score_question(
    ranking: Sequence[str], relevant: Collection[str], ks: Sequence[int]
) -> dict[str, dict[str, float]]:
    """``{level: {"recall_any@5": ..., ...}}``, keyed as the official retrieval log."""
    levels = {"session": session_metrics, "turn": turn_metrics}
    return {
        level: {
            f"{name}@{k}": value for k in ks for name, value in metric(ranking, relevant, k).items()
        }
        for level, metric in levels.items()
    }


# -- report --------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionScores:
    question_id: str
    question_type: str
    metrics: dict[str, dict[str, float]]  # level → "recall_any@5" → value


@dataclass
class Report:
    ks: list[int]
    questions: list[QuestionScores]
    skipped: dict[str, int]  # reason → instances
    instances: int

    def question_types(self) -> list[str]:
        return sorted({q.question_type for q in self.questions})

    def scored(self, question_type: str | None = None) -> list[QuestionScores]:
        if question_type is None:
            return list(self.questions)
        return [q for q in self.questions if q.question_type == question_type]

    def mean(self, level: str, metric: str, k: int, question_type: str | None = None) -> float:
        """Mean of ``metric@k`` at ``level`` over the scored questions (of one type); 0 if none."""
        values = [q.metrics[level][f"{metric}@{k}"] for q in self.scored(question_type)]
        return sum(values) / len(values) if values else 0.0

    def _means(self, question_type: str | None) -> dict[str, Any]:
        return {
            "questions": len(self.scored(question_type)),
            **{
                level: {
                    f"{m}@{k}": self.mean(level, m, k, question_type)
                    for m in METRICS
                    for k in self.ks
                }
                for level in LEVELS
            },
        }

    def to_dict(self) -> dict[str, Any]:
        """Means overall and per question type, plus counts (JSON-ready)."""
        return {
            "instances": self.instances,
            "skipped": dict(self.skipped),
            "overall": self._means(None),
            "by_type": {t: self._means(t) for t in self.question_types()},
        }

    def format(self) -> str:
        columns = [(m, k) for m in METRICS for k in self.ks]
        short = {"recall_any": "any", "recall_all": "all", "ndcg_any": "ndcg"}
        header = f"{'question type':26} {'n':>4} " + " ".join(
            f"{short[m] + '@' + str(k):>7}" for m, k in columns
        )
        skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(self.skipped.items()))
        lines = [
            f"LongMemEval retrieval on memoryd's query path: {self.instances} instances, "
            f"{len(self.questions)} scored; skipped: {skipped or 'none'}",
            "user turns only; relevant = corpus id contains 'answer'; any = recall_any, "
            "all = recall_all, ndcg = ndcg_any (official definitions)",
        ]
        for level in LEVELS:
            lines += ["", f"{level} level", header]
            for label, qtype in [("overall", None)] + [(t, t) for t in self.question_types()]:
                values = " ".join(f"{self.mean(level, m, k, qtype):7.4f}" for m, k in columns)
                lines.append(f"{label:26} {len(self.scored(qtype)):>4} {values}")
        return "\n".join(lines)


# -- run -----------------------------------------------------------------------------------


def _indexable(turns: Sequence[NewTurn], max_bytes: int) -> list[NewTurn]:
    """Drop blank turns; cut those over ``max_bytes`` (at a character boundary)."""
    kept = []
    for turn in turns:
        if not turn.text.strip():
            continue
        data = turn.text.encode()
        if len(data) > max_bytes:
            turn = replace(turn, text=data[:max_bytes].decode(errors="ignore"))
        kept.append(turn)
    return kept


def _ranked_turns(
    service: MemoryService,
    instance: Instance,
    k: int,
    query_options: Mapping[str, Any],
    on_query: OnQuery | None,
    keep_users: bool,
) -> list[str]:
    """Ingest the instance into its own user, ask its question, return the ranked turn ids."""
    user = user_id_for(instance.question_id)
    turns = _indexable(instance.turns, service.config.limits.max_turn_bytes)
    try:
        for start in range(0, len(turns), INGEST_BATCH):
            service.ingest(user, turns[start : start + INGEST_BATCH])
        service.reshuffle(user, now=instance.question_date)  # as the daemon's job would
        params = QueryParams(
            query=instance.question, k=k, now=instance.question_date, **query_options
        )
        result = service.query(user, params)
        if on_query is not None:
            on_query(instance.question_id, result)
    finally:
        if not keep_users and service.user_exists(user):
            service.delete_user(user)
    return result.turn_ids()


def run_longmemeval(
    service: MemoryService,
    path: Path,
    ks: Sequence[int] = DEFAULT_KS,
    *,
    limit: int | None = None,
    query_options: Mapping[str, Any] | None = None,
    on_query: OnQuery | None = None,
    keep_users: bool = False,
) -> Report:
    """Score the first ``limit`` instances of ``path``, one fresh user per question.

    ``query_options`` are passed on to :class:`QueryParams` (beside query, k and now);
    ``on_query(question_id, result)`` sees each question's raw result; users are deleted after
    scoring unless ``keep_users``.

        report = run_longmemeval(service, Path("longmemeval_s.json"), limit=50)
        report.mean("turn", "recall_all", 10)
    """
    instances = load_longmemeval(path)[:limit]
    ks = sorted(set(ks))
    skipped: Counter[str] = Counter()
    scored = []
    for instance in tqdm(instances, desc="longmemeval", unit="question", file=sys.stderr):
        if instance.skip_reason is not None:
            skipped[instance.skip_reason] += 1
            continue
        ranking = _ranked_turns(
            service, instance, ks[-1], query_options or {}, on_query, keep_users
        )
        metrics = score_question(ranking, instance.relevant, ks)
        scored.append(QuestionScores(instance.question_id, instance.question_type, metrics))
    return Report(list(ks), scored, dict(skipped), len(instances))
