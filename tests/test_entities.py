"""Entity canonicalisation against a user's known entities (real encoder)."""

from __future__ import annotations

import pytest

from memoryd.encoder import Encoder
from memoryd.memory.entities import EntityResolver
from memoryd.memory.extract import entity_id
from memoryd.models import Entity, EntityType, Fact


def entity(name: str, type: EntityType = EntityType.PLACE) -> Entity:
    return Entity(entity_id(name, type), name, type)


class CountingEmbed:
    """The real encoder, counting its calls (the string gate must spare most of them)."""

    def __init__(self, encoder: Encoder) -> None:
        self.encoder, self.calls = encoder, 0

    def __call__(self, text: str):
        self.calls += 1
        return self.encoder.embed(text)


@pytest.mark.parametrize(
    ("known", "new", "same"),
    [
        ("New York University", "NYU", True),
        ("NYU", "New York University", True),
        ("Mount Everest", "Everest", True),
        ("Melbourne", "Melborne", True),
        ("New York City", "York", False),
        ("Paris", "London", False),
        ("Caroline", "Carol", False),
    ],
)
def test_matching_rule(encoder: Encoder, known: str, new: str, same: bool) -> None:
    resolver = EntityResolver([(entity(known), [])], encoder.embed)
    assert (resolver.resolve(entity(new)).name == known) is same


def test_types_and_times_never_merge(encoder: Encoder) -> None:
    resolver = EntityResolver(
        [(entity("Everest", EntityType.OBJECT), []), (entity("2026-03-01", EntityType.TIME), [])],
        encoder.embed,
    )
    assert resolver.resolve(entity("Mount Everest")).type is EntityType.PLACE
    assert resolver.resolve(entity("2026-03-02", EntityType.TIME)).name == "2026-03-02"


def test_no_look_alike_costs_no_embedding(encoder: Encoder) -> None:
    embed = CountingEmbed(encoder)
    resolver = EntityResolver([(entity(n), []) for n in ("Oslo", "Lima", "Kyiv")], embed)
    assert resolver.resolve(entity("Quito")).name == "Quito"
    assert embed.calls == 0
    resolver.resolve(entity("Oslo Fjord"))
    assert embed.calls == 2


def test_learnt_aliases_resolve_without_an_embedding(encoder: Encoder) -> None:
    embed = CountingEmbed(encoder)
    resolver = EntityResolver([(entity("Mount Everest"), ["the big mountain"])], embed)
    assert resolver.resolve(entity("The big mountain")).name == "Mount Everest"
    learnt = resolver.resolve_memories([Fact("f", "t", "likes", entity("Everest"), "")])
    assert learnt == {entity("Mount Everest").id: {"Everest"}} and embed.calls == 2
    assert resolver.resolve(entity("Everest")).name == "Mount Everest"
    assert embed.calls == 2
