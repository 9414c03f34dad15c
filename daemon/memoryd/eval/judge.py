"""Fact judge eval: on annotated lines, does the judge hear a value as over exactly when it is?

The examples are the fact corpus's, taken as the judge's training takes them
(:mod:`memoryd.reader.judge_corpus`): values a change pair's second trace names again, values
of single lines, and names said in passing. Precision and recall of *over* at the judge's
threshold, for each kind of example. The corpus's training side measured this way shows the
fit; the dev split (the default) is written apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memoryd.encoder import Encoder
from memoryd.errors import InvalidInputError
from memoryd.fact_corpus import CorpusError
from memoryd.reader import (
    LINE,
    PAIR,
    PASSING,
    FactReader,
    JudgeExample,
    judge_examples,
    judge_inputs,
)

__all__ = ["JudgeReport", "run_judge"]

ROWS = {
    PAIR: "values named again (pairs)",
    LINE: "values (lines)",
    PASSING: "names in passing (lines)",
}


@dataclass(frozen=True)
class Counts:
    """Examples heard as over (``heard``), over in truth (``over``), and both (``right``)."""

    examples: int
    heard: int
    over: int
    right: int

    def prf(self) -> tuple[float, float, float]:
        p = self.right / self.heard if self.heard else 0.0
        r = self.right / self.over if self.over else 0.0
        return p, r, 2 * p * r / (p + r) if p + r else 0.0


def _counts(scores: np.ndarray, examples: list[JudgeExample], threshold: float) -> Counts:
    heard = scores >= threshold
    over = np.array([e.over for e in examples], dtype=bool)
    return Counts(len(examples), int(heard.sum()), int(over.sum()), int((heard & over).sum()))


@dataclass
class JudgeReport:
    path: Path
    threshold: float
    counts: dict[str, Counts]

    def format(self) -> str:
        out = [f"Fact judge eval: {self.path} (threshold {self.threshold:.2f})", ""]
        out.append(f"{'examples':28}{'n':>6}{'over':>6}{'heard':>7}{'P':>7}{'R':>7}{'F1':>7}")
        for source, c in self.counts.items():
            p, r, f = c.prf()
            out.append(
                f"{ROWS[source]:28}{c.examples:>6}{c.over:>6}{c.heard:>7}"
                f"{p:>7.3f}{r:>7.3f}{f:>7.3f}"
            )
        return "\n".join(out) + "\n"


def run_judge(encoder: Encoder, reader: FactReader, path: Path) -> JudgeReport:
    """Score the reader's judge on the corpus files of ``path`` (a file or a directory)."""
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    try:
        examples = judge_examples(files, reader.slots.inventory)
    except CorpusError as exc:
        raise InvalidInputError(str(exc)) from exc
    if not examples:
        raise InvalidInputError(f"{path}: no annotated values")
    x, kept = judge_inputs(encoder, reader.head, examples)
    judge = reader.judge
    scores = judge.probabilities(x)
    sources = np.array([e.source for e in kept])
    counts = {
        source: _counts(
            scores[sources == source], [e for e in kept if e.source == source], judge.threshold
        )
        for source in ROWS
    }
    return JudgeReport(path, judge.threshold, counts)
