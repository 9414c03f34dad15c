"""How well a reading matches a corpus line's annotated facts (the reader's eval and the
training script's cross-validation share it).

A predicted fact matches a gold one when their subjects and values name the same thing (equal
after :func:`memoryd.reader.spans.normalise`, or one's words hold at least half of the other's:
"Boots Kettering High Street" and "Boots"), at three levels:

- ``value``: subject and value;
- ``fact``: subject, attribute and value;
- ``full``: subject, attribute, value and kind.

Only facts about now count (gold and predicted ``none`` facts are left out); each gold fact is
matched once. Per attribute and per kind, precision and recall are of ``full`` matches grouped by
the gold (recall) or predicted (precision) attribute and kind.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from memoryd.fact_corpus import USER, LabelledFact
from memoryd.reader.reader import ReadFact
from memoryd.reader.spans import normalise

__all__ = ["LEVELS", "ReaderScore", "same_thing"]

LEVELS = ("value", "fact", "full")


def same_thing(a: str, b: str) -> bool:
    x, y = normalise(a), normalise(b)
    if x == y:
        return bool(x)
    wx, wy = set(x.split()), set(y.split())
    if not wx or not wy:
        return False
    shared = len(wx & wy)
    return shared >= 1 and shared * 2 >= min(len(wx), len(wy)) and (wx <= wy or wy <= wx)


def _matches(level: str, got: ReadFact, gold: LabelledFact) -> bool:
    if not same_thing(got.subject or USER, gold.subject) or not same_thing(got.value, gold.value):
        return False
    if level == "value":
        return True
    if got.attribute != gold.attribute:
        return False
    return level == "fact" or got.kind == gold.kind


@dataclass
class ReaderScore:
    """Counts over many lines; :meth:`add` one line at a time."""

    matched: Counter[str] = field(default_factory=Counter)
    predicted: int = 0
    gold: int = 0
    by_attribute: dict[str, Counter[str]] = field(default_factory=dict)
    by_kind: dict[str, Counter[str]] = field(default_factory=dict)
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(gold kind, read kind) of the facts matched at the ``fact`` level: the kind's
    confusion."""
    attributes: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(gold attribute, read attribute) of the facts matched at the ``value`` level."""

    def add(self, got: Sequence[ReadFact], gold: Sequence[LabelledFact]) -> None:
        got = [f for f in got if f.kind != "none"]
        gold = [f for f in gold if f.kind != "none"]
        self.predicted += len(got)
        self.gold += len(gold)
        for level in LEVELS:
            free = list(gold)
            for fact in got:
                hit = next((g for g in free if _matches(level, fact, g)), None)
                if hit is not None:
                    free.remove(hit)
                    self.matched[level] += 1
                    if level == "fact":
                        self.kinds[(hit.kind, fact.kind)] += 1
                    if level == "value":
                        self.attributes[(hit.attribute, fact.attribute)] += 1
                    if level == "full":
                        self._count(fact.attribute, fact.kind, "hit")
            if level == "full":
                for fact in got:
                    self._count(fact.attribute, fact.kind, "predicted")
                for g in gold:
                    self._count(g.attribute, g.kind, "gold")

    def _count(self, attribute: str, kind: str, what: str) -> None:
        self.by_attribute.setdefault(attribute, Counter())[what] += 1
        self.by_kind.setdefault(kind, Counter())[what] += 1

    def merge(self, other: ReaderScore) -> None:
        """Add ``other``'s counts to these."""
        self.matched.update(other.matched)
        self.predicted += other.predicted
        self.gold += other.gold
        self.kinds.update(other.kinds)
        self.attributes.update(other.attributes)
        for mine, theirs in (
            (self.by_attribute, other.by_attribute),
            (self.by_kind, other.by_kind),
        ):
            for key, counts in theirs.items():
                mine.setdefault(key, Counter()).update(counts)

    def prf(self, level: str) -> tuple[float, float, float]:
        return _prf(self.matched[level], self.predicted, self.gold)

    @staticmethod
    def group_prf(counts: Counter[str]) -> tuple[float, float, float]:
        """Precision over the group's predictions, recall over its gold facts (a hit counts in
        the predicted group; for a hit both agree on attribute and kind)."""
        return _prf(counts["hit"], counts["predicted"], counts["gold"])


def _prf(hit: int, predicted: int, gold: int) -> tuple[float, float, float]:
    p = hit / predicted if predicted else 0.0
    r = hit / gold if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)
