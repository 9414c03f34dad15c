"""Router measurements: F1 and routing latency of a head (the loop simulation is in
:mod:`memoryd.eval.router_loop`).

Input is a labelled JSONL file, one ``{"text": ..., "labels": [...]}`` object per line (extra
keys are ignored except ``group``, the template a synthetic line came from)::

    {"text": "Remind me to call mom at 5.", "labels": ["working"], "group": "wrk-00"}

``memoryd eval router`` (:func:`evaluate_router`) scores a head on every line (per-label,
micro- and macro-F1 of the router's decisions, as :func:`memoryd.router.head.f1_scores`
defines them) and times routing the way the daemon does it: one text per ``Encoder.embed_routed``
call followed by ``Router.route``, and ``Router.route`` alone on a precomputed routing vector.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memoryd.encoder import Encoder
from memoryd.errors import InvalidInputError
from memoryd.jsonlines import json_objects
from memoryd.models import LABELS, Label
from memoryd.router import Router, RouterHead, f1_scores, label_matrix

__all__ = [
    "WARMUP_CALLS",
    "Example",
    "Latency",
    "RouterReport",
    "embed_examples",
    "evaluate_router",
    "load_examples",
    "load_line",
    "targets",
]

WARMUP_CALLS = 20
"""Calls made, and not timed, before each latency measurement."""
MAX_GROUPS_SHOWN = 30
"""Per-group macro-F1 is shown for files with at most this many groups (corpus domains)."""


# -- input ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Example:
    """One labelled line; ``line`` is its 1-based line number in the file."""

    text: str
    labels: tuple[Label, ...]
    group: str | None
    line: int


def _parse_labels(raw: object, where: str) -> tuple[Label, ...]:
    if not isinstance(raw, list) or not raw:
        raise InvalidInputError(f"{where}: 'labels' must be a non-empty list of label names")
    labels = set()
    for value in raw:
        try:
            labels.add(Label(value))
        except ValueError:
            known = ", ".join(str(label) for label in LABELS)
            raise InvalidInputError(f"{where}: unknown label {value!r} (known: {known})") from None
    if Label.FRAGMENTED in labels and len(labels) > 1:
        raise InvalidInputError(f"{where}: 'fragmented' excludes the other labels")
    return tuple(label for label in LABELS if label in labels)


def load_examples(path: Path) -> list[Example]:
    """Read a labelled JSONL file, or every ``*.jsonl`` of a directory (blank lines skipped).
    A line's ``domain`` (the routing corpus) or ``group`` (the template set) is its group.

    Raises:
        InvalidInputError: the file is missing or empty, or a line is not a JSON object with a
            string ``text`` and a list of known ``labels``; the message names the line.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
        if not files:
            raise InvalidInputError(f"{path}: no .jsonl files")
        return [e for f in files for e in load_examples(f)]
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file")
    examples = []
    with path.open(encoding="utf-8") as fh:
        for number, data in json_objects(fh, InvalidInputError, lambda n: f"{path}:{n}"):
            where = f"{path}:{number}"
            text = data.get("text")
            if not isinstance(text, str):
                raise InvalidInputError(f"{where}: 'text' must be a string")
            labels = _parse_labels(data.get("labels"), where)
            group = data.get("domain", data.get("group"))
            examples.append(Example(text, labels, None if group is None else str(group), number))
    if not examples:
        raise InvalidInputError(f"{path}: no labelled lines")
    return examples


def embed_examples(
    encoder: Encoder, examples: Sequence[Example], desc: str = "embed"
) -> np.ndarray:
    """``(n, 384)`` routing vectors, one call per text as the daemon makes them."""
    return np.stack(
        [
            encoder.routing_vector(e.text)
            for e in tqdm(examples, desc=desc, unit="line", file=sys.stderr)
        ]
    )


def targets(examples: Sequence[Example]) -> np.ndarray:
    return label_matrix([e.labels for e in examples])


def load_line() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unavailable"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


# -- eval router ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """Per-call wall times in nanoseconds."""

    samples_ns: np.ndarray

    def ms(self, q: float) -> float:
        """The ``q``-th percentile in milliseconds."""
        return float(np.percentile(self.samples_ns, q)) / 1e6

    @property
    def p50(self) -> float:
        return self.ms(50)

    @property
    def p95(self) -> float:
        return self.ms(95)

    @property
    def mean(self) -> float:
        return float(self.samples_ns.mean()) / 1e6


@dataclass
class RouterReport:
    """What :func:`evaluate_router` measured."""

    path: Path
    head_path: Path
    head: RouterHead
    threshold: float
    tau0: float
    examples: int
    groups: int
    support: dict[str, int]
    precision: dict[str, float]
    recall: dict[str, float]
    f1: dict[str, float]
    confidences: np.ndarray
    encoder_and_head: Latency
    head_alone: Latency
    warmup: int
    by_group: dict[str, tuple[int, float]] = field(default_factory=dict)
    load: str = field(default_factory=load_line)

    def format(self) -> str:
        head = self.head
        lines = [
            f"Router eval: {self.path} ({self.examples} lines, {self.groups} groups)",
            f"head {self.head_path} (hidden={head.hidden}, temperature={head.temperature:.3f}), "
            f"label threshold {self.threshold:.2f}",
            "",
            f"{'label':12} {'support':>8} {'precision':>10} {'recall':>8} {'F1':>8}",
        ]
        for label in LABELS:
            key = str(label)
            lines.append(
                f"{key:12} {self.support[key]:8d} {self.precision[key]:10.4f} "
                f"{self.recall[key]:8.4f} {self.f1[key]:8.4f}"
            )
        lines += [
            f"{'micro':12} {'':8} {'':10} {'':8} {self.f1['micro']:8.4f}",
            f"{'macro':12} {'':8} {'':10} {'':8} {self.f1['macro']:8.4f}",
            "",
        ]
        if self.by_group:
            lines.append(f"{'domain':12} {'lines':>8} {'macro-F1':>10}")
            lines += [f"{g:12} {n:8d} {f:10.4f}" for g, (n, f) in sorted(self.by_group.items())]
            lines.append("")
        lines += [
            f"confidence s(x): mean {self.confidences.mean():.3f}, median "
            f"{np.median(self.confidences):.3f}; below tau0 = {self.tau0:.2f} (sent to the "
            f"labeller at round 0): {np.mean(self.confidences < self.tau0):.1%}",
            "",
            f"routing latency, ms ({self.examples} calls each after {self.warmup} warm-up calls; "
            f"{self.load})",
            f"{'':34} {'p50':>8} {'p95':>8} {'mean':>8}",
        ]
        for name, lat in (
            ("encoder + head (embed + route)", self.encoder_and_head),
            ("head alone (route on a vector)", self.head_alone),
        ):
            lines.append(f"{name:34} {lat.p50:8.4f} {lat.p95:8.4f} {lat.mean:8.4f}")
        return "\n".join(lines)


def _precision_recall(
    y_true: np.ndarray, y_pred: np.ndarray
) -> tuple[dict[str, float], dict[str, float]]:
    t, p = y_true.astype(bool), y_pred.astype(bool)
    tp, predicted, actual = (t & p).sum(axis=0), p.sum(axis=0), t.sum(axis=0)
    precision = {
        str(lb): float(tp[i] / predicted[i]) if predicted[i] else 1.0 for i, lb in enumerate(LABELS)
    }
    recall = {
        str(lb): float(tp[i] / actual[i]) if actual[i] else 1.0 for i, lb in enumerate(LABELS)
    }
    return precision, recall


def evaluate_router(
    encoder: Encoder,
    router: Router,
    examples: Sequence[Example],
    *,
    path: Path,
    head_path: Path,
    tau0: float,
    warmup: int = WARMUP_CALLS,
) -> RouterReport:
    """F1 of ``router``'s decisions on ``examples`` and its routing latency.

    (a) encoder + head: ``encoder.embed_routed(text)`` (both vectors, as ingest makes them) and
    ``router.route`` on the routing vector, timed per text with ``time.perf_counter_ns`` (the
    decisions of this pass are the ones scored);
    (b) head alone: ``router.route(vec, text)`` on the precomputed routing vectors. Each pass first
    makes ``warmup`` untimed calls (on the first texts, cycling through a short file).
    """
    texts = [e.text for e in examples]
    n = len(texts)
    for i in range(warmup):
        router.route(encoder.routing_vector(texts[i % n]), texts[i % n])
    vectors = np.empty((n, encoder.dim), dtype=np.float32)
    full = np.empty(n, dtype=np.int64)
    decisions = []
    clock = time.perf_counter_ns
    for i, text in enumerate(tqdm(texts, desc="encoder + head", unit="line", file=sys.stderr)):
        start = clock()
        _, vec = encoder.embed_routed(text)
        decision = router.route(vec, text)
        full[i] = clock() - start
        vectors[i] = vec
        decisions.append(decision)
    for i in range(warmup):
        router.route(vectors[i % n], texts[i % n])
    alone = np.empty(n, dtype=np.int64)
    for i, text in enumerate(texts):
        vec = vectors[i]
        start = clock()
        router.route(vec, text)
        alone[i] = clock() - start

    y_true = targets(examples)
    y_pred = label_matrix([d.labels for d in decisions])
    precision, recall = _precision_recall(y_true, y_pred)
    groups = [e.group for e in examples]
    by_group = {}
    if 1 < len(set(groups)) <= MAX_GROUPS_SHOWN and None not in groups:
        for group in set(groups):
            rows = np.array([g == group for g in groups])
            by_group[str(group)] = (int(rows.sum()), f1_scores(y_true[rows], y_pred[rows])["macro"])
    return RouterReport(
        path=path,
        head_path=head_path,
        head=router.head,
        threshold=router.threshold,
        tau0=tau0,
        examples=n,
        groups=len({e.group for e in examples if e.group is not None}),
        support={str(lb): int(y_true[:, i].sum()) for i, lb in enumerate(LABELS)},
        precision=precision,
        recall=recall,
        f1=f1_scores(y_true, y_pred),
        confidences=np.array([d.confidence for d in decisions]),
        encoder_and_head=Latency(full),
        head_alone=Latency(alone),
        warmup=warmup,
        by_group=by_group,
    )
