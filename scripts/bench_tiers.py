"""`make bench-tiers`: what tiered search buys against exhaustive search, measured in one run.

On LoCoMo (read in place), on all LoCoMo conversations merged into one store (a store ten times
larger, same tier sizes), and on a LongMemEval-format file (default: the synthetic one
`scripts/make_lme_synth.py` writes to eval-data/), every conversation or instance goes into a
fresh user, is reshuffled once (timed) with ``now`` = its last time, and every question is asked
under each search configuration:

    all      exhaustive: HNSW + BM25 over every record
    tier1    tier 1 only (exact dense + BM25 restricted to it)
    tier2    tiers 1 and 2 only
    tiered   tier 1, then 1+2, then all, stopping when `score` sufficiency says so

All four run with ``recall: false``, so they see the same placement. Two more rows come from
the same run: ``oracle`` (a perfect sufficiency judge: each question stops at the first stage
whose recall@10 equals the exhaustive one; the bound any judge can reach with these tiers),
and ``tiered, 2nd pass`` (LoCoMo only: every question asked once more with recalls counted,
a reshuffle, then the tiered search again: what promotion by use buys).

Columns: recall@5/@10 (LoCoMo: evidence recall; LongMemEval: turn-level recall_all), candidates
per query (the records in the deepest pool searched: exact dense scoring covers every one of
them; the exhaustive search covers all records), the ratio of exhaustive to tiered candidates,
query p50/p95 (and p50 over the bare encoder call measured in the same run), the share of
queries that stopped at tier 1/2/3, and reshuffle seconds per 1k records scored.

A threshold sweep follows: the tiered search at other `tiers.threshold` values, computed from the
recorded stages (each question's tier-1 and tier-1+2 hits and word share), calibrated on the first
half of the LoCoMo conversations and reported on the second half too. Settings come from the
environment as usual (``MEMORYD_TIERS_DECAY=0.01 make bench-tiers``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memoryd.config import load_config
from memoryd.eval.locomo import load_locomo, recall
from memoryd.eval.longmemeval import load_longmemeval, recall_all
from memoryd.ingest import NewTurn
from memoryd.models import SearchMode
from memoryd.retrieve import QueryParams
from memoryd.retrieve.sufficiency import MIN_POOL_PER_HIT, Verdict, word_share
from memoryd.retrieve.sufficiency import Stage as JudgedStage
from memoryd.service import MemoryService

REPO = Path(__file__).resolve().parents[1]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
LME = REPO / "eval-data" / "longmemeval_synth.json"
MODES = (SearchMode.ALL, SearchMode.TIER1, SearchMode.TIER2, SearchMode.TIERED)
THRESHOLDS = (0.50, 0.60, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95, 1.00)
K = 10
BATCH = 64


@dataclass
class Stage:
    """One stage of the recorded tiered search: its pool, hits (turn ids), word share and
    whether its top-k was full."""

    pool: int
    turns: list[str]
    share: float
    full: bool


@dataclass
class Question:
    """A question's relevance and everything the run measured for it."""

    score: Callable[[list[str], int], float]
    ranked: dict[str, list[str]] = field(default_factory=dict)
    candidates: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    stopped: dict[str, int] = field(default_factory=dict)
    stages: list[Stage] = field(default_factory=list)
    half: int = 0


class Recorder:
    """A sufficiency judge that never stops the search and records what it was shown."""

    name = "recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[float, bool, list[str]]] = []

    def screen(self, stage: JudgedStage) -> Verdict | None:
        return None  # search every stage, to record it

    def __call__(self, stage: JudgedStage) -> Verdict:
        turns = list(dict.fromkeys(h.turn_id for h in stage.hits))
        share = word_share(stage.words, stage.store_size)
        self.seen.append((-1.0 if share is None else share, len(turns) >= stage.k, turns))
        return Verdict(False, "recording")


def _query(
    service: MemoryService, user: str, text: str, now: datetime, mode: SearchMode, recall_: bool
) -> tuple[list[str], int, float, int]:
    params = QueryParams(query=text, k=K, now=now, search=mode, recall=recall_)
    started = time.perf_counter()
    result = service.query(user, params)
    took = time.perf_counter() - started
    return result.turn_ids(), result.candidates, took, int(result.search["stopped_at"])


def _measure(
    service: MemoryService, user: str, text: str, now: datetime, question: Question
) -> None:
    for mode in MODES:
        ranked, candidates, took, stopped = _query(service, user, text, now, mode, False)
        question.ranked[mode.value] = ranked
        question.candidates[mode.value] = candidates
        question.seconds[mode.value] = took
        question.stopped[mode.value] = stopped
    recorder = Recorder()
    live = service.retriever
    service.retriever = dataclasses.replace(live, judge=recorder)
    try:
        params = QueryParams(query=text, k=K, now=now, search=SearchMode.TIERED, recall=False)
        trace = service.query(user, params).search["stages"]
    finally:
        service.retriever = live
    for step, (best, full, turns) in zip(trace, recorder.seen, strict=False):
        question.stages.append(Stage(step["pool"], turns, best, full))


def _ingest(service: MemoryService, user: str, turns: Sequence[NewTurn]) -> None:
    for start in range(0, len(turns), BATCH):
        service.ingest(user, turns[start : start + BATCH])


@dataclass
class Dataset:
    name: str
    questions: list[Question] = field(default_factory=list)
    reshuffle_seconds: list[float] = field(default_factory=list)
    reshuffled: list[int] = field(default_factory=list)
    second: list[Question] = field(default_factory=list)


def run_locomo(service: MemoryService, path: Path, limit: int | None) -> Dataset:
    data = Dataset("LoCoMo")
    conversations = load_locomo(path)[:limit]
    for index, conv in enumerate(conversations):
        user = f"locomo-{conv.sample_id}"
        _ingest(service, user, conv.turns)
        _reshuffle(service, user, conv.last_ts, data)
        half = 0 if index < max(1, len(conversations) // 2) else 1
        asked = []
        for q in tqdm(conv.questions, desc=f"query {user}", file=sys.stderr):
            question = Question(lambda ids, k, ev=q.evidence: recall(ids, ev, k), half=half)
            _measure(service, user, q.text, conv.last_ts, question)
            data.questions.append(question)
            asked.append((q.text, question.score))
        data.second += _second_pass(service, user, conv.last_ts, asked)
        service.delete_user(user)
    return data


def run_locomo_merged(service: MemoryService, path: Path, limit: int | None) -> Dataset:
    """Every conversation in one store (ids prefixed by conversation): a store ten times
    larger than one conversation, with the same tier sizes."""
    conversations = load_locomo(path)[:limit]
    data = Dataset(f"LoCoMo, {len(conversations)} conv. in one store")
    user = "locomo-merged"
    now = max(conv.last_ts for conv in conversations)
    for conv in conversations:
        prefix = f"{conv.sample_id}/"
        turns = [
            dataclasses.replace(
                t, turn_id=prefix + t.resolved_id(), session_id=prefix + t.session_id
            )
            for t in conv.turns
        ]
        _ingest(service, user, turns)
    _reshuffle(service, user, now, data)
    for index, conv in enumerate(conversations):
        half = 0 if index < max(1, len(conversations) // 2) else 1
        for q in tqdm(conv.questions, desc=f"query merged {conv.sample_id}", file=sys.stderr):
            evidence = [f"{conv.sample_id}/{e}" for e in q.evidence]
            question = Question(lambda ids, k, ev=evidence: recall(ids, ev, k), half=half)
            _measure(service, user, q.text, now, question)
            data.questions.append(question)
    service.delete_user(user)
    return data


def _second_pass(
    service: MemoryService,
    user: str,
    now: datetime,
    asked: list[tuple[str, Callable[[list[str], int], float]]],
) -> list[Question]:
    """Ask every question once with recalls counted, reshuffle, then measure the tiered search."""
    for text, _ in asked:
        _query(service, user, text, now, SearchMode.TIERED, True)
    service.reshuffle(user, now=now)
    out = []
    for text, score in asked:
        question = Question(score)
        ranked, candidates, took, stopped = _query(
            service, user, text, now, SearchMode.TIERED, False
        )
        question.ranked["tiered"], question.candidates["tiered"] = ranked, candidates
        question.seconds["tiered"], question.stopped["tiered"] = took, stopped
        out.append(question)
    return out


def run_lme(service: MemoryService, path: Path, limit: int | None) -> Dataset:
    data = Dataset(f"LongMemEval-format ({path.name})")
    for instance in tqdm(load_longmemeval(path)[:limit], desc="LongMemEval", file=sys.stderr):
        if instance.skip_reason is not None:
            continue
        user = f"lme-{len(data.reshuffled)}"
        _ingest(service, user, instance.turns)
        _reshuffle(service, user, instance.question_date, data)
        relevant = sorted(instance.relevant)
        question = Question(lambda ids, k, rel=relevant: recall_all(ids, rel, k))
        _measure(service, user, instance.question, instance.question_date, question)
        data.questions.append(question)
        service.delete_user(user)
    return data


def _reshuffle(service: MemoryService, user: str, now: datetime, data: Dataset) -> None:
    done = service.reshuffle(user, now=now)
    data.reshuffle_seconds.append(float(done["seconds"]))
    data.reshuffled.append(int(done["scored"]))


# -- the table ----------------------------------------------------------------------------


def _simulate(question: Question, threshold: float) -> tuple[list[str], int, int]:
    """The tiered search at ``threshold`` from the recorded stages: ranking, pool, tier."""
    least = min(question.candidates["all"], MIN_POOL_PER_HIT * K)
    for tier, stage in enumerate(question.stages[:2], start=1):
        if stage.full and stage.share >= threshold and stage.pool >= least:
            return stage.turns, stage.pool, tier
    return question.ranked["all"], question.candidates["all"], 3


def _oracle(question: Question) -> tuple[list[str], int, int]:
    best = question.score(question.ranked["all"], K)
    for tier, stage in enumerate(question.stages[:2], start=1):
        if question.score(stage.turns, K) >= best:
            return stage.turns, stage.pool, tier
    return question.ranked["all"], question.candidates["all"], 3


@dataclass
class Row:
    name: str
    r5: float
    r10: float
    candidates: float
    p50: float | None
    p95: float | None
    stops: tuple[float, float, float]


def _row(name: str, outcomes: list[tuple[Question, list[str], int, int, float | None]]) -> Row:
    seconds = [o[4] for o in outcomes if o[4] is not None]
    tiers = [o[3] for o in outcomes]
    return Row(
        name,
        float(np.mean([q.score(ids, 5) for q, ids, *_ in outcomes])),
        float(np.mean([q.score(ids, 10) for q, ids, *_ in outcomes])),
        float(np.mean([o[2] for o in outcomes])),
        float(np.percentile(seconds, 50)) * 1000 if seconds else None,
        float(np.percentile(seconds, 95)) * 1000 if seconds else None,
        tuple(tiers.count(t) / len(tiers) for t in (1, 2, 3)),  # type: ignore[arg-type]
    )


def rows(data: Dataset) -> list[Row]:
    qs = data.questions
    out = [
        _row(
            mode.value,
            [
                (
                    q,
                    q.ranked[mode.value],
                    q.candidates[mode.value],
                    q.stopped[mode.value],
                    q.seconds[mode.value],
                )
                for q in qs
            ],
        )
        for mode in MODES
    ]
    out.append(_row("oracle judge", [(q, *_oracle(q), None) for q in qs]))
    if data.second:
        out.append(
            _row(
                "tiered, 2nd pass",
                [
                    (
                        q,
                        q.ranked["tiered"],
                        q.candidates["tiered"],
                        q.stopped["tiered"],
                        q.seconds["tiered"],
                    )
                    for q in data.second
                ],
            )
        )
    return out


def format_table(datasets: list[Dataset], encoder_ms: float, threshold: float) -> str:
    header = (
        f"{'dataset':34} {'search':17} {'R@5':>6} {'R@10':>6} {'cands':>7} {'all/x':>6}"
        f" {'p50 ms':>7} {'p95 ms':>7} {'p50/enc':>7} {'stop T1/T2/T3':>17} {'reshuffle s/1k':>14}"
    )
    lines = [
        f"tiered search vs exhaustive (k={K}; score sufficiency, word share >= {threshold}; "
        f"bare encoder p50 {encoder_ms:.2f} ms in this run)",
        header,
        "-" * len(header),
    ]
    for data in datasets:
        per_k = sum(data.reshuffle_seconds) / max(1, sum(data.reshuffled)) * 1000
        table = rows(data)
        exhaustive = table[0].candidates
        for row in table:
            timing = (
                f"{row.p50:7.1f} {row.p95:7.1f} {row.p50 / encoder_ms:7.1f}"
                if row.p50 is not None
                else f"{'-':>7} {'-':>7} {'-':>7}"
            )
            stops = "/".join(f"{s:.0%}" for s in row.stops)
            lines.append(
                f"{data.name[:34]:34} {row.name:17} {row.r5:6.3f} {row.r10:6.3f}"
                f" {row.candidates:7.1f} {exhaustive / row.candidates:6.2f} {timing}"
                f" {stops:>17} {per_k:14.4f}"
            )
        lines.append(f"{'':34} questions: {len(data.questions)}")
    return "\n".join(lines)


def format_sweep(data: Dataset) -> str:
    halves = {"all": data.questions}
    if any(q.half for q in data.questions):
        halves["calibration half"] = [q for q in data.questions if q.half == 0]
        halves["held-out half"] = [q for q in data.questions if q.half == 1]
    lines = [f"threshold sweep on {data.name} (R@10 loss vs exhaustive, candidate ratio)"]
    for name, qs in halves.items():
        base = np.mean([q.score(q.ranked["all"], K) for q in qs])
        full = np.mean([q.candidates["all"] for q in qs])
        cells = []
        for threshold in THRESHOLDS:
            sims = [_simulate(q, threshold) for q in qs]
            r10 = np.mean([q.score(s[0], K) for q, s in zip(qs, sims, strict=True)])
            cands = np.mean([s[1] for s in sims])
            cells.append(f"{threshold:.2f}: {100 * (base - r10):+.1f}pt {full / cands:.2f}x")
        lines.append(f"  {name:17} " + "  ".join(cells))
    return "\n".join(lines)


def _encoder_ms(service: MemoryService, texts: list[str]) -> float:
    times = []
    for text in texts:
        started = time.perf_counter()
        service.encoder.embed(text)
        times.append(time.perf_counter() - started)
    return float(np.percentile(times, 50)) * 1000


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO)
    parser.add_argument("--conversations", type=int, help="only the first N LoCoMo ones")
    parser.add_argument("--lme", type=Path, default=LME, help="LongMemEval-format file")
    parser.add_argument("--instances", type=int, help="only the first N LongMemEval ones")
    parser.add_argument("--out", type=Path, default=REPO / "bench-results" / "tiers.txt")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-tiers-") as tmp:
        overrides = {"data_dir": Path(tmp), "model_dir": REPO / "models"}
        config = load_config(environ=os.environ, overrides=overrides)
        service = MemoryService.from_config(config)
        try:
            datasets = []
            if args.locomo.exists():
                datasets.append(run_locomo(service, args.locomo, args.conversations))
                datasets.append(run_locomo_merged(service, args.locomo, args.conversations))
            else:
                print(f"skipping LoCoMo: {args.locomo} not found", file=sys.stderr)
            if args.lme.exists():
                datasets.append(run_lme(service, args.lme, args.instances))
            else:
                print(f"skipping LongMemEval: {args.lme} not found", file=sys.stderr)
            texts = [q.text for c in load_locomo(args.locomo)[:1] for q in c.questions]
            encoder_ms = _encoder_ms(service, texts or ["what did I do last week?"] * 50)
        finally:
            service.close()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report = [format_table(datasets, encoder_ms, config.tiers.threshold)]
    report += [format_sweep(d) for d in datasets]
    report.append(f"peak RSS of this process (one user open at a time): {rss:.0f} MB")
    text = "\n\n".join(report)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    print(f"written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
