"""LoCoMo evidence recall@k for three retrievers measured in one run.

Recall is computed as the official LoCoMo code does (see shared/data/locomo/README.md):
``|evidence ∩ retrieved[:k]| / |evidence|`` on exact dia_id strings, 1.0 for a question with empty
evidence, averaged per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop) and over
categories 1-4. Category 5 (adversarial) has no evidence to retrieve and is excluded. Malformed
evidence strings are split on ';' and spaces and parsed as ``D<s>:<t>`` (leading zeros dropped);
what does not parse is dropped and listed in the report.

Retrievers: ``bm25`` (SQLite FTS5 over the raw turns, same tokenizer and stopwords as the daemon),
``dense`` (exact cosine over the same encoder's turn embeddings) and ``memoryd`` (the daemon's
query path through :class:`MemoryService`, tiered search after a reshuffle at the last session's
time, as the daemon's background job leaves the tiers).
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from memoryd.ingest import NewTurn
from memoryd.memory import parse_timestamp
from memoryd.models import Role, SearchMode
from memoryd.retrieve import QueryParams
from memoryd.service import MemoryService
from memoryd.store import FTS_TOKENIZER, match_expression

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RETRIEVERS = ("bm25", "dense", "memoryd")
_DIA_ID = re.compile(r"^D(\d+):(\d+)$")
_SESSION_KEY = re.compile(r"^session_(\d+)$")
INGEST_BATCH = 64


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    turns: list[NewTurn]
    questions: list[Question]
    last_ts: datetime
    dropped_evidence: list[str] = field(default_factory=list)


def normalise_dia_id(raw: str) -> str | None:
    match = _DIA_ID.match(raw.strip())
    return f"D{int(match.group(1))}:{int(match.group(2))}" if match else None


def parse_evidence(items: Sequence[str]) -> tuple[list[str], list[str]]:
    """(normalised ids, dropped strings) from a question's evidence list."""
    ids, dropped = [], []
    for item in items:
        for part in re.split(r"[;\s]+", item):
            if not part:
                continue
            norm = normalise_dia_id(part)
            (ids.append(norm) if norm else dropped.append(part))
    return list(dict.fromkeys(ids)), dropped


def _session_turns(conv: dict[str, Any], number: int, start: datetime) -> list[NewTurn]:
    turns = []
    for i, raw in enumerate(conv[f"session_{number}"]):
        text = raw["text"]
        if raw.get("blip_caption"):
            text = f"{text} [shares an image: {raw['blip_caption']}]"
        turns.append(
            NewTurn(
                session_id=f"session_{number}",
                role=Role.USER,
                text=text,
                ts=start + timedelta(seconds=i),
                speaker=raw["speaker"],
                turn_id=normalise_dia_id(raw["dia_id"]) or raw["dia_id"],
            )
        )
    return turns


def load_locomo(path: Path) -> list[Conversation]:
    """Read the LoCoMo file into turns (turn_id = dia_id) and questions of categories 1-4."""
    data = json.loads(path.read_text())
    out = []
    for sample in data:
        conv = sample["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
        turns: list[NewTurn] = []
        last = None
        for number in numbers:
            last = parse_timestamp(conv[f"session_{number}_date_time"])
            turns += _session_turns(conv, number, last)
        questions, dropped = [], []
        for qa in sample["qa"]:
            if qa["category"] not in CATEGORIES:
                continue
            ids, bad = parse_evidence(qa.get("evidence", []))
            dropped += bad
            questions.append(Question(qa["question"], qa["category"], tuple(ids)))
        assert last is not None
        out.append(Conversation(sample["sample_id"], turns, questions, last, dropped))
    return out


def recall(retrieved: Sequence[str], evidence: Sequence[str], k: int) -> float:
    if not evidence:
        return 1.0
    top = set(retrieved[:k])
    return sum(e in top for e in evidence) / len(evidence)


class BM25Baseline:
    """FTS5 over raw turns, in memory, with the daemon's tokenizer and stopword query."""

    def __init__(self, turns: Sequence[NewTurn]) -> None:
        self.ids = [t.resolved_id() for t in turns]
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(text, tokenize='{FTS_TOKENIZER}')")
        self.db.executemany(
            "INSERT INTO t(rowid, text) VALUES (?, ?)", [(i, t.text) for i, t in enumerate(turns)]
        )

    def search(self, query: str, k: int) -> list[str]:
        expression = match_expression(query)
        if expression is None:
            return []
        rows = self.db.execute(
            "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (expression, k)
        ).fetchall()
        return [self.ids[r[0]] for r in rows]


class DenseBaseline:
    """Exact cosine over the turns' embeddings (one encoder call per turn, as the daemon)."""

    def __init__(self, service: MemoryService, turns: Sequence[NewTurn]) -> None:
        self.ids = [t.resolved_id() for t in turns]
        self.matrix = np.stack([service.encoder.embed(t.text) for t in turns])

    def search(self, vector: np.ndarray, k: int) -> list[str]:
        scores = self.matrix @ vector
        top = np.argsort(-scores)[:k]
        return [self.ids[i] for i in top]


@dataclass
class Report:
    ks: list[int]
    scores: dict[str, dict[int, dict[int, list[float]]]]  # retriever → k → category → values
    dropped: list[str]
    conversations: int

    def mean(self, retriever: str, k: int, category: int | None = None) -> float:
        by_cat = self.scores[retriever][k]
        values = by_cat[category] if category else [v for c in CATEGORIES for v in by_cat[c]]
        return float(np.mean(values)) if values else 0.0

    def format(self) -> str:
        counts = {c: len(self.scores["bm25"][self.ks[0]][c]) for c in CATEGORIES}
        lines = [
            "LoCoMo evidence recall@k "
            f"({self.conversations} conversations, {sum(counts.values())} questions of "
            "categories 1-4; category 5 excluded: it has no evidence to retrieve)",
            "questions per category: "
            + ", ".join(f"{c} {CATEGORIES[c]}={n}" for c, n in counts.items()),
            f"malformed evidence strings dropped: {len(self.dropped)} {sorted(set(self.dropped))}",
            "",
            f"{'retriever':10} {'k':>3} "
            + " ".join(f"{'cat' + str(c):>7}" for c in CATEGORIES)
            + f" {'overall':>8}",
        ]
        for k in self.ks:
            for name in RETRIEVERS:
                cats = " ".join(f"{self.mean(name, k, c):7.4f}" for c in CATEGORIES)
                lines.append(f"{name:10} {k:>3} {cats} {self.mean(name, k):8.4f}")
        return "\n".join(lines)


def run_locomo(
    service: MemoryService,
    path: Path,
    ks: Sequence[int],
    limit: int | None = None,
    search: SearchMode | None = None,
) -> Report:
    """Ingest each conversation into a fresh user, then score all three retrievers (the
    daemon's with ``search``, default: its configured search)."""
    conversations = load_locomo(path)[:limit]
    ks = sorted(ks)
    top_k = ks[-1]
    scores: dict[str, dict[int, dict[int, list[float]]]] = {
        r: {k: defaultdict(list) for k in ks} for r in RETRIEVERS
    }
    dropped: list[str] = []
    for conv in conversations:
        user = f"locomo-{conv.sample_id}"
        for start in tqdm(
            range(0, len(conv.turns), INGEST_BATCH), desc=f"ingest {user}", file=sys.stderr
        ):
            service.ingest(user, conv.turns[start : start + INGEST_BATCH])
        service.reshuffle(user, now=conv.last_ts)  # tiers as the daemon's job would leave them
        bm25, dense = BM25Baseline(conv.turns), DenseBaseline(service, conv.turns)
        dropped += conv.dropped_evidence
        for q in tqdm(conv.questions, desc=f"query {user}", file=sys.stderr):
            params = QueryParams(query=q.text, k=top_k, now=conv.last_ts, search=search)
            ranked = {
                "bm25": bm25.search(q.text, top_k),
                "dense": dense.search(service.encoder.embed(q.text), top_k),
                "memoryd": service.query(user, params).turn_ids(),
            }
            for name, ids in ranked.items():
                for k in ks:
                    scores[name][k][q.category].append(recall(ids, q.evidence, k))
    return Report(list(ks), scores, dropped, len(conversations))
