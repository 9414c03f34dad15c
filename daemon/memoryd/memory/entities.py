"""Entity canonicalisation: one node per real-world thing, however the user spells it.

Ids already fold case, spacing, articles, a plural and a table of aliases
(:func:`memoryd.memory.extract.canonical_name`: "NYC", "New York" → "new york city"). The
:class:`EntityResolver` goes further, against the entities this user already has: a new name of
the same type is taken to be a known entity when

- it is the known name's acronym, or the other way round ("NYU" ↔ "New York University"); or
- the two names share a word or their first 4 letters, *and* their encoder embeddings have a
  cosine of at least ``threshold`` (0.90 by default: on MiniLM "knee injury" ↔ "injured knee"
  is 0.935, "Mount Everest" ↔ "Everest" 0.904, while "New York City" ↔ "York" is 0.889,
  "sister" ↔ "brother" 0.648); or
- the names share their first 4 letters and differ by a typo (difflib ratio ≥ 0.92, both at
  least 6 letters).

Only known names that share a word, the first 4 letters or an acronym with the new one are
looked at (indexed, so a user with thousands of entities pays no scan), and a name with no
look-alike costs no encoder call; a known entity's embedding is computed once, when first
compared. Time entities are never merged
(their names are dates). Resolution rewrites the memory's entity to the known one, and the
surface name is remembered as an alias of it (journaled with the turn): the next time that name
resolves at once.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from memoryd.memory.extract import canonical_name
from memoryd.models import Entity, EntityType, Episode, Fact, Memory, Mention

__all__ = ["EntityResolver", "KnownEntity"]

DEFAULT_THRESHOLD = 0.90
MAX_NAME_WORDS = 4
TYPO_RATIO = 0.92
TYPO_MIN_LETTERS = 6
PREFIX = 4


@dataclass
class KnownEntity:
    entity: Entity
    key: str
    vector: np.ndarray | None = None


@dataclass
class _TypeIndex:
    """Known entities of one type, indexed by what the cheap string tests look at."""

    by_id: dict[str, KnownEntity] = field(default_factory=dict)
    by_word: dict[str, set[str]] = field(default_factory=dict)
    by_prefix: dict[str, set[str]] = field(default_factory=dict)
    by_initials: dict[str, set[str]] = field(default_factory=dict)
    by_acronym: dict[str, set[str]] = field(default_factory=dict)
    by_alias: dict[str, str] = field(default_factory=dict)

    def alias(self, name: str, entity_id: str) -> None:
        """Remember ``name`` as another name of a known entity: it resolves at once next time."""
        self.by_alias.setdefault(canonical_name(name), entity_id)

    def add(self, entity: Entity) -> KnownEntity:
        if entity.id in self.by_id:
            return self.by_id[entity.id]
        known = self.by_id[entity.id] = KnownEntity(entity, canonical_name(entity.name))
        for word in known.key.split():
            self.by_word.setdefault(word, set()).add(entity.id)
        self.by_prefix.setdefault(known.key[:PREFIX], set()).add(entity.id)
        if initials := _initials(known.key):
            self.by_initials.setdefault(initials, set()).add(entity.id)
        if acronym := _acronym(entity.name):
            self.by_acronym.setdefault(acronym, set()).add(entity.id)
        return known

    def candidates(self, name: str, key: str) -> list[KnownEntity]:
        ids: set[str] = set()
        for word in key.split():
            ids |= self.by_word.get(word, set())
        ids |= self.by_prefix.get(key[:PREFIX], set())
        if acronym := _acronym(name):
            ids |= self.by_initials.get(acronym, set())
        if initials := _initials(key):
            ids |= self.by_acronym.get(initials, set())
        return [self.by_id[i] for i in sorted(ids)]


class EntityResolver:
    """The user's known entities by type, and the rule that maps a new name onto one of them.

    ``embed`` turns a name into a unit vector (the encoder). Not thread-safe: it is used on the
    user's writer only.
    """

    def __init__(
        self,
        known: Iterable[tuple[Entity, Sequence[str]]],
        embed: Callable[[str], np.ndarray],
        threshold: float = DEFAULT_THRESHOLD,
    ) -> None:
        self._embed = embed
        self.threshold = threshold
        self._types: dict[EntityType, _TypeIndex] = {}
        for entity, aliases in known:
            index = self._index(entity.type)
            index.add(entity)
            for name in aliases:
                index.alias(name, entity.id)

    def _index(self, type: EntityType) -> _TypeIndex:
        return self._types.setdefault(type, _TypeIndex())

    def resolve(self, entity: Entity) -> Entity:
        """The known entity ``entity`` names, registering it as new when there is none."""
        index = self._index(entity.type)
        if entity.id in index.by_id:
            return index.by_id[entity.id].entity
        aliased = index.by_alias.get(canonical_name(entity.name))
        if aliased is not None:
            return index.by_id[aliased].entity
        match = None if entity.type is EntityType.TIME else self._match(entity, index)
        if match is None:
            index.add(entity)
            return entity
        index.alias(entity.name, match.entity.id)
        return match.entity

    def _match(self, entity: Entity, index: _TypeIndex) -> KnownEntity | None:
        key = canonical_name(entity.name)
        best: tuple[float, KnownEntity] | None = None
        # A phrase of more than MAX_NAME_WORDS words (a value read from a clause: "spare
        # battery in the left pocket") is matched by acronym or typo only: its look-alikes by
        # shared word are many, each would cost an encoder call, and phrases are not names.
        by_cosine = len(key.split()) <= MAX_NAME_WORDS
        vector: np.ndarray | None = None
        for known in index.candidates(entity.name, key):
            if _acronym(entity.name) == _initials(known.key) != "":
                return known
            if _acronym(known.entity.name) == _initials(key) != "" or _typo(key, known.key):
                return known
            if not by_cosine or len(known.key.split()) > MAX_NAME_WORDS:
                continue
            if vector is None:
                vector = self._embed(entity.name)  # once per new name
            cosine = self._cosine(vector, known)
            if cosine >= self.threshold and (best is None or cosine > best[0]):
                best = (cosine, known)
        return best[1] if best else None

    def _cosine(self, vector: np.ndarray, known: KnownEntity) -> float:
        if known.vector is None:
            known.vector = self._embed(known.entity.name)
        return float(np.dot(vector, known.vector))

    def resolve_memories(self, memories: Sequence[Memory]) -> dict[str, set[str]]:
        """Rewrite the entities of ``memories`` in place to known ones; returns the aliases
        learnt ({entity id: surface names})."""
        learnt: dict[str, set[str]] = {}

        def resolved(entity: Entity) -> Entity:
            found = self.resolve(entity)
            if found.id != entity.id or found.name != entity.name:
                learnt.setdefault(found.id, set()).add(entity.name)
            return found

        for memory in memories:
            if isinstance(memory, Fact):
                memory.object = resolved(memory.object)
            elif isinstance(memory, Episode):
                memory.mentions = _dedupe(
                    [dataclasses.replace(m, entity=resolved(m.entity)) for m in memory.mentions]
                )
        return learnt


def _dedupe(mentions: list[Mention]) -> list[Mention]:
    seen: dict[str, Mention] = {}
    for mention in mentions:
        seen.setdefault(mention.entity.id, mention)
    return list(seen.values())


def _acronym(name: str) -> str:
    """The lower-cased letters of an all-caps short name ("NYU", "N.Y.U." → "nyu"), else ""."""
    letters = name.replace(".", "").strip()
    return (
        letters.lower()
        if 2 <= len(letters) <= 6 and letters.isalpha() and letters.isupper()
        else ""
    )


def _initials(key: str) -> str:
    """The initials of a name of 2+ words ("new york university" → "nyu"), else ""."""
    words = key.split()
    return "".join(w[0] for w in words) if len(words) >= 2 else ""


def _typo(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` share their first PREFIX letters and differ by a typo. The
    cheap bounds go first (difflib's ratio is 2·matches / total length, so lengths far apart
    cannot reach TYPO_RATIO): most look-alikes by shared word never reach ``ratio``."""
    if min(len(a), len(b)) < TYPO_MIN_LETTERS or a[:PREFIX] != b[:PREFIX]:
        return False
    if 2 * min(len(a), len(b)) < TYPO_RATIO * (len(a) + len(b)):
        return False
    matcher = difflib.SequenceMatcher(None, a, b)
    return matcher.quick_ratio() >= TYPO_RATIO and matcher.ratio() >= TYPO_RATIO
