"""From a routed turn to typed memory records (memoryd.memory.build)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memoryd.memory import fact_values
from memoryd.memory.build import BASE_IMPORTANCE, build_memories, importance, memory_id
from memoryd.memory.extract import entity_id, extract
from memoryd.models import (
    Entity,
    EntityType,
    Episode,
    Fact,
    Header,
    Label,
    Memory,
    MemoryType,
    Parse,
    Role,
    Rule,
    RuleNodeKind,
    Task,
    TaskStatus,
    Turn,
    index_text,
    memory_type,
)
from memoryd.reader import ReadFact
from memoryd.store.codec import memory_from_payload, to_payload
from support.reading import build, slots

READER_SLOTS = slots()

NOW = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def _turn(
    text: str,
    *labels: Label,
    role: Role = Role.USER,
    speaker: str | None = None,
    turn_id: str = "t1",
) -> Turn:
    return Turn(turn_id, "s1", role, text, NOW, speaker=speaker, labels=labels)


def _build(turn: Turn, *facts: tuple[str, str]) -> list[Memory]:
    """The records of ``turn`` given what the reader read of it: ``(attribute, value)``
    facts about the speaker, stated now (the build's mechanics, without a model)."""
    read = [
        ReadFact(
            None, a, v, "state", False, 0.9, 0.9, turn.text.index(v), turn.text.index(v) + len(v)
        )
        for a, v in facts
    ]
    slots = READER_SLOTS
    return build_memories(turn, extract(turn.text, turn.ts, fact_values(read, slots)), read, slots)


def _kinds(records: list[Memory]) -> list[str]:
    return [type(r).__name__ for r in records]


ALLERGY = ("allergy", "ibuprofen")


@pytest.mark.parametrize(
    ("text", "labels", "kinds", "facts"),
    [
        ("ok lol", (Label.FRAGMENTED,), [], ()),
        ("I went for a run yesterday.", (Label.EPISODIC,), ["Episode"], ()),
        ("I'm allergic to ibuprofen", (Label.SEMANTIC,), ["Fact"], (ALLERGY,)),
        (
            "I love hiking and swimming.",
            (Label.SEMANTIC,),
            ["Episode", "Fact", "Fact"],
            (("hobby", "hiking"), ("hobby", "swimming")),
        ),
        ("If it rains, take an umbrella.", (Label.PROCEDURAL,), ["Rule"], ()),
        ("Remind me to call mom tomorrow at 5pm", (Label.WORKING,), ["Task"], ()),
        ("I took aspirin and my vitamins", (Label.WORKING,), ["Task", "Task"], ()),
        # a label whose patterns find nothing still gets its type, read from the clause or
        # kept as the sentence, and such a record keeps the Episode beside it; a semantic
        # label with no fact the reader reads keeps the Episode
        ("The weather is nice.", (Label.SEMANTIC,), ["Episode"], ()),
        (
            "The weather is nice.",
            (Label.PROCEDURAL, Label.WORKING),
            ["Episode", "Rule", "Task"],
            (),
        ),
        ("The weather is nice.", (), ["Episode"], ()),
        # several labels: never more than one Episode
        (
            "I'm allergic to ibuprofen and I went to the clinic yesterday.",
            (Label.EPISODIC, Label.SEMANTIC),
            ["Episode", "Fact"],
            (ALLERGY,),
        ),
        (
            "I'm allergic to ibuprofen",
            (Label.SEMANTIC, Label.WORKING),
            ["Episode", "Fact", "Task"],
            (ALLERGY,),
        ),
        # a turn that says more than its facts keeps its Episode (the rest stays findable);
        # one whose facts' statements hold every word it says does not
        (
            "Yep! I've got a hand-painted bowl. My friend Ana made it for my 18th birthday.",
            (Label.SEMANTIC,),
            ["Episode", "Fact"],
            (("friend", "Ana"),),
        ),
        ("My friend is Ana.", (Label.SEMANTIC,), ["Fact"], (("friend", "Ana"),)),
        # fragmented next to a real label is ignored
        ("I'm allergic to ibuprofen", (Label.FRAGMENTED, Label.SEMANTIC), ["Fact"], (ALLERGY,)),
        # a fact the reader reads is kept whatever the label: a turn called noise keeps it
        ("ok I'm allergic to ibuprofen", (Label.FRAGMENTED,), ["Fact"], (ALLERGY,)),
        (
            "Remind me, I'm allergic to ibuprofen",
            (Label.WORKING,),
            ["Episode", "Fact", "Task"],
            (ALLERGY,),
        ),
    ],
)
def test_labels_choose_the_records(
    text: str, labels: tuple[Label, ...], kinds: list[str], facts: tuple[tuple[str, str], ...]
) -> None:
    assert _kinds(_build(_turn(text, *labels), *facts)) == kinds


def test_episode_carries_turn_mentions_and_event_time() -> None:
    turn = _turn("Last night Anna and I walked around Boston.", Label.EPISODIC, speaker="Caroline")
    (episode,) = _build(turn)
    assert isinstance(episode, Episode)
    assert (episode.turn_id, episode.session_id, episode.text) == ("t1", "s1", turn.text)
    assert (episode.ts, episode.speaker) == (NOW, "Caroline")
    assert episode.event_time == datetime(2023, 5, 7, 21, tzinfo=UTC)
    mentions = {(m.entity.name, m.entity.type, m.role) for m in episode.mentions}
    assert mentions == {
        ("2023-05-07", EntityType.TIME, "mention"),
        ("Anna", EntityType.PERSON, "subject"),
        ("Boston", EntityType.PLACE, "mention"),
    }
    boston = next(m.entity for m in episode.mentions if m.entity.name == "Boston")
    assert boston.id == entity_id("Boston", EntityType.PLACE)


def test_episode_mentions_are_unique_per_entity() -> None:
    (episode,) = _build(_turn("I saw Anna. Anna called. anna left.", Label.EPISODIC))
    ids = [m.entity.id for m in episode.mentions]
    assert len(ids) == len(set(ids)) == 1
    assert episode.mentions[0].role == "subject"


def test_episode_without_times_has_no_event_time() -> None:
    (episode,) = _build(_turn("We talked about books.", Label.EPISODIC))
    assert episode.event_time is None


def test_fact_fields() -> None:
    (fact,) = build(_turn("I'm allergic to ibuprofen", Label.SEMANTIC))
    assert isinstance(fact, Fact)
    assert (fact.relation, fact.label, fact.kind, fact.parse) == (
        "allergy",
        "allergic to",
        "state",
        Parse.READER,
    )
    assert fact.object == Entity(
        entity_id("ibuprofen", EntityType.OBJECT), "ibuprofen", EntityType.OBJECT
    )
    assert (fact.subject, fact.valid_from, fact.valid_to) == ("user", NOW, None)
    assert (fact.negated, fact.text, fact.turn_id) == (False, "I'm allergic to ibuprofen", "t1")
    assert 0.6 <= fact.confidence <= 1.0
    assert fact.statement == "allergic to: ibuprofen"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "My sister Anna lives in Berlin.",
            {
                ("user", "sibling", "Anna", EntityType.PERSON),
                ("Anna", "home_city", "Berlin", EntityType.PLACE),
            },
        ),
        ("I have a dog named Max.", {("user", "pet", "Max", EntityType.OBJECT)}),
        (
            "I work at Google as a designer.",
            {
                ("user", "employer", "Google", EntityType.ORGANISATION),
                ("user", "job_title", "designer", EntityType.OBJECT),
            },
        ),
    ],
)
def test_a_fact_has_its_subject_attribute_and_typed_value(
    text: str, expected: set[tuple[str, str, str, EntityType]]
) -> None:
    facts = [f for f in build(_turn(text, Label.SEMANTIC)) if isinstance(f, Fact)]
    assert {(f.subject, f.relation, f.object.name, f.object.type) for f in facts} == expected


def test_a_lasting_not_is_negated() -> None:
    (fact,) = build(_turn("I don't eat pork.", Label.SEMANTIC))
    assert isinstance(fact, Fact)
    assert (fact.relation, fact.object.name, fact.negated) == ("diet", "pork", True)
    assert fact.label == "does not eat"


def test_an_ending_is_stored_closed() -> None:
    facts = build(_turn("I'm not vegetarian any more.", Label.SEMANTIC))
    (fact,) = [f for f in facts if isinstance(f, Fact)]
    assert (fact.relation, fact.kind, fact.valid_to) == ("diet", "end", NOW)


def test_fact_subject_is_the_speaker_when_known() -> None:
    (fact,) = build(_turn("I live in Lisbon.", Label.SEMANTIC, speaker="Melanie"))
    assert isinstance(fact, Fact)
    assert fact.subject == "Melanie"


def test_assistant_first_person_is_not_a_user_fact() -> None:
    turn = _turn("I'm a language model and I love helping.", Label.SEMANTIC, role=Role.ASSISTANT)
    assert _kinds(build(turn)) == ["Episode"]


def test_rule_node_tree() -> None:
    text = "When I'm stressed and it's late, drink water, then go to bed"
    (rule,) = _build(_turn(text, Label.PROCEDURAL))
    assert isinstance(rule, Rule)
    assert [(n.kind, n.text, n.ord) for n in rule.nodes] == [
        (RuleNodeKind.CONDITION, "I'm stressed", 0),
        (RuleNodeKind.CONDITION, "it's late", 1),
        (RuleNodeKind.SEQUENCE, "then", 2),
        (RuleNodeKind.ACTION, "drink water", 3),
        (RuleNodeKind.ACTION, "go to bed", 4),
    ]
    assert rule.conditions == ["I'm stressed", "it's late"]
    assert rule.actions == ["drink water", "go to bed"]
    assert (rule.title, rule.text, rule.support) == ("I'm stressed → drink water", text, 1)
    assert len({n.id for n in rule.nodes}) == 5
    assert all(n.id.startswith("rn_") for n in rule.nodes)


def test_health_rule() -> None:
    text = "If I take an NSAID together with aspirin, check the bleeding risk first"
    (rule,) = _build(_turn(text, Label.PROCEDURAL))
    assert isinstance(rule, Rule)
    assert rule.conditions == ["I take an NSAID together with aspirin"]
    assert rule.actions == ["check the bleeding risk first"]


def test_todo_task_starts_pending() -> None:
    (task,) = _build(_turn("Remind me to call mom tomorrow at 5pm", Label.WORKING))
    assert isinstance(task, Task)
    assert (task.title, task.due) == ("call mom", datetime(2023, 5, 9, 17, tzinfo=UTC))
    assert [(s.status, s.ts, s.turn_id) for s in task.states] == [(TaskStatus.PENDING, NOW, "t1")]
    assert task.status is TaskStatus.PENDING


def test_medication_task() -> None:
    (task,) = _build(_turn("Take omeprazole 30 min before dinner", Label.WORKING))
    assert isinstance(task, Task)
    assert (task.title, task.due, task.status) == (
        "Take omeprazole 30 min before dinner",
        None,
        TaskStatus.PENDING,
    )


def test_completions_become_done_tasks() -> None:
    turn = _turn("I took aspirin and my blood-pressure pill this morning", Label.WORKING)
    tasks = _build(turn)
    assert all(isinstance(t, Task) for t in tasks)
    morning = datetime(2023, 5, 8, 9, tzinfo=UTC)
    assert [(t.title, t.status, t.states[0].ts) for t in tasks] == [  # type: ignore[union-attr]
        ("take aspirin", TaskStatus.DONE, morning),
        ("take blood-pressure pill", TaskStatus.DONE, morning),
    ]


def test_ids_are_deterministic_and_distinct() -> None:
    text = (
        "I'm allergic to ibuprofen. If it rains, take an umbrella. Remind me to call mom. "
        "I took my pills."
    )
    labels = (Label.EPISODIC, Label.SEMANTIC, Label.PROCEDURAL, Label.WORKING)
    first, again = _build(_turn(text, *labels), ALLERGY), _build(_turn(text, *labels), ALLERGY)
    other = _build(_turn(text, *labels, turn_id="t2"), ALLERGY)
    ids = [r.id for r in first]
    assert ids == [r.id for r in again]
    assert len(set(ids)) == len(ids) == 5
    assert not set(ids) & {r.id for r in other}
    assert [i.split("_")[0] for i in ids] == ["ep", "fact", "rule", "task", "task"]
    state_ids = [s.id for r in first if isinstance(r, Task) for s in r.states]
    assert all(i.startswith("st_") for i in state_ids) and len(set(state_ids)) == 2


def test_memory_id_recipe() -> None:
    assert memory_id("fact", "t1", "fact", 0) == memory_id("fact", "t1", "fact", 0)
    assert memory_id("fact", "t1", "fact", 0) != memory_id("fact", "t1", "fact", 1)
    assert len(memory_id("ep", "t1", "episode", 0)) == len("ep_") + 16


def test_records_round_trip_through_the_journal_payload() -> None:
    text = (
        "Last night I'm allergic to ibuprofen. If it rains, take an umbrella. "
        "Remind me to call mom tomorrow. I took my pills."
    )
    labels = (Label.EPISODIC, Label.SEMANTIC, Label.PROCEDURAL, Label.WORKING)
    for record in _build(_turn(text, *labels), ALLERGY):
        assert memory_from_payload(memory_type(record), to_payload(record)) == record


# ---------------------------------------------------------------------------------------------
# Importance


def test_every_record_gets_its_importance_and_default_header() -> None:
    text = "I'm allergic to ibuprofen. Remind me to call mom tomorrow."
    for record in _build(_turn(text, Label.EPISODIC, Label.SEMANTIC, Label.WORKING), ALLERGY):
        assert record.header == Header(importance=importance(record))
        assert 1.0 <= record.header.importance <= 10.0


def test_importance_ranks_health_and_knowledge_above_chit_chat() -> None:
    (allergy,) = _build(_turn("I'm allergic to ibuprofen", Label.SEMANTIC), ALLERGY)
    hiking = _turn("I love hiking in the mountains", Label.SEMANTIC)
    (_, hobby) = _build(hiking, ("hobby", "hiking"))  # and the Episode: "mountains"
    (chat,) = _build(_turn("The weather was nice at the beach today.", Label.EPISODIC))
    (short,) = _build(_turn("ok sure", Label.EPISODIC))
    assert importance(allergy) > importance(hobby) > importance(chat) > importance(short)


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        # base 3 (episode) + 1 (first person)
        ("I walked along the beach for an hour.", (Label.EPISODIC,), 4.0),
        # base 3 − 1.5 (short)
        ("nice one", (Label.EPISODIC,), 1.5),
        # base 5 + 2.5 (health) + 1 (first person)
        ("I'm allergic to ibuprofen", (Label.SEMANTIC,), 8.5),
        # base 4.5 + 1 (first person) + 1 (due)
        ("Remind me to call mom tomorrow at 5pm", (Label.WORKING,), 6.5),
        # base 5.5 + 2.5 (health) + 1 (first person)
        (
            "If I take an NSAID together with aspirin, check the bleeding risk first",
            (Label.PROCEDURAL,),
            9.0,
        ),
    ],
)
def test_importance_heuristic(text: str, labels: tuple[Label, ...], expected: float) -> None:
    facts = (ALLERGY,) if Label.SEMANTIC in labels else ()
    (record,) = _build(_turn(text, *labels), *facts)
    assert importance(record) == pytest.approx(expected)


def test_importance_has_a_base_for_every_memory_type() -> None:
    assert set(BASE_IMPORTANCE) == set(MemoryType)
    assert all(1.0 <= v <= 10.0 for v in BASE_IMPORTANCE.values())


def test_a_fact_is_indexed_by_its_statement_not_its_sentence() -> None:
    """Two facts of one sentence would repeat its words in the lexical index; the sentence is
    in the turn's Episode."""
    text = "I'm allergic to ibuprofen. Found out at my sister's wedding."
    records = _build(_turn(text, Label.SEMANTIC), ALLERGY)
    (fact,) = [r for r in records if isinstance(r, Fact)]
    assert any(isinstance(r, Episode) for r in records)
    indexed = index_text(fact)
    assert "ibuprofen" in indexed and "user" in indexed
    assert "wedding" not in indexed
