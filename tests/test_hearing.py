"""A stored value named again: the fact judge ends it when the turn says it is over, and leaves
it when the turn only names it (real encoder, reader head and judge; memoryd.memory.hearing)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from memoryd.encoder import Encoder
from memoryd.ingest import NewTurn, relabelled
from memoryd.memory import StagedView, named_in
from memoryd.memory.build import memory_id
from memoryd.models import Entity, EntityType, Fact, Label, Parse, Role, Turn
from memoryd.reader import FactReader
from memoryd.reader.judge import MAX_WORDS, candidate_spans
from memoryd.reader.spans import word_starts
from memoryd.service import MemoryService
from support.config import MODEL_DIR

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
STATED = "our broadband is with Spectranet"
ENDED = "we got rid of Spectranet in the end, the fibre's so much faster"
NAMED = "Spectranet engineer is coming on monday to look at the line"


@pytest.fixture(scope="module")
def reader() -> FactReader:
    return FactReader.load(MODEL_DIR)


def ingest(service: MemoryService, user: str, *texts: str) -> None:
    service.ingest(
        user,
        [
            NewTurn("s1", Role.USER, t, ts=T0 + timedelta(days=i), turn_id=f"{user}-t{i}")
            for i, t in enumerate(texts)
        ],
    )


def named(service: MemoryService, user: str) -> list[Fact]:
    found = [s.memory for s in service.list_facts(user, history=True)]
    return [f for f in found if isinstance(f, Fact) and f.object.name == "Spectranet"]


def test_a_value_named_as_over_is_ended_by_the_judge(service: MemoryService) -> None:
    """The reader reads no fact in "we got rid of Spectranet in the end": the judge hears the
    stored broadband named as over and ends it; an engineer's visit names it and ends nothing."""
    ingest(service, "ended", STATED, ENDED)
    (stated,) = [f for f in named(service, "ended") if f.kind == "state"]
    (ending,) = [f for f in named(service, "ended") if f.parse is Parse.JUDGE]
    assert (stated.relation, stated.superseded_by) == ("broadband", ending.id)
    assert (ending.parse, ending.kind, ending.turn_id) == (Parse.JUDGE, "end", "ended-t1")
    assert ending.valid_to == stated.valid_to == T0 + timedelta(days=1)
    ingest(service, "named", STATED, NAMED)
    assert [(f.relation, f.valid_to) for f in named(service, "named")] == [("broadband", None)]


def test_a_reread_hears_the_turns_again(service: MemoryService) -> None:
    ingest(service, "u", STATED, ENDED)
    service.reread_facts("u")
    current = [f for f in service.list_facts("u")]
    assert "Spectranet" not in {s.memory.object.name for s in current}
    endings = [f for f in named(service, "u") if f.parse is Parse.JUDGE]
    assert len(endings) == 2  # the ingest's (closed by the reread) and the reread's own


def test_a_relabelled_turn_keeps_its_judged_ending(service: MemoryService) -> None:
    """The judge's endings do not depend on the router's labels: a turn relabelled by the LLM
    keeps them (its other records are built again)."""
    ingest(service, "u", STATED, ENDED)
    (ending,) = [f for f in named(service, "u") if f.parse is Parse.JUDGE]
    with service.users.lease("u") as ws:
        turn, _, _ = ws.journal.turn("u-t1") or pytest.fail("turn not journaled")
        facts, _ = ws.shared.read_stored(turn)
        relabel = relabelled(
            turn,
            (Label.EPISODIC,),
            facts,
            ws.journal,
            ws.entities,
            ws.shared.reader.slots,
            source="test",
            holdout=False,
            after_round=0,
        )
    assert ending.id in {m.id for m in relabel.memories}


def test_a_turn_is_heard_for_runs_of_up_to_three_words(encoder: Encoder) -> None:
    text = "Dev and I broke up, sadly."
    _, offsets = encoder.reading(text)
    spans = candidate_spans(text, offsets, word_starts(text, offsets))
    found = {s.text for s in spans}
    assert {"Dev", "Dev and", "Dev and I", "broke up", "sadly"} <= found
    assert not {t for t in found if "," in t or len(t.split()) > MAX_WORDS}


def stored(value: str, relation: str = "broadband", turn_id: str = "t-old", **kw: object) -> Fact:
    return Fact(
        id=memory_id("fact", turn_id, "fact", value),
        turn_id=turn_id,
        relation=relation,
        object=Entity(f"ent-{value}", value, EntityType.PERSON),
        text=f"broadband {value}",
        valid_from=T0,
        sources=[turn_id],
        parse=Parse.READER,
        **kw,  # type: ignore[arg-type]
    )


def endings(encoder: Encoder, reader: FactReader, old: Fact, said: list[Fact]) -> list[Fact]:
    states, offsets = encoder.reading(ENDED)
    _, heard = reader.hear(ENDED, states, offsets)
    named = named_in(heard, reader.judge, reader.slots)
    key = next(i for i, s in named.spans.items() if s.text == "Spectranet")
    old = dataclasses.replace(old, object=Entity(key, "Spectranet", EntityType.ORGANISATION))
    view = StagedView()
    view.stage([old])
    turn = Turn(
        turn_id="t-new", session_id="s1", role=Role.USER, text=ENDED, ts=T0 + timedelta(days=3)
    )
    return named.endings(turn, view, said)


def test_the_judge_leaves_what_the_reader_read_and_what_the_turn_said(
    encoder: Encoder, reader: FactReader
) -> None:
    (ending,) = endings(encoder, reader, stored("Spectranet"), [])
    assert (ending.subject, ending.relation, ending.object.name) == (
        "user",
        "broadband",
        "Spectranet",
    )
    assert ending.confidence >= reader.judge.threshold
    read_here = dataclasses.replace(stored("Spectranet"), id="fact_read", turn_id="t-new")
    old = stored("Spectranet")
    assert endings(encoder, reader, old, [read_here]) == []  # the reader's reading stands
    elsewhere = dataclasses.replace(read_here, relation="other")
    assert endings(encoder, reader, old, [elsewhere]) == []  # in another attribute too
    assert endings(encoder, reader, stored("Spectranet", turn_id="t-new"), []) == []  # its own
    assert endings(encoder, reader, stored("Spectranet", negated=True), []) == []
