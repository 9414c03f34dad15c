"""Fact judge eval: on annotated lines, does the judge hear a value as over exactly when it is?

Examples come from the fact corpus's files (``models/fact_corpus/LABELS.md``), the same way the
judge's training takes them (``scripts/train_fact_judge.py``):

- a change pair gives one example for each fact of its first trace that states something and
  whose value the second trace names again (in any case): *over* when the pair lists the value
  as stale;
- a single line gives one example for each annotated value: *over* when its kind is ``end``.

Each text goes through the encoder and the reader's head as the daemon reads a turn, and the
judge scores the value's first whole-word occurrence with the fact's attribute. Precision and
recall of *over* at the judge's threshold, for pair and line examples apart. The corpus's
training split measured this way shows the fit; the dev split (the default) is written apart.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memoryd.encoder import Encoder
from memoryd.errors import InvalidInputError
from memoryd.fact_corpus import CorpusError, Inventory, read_pairs, read_turns
from memoryd.reader import FactReader, ReaderHead, value_features

__all__ = ["JudgeExample", "JudgeReport", "judge_examples", "judge_inputs", "run_judge"]


@dataclass(frozen=True)
class JudgeExample:
    text: str
    value: str
    attribute: str
    over: bool
    group: str  # the file's writer pass ("family" of family_pairs.jsonl)
    pair: bool  # from a change pair: a value named again, the case the judge serves


def named_at(text: str, value: str) -> tuple[int, int] | None:
    """The characters of ``value``'s first whole-word occurrence in ``text``, in any case (the
    daemon hears names case-folded)."""
    found = re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE)
    return (found.start(), found.end()) if found else None


def judge_examples(files: list[Path], inventory: Inventory) -> list[JudgeExample]:
    """The examples of corpus files (see the module docstring); CorpusError on a bad line."""
    out: list[JudgeExample] = []
    for path in files:
        group = path.name.split("_")[0]
        if path.name.endswith("_pairs.jsonl"):
            for pair in read_pairs(path, inventory):
                stale = {(s.lower(), v.lower()) for s, _, v in pair.stale}
                for fact in pair.first.facts:
                    if fact.kind == "none" or named_at(pair.second.text, fact.value) is None:
                        continue
                    over = (fact.subject.lower(), fact.value.lower()) in stale
                    text = pair.second.text
                    out.append(JudgeExample(text, fact.value, fact.attribute, over, group, True))
        else:
            for turn in read_turns(path, inventory):
                for fact in turn.facts:
                    over = fact.kind == "end"
                    out.append(
                        JudgeExample(turn.text, fact.value, fact.attribute, over, group, False)
                    )
    return out


def judge_inputs(
    encoder: Encoder, head: ReaderHead, examples: list[JudgeExample]
) -> tuple[np.ndarray, list[JudgeExample]]:
    """The judge features of the examples whose value the encoder sees (a text cut at the
    encoder's length may lose it), each text read as the daemon reads it; and those examples."""
    rows, kept = [], []
    for item in tqdm(examples, desc="examples", unit="example", file=sys.stderr):
        states, offsets = encoder.reading(item.text)
        where = named_at(item.text, item.value) or (0, 0)
        row = value_features(head, item.text, states, offsets, where, item.attribute)
        if row is not None:
            rows.append(row)
            kept.append(item)
    if not rows:
        return np.zeros((0, 0), dtype=np.float32), []
    return np.stack(rows), kept


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
    pairs: Counts
    lines: Counts

    def format(self) -> str:
        out = [f"Fact judge eval: {self.path} (threshold {self.threshold:.2f})", ""]
        out.append(f"{'examples':28}{'n':>6}{'over':>6}{'heard':>7}{'P':>7}{'R':>7}{'F1':>7}")
        for name, c in (("values named again (pairs)", self.pairs), ("values (lines)", self.lines)):
            p, r, f = c.prf()
            out.append(
                f"{name:28}{c.examples:>6}{c.over:>6}{c.heard:>7}{p:>7.3f}{r:>7.3f}{f:>7.3f}"
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
    pair = np.array([e.pair for e in kept], dtype=bool)
    pairs = _counts(scores[pair], [e for e in kept if e.pair], judge.threshold)
    lines = _counts(scores[~pair], [e for e in kept if not e.pair], judge.threshold)
    return JudgeReport(path, judge.threshold, pairs, lines)
