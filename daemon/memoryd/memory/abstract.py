"""The LLM abstraction operators A_sem and A_proc (HGP §3.2): episodes in, facts and rules out.

The hot-path extractors (``extract.py``) read one turn with regular expressions and miss what is
only implied or phrased unusually. These two operators run in the background over a batch of new
episodes (at most :data:`MAX_BATCH`) and ask an LLM for what the batch says in general:

- **A_sem** (:func:`abstract_facts`): stable facts about the speakers (preferences, health
  conditions, allergies, medication, home, work, hobbies, relatives) as :class:`Fact` records
  ``speaker -[attribute]-> object`` over the attributes of the fact inventory
  (``models/fact_inventory.json``, :class:`memoryd.reader.Slots`), as the reader reads them;
- **A_proc** (:func:`abstract_rules`): reusable if/then rules, habits and procedures as
  :class:`Rule` records.

Both send one prompt whose answer is constrained by a JSON schema (:func:`sem_schema`,
:data:`PROC_SCHEMA`: enums for closed sets, bounded strings and arrays, so that a tiny model can
fill them in). Each item names the episode it comes from by its number in the prompt (1-based).
The answer is then normalised: items that do not fit the item schema, name an episode outside
the batch, have an empty or vague object ("it", "that"), copy the prompt's worked example (tiny
models do) or repeat an earlier item are dropped and logged at debug level; only an answer
without the expected list raises LLMOutputError.

The operators are pure: the caller journals the records they return, so rebuilding the stores
from the journal never calls the LLM again. Records have ``origin=Origin.LLM`` and a heuristic
importance (``build.importance``).

Ids are hashes of the source episode and the record's content, never of the answer's order::

    fact: memory_id("fact", "asem:<episode id>", "fact", "<attribute>|<object entity id>|<negated>")
    rule: memory_id("rule", "aproc:<episode id>", "rule", "<conditions> => <actions>")
    node: memory_id("rn", <rule id>, "rule_node", <ord>)

(a rule's conditions and actions lower-cased, each list joined by " ; "). The same batch and
answer give the same ids, and the same fact found again for the same episode (a retried batch)
keeps its id. A fact or rule stated in several episodes of the batch is kept once, for the first
item naming it: a fact lists the other episodes' turns in ``sources``, a rule counts them in
``support``.

The answers are long for a small model: one that fills every array and string to its bound takes
about 500 tokens (A_sem) and 800 tokens (A_proc) with Gemma's tokenizer, on top of a prompt of up
to 850 tokens, so the LLM's ``max_tokens`` must allow that, not just the router's short labels.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from memoryd.errors import LLMOutputError
from memoryd.llm import LLM, Prompt, schema_problem
from memoryd.memory.build import importance, memory_id
from memoryd.memory.extract import entity_id
from memoryd.models import (
    OTHERWISE,
    Entity,
    Episode,
    Fact,
    Header,
    Origin,
    Rule,
    RuleNode,
    RuleNodeKind,
)
from memoryd.reader import Slots

__all__ = [
    "CONFIDENCE",
    "MAX_BATCH",
    "MAX_EPISODE_CHARS",
    "PROC_SCHEMA",
    "abstract_facts",
    "abstract_rules",
    "proc_prompt",
    "sem_prompt",
    "sem_schema",
]

log = logging.getLogger(__name__)

# Most episodes per call, and the longest episode text put into a prompt: the local model's
# context is 2048 tokens, shared by the instructions, the batch and the answer.
MAX_BATCH = 6
MAX_EPISODE_CHARS = 300
# Longest record text and rule title kept (the episode text, resp. "<condition> → <action>").
MAX_TEXT_CHARS = 200
MAX_TITLE_CHARS = 80
# Small models give words more reliably than numbers: confidence word → Fact.confidence.
CONFIDENCE: dict[str, float] = {"low": 0.5, "medium": 0.7, "high": 0.9}
# The else-branch of a rule: its BRANCH node's text and the ``when`` of its nodes.

# Objects that name nothing by themselves (compared in lower case, outer punctuation removed).
VAGUE_OBJECTS = frozenset(
    "it that this these those them they he she him her his hers its me i you we us one "
    "something someone somebody anything anyone everything nothing stuff thing things there "
    "here none n/a na null unknown user speaker".split()
)
_LEADING_IF = re.compile(r"^(?:if|when|whenever)\b\s*", re.IGNORECASE)
_LEADING_THEN = re.compile(r"^(?:and )?then\b\s*", re.IGNORECASE)
_OUTER_PUNCTUATION = " \t.,;:!?\"'`"


def _string(max_length: int, min_length: int = 1) -> dict[str, Any]:
    return {"type": "string", "minLength": min_length, "maxLength": max_length}


def _strings(max_length: int, min_items: int, max_items: int) -> dict[str, Any]:
    return {
        "type": "array",
        "items": _string(max_length),
        "minItems": min_items,
        "maxItems": max_items,
    }


def _answer_schema(key: str, item: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {key: {"type": "array", "items": item, "maxItems": max_items}},
        "required": [key],
        "additionalProperties": False,
    }


def _item_schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# The episode number is an enum, not an integer range: llama.cpp's grammar enforces enums but
# ignores minimum/maximum, and one bad number must not fail the whole answer's validation.
_EPISODE = {"enum": list(range(1, MAX_BATCH + 1))}


def _fact_item(attributes: Sequence[str]) -> dict[str, Any]:
    return _item_schema(
        {
            "episode": _EPISODE,
            "attribute": {"enum": list(attributes)},
            "object": _string(60),
            "negated": {"type": "boolean"},
            "confidence": {"enum": list(CONFIDENCE)},
        }
    )


_RULE_ITEM = _item_schema(
    {
        "episode": _EPISODE,
        "conditions": _strings(80, 1, 3),
        "actions": _strings(80, 1, 4),
        "otherwise": _strings(80, 0, 3),
        "tags": _strings(20, 0, 3),
    }
)


def sem_schema(slots: Slots) -> dict[str, Any]:
    """The A_sem answer's schema: each fact's attribute one of the inventory's."""
    return _answer_schema("facts", _fact_item(slots.inventory.names), 8)


PROC_SCHEMA: dict[str, Any] = _answer_schema("rules", _RULE_ITEM, 4)

# Each prompt ends with one worked example. A small model sometimes copies it into its answer
# for an unrelated batch, so an item repeating it is dropped unless its episode says the same.
_EXAMPLE_DATE = "2023-04-02"
_SEM_EXAMPLE_LINE = "Ana: My brother Luis and I live in Porto now."
_SEM_EXAMPLE: dict[str, Any] = {
    "facts": [
        {"episode": 1, "attribute": "home_city", "object": "Porto", "negated": False,
         "confidence": "high"},
        {"episode": 1, "attribute": "sibling", "object": "Luis", "negated": False,
         "confidence": "high"},
    ]
}  # fmt: skip
_PROC_EXAMPLE_LINE = "Ana: When it rains I take the bus to work, otherwise I cycle."
_PROC_EXAMPLE: dict[str, Any] = {
    "rules": [
        {"episode": 1, "conditions": ["it rains"], "actions": ["take the bus to work"],
         "otherwise": ["cycle to work"], "tags": ["commute"]},
    ]
}  # fmt: skip
_SEM_EXAMPLE_OBJECTS = frozenset(f["object"].lower() for f in _SEM_EXAMPLE["facts"])
_PROC_EXAMPLE_PHRASES = frozenset(
    t.lower() for r in _PROC_EXAMPLE["rules"] for t in r["conditions"] + r["actions"]
)

_SEM_SYSTEM = """\
Below are numbered lines from a person's chat history. List the lasting facts they give about \
the speaker: likes and dislikes, preferences, illnesses and diagnoses, allergies, medicines \
taken, where they live, their job and employer, hobbies, their relatives and partner. A fact \
may be said outright or be plain from the line.
Leave out one-time events, plans, "what if" talk, questions, and anything about other people \
except who the speaker's relatives are.
Fields: "episode" is the line number. "attribute" is one of: {attributes}. "object" is the \
value: the thing, place or person, in a few words. "negated" is true when the line denies the \
fact ("I don't eat meat" is diet meat, negated).
Reply with a JSON object only; with no lasting fact, reply {{"facts": []}}.

Example:
[1] {date} {line}
{example}"""

_PROC_SYSTEM = f"""\
Below are numbered lines from a person's chat history. List the rules the speaker follows or \
asks to be followed again and again: habits, routines, "if this, then do that", steps of a task.
Leave out one-time events, single plans and questions.
Fields: "episode" is the line number. "conditions" say when the rule applies. "actions" are \
what to do, in order. "otherwise" is what to do when the conditions do not hold, often \
nothing: []. "tags" are up to three one-word topics.
Reply with a JSON object only; with no rule, reply {{"rules": []}}.

Example:
[1] {_EXAMPLE_DATE} {_PROC_EXAMPLE_LINE}
{json.dumps(_PROC_EXAMPLE)}"""


def sem_prompt(episodes: Sequence[Episode], slots: Slots) -> Prompt:
    """The A_sem prompt for a batch of 1..MAX_BATCH episodes (answer: :func:`sem_schema`)."""
    system = _SEM_SYSTEM.format(
        attributes=", ".join(slots.inventory.names),
        date=_EXAMPLE_DATE,
        line=_SEM_EXAMPLE_LINE,
        example=json.dumps(_SEM_EXAMPLE),
    )
    return Prompt(system=system, user=_batch_text(episodes))


def proc_prompt(episodes: Sequence[Episode]) -> Prompt:
    """The A_proc prompt for a batch of 1..MAX_BATCH episodes (answer: :data:`PROC_SCHEMA`)."""
    return Prompt(system=_PROC_SYSTEM, user=_batch_text(episodes))


def abstract_facts(
    llm: LLM, episodes: Sequence[Episode], slots: Slots, *, timeout: float | None
) -> list[Fact]:
    """A_sem: the lasting facts ``llm`` finds in ``episodes`` (see the module docstring).

    An empty batch gives [] without a call. Raises ValueError for more than MAX_BATCH episodes,
    ``LLMError`` from the call, and LLMOutputError if the answer has no ``facts`` list.
    """
    if not episodes:
        return []
    schema = sem_schema(slots)
    answer = llm.generate_json(sem_prompt(episodes, slots), schema, timeout=timeout)
    item_schema = schema["properties"]["facts"]["items"]
    facts: dict[tuple[str, str, str, bool], Fact] = {}
    for item in _items(llm.name, answer, "facts"):
        episode = _episode_of(item, item_schema, episodes, "A_sem")
        fact = None if episode is None else _fact(item, episode, slots)
        if fact is None:
            continue
        key = (fact.subject, fact.relation, fact.object.id, fact.negated)
        known = facts.setdefault(key, fact)
        if known is not fact and fact.turn_id not in known.sources:
            known.sources.append(fact.turn_id)
    for fact in facts.values():
        fact.header = Header(importance=importance(fact))
    return list(facts.values())


def abstract_rules(llm: LLM, episodes: Sequence[Episode], *, timeout: float | None) -> list[Rule]:
    """A_proc: the rules ``llm`` finds in ``episodes``.

    Node layout (``ord`` 0..n in this order; ``when`` None unless stated)::

        CONDITION × len(conditions)   the conditions, in the answer's order
        SEQUENCE  "then"
        ACTION    × len(actions)      the actions, in order
        BRANCH    "otherwise", when="otherwise"    } only when the answer's
        ACTION    × len(otherwise), when="otherwise" } "otherwise" is non-empty

    That is build.py's layout (the graph store hangs the BRANCH node off the SEQUENCE node and
    chains its actions after it). Conditions lose a leading "if"/"when", actions a leading
    "then". An empty batch gives [] without a call; errors as :func:`abstract_facts`.
    """
    if not episodes:
        return []
    answer = llm.generate_json(proc_prompt(episodes), PROC_SCHEMA, timeout=timeout)
    rules: dict[str, Rule] = {}
    for item in _items(llm.name, answer, "rules"):
        episode = _episode_of(item, _RULE_ITEM, episodes, "A_proc")
        found = None if episode is None else _rule(item, episode)
        if found is None:
            continue
        key, rule = found
        known = rules.setdefault(key, rule)
        if known is not rule:
            known.support += 1
    for rule in rules.values():
        rule.header = Header(importance=importance(rule))
    return list(rules.values())


# ------------------------------------------------------------------------------------ helpers


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _batch_text(episodes: Sequence[Episode]) -> str:
    if not 1 <= len(episodes) <= MAX_BATCH:
        raise ValueError(f"a batch has 1 to {MAX_BATCH} episodes, not {len(episodes)}")
    lines = [
        f"[{n}] {e.ts.date().isoformat()} {e.speaker or 'User'}: "
        f"{_shorten(e.text, MAX_EPISODE_CHARS)}"
        for n, e in enumerate(episodes, start=1)
    ]
    return "\n".join(lines)


def _items(backend: str, answer: Any, key: str) -> list[Any]:
    """The answer's list of items; LLMOutputError if there is none."""
    items = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(items, list):
        raise LLMOutputError(backend, f"no {key!r} list", json.dumps(answer))
    return items


def _echoes(texts: list[str], example: frozenset[str], episode: Episode) -> bool:
    """Whether one of ``texts`` comes from the prompt's example rather than from ``episode``."""
    said = " ".join(episode.text.lower().split())
    return any(t.lower() in example and t.lower() not in said for t in texts)


def _drop(operator: str, item: Any, reason: str) -> None:
    log.debug("%s: dropped %r: %s", operator, item, reason)


def _episode_of(
    item: Any, schema: dict[str, Any], episodes: Sequence[Episode], operator: str
) -> Episode | None:
    """The episode an item comes from, or None (logged) if the item is malformed or names none."""
    problem = schema_problem(item, schema)
    if problem is not None:
        _drop(operator, item, problem)
        return None
    number = int(item["episode"])  # the enum also admits 1.0
    if number > len(episodes):
        _drop(operator, item, f"the batch has {len(episodes)} episodes")
        return None
    return episodes[number - 1]


def _fact(item: dict[str, Any], episode: Episode, slots: Slots) -> Fact | None:
    name = " ".join(item["object"].split()).strip(_OUTER_PUNCTUATION)
    if not name or name.lower() in VAGUE_OBJECTS:
        _drop("A_sem", item, "vague object")
        return None
    if _echoes([name], _SEM_EXAMPLE_OBJECTS, episode):
        _drop("A_sem", item, "repeats the prompt's example")
        return None
    relation = item["attribute"]
    object_type = slots.value_type(relation)
    entity = Entity(entity_id(name, object_type), name, object_type)
    negated = bool(item["negated"])
    return Fact(
        id=memory_id("fact", f"asem:{episode.id}", "fact", f"{relation}|{entity.id}|{negated}"),
        turn_id=episode.turn_id,
        relation=relation,
        object=entity,
        text=_shorten(episode.text, MAX_TEXT_CHARS),
        subject=episode.speaker or "user",
        confidence=CONFIDENCE[item["confidence"]],
        valid_from=episode.ts,
        negated=negated,
        sources=[episode.turn_id],
        origin=Origin.LLM,
        label=slots.label(relation, negated),
    )


def _clean(texts: list[str], leading: re.Pattern[str]) -> list[str]:
    cleaned = (leading.sub("", " ".join(t.split())).strip(_OUTER_PUNCTUATION) for t in texts)
    return [t for t in cleaned if t]


def _rule(item: dict[str, Any], episode: Episode) -> tuple[str, Rule] | None:
    """The rule of an item and its content key (lower-case conditions => actions)."""
    conditions = _clean(item["conditions"], _LEADING_IF)
    actions = _clean(item["actions"], _LEADING_THEN)
    if not conditions or not actions:
        _drop("A_proc", item, "no condition or no action")
        return None
    if _echoes(conditions + actions, _PROC_EXAMPLE_PHRASES, episode):
        _drop("A_proc", item, "repeats the prompt's example")
        return None
    otherwise = _clean(item["otherwise"], _LEADING_THEN)
    steps: list[tuple[RuleNodeKind, str, str | None]] = [
        *((RuleNodeKind.CONDITION, c, None) for c in conditions),
        (RuleNodeKind.SEQUENCE, "then", None),
        *((RuleNodeKind.ACTION, a, None) for a in actions),
    ]
    if otherwise:
        steps.append((RuleNodeKind.BRANCH, OTHERWISE, OTHERWISE))
        steps += [(RuleNodeKind.ACTION, o, OTHERWISE) for o in otherwise]
    key = f"{' ; '.join(conditions)} => {' ; '.join(actions)}".lower()
    rule_id = memory_id("rule", f"aproc:{episode.id}", "rule", key)
    tags = (" ".join(t.split()).strip(_OUTER_PUNCTUATION).lower() for t in item["tags"])
    return key, Rule(
        id=rule_id,
        turn_id=episode.turn_id,
        title=_shorten(f"{conditions[0]} → {actions[0]}", MAX_TITLE_CHARS),
        text=_shorten(episode.text, MAX_TEXT_CHARS),
        nodes=[
            RuleNode(memory_id("rn", rule_id, "rule_node", j), kind, text, ord=j, when=when)
            for j, (kind, text, when) in enumerate(steps)
        ],
        tags=list(dict.fromkeys(t for t in tags if t)),
        origin=Origin.LLM,
    )
