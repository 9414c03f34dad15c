"""Supersession by slot (memoryd.memory.consolidate): which stored facts a new fact closes,
doubts, reinforces or leaves alone, decided from the slot (subject, attribute), the inventory's
cardinality and the statement's kind. Pure: facts in, decisions out, on a view of staged facts."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from memoryd.fact_corpus import INVENTORY_FILE, load_inventory
from memoryd.memory import StagedView, consolidate
from memoryd.memory.build import memory_id
from memoryd.models import Entity, EntityType, Fact, Parse
from memoryd.reader import Slots
from support.config import MODEL_DIR

SLOTS = Slots(load_inventory(MODEL_DIR / INVENTORY_FILE))
T0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)


def fact(
    attribute: str,
    value: str,
    *,
    subject: str = "user",
    kind: str = "state",
    day: int = 0,
    negated: bool = False,
    old: str | None = None,
    confidence: float = 0.95,
) -> Fact:
    turn = f"t-{attribute}-{value}-{day}-{kind}"
    return Fact(
        id=memory_id("fact", turn, "fact", 0),
        turn_id=turn,
        relation=attribute,
        object=Entity(value.lower(), value, EntityType.OTHER),
        text=f"{subject} {attribute} {value}",
        subject=subject,
        confidence=confidence,
        valid_from=T0 + timedelta(days=day),
        valid_to=T0 + timedelta(days=day) if kind == "end" else None,
        negated=negated,
        sources=[turn],
        parse=Parse.READER,
        kind=kind,
        old=old,
        label=SLOTS.label(attribute, negated),
    )


def fold(*facts: Fact) -> dict[str, Fact]:
    """Fold ``facts`` in order, as ingest would; every record by id, as it ends."""
    view = StagedView()
    out: dict[str, Fact] = {}
    for f in facts:
        result = consolidate(None, [f], view, SLOTS)
        view.stage([*result.memories, *result.updates])
        out.update((m.id, m) for m in [*result.memories, *result.updates] if isinstance(m, Fact))
    return out


def current(records: dict[str, Fact]) -> set[tuple[str, str, str]]:
    return {(f.subject, f.relation, f.object.name) for f in records.values() if f.valid_to is None}


def test_a_new_value_of_a_one_value_slot_replaces_the_old() -> None:
    priya, marcus = (
        fact("manager", "Priya Shah"),
        fact("manager", "Marcus Lee", kind="change", day=9),
    )
    records = fold(priya, marcus)
    assert current(records) == {("user", "manager", "Marcus Lee")}
    closed = records[priya.id]
    assert (closed.valid_to, closed.superseded_by) == (marcus.valid_from, marcus.id)


def test_values_of_a_many_value_slot_add_up() -> None:
    records = fold(fact("allergy", "peanuts"), fact("allergy", "shellfish", kind="add", day=3))
    assert current(records) == {("user", "allergy", "peanuts"), ("user", "allergy", "shellfish")}
    records = fold(fact("pet", "Biscuit"), fact("pet", "Miso", day=3))  # added without "also"
    assert len(current(records)) == 2


def test_an_addition_to_a_one_value_slot_keeps_both() -> None:
    records = fold(fact("bank", "Nationwide"), fact("bank", "Monzo", kind="add", day=2))
    assert current(records) == {("user", "bank", "Nationwide"), ("user", "bank", "Monzo")}


def test_a_fact_about_someone_else_never_closes_the_users() -> None:
    records = fold(
        fact("home_city", "Bristol"),
        fact("home_city", "Edinburgh", subject="Tom", kind="change", day=5),
        fact("employer", "Acme"),
        fact("employer", "Initech", subject="Jess", day=6),
    )
    assert current(records) == {
        ("user", "home_city", "Bristol"),
        ("Tom", "home_city", "Edinburgh"),
        ("user", "employer", "Acme"),
        ("Jess", "employer", "Initech"),
    }


def test_another_attribute_is_never_closed_without_its_old_value_named() -> None:
    records = fold(fact("energy_supplier", "Octopus"), fact("broadband", "Sky", kind="change"))
    assert len(current(records)) == 2


def test_a_named_old_value_closes_whatever_its_attribute() -> None:
    octopus = fact("energy_supplier", "Octopus")
    edf = fact("phone_plan", "EDF", kind="change", old="Octopus", day=4)  # a misread attribute
    records = fold(octopus, edf)
    assert records[octopus.id].superseded_by == edf.id
    # in a many-value slot the old value named is the one replaced, and only it
    records = fold(
        fact("medication", "sertraline"),
        fact("medication", "vitamin D"),
        fact("medication", "citalopram", kind="change", old="sertraline", day=2),
    )
    assert current(records) == {
        ("user", "medication", "vitamin D"),
        ("user", "medication", "citalopram"),
    }


def test_an_ending_closes_only_the_value_it_names() -> None:
    gym = fact("hobby", "climbing")
    records = fold(gym, fact("hobby", "swimming"), fact("hobby", "climbing", kind="end", day=7))
    assert current(records) == {("user", "hobby", "swimming")}
    assert records[gym.id].valid_to == T0 + timedelta(days=7)
    records = fold(fact("doctor", "Dr Patel"), fact("doctor", "Dr Okafor", kind="end", day=2))
    assert current(records) == {("user", "doctor", "Dr Patel")}  # it named another doctor


def test_an_ending_closes_a_value_it_names_in_part() -> None:
    """ "phoned virgin and cancelled" ends "Virgin Media"; another value of its slot stays."""
    virgin_media, ended = (
        fact("subscription", "Virgin Media"),
        fact("subscription", "virgin", kind="end"),
    )
    netflix = fact("subscription", "Netflix")
    assert current(fold(virgin_media, netflix, ended)) == {("user", "subscription", "Netflix")}


def test_a_value_stated_again_after_a_change_replaced_it_is_history() -> None:
    """ "part-exchanged the corsa for a Kia Niro", then "dad thinks I should've run the corsa
    into the ground": a mention of the car before, not a return to it; a change back is."""
    corsa, niro = fact("car", "Corsa"), fact("car", "Kia Niro", kind="change", old="corsa", day=5)
    mention = fact("car", "corsa", day=9)
    records = fold(corsa, niro, mention)
    assert current(records) == {("user", "car", "Kia Niro")}
    assert (records[mention.id].valid_to, records[mention.id].superseded_by) == (
        mention.valid_from,
        niro.id,
    )
    back = fact("car", "corsa", kind="change", day=9)
    assert current(fold(corsa, niro, back)) == {("user", "car", "corsa")}


def test_the_same_value_reinforces_and_the_opposite_polarity_closes() -> None:
    first, again = fact("home_city", "Oslo"), fact("home_city", "oslo", day=1)
    records = fold(first, again)
    assert again.id not in records and records[first.id].sources == [first.turn_id, again.turn_id]
    assert records[first.id].confidence > first.confidence
    likes = fact("likes", "olives")
    records = fold(likes, fact("likes", "olives", negated=True, day=1))
    assert records[likes.id].valid_to is not None
    assert current(records) == {("user", "likes", "olives")}  # the negated one
    assert [f.negated for f in records.values() if f.valid_to is None] == [True]


def test_a_negation_does_not_replace_the_slots_other_values() -> None:
    records = fold(fact("diet", "vegetarian"), fact("diet", "pork", negated=True, day=1))
    assert current(records) == {("user", "diet", "vegetarian"), ("user", "diet", "pork")}


def test_an_unsure_reading_doubts_instead_of_closing() -> None:
    old = fact("manager", "Priya Shah")
    new = fact("manager", "Marcus Lee", kind="change", day=3, confidence=0.4)
    records = fold(old, new)
    assert records[old.id].valid_to is None and records[old.id].doubted_by == new.id
    # stating the old value again clears the doubt (and, being sure, replaces the newer one)
    again = fact("manager", "Priya Shah", day=5)
    records = fold(old, new, again)
    assert records[old.id].doubted_by is None
    assert current(records) == {("user", "manager", "Priya Shah")}


def test_a_change_in_a_many_value_slot_replaces_its_one_value_and_doubts_several() -> None:
    sertraline = fact("medication", "sertraline")
    records = fold(sertraline, fact("medication", "citalopram", kind="change", day=2))
    assert current(records) == {("user", "medication", "citalopram")}
    vitamin = fact("medication", "vitamin D")
    records = fold(sertraline, vitamin, fact("medication", "citalopram", kind="change", day=2))
    assert len(current(records)) == 3
    assert records[sertraline.id].doubted_by is not None and records[vitamin.id].doubted_by
    # an addition or a plain statement in a slot of many values replaces nothing
    records = fold(sertraline, fact("medication", "citalopram", kind="add", day=2))
    assert len(current(records)) == 2 and records[sertraline.id].doubted_by is None


def test_a_dose_ends_with_its_medicine() -> None:
    """The inventory's ``ends_with``: sertraline replaced or stopped takes "Sertraline — dose:
    50mg" with it; the dose of a medicine someone still takes stays."""
    sertraline, dose = fact("medication", "sertraline"), fact("dose", "50mg", subject="Sertraline")
    swapped = fact("medication", "citalopram", kind="change", day=2)
    new_dose = fact("dose", "20mg", subject="Citalopram", day=2)
    records = fold(sertraline, dose, swapped, new_dose)
    assert current(records) == {
        ("user", "medication", "citalopram"),
        ("Citalopram", "dose", "20mg"),
    }
    assert (records[dose.id].valid_to, records[dose.id].superseded_by) == (
        swapped.valid_from,
        swapped.id,
    )
    stopped = fact("medication", "sertraline", kind="end", day=5)
    assert current(fold(sertraline, dose, stopped)) == set()
    # another medicine ended, or mum's sertraline while the user still takes it: the dose stays
    vitamin = fact("medication", "vitamin D")
    ended = fact("medication", "vitamin D", kind="end", day=5)
    assert ("Sertraline", "dose", "50mg") in current(fold(sertraline, dose, vitamin, ended))
    mums = fact("medication", "sertraline", subject="Mum", day=1)
    mum_stopped = fact("medication", "sertraline", subject="Mum", kind="end", day=5)
    records = fold(sertraline, dose, mums, mum_stopped)
    assert records[mums.id].valid_to is not None
    assert ("Sertraline", "dose", "50mg") in current(records)


def test_a_past_statement_journaled_late_is_history() -> None:
    leeds = fact("home_city", "Leeds", day=10)
    york = fact("home_city", "York", day=2)  # said earlier, arrives later (an import)
    records = fold(leeds, york)
    assert current(records) == {("user", "home_city", "Leeds")}
    assert records[york.id].superseded_by == leeds.id
    assert york.valid_to is None  # the record given is not changed


@pytest.mark.parametrize("attribute", ["manager", "home_city", "bank", "employer", "diet"])
def test_one_value_attributes_of_the_inventory(attribute: str) -> None:
    assert SLOTS.single(attribute)


@pytest.mark.parametrize("attribute", ["allergy", "medication", "pet", "language", "child"])
def test_many_value_attributes_of_the_inventory(attribute: str) -> None:
    assert not SLOTS.single(attribute)


def test_an_open_attribute_is_never_replaced_by_slot() -> None:
    thursdays = fact("other", "Thursdays")
    records = fold(thursdays, fact("other", "the Crown", kind="change", day=1))
    assert len(current(records)) == 2 and records[thursdays.id].doubted_by is None
    assert not SLOTS.single("other")


def test_folding_is_pure() -> None:
    old = fact("manager", "Priya Shah")
    before = dataclasses.replace(old)
    fold(old, fact("manager", "Marcus Lee", day=2))
    assert old == before
