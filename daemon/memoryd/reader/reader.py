"""From the head's reading of a text to the facts it states (:class:`ReadFact`).

    reader = FactReader.load(Path("models"))       # the head and the inventory
    facts = reader.read(text, states, offsets)     # the encoder's token states of ``text``
    [(f.subject, f.attribute, f.value, f.kind) for f in facts]
    → [(None, "manager", "Marcus Lee", "change")]  # None: the speaker

A value span takes the attribute and kind the head gives it most probability; its best
candidate subject, and any other named one scoring at least ``second_subject``, so "Tom and
Jess have moved to Edinburgh" gives one fact for each of them; an ``old`` span goes with the
nearest value that changes. In an attribute of one value, a value given both to the speaker and
to someone named is that someone's alone when the speaker has another (:func:`one_value_each`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memoryd.encoder import MANIFEST_FILE, sha256_file
from memoryd.errors import ModelMissingError
from memoryd.fact_corpus import INVENTORY_FILE, OTHER, load_inventory
from memoryd.reader.head import KINDS, ReaderHead, Reading, SpanFacts
from memoryd.reader.judge import FactJudge, Heard, candidate_spans
from memoryd.reader.slots import Slots
from memoryd.reader.spans import Span, normalise

__all__ = ["HEAD_FILE", "SUBJECT_THRESHOLD", "FactReader", "ReadFact", "one_value_each"]

HEAD_FILE = "fact_reader.npz"
TUNED = "tuned"
"""The input of a head that reads its own tuned top layers (else the encoder's last layer)."""
MANIFEST_SECTION = "fact_reader"

HOLDS = ("state", "change")
"""The kinds that say a value holds now, new or in place of another: to a slot they are one
decision, so a fact read as either is as sure as the two probabilities together."""
SUBJECT_THRESHOLD = 0.5
"""The default least score of a second subject (a head's meta ``second_subject`` overrides)."""


@dataclass(frozen=True)
class ReadFact:
    """One fact a text states. ``subject`` None is the speaker; ``attribute`` an inventory
    name or ``other``; ``start``/``end`` the value's characters in the text."""

    subject: str | None
    attribute: str
    value: str
    kind: str
    negated: bool
    attribute_p: float
    kind_p: float  # of a kind of HOLDS: of the two together
    start: int
    end: int
    old: str | None = None

    @property
    def confidence(self) -> float:
        return min(self.attribute_p, self.kind_p)

    def key(self) -> tuple[str, str, str]:
        return (normalise(self.subject or "user"), self.attribute, normalise(self.value))


class FactReader:
    """The head, the inventory it was trained on (``slots``) and the judge trained over it
    (:mod:`memoryd.reader.judge`)."""

    def __init__(self, head: ReaderHead, slots: Slots, judge: FactJudge) -> None:
        if list(head.attributes) != [*slots.inventory.names, OTHER]:
            raise ModelMissingError(
                "fact reader head", "a head trained on this inventory (run `make models`)"
            )
        self.head = head
        self.slots = slots
        self.judge = judge

    def check_input(self, reads_tuned: bool) -> None:
        """The head must read the states the encoder gives it: its own tuned top layers'
        (``fact-top-int8.onnx`` present) or the last layer's. ModelMissingError otherwise."""
        if (self.head.input == TUNED) != reads_tuned:
            raise ModelMissingError(
                f"fact reader head reading {self.head.input!r} states",
                "the fact reader layers it was trained with (run `make models`)",
            )

    @classmethod
    def load(cls, model_dir: Path, verify: bool = True) -> FactReader:
        """The reader built into ``model_dir``; ``verify`` checks the head's and the judge's
        sha256 against the manifest (ModelMissingError names what is missing or stale)."""
        path = Path(model_dir) / HEAD_FILE
        head = ReaderHead.load(path)
        if verify:
            _verify(path, Path(model_dir) / MANIFEST_FILE)
        slots = Slots(load_inventory(Path(model_dir) / INVENTORY_FILE))
        return cls(head, slots, FactJudge.load(Path(model_dir), head, verify))

    @property
    def second_subject(self) -> float:
        """The least score of a second subject a value is about (its recipe's, chosen by
        cross-validation)."""
        return float(self.head.meta.get("second_subject", SUBJECT_THRESHOLD))

    @property
    def min_confidence(self) -> float:
        """The least confidence of a fact the reader keeps (its recipe's, chosen by
        cross-validation on the training lines: docs/decisions.md)."""
        return float(self.head.meta.get("min_confidence", 0.0))

    def read(self, text: str, states: np.ndarray, offsets: list[tuple[int, int]]) -> list[ReadFact]:
        """Every fact ``text`` states with at least :attr:`min_confidence`, ``none`` ones
        included (the caller drops them)."""
        return self._confident(self.read_all(text, states, offsets))

    def hear(
        self, text: str, states: np.ndarray, offsets: list[tuple[int, int]]
    ) -> tuple[list[ReadFact], Heard]:
        """:meth:`read`, and the text as the judge hears it, from the same pass of the head."""
        reading = self.head.read(text, states, offsets)
        heard = Heard(text, reading.states, tuple(candidate_spans(text, offsets, reading.starts)))
        return self._confident(self._read(reading)), heard

    def _confident(self, facts: list[ReadFact]) -> list[ReadFact]:
        least = self.min_confidence
        return [f for f in facts if f.confidence >= least]

    def read_all(
        self, text: str, states: np.ndarray, offsets: list[tuple[int, int]]
    ) -> list[ReadFact]:
        """Every fact the head finds, however unsure."""
        return self._read(self.head.read(text, states, offsets))

    def _read(self, reading: Reading) -> list[ReadFact]:
        olds = reading.spans["old"]
        facts: dict[tuple[str, str, str], ReadFact] = {}
        for span_facts in reading.facts:
            for fact in self._facts(span_facts, olds, reading.facts):
                facts.setdefault(fact.key(), fact)
        return one_value_each(list(facts.values()), self.slots)

    def _facts(self, found: SpanFacts, olds: list[Span], every: list[SpanFacts]) -> list[ReadFact]:
        attribute = int(found.attribute.argmax())
        kind = int(found.kind.argmax())
        kind_p = float(found.kind[kind])
        if KINDS[kind] in HOLDS:
            kind_p = float(sum(found.kind[KINDS.index(k)] for k in HOLDS))
        old = _old_of(found, olds, every) if KINDS[kind] in ("change", "state") else None
        chosen = _subjects(found.subjects, self.second_subject)
        value = found.value
        return [
            ReadFact(
                subject=None if s is None or _same(s, value) else s.text,
                attribute=self.head.attributes[attribute],
                value=value.text,
                kind=KINDS[kind],
                negated=found.negated > 0.5,
                attribute_p=round(float(found.attribute[attribute]), 4),
                kind_p=round(kind_p, 4),
                start=value.start,
                end=value.end,
                old=old,
            )
            for s in chosen
        ]


def one_value_each(facts: list[ReadFact], slots: Slots) -> list[ReadFact]:
    """``facts`` without the speaker's share of a value the head also gave to someone the text
    names, where that leaves the speaker two values of one attribute that holds one ("I'm in
    Oxford and mum's about an hour away in Swindon": Swindon is mum's, not the speaker's too).
    """
    mine: dict[str, set[str]] = {}
    theirs: set[tuple[str, str]] = set()
    for f in facts:
        if f.kind in HOLDS and not f.negated and slots.single(f.attribute):
            if f.subject is None:
                mine.setdefault(f.attribute, set()).add(f.value)
            else:
                theirs.add((f.attribute, f.value))
    return [
        f
        for f in facts
        if f.subject is not None
        or len(mine.get(f.attribute, ())) < 2
        or (f.attribute, f.value) not in theirs
    ]


def _subjects(scored: list[tuple[Span | None, float]], second: float) -> list[Span | None]:
    """The best candidate, and every other named one scoring at least ``second`` ("Tom and
    Jess"); the speaker (None) only when it scores best."""
    best = max(scored, key=lambda sp: sp[1])
    others = [s for s, p in scored if s is not None and s is not best[0] and p >= second]
    return [best[0], *others]


def _same(subject: Span, value: Span) -> bool:
    return subject.start == value.start and subject.end == value.end


def _old_of(found: SpanFacts, olds: list[Span], every: list[SpanFacts]) -> str | None:
    """The ``old`` span nearest to this value, of those no other value is nearer to."""
    mine = [o for o in olds if all(_gap(o, found.value) <= _gap(o, x.value) for x in every)]
    return min(mine, key=lambda o: _gap(o, found.value)).text if mine else None


def _gap(a: Span, b: Span) -> int:
    return max(a.first - b.last, b.first - a.last, 0)


def _verify(path: Path, manifest: Path) -> None:
    expected = None
    if manifest.is_file():
        section = json.loads(manifest.read_text()).get(MANIFEST_SECTION) or {}
        expected = section.get("file", {}).get("sha256")
    if expected is None or sha256_file(path) != expected:
        raise ModelMissingError(str(path), f"fact reader head recorded in {manifest.name}")
