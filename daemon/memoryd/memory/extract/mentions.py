"""Typed entity mentions: fact values, drugs, capitalised names typed by gazetteers and
context cues, and times."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memoryd.memory.extract.health import WORD, is_drug
from memoryd.memory.extract.names import (
    CAPITAL_STOPWORDS,
    FIRST_NAMES,
    ORG_SUFFIXES,
    ORGANISATIONS,
    PERSON_TITLES,
    PLACE_KEYS,
    PLACE_SUFFIXES,
    RELATIONSHIP_WORDS,
    canonical_name,
)
from memoryd.memory.extract.sentences import CLAUSE_OPENERS, overlaps, rx
from memoryd.memory.timeparse import TimeMention
from memoryd.models import EntityType

__all__ = [
    "GREETINGS",
    "OBJECT_VERBS",
    "EntityMention",
    "KnownValue",
    "MentionRole",
    "entity_mentions",
]


MentionRole = Literal["subject", "object", "mention"]


@dataclass(frozen=True)
class EntityMention:
    """An entity named in the text at offset ``start``; ``role`` is "subject" when it opens a
    clause, "object" when a verb or a fact takes it, "mention" otherwise. A time entity's name is
    its resolved value ("2023-05-07"), so mentions of one day share an id."""

    name: str
    type: EntityType
    role: MentionRole
    start: int


GREETINGS = frozenset("hey hi hello thanks thank dear congrats congratulations bye yo".split())


OBJECT_VERBS = frozenset(
    "met saw visited called love like miss missed took take bought meet see visit call "
    "adore hate watched read".split()
)


# Entities.
_NAME = re.compile(
    r"(?<![\w'])(?:(?P<title>" + "|".join(PERSON_TITLES) + r")\.?\s+)?"
    r"(?P<name>[A-Z][\w'-]*(?:(?:\s+(?:of|the|de|da|van|von|del|la|le|&))*\s+"
    r"(?!I\b|I')[A-Z][\w'-]*)*)"
)


_PLACE_CUE = rx(
    r"\b(?:in|at|from|to|near|visit|visited|visiting|around|across|through|into)\s+(?:the\s+)?$"
)


_PERSON_AFTER = rx(r"^(?:\s+and\s+I\b|\s+(?:said|says|told|asked|and\s+me)\b|'s\s)")


# "That's great, Calvin!": a single name between a comma and the end of the sentence.
_VOCATIVE_AFTER = re.compile(r"\s*(?:[!?.]|$)")


_GREETING_BEFORE = rx(rf"\b(?:{'|'.join(GREETINGS)})(?:\s+you)?[\s,]*$")


_RELATIVE_BEFORE = rx(rf"\bmy\s+(?:{'|'.join(RELATIONSHIP_WORDS)}|best\s+friend)\s*,?\s*$")


KnownValue = tuple[str, EntityType, int]
"""A fact's value the reader found: its text, entity type and start in the text."""


def entity_mentions(
    text: str, times: list[TimeMention], values: Sequence[KnownValue], starts: set[int]
) -> list[EntityMention]:
    """Typed mentions: fact values first, then drugs, capitalised names and times; a later
    source never re-types a span an earlier one claimed."""
    found: list[tuple[EntityMention, int]] = [
        (EntityMention(name, kind, "object", start), start + len(name))
        for name, kind, start in values
    ]
    found += [
        (EntityMention(m.group(), EntityType.OBJECT, "mention", m.start()), m.end())
        for m in WORD.finditer(text)
        if is_drug(m.group())
    ]
    found += _names(text, starts)
    found += [
        (EntityMention(_time_name(t), EntityType.TIME, "mention", t.start), t.end) for t in times
    ]
    kept: list[EntityMention] = []
    spans: list[tuple[int, int]] = []
    for mention, end in found:
        if not overlaps(spans, mention.start, end):
            spans.append((mention.start, end))
            kept.append(mention)
    return sorted(kept, key=lambda e: e.start)


def _time_name(t: TimeMention) -> str:
    """A time entity is named by its resolved value, so mentions of one day link up."""
    fmt = {"minute": "%Y-%m-%dT%H:%M", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}
    return t.value.strftime(fmt[t.granularity])


def _names(text: str, starts: set[int]) -> list[tuple[EntityMention, int]]:
    """Capitalised word sequences, typed by gazetteers and context cues; ``starts`` are the
    sentence start offsets."""
    candidates = [_name_span(m) for m in _NAME.finditer(text)]
    spans = [c for c in candidates if c is not None]
    mid_sentence = {text[s:e] for s, e, _ in spans if s not in starts}
    out: list[tuple[EntityMention, int]] = []
    for start, end, title in spans:
        name = text[start:end]
        if start in starts and not title and not _clearly_a_name(name, text, end, mid_sentence):
            continue
        kind = _entity_type(name, text, start, end, bool(title))
        out.append((EntityMention(name, kind, _role(text, start, end, starts), start), end))
    return out


def _name_span(m: re.Match[str]) -> tuple[int, int, str | None] | None:
    """Trim stopwords off the front and a possessive off the end of a capitalised run."""
    start, words = m.start("name"), m["name"].split(" ")
    while words and words[0].strip() in CAPITAL_STOPWORDS:
        start += len(words[0]) + 1
        words = words[1:]
    while words and words[-1] in CAPITAL_STOPWORDS:
        words = words[:-1]
    if not words:
        return None
    name = " ".join(words)
    name = re.sub(r"'s?$", "", name)
    if len(name) < 2 or name.isdigit():
        return None
    title = m["title"] if start == m.start("name") else None
    return (m.start() if title else start), start + len(name), title


def _clearly_a_name(name: str, text: str, end: int, mid_sentence: set[str]) -> bool:
    """A capitalised run at a sentence start counts only with evidence that it is a name."""
    first = name.split()[0].lower()
    return (
        first in FIRST_NAMES
        or canonical_name(name) in PLACE_KEYS
        or canonical_name(name) in ORGANISATIONS
        or name in mid_sentence
        or bool(_PERSON_AFTER.match(text, end))
        or (len(name.split()) > 1 and name.split()[-1].lower() in ORG_SUFFIXES | PLACE_SUFFIXES)
    )


def _entity_type(name: str, text: str, start: int, end: int, titled: bool) -> EntityType:
    key, words = canonical_name(name), name.lower().split()
    before = text[max(0, start - 40) : start]
    if titled:
        return EntityType.PERSON
    if (
        key in ORGANISATIONS
        or words[-1] in ORG_SUFFIXES
        or (words[0] in ORG_SUFFIXES and "of" in words)
    ):
        return EntityType.ORGANISATION
    if key in PLACE_KEYS or (len(words) > 1 and words[-1] in PLACE_SUFFIXES):
        return EntityType.PLACE
    if (
        words[0] in FIRST_NAMES
        or key in ("mother", "father", "grandmother", "grandfather")
        or _RELATIVE_BEFORE.search(before)
        or _GREETING_BEFORE.search(before)
        or _PERSON_AFTER.match(text, end)
        or (len(words) == 1 and before.endswith(", ") and _VOCATIVE_AFTER.match(text, end))
    ):
        return EntityType.PERSON
    if _PLACE_CUE.search(before):
        return EntityType.PLACE
    if is_drug(name):
        return EntityType.OBJECT
    return EntityType.OTHER


def _role(text: str, start: int, end: int, starts: set[int]) -> MentionRole:
    """Subject when it opens a clause and a lower-case word follows; object after a verb."""
    clause = re.split(r"[,;:.!?]", text[max(0, start - 60) : start])[-1].strip().lower()
    follows = re.match(r"\s+[a-z]", text[end : end + 3])
    opener = not clause or clause.split()[-1] in CLAUSE_OPENERS  # "Yesterday Anna called"
    if (start in starts or opener) and follows:
        return "subject"
    previous = clause.split()[-2:] if clause else []
    if previous and (previous[-1] in OBJECT_VERBS or previous[-1].endswith("ed")):
        return "object"
    if len(previous) == 2 and previous[-1] == "the" and previous[0] in OBJECT_VERBS:
        return "object"
    return "mention"
