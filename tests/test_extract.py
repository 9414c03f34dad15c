"""Rule-based extractors (memoryd.memory.extract)."""

from __future__ import annotations

import dataclasses
import hashlib
from datetime import UTC, datetime

import pytest

from memoryd.memory.extract import (
    Extraction,
    canonical_name,
    entity_id,
    extract,
    is_health_related,
)
from memoryd.models import EntityType

# Monday 8 May 2023, 13:56 UTC.
NOW = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


# Personal-health sentences


def test_health_drug_is_a_mention() -> None:
    x = extract("I'm allergic to ibuprofen", NOW)
    assert [(e.name, e.type, e.role) for e in x.entities] == [
        ("ibuprofen", EntityType.OBJECT, "mention")
    ]


def test_the_readers_values_are_typed_mentions_first() -> None:
    text = "my landlord is Foxtons, remind me to email them"
    x = extract(text, NOW, [("Foxtons", EntityType.ORGANISATION, text.index("Foxtons"))])
    assert ("Foxtons", EntityType.ORGANISATION, "object") in [
        (e.name, e.type, e.role) for e in x.entities
    ]


def test_health_injury_with_episodic_time() -> None:
    x = extract("I hurt my knee playing football last month", NOW)
    assert [(t.text, t.value, t.granularity) for t in x.times] == [
        ("last month", datetime(2023, 4, 1, tzinfo=UTC), "month")
    ]


def test_health_run_last_night() -> None:
    x = extract("Last night I went for a run, my heart rate peaked at 160 bpm", NOW)
    assert [(t.text, t.value) for t in x.times] == [
        ("Last night", datetime(2023, 5, 7, 21, tzinfo=UTC))
    ]
    assert x.tasks == [] and x.completions == []
    assert is_health_related("Last night I went for a run, my heart rate peaked at 160 bpm")


def test_health_interaction_rule() -> None:
    x = extract("If I take an NSAID together with aspirin, check the bleeding risk first", NOW)
    assert [(r.conditions, r.actions) for r in x.rules] == [
        (["I take an NSAID together with aspirin"], ["check the bleeding risk first"])
    ]
    assert {e.name for e in x.entities} == {"NSAID", "aspirin"}


def test_health_completions_for_both_pills() -> None:
    x = extract("I took aspirin and my blood-pressure pill this morning", NOW)
    assert [(c.action, c.ts) for c in x.completions] == [
        ("take aspirin", datetime(2023, 5, 8, 9, tzinfo=UTC)),
        ("take blood-pressure pill", datetime(2023, 5, 8, 9, tzinfo=UTC)),
    ]


def test_health_medication_task() -> None:
    x = extract("Take omeprazole 30 min before dinner", NOW)
    assert [(t.title, t.due) for t in x.tasks] == [("Take omeprazole 30 min before dinner", None)]
    assert x.rules == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I'm allergic to penicillin", True),
        ("I take lisinopril", True),
        ("my blood-pressure pill", True),
        ("check the bleeding risk", True),
        ("I love a cold drink", False),
        ("we went hiking", False),
    ],
)
def test_is_health_related(text: str, expected: bool) -> None:
    assert is_health_related(text) is expected


# ---------------------------------------------------------------------------------------------
# Rules


@pytest.mark.parametrize(
    ("text", "conditions", "actions"),
    [
        (
            "If it rains, take an umbrella.",
            ["it rains"],
            ["take an umbrella"],
        ),
        (
            "If it rains then take the bus",
            ["it rains"],
            ["take the bus"],
        ),
        (
            "Whenever it rains, take an umbrella and then call Anna; text Tom",
            ["it rains"],
            ["take an umbrella", "call Anna", "text Tom"],
        ),
        (
            "When I'm stressed and it's late, I go for a walk, then I meditate.",
            ["I'm stressed", "it's late"],
            ["I go for a walk", "I meditate"],
        ),
        (
            "Before I go running, stretch for 5 minutes, then drink water.",
            ["before I go running"],
            ["stretch for 5 minutes", "drink water"],
        ),
        (
            "Always check the stove when leaving the house",
            ["leaving the house"],
            ["Always check the stove"],
        ),
        (
            "Never take ibuprofen if my stomach is empty",
            ["my stomach is empty"],
            ["Never take ibuprofen"],
        ),
        (
            "wake up -> brush teeth -> shower",
            ["wake up"],
            ["brush teeth", "shower"],
        ),
        ("low battery → enable power saving", ["low battery"], ["enable power saving"]),
    ],
)
def test_rules(text: str, conditions: list[str], actions: list[str]) -> None:
    (rule,) = extract(text, NOW).rules
    assert (rule.conditions, rule.actions) == (conditions, actions)
    assert rule.text == text.rstrip(".")
    assert rule.title.startswith(conditions[0])


@pytest.mark.parametrize(
    "text",
    [
        "When I was a kid, I loved painting.",  # narrative past
        "If I were allergic to peanuts, I would know.",  # hypothetical
        "If I had known, I would have called, otherwise fine.",  # past hypothetical
        "If I were you, I'd take the bus, otherwise walk.",  # advice to someone else
        "If you need anything, let me know.",  # chit-chat
        "Whenever I can, I'll be there.",  # nothing to do
        "When everything clicks, it's a great feeling.",  # not an action
        "After that, we went home.",
        "What do you do if it rains?",  # question
    ],
)
def test_no_rule_from_narrative_or_chit_chat(text: str) -> None:
    assert extract(text, NOW).rules == []


# ---------------------------------------------------------------------------------------------
# Tasks


@pytest.mark.parametrize(
    ("text", "title", "due"),
    [
        (
            "Remind me to call mom tomorrow at 5pm",
            "call mom",
            datetime(2023, 5, 9, 17, tzinfo=UTC),
        ),
        ("remind me to pay rent on Friday", "pay rent", datetime(2023, 5, 12, tzinfo=UTC)),
        (
            "Can you remind me to water the plants tonight?",
            "water the plants",
            datetime(2023, 5, 8, 21, tzinfo=UTC),
        ),
        (
            "I need to finish the report by Friday.",
            "finish the report",
            datetime(2023, 5, 12, tzinfo=UTC),
        ),
        ("I have to renew my passport.", "renew my passport", None),
        (
            "I must call the bank in 2 hours.",
            "call the bank",
            datetime(2023, 5, 8, 15, 56, tzinfo=UTC),
        ),
        (
            "I should book a dentist appointment next week.",
            "book a dentist appointment",
            datetime(2023, 5, 15, tzinfo=UTC),
        ),
        ("Don't forget to water the plants.", "water the plants", None),
        ("Remember to buy milk tomorrow.", "buy milk", datetime(2023, 5, 9, tzinfo=UTC)),
        ("todo: buy milk", "buy milk", None),
        ("TODO: file taxes by May 15", "file taxes", datetime(2023, 5, 15, tzinfo=UTC)),
        # a clock time already past today is tomorrow's
        ("log: alarm set for 7:00", "alarm", datetime(2023, 5, 9, 7, tzinfo=UTC)),
        ("log: reminder scheduled for 18:30", "reminder", datetime(2023, 5, 8, 18, 30, tzinfo=UTC)),
        ("Take omeprazole 30 min before dinner", "Take omeprazole 30 min before dinner", None),
        (
            "Call the pharmacy tomorrow at 9am.",
            "Call the pharmacy",
            datetime(2023, 5, 9, 9, tzinfo=UTC),
        ),
        (
            "I've got a dentist appointment tomorrow at 10am.",
            "dentist appointment",
            datetime(2023, 5, 9, 10, tzinfo=UTC),
        ),
        (  # whom it is with is part of it
            "My neurology appointment with Dr. Moreau is tomorrow at 3pm.",
            "neurology appointment with Dr. Moreau",
            datetime(2023, 5, 9, 15, tzinfo=UTC),
        ),
    ],
)
def test_tasks(text: str, title: str, due: datetime | None) -> None:
    assert [(t.title, t.due) for t in extract(text, NOW).tasks] == [(title, due)]


@pytest.mark.parametrize(
    "text",
    [
        "I have to say, that's amazing.",
        "I should have known.",
        "I need to be more careful.",
        "That's what I need to hear.",
        "I should try that sometime.",  # "should" without a time is chit-chat
        "It's a reminder to slow down.",
        "This painting reminds me to stay true.",
        "I got to teach a class last Monday.",
        "Check this out, I took it last month.",
        "If I have to leave early, I will.",
        "Do I need to bring anything?",
    ],
)
def test_no_task_from_figures_of_speech(text: str) -> None:
    assert extract(text, NOW).tasks == []


# ---------------------------------------------------------------------------------------------
# Completions


@pytest.mark.parametrize(
    ("text", "actions", "ts"),
    [
        ("I already called the pharmacy today.", ["call pharmacy"], NOW),
        ("I took my meds.", ["take meds"], NOW),
        ("Took my vitamins this morning", ["take vitamins"], datetime(2023, 5, 8, 9, tzinfo=UTC)),
        (
            "I finished the report and sent the invoice.",
            ["finish report", "send invoice"],
            NOW,
        ),
        (
            "I just paid the electricity bill at 9am",
            ["pay electricity bill"],
            datetime(2023, 5, 8, 9, tzinfo=UTC),
        ),
        ("I bought groceries yesterday.", ["buy groceries"], datetime(2023, 5, 7, tzinfo=UTC)),
        ("Done with the laundry", ["finish laundry"], NOW),
        ("Laundry done!", ["finish Laundry"], NOW),
    ],
)
def test_completions(text: str, actions: list[str], ts: datetime) -> None:
    found = extract(text, NOW).completions
    assert [c.action for c in found] == actions
    assert all(c.ts == ts for c in found)


@pytest.mark.parametrize(
    "text",
    [
        "I took a trip to Japan two years ago.",  # long past: an event, not a to-do done
        "Here's a photo I took at the park.",  # relative clause
        "It took a bit of work.",
        "Took some trial and error.",
        "If I took it, I'd feel better.",
        "Did you take your pills?",
        "Well done!",
    ],
)
def test_no_completion(text: str) -> None:
    assert extract(text, NOW).completions == []


# ---------------------------------------------------------------------------------------------
# Entities


def test_entities_are_typed_and_located() -> None:
    text = "Hey Mel! My sister Anna moved to NYC and works at Google with Dr. Smith on Friday."
    found = {(e.name, e.type) for e in extract(text, NOW).entities}
    assert found == {
        ("Mel", EntityType.PERSON),
        ("Anna", EntityType.PERSON),
        ("NYC", EntityType.PLACE),
        ("Google", EntityType.ORGANISATION),
        ("Dr. Smith", EntityType.PERSON),
        ("2023-05-05", EntityType.TIME),
    }
    for e in extract(text, NOW).entities:
        if e.type is not EntityType.TIME:
            assert text[e.start : e.start + len(e.name)] == e.name


@pytest.mark.parametrize(
    ("text", "name", "kind"),
    [
        ("We visited Lisbon.", "Lisbon", EntityType.PLACE),
        ("We stayed near Lake Tahoe.", "Lake Tahoe", EntityType.PLACE),
        (
            "She studies at the University of Michigan.",
            "University of Michigan",
            EntityType.ORGANISATION,
        ),
        ("He joined Acme Corp in June.", "Acme Corp", EntityType.ORGANISATION),
        ("That's great, Calvin!", "Calvin", EntityType.PERSON),
        ("Caroline and I went out.", "Caroline", EntityType.PERSON),
        ("I met Priya at the gym.", "Priya", EntityType.OTHER),
    ],
)
def test_entity_types(text: str, name: str, kind: EntityType) -> None:
    found = {e.name: e.type for e in extract(text, NOW).entities}
    assert found[name] is kind


def test_sentence_start_words_are_not_entities() -> None:
    text = "Thanks! Great to hear. Yesterday was fun. Sounds good."
    assert [e.type for e in extract(text, NOW).entities] == [EntityType.TIME]


def test_time_entities_are_named_by_their_value() -> None:
    names = [
        e.name for e in extract("yesterday, tomorrow at 5pm, in June, back in 2019", NOW).entities
    ]
    assert names == ["2023-05-07", "2023-05-09T17:00", "2023-06", "2019"]


def test_entity_roles() -> None:
    roles = {
        e.name: e.role for e in extract("Anna called me. I visited Boston. Hi Tom.", NOW).entities
    }
    assert roles == {"Anna": "subject", "Boston": "object", "Tom": "mention"}


# ---------------------------------------------------------------------------------------------
# Canonical names and ids


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("NYC", "new york city"),
        ("New York City", "new york city"),
        ("  new   York  ", "new york city"),
        ("U.S.", "united states"),
        ("Dogs", "dog"),
        ("puppies", "puppy"),
        ("cookies", "cookie"),
        ("boxes", "box"),
        ("glasses", "glasses"),
        ("Paris", "paris"),
        ("diabetes", "diabetes"),
        ("Anna's", "anna"),
        ("the Beatles", "beatle"),
        ("Mom", "mother"),
        ("Advil", "ibuprofen"),
        ("blood-pressure pills", "blood-pressure pill"),
    ],
)
def test_canonical_name(name: str, canonical: str) -> None:
    assert canonical_name(name) == canonical


def test_entity_id_is_stable_and_folds_surface_forms() -> None:
    place = entity_id("NYC", EntityType.PLACE)
    assert place == entity_id("New York City", EntityType.PLACE)
    assert place.startswith("ent_") and len(place) == 4 + 16
    assert entity_id("Dogs", EntityType.OBJECT) == entity_id("dog", EntityType.OBJECT)
    assert entity_id("Apple", EntityType.ORGANISATION) != entity_id("apple", EntityType.OBJECT)
    # the documented recipe, pinned: ids must survive restarts and rebuilds
    digest = hashlib.sha1(b"place:paris").hexdigest()[:16]
    assert entity_id("Paris", EntityType.PLACE) == f"ent_{digest}"


# ---------------------------------------------------------------------------------------------
# The record itself


def test_extraction_is_frozen_and_empty_for_empty_text() -> None:
    x = extract("", NOW)
    assert x == Extraction([], [], [], [], [])
    with pytest.raises(dataclasses.FrozenInstanceError):
        x.times = []  # type: ignore[misc]


def test_extract_is_deterministic_and_handles_curly_quotes() -> None:
    text = "I\u2019m allergic to penicillin and I\u2019ll call Dr. Lee tomorrow."
    assert extract(text, NOW) == extract(text, NOW)
    assert extract(text, NOW) == extract(text.replace("\u2019", "'"), NOW)
