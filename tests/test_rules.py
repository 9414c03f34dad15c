"""Procedural memory end to end: rule trees from a sentence to the graph and back to a query.

Extractor (else-branches, sequences, tags), the one node layout shared with A_proc, the graph
tree (NEXT_STEP / BRANCH edges, idempotent rewrite and rebuild) and retrieval's branch choice,
the last through a real MemoryService.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from memoryd.ingest import NewTurn
from memoryd.memory.abstract import _rule as aproc_rule
from memoryd.memory.extract import extract
from memoryd.models import Episode, Label, MemoryType, Role, Rule, RuleNodeKind, Turn
from memoryd.retrieve import Item, QueryParams, Stores
from memoryd.retrieve.expand import matching_rules
from memoryd.retrieve.render import render_line
from memoryd.schemas.replies import ItemReply
from memoryd.service import MemoryService
from memoryd.store.codec import memory_from_payload, to_payload
from support.reading import build
from support.replies import as_json

NOW = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
NSAID = (
    "If I take an NSAID with aspirin, check the bleeding risk first, otherwise take it with food."
)
A, C, S, B = RuleNodeKind.ACTION, RuleNodeKind.CONDITION, RuleNodeKind.SEQUENCE, RuleNodeKind.BRANCH


def rules_of(text: str) -> list[tuple[list[str], list[str], list[str]]]:
    return [(r.conditions, r.actions, r.otherwise) for r in extract(text, NOW).rules]


def build_rule(text: str) -> Rule:
    turn = Turn("t1", "s1", Role.USER, text, NOW, labels=(Label.PROCEDURAL,))
    (rule,) = [m for m in build(turn) if isinstance(m, Rule)]
    return rule


def layout(rule: Rule) -> list[tuple[RuleNodeKind, str, int, str | None]]:
    return [(n.kind, n.text, n.ord, n.when) for n in rule.nodes]


# ---------------------------------------------------------------------------------- extractor


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            NSAID,
            [(["I take an NSAID with aspirin"], ["check the bleeding risk first"],
              ["take it with food"])],
        ),
        ("If it rains, take the bus; otherwise walk", [(["it rains"], ["take the bus"], ["walk"])]),
        ("If it rains, take the bus, else walk to work", [(["it rains"], ["take the bus"],
                                                         ["walk to work"])]),
        ("If it rains, take the bus; if not, walk.", [(["it rains"], ["take the bus"], ["walk"])]),
        ("If it rains, take the bus, or else walk", [(["it rains"], ["take the bus"], ["walk"])]),
        (
            "If I feel dizzy, sit down, otherwise drink water and then rest",
            [(["I feel dizzy"], ["sit down"], ["drink water", "rest"])],
        ),
        (
            "Never take ibuprofen if my stomach is empty, otherwise take it with water",
            [(["my stomach is empty"], ["Never take ibuprofen"], ["take it with water"])],
        ),
        # "When X: A, then B" is a sequence; a comma list of actions is split into steps.
        (
            "When the alarm rings: get up, then drink water",
            [(["the alarm rings"], ["get up", "drink water"], [])],
        ),
        (
            "When I get home: take off my shoes, wash my hands, then start dinner.",
            [(["I get home"], ["take off my shoes", "wash my hands", "start dinner"], [])],
        ),
        # Several "if" clauses are separate rules, and their else has no clear scope.
        (
            "If it's sunny, walk to work; if it rains, take the bus; otherwise call a cab.",
            [(["it's sunny"], ["walk to work"], []), (["it rains"], ["take the bus"], [])],
        ),
        # An else-branch that is no action, or narrated in the past, is dropped; the rule stays.
        ("If it rains, take the bus, otherwise it's fine.", [(["it rains"], ["take the bus"], [])]),
        ("If it rains, take the bus, otherwise I walked", [(["it rains"], ["take the bus"], [])]),
        # "else" inside an action is no else-branch.
        ("If it's late, ask someone else to drive", [(["it's late"], ["ask someone else to drive"],
                                                      [])]),
        # A comma inside one action stays when not every piece is an action.
        ("If I have a headache, take ibuprofen, 200 mg", [(["I have a headache"],
                                                          ["take ibuprofen, 200 mg"], [])]),
    ],
)  # fmt: skip
def test_rules_with_else_branches_and_sequences(
    text: str, expected: list[tuple[list[str], list[str], list[str]]]
) -> None:
    assert rules_of(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "If I were you, I'd call her, otherwise I'd wait.",
        "If I had known, I would have called her, otherwise fine.",
        "If you need anything, let me know, otherwise see you.",
        "If it's a weekday take the bus, on weekends cycle",  # no precise case pattern
        "Otherwise, take the bus.",
        "If it rains, otherwise take the bus",
    ],
)
def test_no_rule_from_hypotheticals_or_dangling_else(text: str) -> None:
    assert extract(text, NOW).rules == []


def test_rule_tags_are_cheap_and_deterministic() -> None:
    (rule,) = extract(NSAID, NOW).rules
    assert rule.tags == ["health", "nsaid", "aspirin"]
    (other,) = extract("Never take Advil if my stomach is empty", NOW).rules
    assert other.tags == ["health", "ibuprofen"]
    assert extract("If it rains, take the bus", NOW).rules[0].tags == []


# -------------------------------------------------------------------------------------- build


def test_build_writes_the_shared_layout_with_the_else_branch() -> None:
    rule = build_rule(NSAID)
    assert layout(rule) == [
        (C, "I take an NSAID with aspirin", 0, None),
        (S, "then", 1, None),
        (A, "check the bleeding risk first", 2, None),
        (B, "otherwise", 3, "otherwise"),
        (A, "take it with food", 4, "otherwise"),
    ]
    assert rule.conditions == ["I take an NSAID with aspirin"]
    assert rule.actions == ["check the bleeding risk first"]
    assert rule.branches == {"otherwise": ["take it with food"]}
    assert rule.tags == ["health", "nsaid", "aspirin"]
    assert build_rule(NSAID) == rule  # deterministic ids
    assert len({n.id for n in rule.nodes}) == 5
    assert memory_from_payload(MemoryType.PROCEDURAL, to_payload(rule)) == rule


def test_build_without_else_has_no_branch_node() -> None:
    rule = build_rule("If it rains, take the bus")
    assert [n.kind for n in rule.nodes] == [C, S, A]
    assert rule.branches == {}


def test_extractor_and_aproc_share_one_layout() -> None:
    episode = Episode("ep1", "t1", "s1", NSAID, NOW)
    item = {
        "episode": 1,
        "conditions": ["I take an NSAID with aspirin"],
        "actions": ["check the bleeding risk first"],
        "otherwise": ["take it with food"],
        "tags": [],
    }
    found = aproc_rule(item, episode)
    assert found is not None
    assert [(k, t, o, w) for k, t, o, w in layout(found[1])] == layout(build_rule(NSAID))


# ---------------------------------------------------------------------------------- retrieval


def rule_item(rule: Rule, detail: dict | None = None) -> Item:
    return Item(rule, MemoryType.PROCEDURAL, 0.0, "why", [rule.turn_id], "s1", "", False,
                detail or {})  # fmt: skip


def test_render_line_shows_branches_and_marks_the_matched_one() -> None:
    rule = build_rule(NSAID)
    plain = render_line(rule_item(rule))
    assert plain == (
        "if I take an NSAID with aspirin then check the bleeding risk first "
        "(otherwise take it with food)"
    )
    assert render_line(rule_item(rule, {"branch": "otherwise"})) == plain + (
        " [applies: otherwise]"
    )
    assert render_line(rule_item(rule, {"branch": None})).endswith("[applies: none]")
    assert as_json(ItemReply.of(rule_item(rule, {"branch": "then"})))["detail"] == {
        "branch": "then"
    }


@pytest.fixture
def health(service: MemoryService) -> Iterator[Stores]:
    turns = [
        NSAID,
        "If it's cold, wear a warm coat to work.",
        "I went hiking with Anna last weekend.",
    ]
    for text in turns:
        (reply,) = service.ingest("pat", [NewTurn(session_id="s1", role=Role.USER, text=text)])
        if text == NSAID:
            assert "procedural" in [m.type for m in reply.memories]
    with service.users.lease("pat") as ws:
        yield ws.stores


def matched(stores: Stores, query: str) -> dict[str, tuple[str, dict]]:
    found = matching_rules(stores, query)
    return {" ".join(_rule_of(stores, x.id).conditions): (x.why, x.detail) for x in found}


def _rule_of(stores: Stores, rule_id: str) -> Rule:
    rule = stores.journal.memories_by_id([rule_id])[rule_id].memory
    assert isinstance(rule, Rule)
    return rule


@pytest.mark.parametrize(
    ("query", "branch", "actions"),
    [
        ("I take an NSAID with aspirin, what should I do?", "then",
         ["check the bleeding risk first"]),
        ("I did not take aspirin with it", "otherwise", ["take it with food"]),
        ("no aspirin today, what now?", "otherwise", ["take it with food"]),
        ("I forgot my aspirin", "otherwise", ["take it with food"]),
    ],
)  # fmt: skip
def test_matching_rules_picks_the_branch(
    health: Stores, query: str, branch: str, actions: list[str]
) -> None:
    found = matched(health, query)
    why, detail = found["I take an NSAID with aspirin"]
    assert why.startswith("condition 'I take an NSAID with aspirin' matches the query")
    assert why.endswith(f"; branch: {branch}")
    assert type(why) is str
    assert detail == {
        "branch": branch,
        "condition": "I take an NSAID with aspirin",
        "negated": branch == "otherwise",
        "actions": actions,
    }


def test_negated_rule_without_else_has_no_branch(health: Stores) -> None:
    why, detail = matched(health, "it's not cold today")["it's cold"]
    assert why == "condition 'it's cold' matches the query, which negates it; no branch applies"
    assert (detail["branch"], detail["actions"]) == (None, [])
    why, detail = matched(health, "it's cold, how do I get to work?")["it's cold"]
    assert why.endswith("; branch: then") and detail["actions"] == ["wear a warm coat to work"]


def test_query_returns_the_rule_tree(service: MemoryService, health: Stores) -> None:
    result = service.query("pat", QueryParams("no aspirin today, what now?"))
    rules = [i for i in result.items if i.type is MemoryType.PROCEDURAL]
    assert any(isinstance(i.memory, Rule) and i.memory.branches for i in rules)
    assert "(otherwise take it with food)" in "\n".join(render_line(i) for i in rules)


def test_query_marks_the_branch_on_a_hit_rule(service: MemoryService, health: Stores) -> None:
    result = service.query("pat", QueryParams("no aspirin today, what now?"))
    (item,) = [i for i in result.items if isinstance(i.memory, Rule) and "NSAID" in i.memory.text]
    assert item.hit and item.detail["branch"] == "otherwise"
    assert "branch: otherwise" in item.why


def test_rebuild_reproduces_the_rule_tree(service: MemoryService, health: Stores) -> None:
    rule_id = next(
        rid for rid, conds in health.graph.rules_with_conditions() if "NSAID" in conds[0]
    )
    before = health.graph.rule_tree(rule_id, edges=True)
    nodes, edges = before
    c, s, a, b, e = (n.id for n in nodes)
    assert [n.kind for n in nodes] == [C, S, A, B, A]
    assert edges == sorted(
        [
            ("NEXT_STEP", c, s, None),
            ("NEXT_STEP", s, a, None),
            ("BRANCH", s, b, "otherwise"),
            ("NEXT_STEP", b, e, None),
        ]
    )
    service.rebuild("pat")
    with service.users.lease("pat") as ws:
        assert ws.projection.graph.rule_tree(rule_id, edges=True) == before
