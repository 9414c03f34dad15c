"""The LLM abstraction operators A_sem and A_proc (memoryd.memory.abstract).

Normalisation, ids and node layout are checked with ScriptedFakeLLM, which returns a given answer
(including answers a schema-constrained model never gives); the last tests run both operators on
the real Gemma 3 270M GGUF through the llama.cpp backend and check the answers' shape only.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memoryd.errors import LLMOutputError
from memoryd.fact_corpus import INVENTORY_FILE, load_inventory
from memoryd.llm import LlamaCppLLM, Prompt
from memoryd.memory.abstract import (
    CONFIDENCE,
    MAX_BATCH,
    MAX_EPISODE_CHARS,
    OTHERWISE,
    PROC_SCHEMA,
    abstract_facts,
    abstract_rules,
    proc_prompt,
    sem_prompt,
    sem_schema,
)
from memoryd.memory.build import importance
from memoryd.memory.extract import entity_id
from memoryd.models import EntityType, Episode, Fact, Origin, Rule, RuleNodeKind
from memoryd.reader import Slots
from support.llm_fixtures import RecordingLLM, gemma_gguf

REPO = Path(__file__).resolve().parents[1]
SLOTS = Slots(load_inventory(REPO / "models" / INVENTORY_FILE))
SEM_SCHEMA = sem_schema(SLOTS)
ATTRIBUTES = SLOTS.inventory.names
DAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)

HEALTH = (
    "I'm allergic to ibuprofen",
    "I was diagnosed with hypertension last year",
    "If I take an NSAID with aspirin I should check bleeding risk",
)


def episodes(*texts: str, speaker: str | None = "Caroline") -> list[Episode]:
    return [
        Episode(f"ep{i}", f"t{i}", "s1", text, DAY.replace(day=8 + i), speaker=speaker)
        for i, text in enumerate(texts, start=1)
    ]


class ScriptedFakeLLM:
    """A fake LLM: answers every call with a copy of ``answer`` and records what it was sent."""

    name = "fake:scripted"

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[Prompt, dict[str, Any], float | None]] = []

    def generate_json(
        self, prompt: Prompt, schema: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        self.calls.append((prompt, schema, timeout))
        return copy.deepcopy(self.answer)

    def close(self) -> None:
        pass


def fact_item(episode: int = 1, **fields: Any) -> dict[str, Any]:
    item = {
        "episode": episode,
        "attribute": "allergy",
        "object": "ibuprofen",
        "negated": False,
        "confidence": "high",
    }
    return {**item, **fields}


def rule_item(episode: int = 1, **fields: Any) -> dict[str, Any]:
    item = {
        "episode": episode,
        "conditions": ["I take an NSAID with aspirin"],
        "actions": ["check bleeding risk"],
        "otherwise": [],
        "tags": ["medication"],
    }
    return {**item, **fields}


def facts_of(*items: dict[str, Any], batch: list[Episode] | None = None) -> list[Fact]:
    return abstract_facts(
        ScriptedFakeLLM({"facts": list(items)}), batch or episodes(*HEALTH), SLOTS, timeout=5
    )


def rules_of(*items: dict[str, Any], batch: list[Episode] | None = None) -> list[Rule]:
    return abstract_rules(
        ScriptedFakeLLM({"rules": list(items)}), batch or episodes(*HEALTH), timeout=5
    )


def assert_well_formed_fact(fact: Fact, batch: list[Episode]) -> None:
    by_turn = {e.turn_id: e for e in batch}
    episode = by_turn[fact.turn_id]
    assert isinstance(fact, Fact)
    assert fact.id.startswith("fact_")
    assert fact.relation in ATTRIBUTES
    assert fact.object.name and fact.object.id == entity_id(fact.object.name, fact.object.type)
    assert fact.object.type is SLOTS.value_type(fact.relation)
    assert fact.label == SLOTS.label(fact.relation, fact.negated)
    assert fact.subject == (episode.speaker or "user")
    assert fact.confidence in CONFIDENCE.values()
    assert isinstance(fact.negated, bool)
    assert fact.valid_from == episode.ts and fact.valid_to is None
    assert fact.sources[0] == fact.turn_id and set(fact.sources) <= set(by_turn)
    assert fact.origin is Origin.LLM
    assert fact.header.importance == importance(fact)


def assert_well_formed_rule(rule: Rule, batch: list[Episode]) -> None:
    assert isinstance(rule, Rule)
    assert rule.id.startswith("rule_")
    assert rule.turn_id in {e.turn_id for e in batch}
    assert rule.origin is Origin.LLM and rule.support >= 1
    assert rule.header.importance == importance(rule)
    assert [n.ord for n in rule.nodes] == list(range(len(rule.nodes)))
    assert len({n.id for n in rule.nodes}) == len(rule.nodes)
    kinds = [n.kind for n in rule.nodes]
    then = kinds.index(RuleNodeKind.SEQUENCE)
    assert then >= 1 and set(kinds[:then]) == {RuleNodeKind.CONDITION}
    main = [n for n in rule.nodes[then + 1 :] if n.when is None]
    branch = [n for n in rule.nodes[then + 1 :] if n.when is not None]
    assert main and all(n.kind is RuleNodeKind.ACTION for n in main)
    assert rule.nodes[then + 1 : then + 1 + len(main)] == main  # main line first
    if branch:
        assert branch[0].kind is RuleNodeKind.BRANCH and len(branch) >= 2
        assert all(n.kind is RuleNodeKind.ACTION for n in branch[1:])
        assert {n.when for n in branch} == {OTHERWISE}
    assert all(n.text for n in rule.nodes)


# ------------------------------------------------------------------------------------ schemas


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


@pytest.mark.parametrize("schema", [SEM_SCHEMA, PROC_SCHEMA], ids=["sem", "proc"])
def test_schemas_are_strict_and_bounded(schema):
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for node in _walk(schema):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert set(node["required"]) == set(node["properties"])
        if node.get("type") == "string":
            assert "maxLength" in node
        if node.get("type") == "array":
            assert "maxItems" in node


def test_sem_schema_enums_and_what_it_rejects():
    item = SEM_SCHEMA["properties"]["facts"]["items"]["properties"]
    assert item["attribute"]["enum"] == list(ATTRIBUTES)
    assert item["confidence"]["enum"] == ["low", "medium", "high"]
    assert item["episode"]["enum"] == list(range(1, MAX_BATCH + 1))

    valid = Draft202012Validator(SEM_SCHEMA)
    assert valid.is_valid({"facts": []})
    assert valid.is_valid({"facts": [fact_item(), fact_item(2, attribute="medication")]})
    for bad in (
        {},
        {"facts": [fact_item(attribute="hates")]},  # outside the inventory
        {"facts": [fact_item(attribute="other")]},  # an LLM's fact names its attribute
        {"facts": [fact_item(confidence=0.9)]},
        {"facts": [fact_item(object="")]},
        {"facts": [fact_item(object="x" * 61)]},
        {"facts": [fact_item(episode=0)]},
        {"facts": [fact_item(episode=MAX_BATCH + 1)]},
        {"facts": [fact_item(why="extra key")]},
        {"facts": [{k: v for k, v in fact_item().items() if k != "negated"}]},
        {"facts": [fact_item()] * 9},
        {"facts": []} | {"rules": []},
    ):
        assert not valid.is_valid(bad), bad


def test_proc_schema_what_it_rejects():
    valid = Draft202012Validator(PROC_SCHEMA)
    assert valid.is_valid({"rules": [rule_item(), rule_item(otherwise=["a"], tags=[])]})
    for bad in (
        {"rules": [rule_item(conditions=[])]},
        {"rules": [rule_item(conditions=["a", "b", "c", "d"])]},
        {"rules": [rule_item(actions=[])]},
        {"rules": [rule_item(actions=["a"] * 5)]},
        {"rules": [rule_item(otherwise=["a"] * 4)]},
        {"rules": [rule_item(tags=["a"] * 4)]},
        {"rules": [rule_item(tags=["x" * 21])]},
        {"rules": [rule_item(actions=["x" * 81])]},
        {"rules": [rule_item(conditions=[""])]},
        {"rules": [rule_item(priority="high")]},
        {"rules": [rule_item()] * 5},
    ):
        assert not valid.is_valid(bad), bad


# ------------------------------------------------------------------------------------ prompts


def test_prompts_number_the_episodes_with_date_and_speaker():
    batch = episodes(*HEALTH)
    batch[1].speaker = None
    for prompt in (sem_prompt(batch, SLOTS), proc_prompt(batch)):
        assert isinstance(prompt, Prompt)
        assert prompt.user.splitlines() == [
            "[1] 2023-05-09 Caroline: I'm allergic to ibuprofen",
            "[2] 2023-05-10 User: I was diagnosed with hypertension last year",
            "[3] 2023-05-11 Caroline: If I take an NSAID with aspirin I should check bleeding risk",
        ]
    assert sem_prompt(batch, SLOTS).system != proc_prompt(batch).system


def test_sem_prompt_names_every_attribute_and_what_to_skip():
    system = sem_prompt(episodes("hi"), SLOTS).system
    for attribute in ATTRIBUTES:
        assert attribute in system
    for skipped in ("one-time events", '"what if"', "questions", "other people"):
        assert skipped in system
    assert "relatives" in system


def test_prompts_cut_long_episodes_and_refuse_bad_batch_sizes():
    text = "I like  tea.\n" + "x" * 1000
    line = sem_prompt(episodes(text), SLOTS).user
    assert line.startswith("[1] 2023-05-09 Caroline: I like tea. xxx")
    assert line.endswith("…")
    assert len(line) == len("[1] 2023-05-09 Caroline: ") + MAX_EPISODE_CHARS
    for prompt in (lambda b: sem_prompt(b, SLOTS), proc_prompt):
        prompt(episodes(*["hi"] * MAX_BATCH))
        for size in (0, MAX_BATCH + 1):
            with pytest.raises(ValueError, match=f"1 to {MAX_BATCH} episodes, not {size}"):
                prompt(episodes(*["hi"] * size))


def test_operators_send_their_prompt_schema_and_timeout():
    batch = episodes(*HEALTH)
    llm = ScriptedFakeLLM({"facts": []})
    assert abstract_facts(llm, batch, SLOTS, timeout=12.5) == []
    assert llm.calls == [(sem_prompt(batch, SLOTS), SEM_SCHEMA, 12.5)]
    llm = ScriptedFakeLLM({"rules": []})
    assert abstract_rules(llm, batch, timeout=None) == []
    assert llm.calls == [(proc_prompt(batch), PROC_SCHEMA, None)]


def test_empty_batch_makes_no_call():
    llm = ScriptedFakeLLM({"facts": []})
    assert abstract_facts(llm, [], SLOTS, timeout=1) == []
    assert abstract_rules(llm, [], timeout=1) == []
    assert llm.calls == []


# -------------------------------------------------------------------------------------- facts


def test_fact_record_from_an_answer_item():
    batch = episodes(*HEALTH)
    [fact] = facts_of(fact_item(1))
    assert_well_formed_fact(fact, batch)
    assert (fact.subject, fact.relation, fact.object.name) == (
        "Caroline",
        "allergy",
        "ibuprofen",
    )
    assert fact.object.id == entity_id("ibuprofen", EntityType.OBJECT)
    assert (fact.turn_id, fact.sources, fact.valid_from) == ("t1", ["t1"], batch[0].ts)
    assert fact.text == "I'm allergic to ibuprofen"
    assert fact.confidence == 0.9 and fact.negated is False
    assert fact.header.importance > 5.0  # health and first person


def test_fact_subject_is_user_without_a_speaker_and_text_is_shortened():
    batch = episodes("I live in Lisbon. " + "blah " * 100, speaker=None)
    [fact] = facts_of(fact_item(attribute="home_city", object="Lisbon"), batch=batch)
    assert fact.subject == "user"
    assert len(fact.text) == 200 and fact.text.endswith("…")
    assert_well_formed_fact(fact, batch)


def test_confidence_words_map_to_numbers():
    found = facts_of(
        *(fact_item(object=word, confidence=word) for word in ("low", "medium", "high"))
    )
    assert [f.confidence for f in found] == [0.5, 0.7, 0.9]
    assert CONFIDENCE == {"low": 0.5, "medium": 0.7, "high": 0.9}


def test_the_inventory_types_and_names_the_value():
    found = facts_of(
        fact_item(attribute="sibling", object="Anna"),
        fact_item(attribute="pet", object="Max"),
        fact_item(attribute="likes", object="tea", negated=True),
        fact_item(attribute="home_city", object="Lisbon"),
    )
    assert [(f.relation, f.object.type, f.label) for f in found] == [
        ("sibling", EntityType.PERSON, "sibling"),
        ("pet", EntityType.OBJECT, "pet"),
        ("likes", EntityType.OBJECT, "does not like"),
        ("home_city", EntityType.PLACE, "lives in"),
    ]


def test_bad_items_are_dropped_and_good_ones_kept(caplog):
    caplog.set_level("DEBUG", logger="memoryd.memory.abstract")
    found = facts_of(
        fact_item(4),  # the batch has 3 episodes
        fact_item(attribute="hates"),  # outside the inventory
        fact_item(object="it"),
        fact_item(object=" That. "),
        fact_item(object="?!"),
        fact_item(confidence=0.9),
        fact_item(why="extra"),
        "allergic to ibuprofen",
        fact_item(2, attribute="condition", object="hypertension"),
    )
    assert [(f.turn_id, f.relation, f.object.name) for f in found] == [
        ("t2", "condition", "hypertension")
    ]
    assert caplog.text.count("A_sem: dropped") == 8


def test_duplicate_facts_are_kept_once_with_every_source():
    found = facts_of(
        fact_item(1),
        fact_item(1, object="Ibuprofen.", confidence="low"),  # same entity
        fact_item(3, object="ibuprofen"),  # stated again in episode 3
        fact_item(1, negated=True),  # a contradiction is not a duplicate
    )
    assert [(f.negated, f.sources, f.confidence) for f in found] == [
        (False, ["t1", "t3"], 0.9),
        (True, ["t1"], 0.9),
    ]


def test_facts_of_different_speakers_are_different():
    batch = episodes("I love jazz", "I love jazz too")
    batch[1].speaker = "Melanie"
    found = facts_of(
        fact_item(1, attribute="likes", object="jazz"),
        fact_item(2, attribute="likes", object="jazz"),
        batch=batch,
    )
    assert [f.subject for f in found] == ["Caroline", "Melanie"]


def test_fact_ids_are_deterministic_and_independent_of_answer_order():
    items = [
        fact_item(1),
        fact_item(2, attribute="condition", object="hypertension"),
        fact_item(2, attribute="medication", object="lisinopril"),
    ]
    first = [f.id for f in facts_of(*items)]
    assert [f.id for f in facts_of(*items)] == first
    assert sorted(f.id for f in facts_of(*reversed(items))) == sorted(first)
    assert len(set(first)) == 3
    other_batch = episodes(*HEALTH)
    other_batch[0].id = "ep-other"  # the same answer about another episode
    assert facts_of(items[0], batch=other_batch)[0].id != first[0]


def test_a_copy_of_the_prompt_example_is_dropped_unless_the_episode_says_it():
    porto = fact_item(attribute="home_city", object="Porto")
    assert facts_of(porto) == []
    [fact] = facts_of(porto, batch=episodes("We moved to porto in May."))
    assert fact.object.name == "Porto"


@pytest.mark.parametrize("answer", [{"rules": []}, {"facts": "none"}, {"facts": {}}, ["facts"]])
def test_an_answer_without_a_facts_list_is_an_output_error(answer):
    with pytest.raises(LLMOutputError, match=r"fake:scripted.*no 'facts' list") as err:
        abstract_facts(ScriptedFakeLLM(answer), episodes(*HEALTH), SLOTS, timeout=1)
    assert err.value.backend == "fake:scripted"


# -------------------------------------------------------------------------------------- rules


def test_rule_without_otherwise_has_the_build_layout():
    batch = episodes(*HEALTH)
    [rule] = rules_of(rule_item(3, conditions=["If I take an NSAID", "I also take aspirin"]))
    assert_well_formed_rule(rule, batch)
    assert [(n.kind, n.text, n.ord, n.when) for n in rule.nodes] == [
        (RuleNodeKind.CONDITION, "I take an NSAID", 0, None),
        (RuleNodeKind.CONDITION, "I also take aspirin", 1, None),
        (RuleNodeKind.SEQUENCE, "then", 2, None),
        (RuleNodeKind.ACTION, "check bleeding risk", 3, None),
    ]
    assert rule.title == "I take an NSAID → check bleeding risk"
    assert rule.text == HEALTH[2] and rule.turn_id == "t3"
    assert rule.tags == ["medication"] and rule.support == 1 and rule.origin is Origin.LLM
    assert rule.header.importance == importance(rule)


def test_rule_with_otherwise_gets_a_branch():
    batch = episodes("When my BP is above 140 I call Dr Lee and rest, otherwise I go jogging.")
    [rule] = rules_of(
        rule_item(
            conditions=["when my BP is above 140"],
            actions=["call Dr Lee", "then rest."],
            otherwise=["go jogging", "  "],
            tags=["Health", "health ", "bp"],
        ),
        batch=batch,
    )
    assert_well_formed_rule(rule, batch)
    assert [(n.kind, n.text, n.ord, n.when) for n in rule.nodes] == [
        (RuleNodeKind.CONDITION, "my BP is above 140", 0, None),
        (RuleNodeKind.SEQUENCE, "then", 1, None),
        (RuleNodeKind.ACTION, "call Dr Lee", 2, None),
        (RuleNodeKind.ACTION, "rest", 3, None),
        (RuleNodeKind.BRANCH, "otherwise", 4, "otherwise"),
        (RuleNodeKind.ACTION, "go jogging", 5, "otherwise"),
    ]
    assert rule.tags == ["health", "bp"]


def test_bad_rules_are_dropped_and_duplicates_counted():
    found = rules_of(
        rule_item(9),
        rule_item(conditions=["if", " "]),  # nothing left after cleaning
        rule_item(actions=["a"] * 5),
        rule_item(conditions=["it rains"], actions=["take the bus to work"]),  # the example
        rule_item(1),
        rule_item(3, conditions=["i take an nsaid with aspirin"], actions=["Check bleeding risk"]),
        rule_item(3, actions=["ask my doctor"]),
    )
    assert [(r.turn_id, r.actions, r.support) for r in found] == [
        ("t1", ["check bleeding risk"], 2),
        ("t3", ["ask my doctor"], 1),
    ]


def test_rule_ids_are_deterministic_and_unique():
    items = [rule_item(1, otherwise=["do nothing"]), rule_item(3, actions=["ask my doctor"])]
    first = rules_of(*items)
    second = rules_of(*reversed(items))
    assert sorted(r.id for r in first) == sorted(r.id for r in second)
    by_id = {r.id: r for r in second}
    for rule in first:
        assert [n.id for n in rule.nodes] == [n.id for n in by_id[rule.id].nodes]
    node_ids = [n.id for r in first for n in r.nodes]
    assert len(set(node_ids)) == len(node_ids) == 8


def test_an_answer_without_a_rules_list_is_an_output_error():
    with pytest.raises(LLMOutputError, match="no 'rules' list"):
        abstract_rules(ScriptedFakeLLM({"facts": []}), episodes(*HEALTH), timeout=1)


# ------------------------------------------------------------------------------------ layering


def test_abstract_imports_only_llm_errors_memory_and_the_inventory():
    tree = ast.parse((REPO / "daemon" / "memoryd" / "memory" / "abstract.py").read_text())
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memoryd")
    } | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("memoryd")
    }
    assert imported
    for module in imported:
        assert module in (
            "memoryd.errors",
            "memoryd.models",
            "memoryd.reader",
        ) or module.startswith(("memoryd.llm", "memoryd.memory.")), module


# ------------------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingLLM]:
    """Gemma 3 270M on one thread; answers of these operators need far more than the router's
    64 tokens (see the module docstring of memoryd.memory.abstract)."""
    path = gemma_gguf(tmp_path_factory.mktemp("gguf"))
    llm = RecordingLLM(
        LlamaCppLLM(path, threads=1, context=2048, max_tokens=1024, idle_release=600.0)
    )
    yield llm
    llm.close()
    path.unlink()  # 253 MB: pytest keeps the last three base temp dirs


def test_real_model_a_sem_answer_fits_and_records_are_well_formed(gemma):
    batch = episodes(*HEALTH)
    facts = abstract_facts(gemma, batch, SLOTS, timeout=300)
    assert list(Draft202012Validator(SEM_SCHEMA).iter_errors(gemma.answers[-1])) == []
    assert len(facts) <= len(gemma.answers[-1]["facts"])
    for fact in facts:
        assert_well_formed_fact(fact, batch)


def test_real_model_a_proc_answer_fits_and_records_are_well_formed(gemma):
    batch = episodes(*HEALTH)
    rules = abstract_rules(gemma, batch, timeout=300)
    assert list(Draft202012Validator(PROC_SCHEMA).iter_errors(gemma.answers[-1])) == []
    assert len(rules) <= len(gemma.answers[-1]["rules"])
    for rule in rules:
        assert_well_formed_rule(rule, batch)
