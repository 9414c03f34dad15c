"""The real encoder and fact reader for tests that build records from a text without a
service: what a workspace reads of a turn before building it."""

from __future__ import annotations

import functools

from memoryd.encoder import Encoder
from memoryd.memory import build_memories, extract, fact_values
from memoryd.models import Memory, Role, Turn
from memoryd.reader import FactReader, ReadFact, Slots
from support.config import MODEL_DIR


@functools.cache
def _models() -> tuple[Encoder, FactReader]:
    return Encoder(MODEL_DIR), FactReader.load(MODEL_DIR)


def slots() -> Slots:
    """The inventory's slots the built reader was trained on."""
    return _models()[1].slots


def read(text: str, role: Role = Role.USER) -> list[ReadFact]:
    """What the reader reads of a user or log turn's text (an assistant's: nothing)."""
    if role is Role.ASSISTANT:
        return []
    encoder, reader = _models()
    states, offsets = encoder.reading(text)
    return reader.read(text, states, offsets)


def build(turn: Turn) -> list[Memory]:
    """The records ``turn``'s labels ask for, with the facts the real reader reads of it."""
    facts = read(turn.text, turn.role)
    slots = _models()[1].slots
    return build_memories(
        turn, extract(turn.text, turn.local_ts, fact_values(facts, slots)), facts, slots
    )
