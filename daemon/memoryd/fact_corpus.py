"""The fact corpus (``models/fact_corpus/``) and the attribute inventory: their lines, read and
checked against ``models/fact_corpus/LABELS.md``. Used by the reader's training script, its eval
and the corpus tests; it needs nothing but the standard library (and the stdlib-only
:mod:`memoryd.models`), so a writer can check a file with
``python3 scripts/check_fact_corpus.py FILE``.

Three kinds of file:

- turns (``*.jsonl`` with ``text``): one trace and the facts it states;
- pairs (``*.jsonl`` with ``first`` and ``second``): two traces and what the second does to the
  first's facts;
- scenarios (``evals/updates/*.jsonl`` with ``turns``): a history and a later question.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memoryd.jsonlines import json_objects
from memoryd.models import OTHER_ATTRIBUTE

__all__ = [
    "CORPUS_DIR",
    "INVENTORY_FILE",
    "KINDS",
    "NONE_REASONS",
    "OTHER",
    "ROLES",
    "USER",
    "Attribute",
    "CorpusError",
    "Inventory",
    "LabelledFact",
    "LabelledTurn",
    "Pair",
    "load_inventory",
    "read_jsonl",
    "read_pairs",
    "read_turns",
]

CORPUS_DIR = "fact_corpus"
INVENTORY_FILE = "fact_inventory.json"
USER = "user"
OTHER = OTHER_ATTRIBUTE
KINDS = ("state", "change", "add", "end", "none")
NONE_REASONS = ("question", "hypothetical", "plan", "opinion", "past", "wish", "other")
ROLES = ("user", "assistant", "log")
OUTCOMES = ("replace", "add", "end", "none")
CARDINALITIES = ("one", "many")
VALUE_TYPES = ("person", "place", "organisation", "object", "other")


class CorpusError(ValueError):
    """A corpus line that breaks the annotation rules; the message names the file and line."""


@dataclass(frozen=True)
class Attribute:
    name: str
    cardinality: str
    value_type: str
    label: str
    negative_label: str
    aliases: tuple[str, ...]
    about: str
    ends_with: str | None = None
    """The attribute whose value a fact of this one is about ("dose" of a "medication"): the
    fact ends when that value's fact does."""

    @property
    def single(self) -> bool:
        """Whether the slot holds one value at a time."""
        return self.cardinality == "one"


@dataclass(frozen=True)
class Inventory:
    version: int
    attributes: tuple[Attribute, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def get(self, name: str) -> Attribute | None:
        return next((a for a in self.attributes if a.name == name), None)


def load_inventory(path: Path) -> Inventory:
    data = json.loads(Path(path).read_text())
    attributes = []
    for raw in data["attributes"]:
        if raw["cardinality"] not in CARDINALITIES:
            raise CorpusError(f"{path}: {raw['name']}: cardinality {raw['cardinality']!r}")
        if raw.get("value_type", "object") not in VALUE_TYPES:
            raise CorpusError(f"{path}: {raw['name']}: value_type {raw['value_type']!r}")
        attributes.append(
            Attribute(
                name=raw["name"],
                cardinality=raw["cardinality"],
                value_type=raw.get("value_type", "object"),
                label=raw["label"],
                negative_label=raw["negative_label"],
                aliases=tuple(raw.get("aliases", ())),
                about=raw.get("about", ""),
                ends_with=raw.get("ends_with"),
            )
        )
    names = [a.name for a in attributes]
    if len(set(names)) != len(names) or OTHER in names:
        raise CorpusError(f"{path}: attribute names repeat or use {OTHER!r}")
    for a in attributes:
        if a.ends_with is not None and a.ends_with not in names:
            raise CorpusError(f"{path}: {a.name}: ends_with {a.ends_with!r} is no attribute")
    return Inventory(version=int(data["version"]), attributes=tuple(attributes))


@dataclass(frozen=True)
class LabelledFact:
    subject: str
    attribute: str
    value: str
    kind: str
    negated: bool = False
    old: str | None = None
    phrase: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class LabelledTurn:
    id: str
    role: str
    domain: str
    text: str
    facts: tuple[LabelledFact, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Pair:
    id: str
    domain: str
    outcome: str
    first: LabelledTurn
    second: LabelledTurn
    current: tuple[tuple[str, str, str], ...]
    stale: tuple[tuple[str, str, str], ...]


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; a line that is not a JSON object raises."""
    with Path(path).open(encoding="utf-8") as fh:
        yield from json_objects(fh, CorpusError, lambda number: f"{path}:{number}")


def _need(data: dict[str, Any], key: str, where: str, kind: type = str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
        raise CorpusError(f"{where}: {key!r} must be a non-empty {kind.__name__}")
    return value


def _fact(raw: Any, text: str, inventory: Inventory, where: str) -> LabelledFact:
    if not isinstance(raw, dict):
        raise CorpusError(f"{where}: a fact must be an object")
    unknown = set(raw) - {
        "subject",
        "attribute",
        "value",
        "kind",
        "negated",
        "old",
        "phrase",
        "why",
    }
    if unknown:
        raise CorpusError(f"{where}: unknown fact fields {sorted(unknown)}")
    subject = _need(raw, "subject", where)
    attribute = _need(raw, "attribute", where)
    value = _need(raw, "value", where)
    kind = _need(raw, "kind", where)
    if kind not in KINDS:
        raise CorpusError(f"{where}: kind {kind!r} is not one of {KINDS}")
    if attribute != OTHER and inventory.get(attribute) is None:
        raise CorpusError(f"{where}: attribute {attribute!r} is not in the inventory (or 'other')")
    phrase = raw.get("phrase")
    if attribute == OTHER and not (isinstance(phrase, str) and phrase.strip()):
        raise CorpusError(f"{where}: an 'other' fact needs a phrase")
    why = raw.get("why")
    if kind == "none" and why not in NONE_REASONS:
        raise CorpusError(f"{where}: a 'none' fact needs why in {NONE_REASONS}")
    old = raw.get("old")
    for name, span in (("subject", subject), ("value", value), ("old", old)):
        if name == "subject" and span == USER:
            continue
        if span is not None and (not isinstance(span, str) or span not in text):
            raise CorpusError(f"{where}: {name} {span!r} is not a span of the text")
    negated = raw.get("negated", False)
    if not isinstance(negated, bool):
        raise CorpusError(f"{where}: negated must be true or false")
    return LabelledFact(subject, attribute, value, kind, negated, old, phrase, why)


def parse_turn(data: dict[str, Any], inventory: Inventory, where: str) -> LabelledTurn:
    text = _need(data, "text", where)
    role = _need(data, "role", where)
    if role not in ROLES:
        raise CorpusError(f"{where}: role {role!r} is not one of {ROLES}")
    facts = data.get("facts")
    if not isinstance(facts, list):
        raise CorpusError(f"{where}: 'facts' must be a list (empty when the text states none)")
    return LabelledTurn(
        id=str(data.get("id", "")),
        role=role,
        domain=str(data.get("domain", "")),
        text=text,
        facts=tuple(_fact(f, text, inventory, f"{where} fact {i}") for i, f in enumerate(facts)),
    )


def read_turns(path: Path, inventory: Inventory) -> list[LabelledTurn]:
    turns = []
    for number, data in read_jsonl(path):
        where = f"{path}:{number}"
        turn = parse_turn(data, inventory, where)
        if not turn.id or not turn.domain:
            raise CorpusError(f"{where}: 'id' and 'domain' are required")
        turns.append(turn)
    return turns


def _triples(raw: Any, where: str) -> tuple[tuple[str, str, str], ...]:
    if not isinstance(raw, list):
        raise CorpusError(f"{where}: must be a list")
    out: list[tuple[str, str, str]] = []
    for item in raw:
        if not isinstance(item, dict):
            raise CorpusError(f"{where}: items are objects with subject, attribute, value")
        s, a, v = (_need(item, k, where) for k in ("subject", "attribute", "value"))
        out.append((s, a, v))
    return tuple(out)


def read_pairs(path: Path, inventory: Inventory) -> list[Pair]:
    pairs = []
    for number, data in read_jsonl(path):
        where = f"{path}:{number}"
        outcome = _need(data, "outcome", where)
        if outcome not in OUTCOMES:
            raise CorpusError(f"{where}: outcome {outcome!r} is not one of {OUTCOMES}")
        domain = _need(data, "domain", where)
        first = parse_turn(_need(data, "first", where, dict), inventory, f"{where} first")
        second = parse_turn(_need(data, "second", where, dict), inventory, f"{where} second")
        current = _triples(data.get("current"), f"{where} current")
        stale = _triples(data.get("stale", []), f"{where} stale")
        texts = first.text + "\n" + second.text
        for s, _, v in (*current, *stale):
            if v not in texts or (s != USER and s not in texts):
                raise CorpusError(f"{where}: {s!r} / {v!r} is not a span of the two texts")
        if outcome in ("replace", "end") and not stale:
            raise CorpusError(f"{where}: a {outcome} pair names its stale value")
        pairs.append(Pair(_need(data, "id", where), domain, outcome, first, second, current, stale))
    return pairs
