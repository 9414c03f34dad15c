"""What the inventory says of a fact's slot (its subject and attribute): how many values it
holds at a time, how a reply names it, what kind of entity its value is.

    slots = Slots(load_inventory(models / INVENTORY_FILE))
    slots.single("manager")             → True: a new manager replaces the old one
    slots.ending_with("medication")     → ("dose",): a dose ends with its medicine
    slots.label("likes", negated=True)  → "does not like"
    subject_name("my sister aoife's")   → "Aoife"
"""

from __future__ import annotations

import re

from memoryd.fact_corpus import OTHER, Inventory
from memoryd.models import EntityType

__all__ = ["Slots", "subject_name"]

_DETERMINERS = re.compile(
    r"^(?:(?:the|a|an|my|our|your|his|her|their|me and|and)\s+)+", re.IGNORECASE
)
_POSSESSIVE = re.compile(r"(?:'s|'|’s|’)$")
_RELATIVES = re.compile(
    r"^(?:(?:little|big|older|younger|baby|twin|step|half)[\s-]+)*"
    r"(?:sister|brother|sis|bro|mum|mom|dad|mother|father|son|daughter|wife|husband|partner|"
    r"boyfriend|girlfriend|fiance|fiancee|grandma|grandad|granny|nan|gran|aunt|auntie|uncle|"
    r"cousin|niece|nephew|friend|mate|boss|manager|colleague|flatmate|housemate|neighbou?r|"
    r"landlord|landlady)\s+(?=\S+(?:\s\S+)?$)",
    re.IGNORECASE,
)


def subject_name(text: str) -> str:
    """The stored form of a subject other than the speaker: without its determiner, possessive
    or the relation word before a name ("my sister Aoife" → "Aoife", "the dog" → "Dog"), each
    word capitalised, so "tom" and "Tom" are one subject."""
    text = _POSSESSIVE.sub("", _DETERMINERS.sub("", text.strip()))
    text = _RELATIVES.sub("", text)
    words = text.split()
    return " ".join(w[:1].upper() + w[1:] for w in words) or text


class Slots:
    """The inventory's answers for the reader, the build and consolidation."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._attributes = {a.name: a for a in inventory.attributes}

    def known(self, attribute: str) -> bool:
        return attribute in self._attributes

    def single(self, attribute: str) -> bool:
        """Whether the attribute holds one value at a time (``other`` and unknown ones: no,
        the judge decides)."""
        found = self._attributes.get(attribute)
        return found is not None and found.single

    def ending_with(self, attribute: str) -> tuple[str, ...]:
        """The attributes whose facts are about a value of ``attribute`` and end with it
        (``medication`` → ``("dose",)``: a medicine stopped takes its dose with it)."""
        return tuple(a.name for a in self.inventory.attributes if a.ends_with == attribute)

    def label(self, attribute: str, negated: bool = False) -> str:
        """How a reply names the attribute ("" for ``other``: the sentence says it)."""
        found = self._attributes.get(attribute)
        if found is None:
            return "" if attribute == OTHER else attribute.replace("_", " ")
        return found.negative_label if negated else found.label

    def value_type(self, attribute: str) -> EntityType:
        found = self._attributes.get(attribute)
        return EntityType(found.value_type) if found is not None else EntityType.OTHER

    def value_types(self) -> tuple[EntityType, ...]:
        """Every kind of entity a fact's value may be (``other`` included)."""
        kinds = {EntityType(a.value_type) for a in self.inventory.attributes}
        return tuple(sorted(kinds | {EntityType.OTHER}))
