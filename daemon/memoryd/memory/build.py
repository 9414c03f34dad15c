"""Turn one routed turn and its extraction into typed memory records.

The router's labels pick the record types; the extraction fills them::

    turn.labels == (Label.SEMANTIC,), text "I'm allergic to ibuprofen"
    → [Fact(relation="allergic_to", object=Entity(name="ibuprofen", type=OBJECT), ...)]

- a turn labelled only ``fragmented`` becomes nothing (it stays in the journal); next to another
  label ``fragmented`` is ignored, and a turn with no label is treated as episodic;
- ``episodic`` gives one :class:`Episode`; ``semantic`` one :class:`Fact` per fact candidate
  (user and log turns only: an assistant's "I" is not the user); ``procedural`` one
  :class:`Rule` per rule candidate; ``working`` one :class:`Task` per to-do and one per reported
  completion (already done; matching it to an open task is the working-memory store's job);
- a label whose extractor found nothing still yields an Episode, so every kept turn has at least
  one searchable record, and no turn has more than one Episode;
- strong extractor evidence adds its label to the router's (:func:`evidence_labels`): a health
  fact (allergy, condition, injury, medication) is kept as semantic, a reported health action
  ("I took aspirin") as working and a health rule ("if I take an NSAID with aspirin, check the
  bleeding risk") as procedural, whatever the classifier said, because forgetting either can
  hurt the user and both patterns are precise. The turn's journaled labels stay the router's.

A fact's subject is the turn's speaker when the client names one (two-person logs such as
LoCoMo), else "user"; a candidate's qualifier joins its relation ("relationship:sister",
"prefers:food", "owns:dog"), so that a later fact with the same relation string replaces it.

Ids are a hash of (turn id, kind, index): rebuilding from the journal recreates the same ids.
"""

from __future__ import annotations

import hashlib
import re

from memoryd.memory.extract import Extraction, entity_id, is_health_related
from memoryd.models import (
    Entity,
    Episode,
    Fact,
    Header,
    Label,
    Memory,
    MemoryType,
    Mention,
    Role,
    Rule,
    RuleNode,
    RuleNodeKind,
    State,
    Task,
    TaskStatus,
    Turn,
    memory_type,
)

__all__ = ["build_memories", "evidence_labels", "importance", "memory_id"]

# importance() = base by type + bonuses − penalty, clamped to [1, 10]. Standing knowledge (facts,
# rules) outranks a passing event; health and safety weigh most because forgetting them can hurt
# the user.
BASE_IMPORTANCE: dict[MemoryType, float] = {
    MemoryType.EPISODIC: 3.0,
    MemoryType.SEMANTIC: 5.0,
    MemoryType.PROCEDURAL: 5.5,
    MemoryType.WORKING: 4.5,
}
HEALTH_BONUS = 2.5  # mentions a drug, condition, allergy, injury, bleeding, emergency…
FIRST_PERSON_BONUS = 1.0  # about the user ("I", "my", "me")
DUE_BONUS = 1.0  # a task with a due time
SHORT_PENALTY = 1.5  # fewer than SHORT_WORDS words: little to remember
SHORT_WORDS = 5
IMPORTANCE_RANGE = (1.0, 10.0)

EVIDENCE_RELATIONS = frozenset({"allergic_to", "has_condition", "takes_medication"})

_FIRST_PERSON = re.compile(r"(?<![\w'])(?:I|I'm|I've|my|me|mine)(?![\w'])", re.IGNORECASE)
_ROLE_RANK = {"subject": 0, "object": 1, "mention": 2}


def memory_id(prefix: str, turn_id: str, kind: str, index: int | str) -> str:
    """A deterministic id such as ``fact_1a2b…`` for the ``index``-th ``kind`` of a turn."""
    digest = hashlib.sha1(f"{turn_id}\x1f{kind}\x1f{index}".encode()).hexdigest()
    return f"{prefix}_{digest[:16]}"


def evidence_labels(turn: Turn, extraction: Extraction) -> set[Label]:
    """Labels the extraction proves on its own (see the module docstring)."""
    labels = set()
    if turn.role is not Role.ASSISTANT and any(
        f.relation in EVIDENCE_RELATIONS for f in extraction.facts
    ):
        labels.add(Label.SEMANTIC)
    if any(is_health_related(c.action) for c in extraction.completions):
        labels.add(Label.WORKING)
    if any(is_health_related(r.text) for r in extraction.rules):
        labels.add(Label.PROCEDURAL)
    return labels


def build_memories(turn: Turn, extraction: Extraction) -> list[Memory]:
    """The typed records for one turn, Episode first; each carries its importance header."""
    evidence = evidence_labels(turn, extraction)
    labels = (set(turn.labels) | evidence) - {Label.FRAGMENTED}
    if not labels and Label.FRAGMENTED in turn.labels:
        return []
    by_label: dict[Label, list[Memory]] = {
        Label.SEMANTIC: _facts(turn, extraction),
        Label.PROCEDURAL: _rules(turn, extraction),
        Label.WORKING: _tasks(turn, extraction),
    }
    typed = [m for label, found in by_label.items() if label in labels for m in found]
    wants_episode = (
        not labels
        or Label.EPISODIC in labels
        or any(not by_label[label] for label in labels - {Label.EPISODIC})
    )
    records: list[Memory] = [_episode(turn, extraction)] if wants_episode else []
    records += typed
    for record in records:
        record.header = Header(importance=importance(record))
    return records


def importance(memory: Memory) -> float:
    """Heuristic importance in [1, 10] for a record with no LLM score (see BASE_IMPORTANCE)."""
    text = _text_of(memory)
    score = BASE_IMPORTANCE[memory_type(memory)]
    if is_health_related(text):
        score += HEALTH_BONUS
    if _FIRST_PERSON.search(text):
        score += FIRST_PERSON_BONUS
    if isinstance(memory, Task) and memory.due is not None:
        score += DUE_BONUS
    if len(text.split()) < SHORT_WORDS:
        score -= SHORT_PENALTY
    low, high = IMPORTANCE_RANGE
    return round(min(high, max(low, score)), 2)


def _text_of(memory: Memory) -> str:
    if isinstance(memory, Fact):
        return f"{memory.text} {memory.object.name}"
    if isinstance(memory, Task):
        return memory.text or memory.title
    return memory.text


def _episode(turn: Turn, extraction: Extraction) -> Episode:
    return Episode(
        id=memory_id("ep", turn.turn_id, "episode", 0),
        turn_id=turn.turn_id,
        session_id=turn.session_id,
        text=turn.text,
        ts=turn.ts,
        speaker=turn.speaker,
        mentions=_mentions(extraction),
        event_time=extraction.times[0].value if extraction.times else None,
    )


def _mentions(extraction: Extraction) -> list[Mention]:
    """One mention per entity, in text order, keeping its strongest role."""
    best: dict[str, Mention] = {}
    for e in extraction.entities:
        entity = Entity(entity_id(e.name, e.type), e.name, e.type)
        known = best.get(entity.id)
        if known is None:
            best[entity.id] = Mention(entity, e.role)
        elif _ROLE_RANK[e.role] < _ROLE_RANK[known.role]:
            best[entity.id] = Mention(known.entity, e.role)
    return list(best.values())


def _facts(turn: Turn, extraction: Extraction) -> list[Memory]:
    """First-person facts, unless the assistant said them about itself."""
    if turn.role is Role.ASSISTANT:
        return []
    facts: list[Memory] = []
    for i, c in enumerate(extraction.facts):
        relation = f"{c.relation}:{c.qualifier}" if c.qualifier else c.relation
        facts.append(
            Fact(
                id=memory_id("fact", turn.turn_id, "fact", i),
                turn_id=turn.turn_id,
                relation=relation,
                object=Entity(entity_id(c.object, c.object_type), c.object, c.object_type),
                text=c.text,
                subject=turn.speaker or "user",
                confidence=c.confidence,
                valid_from=turn.ts,
                negated=c.negated,
                sources=[turn.turn_id],
            )
        )
    return facts


def _rules(turn: Turn, extraction: Extraction) -> list[Memory]:
    return [
        Rule(
            id=memory_id("rule", turn.turn_id, "rule", i),
            turn_id=turn.turn_id,
            title=c.title,
            text=c.text,
            # "otherwise": the else-branch's ``when``, as abstract.OTHERWISE (A_proc) has it
            nodes=_rule_nodes(turn.turn_id, i, c.conditions, c.actions, {"otherwise": c.otherwise}),
            tags=list(c.tags),
        )
        for i, c in enumerate(extraction.rules)
    ]


def _rule_nodes(
    turn_id: str,
    rule_index: int,
    conditions: list[str],
    actions: list[str],
    branches: dict[str, list[str]] | None = None,
) -> list[RuleNode]:
    """The one rule layout (A_proc's too), ``ord`` 0…n in this order, ``when`` None unless
    stated::

        CONDITION × len(conditions)
        SEQUENCE  "then"
        ACTION    × len(actions)                 the main line
        per branch with actions, in ``branches`` order:
        BRANCH    <when>, when=<when>
        ACTION    × len(branch), when=<when>

    A branch without actions gets no node. Ids hash (turn id, rule index, ord).
    """
    steps: list[tuple[RuleNodeKind, str, str | None]] = [
        *((RuleNodeKind.CONDITION, c, None) for c in conditions),
        (RuleNodeKind.SEQUENCE, "then", None),
        *((RuleNodeKind.ACTION, a, None) for a in actions),
    ]
    for when, branch in (branches or {}).items():
        if branch:
            steps.append((RuleNodeKind.BRANCH, when, when))
            steps += [(RuleNodeKind.ACTION, a, when) for a in branch]
    return [
        RuleNode(
            memory_id("rn", turn_id, "rule_node", f"{rule_index}:{j}"), kind, text, ord=j, when=when
        )
        for j, (kind, text, when) in enumerate(steps)
    ]


def _tasks(turn: Turn, extraction: Extraction) -> list[Memory]:
    """Open to-dos (pending at the turn's time) and reported completions (done at their time)."""
    tasks: list[Memory] = []
    for i, c in enumerate(extraction.tasks):
        state = State(
            memory_id("st", turn.turn_id, "task_state", i),
            TaskStatus.PENDING,
            turn.ts,
            note="created",
            turn_id=turn.turn_id,
        )
        task_id = memory_id("task", turn.turn_id, "task", i)
        tasks.append(Task(task_id, turn.turn_id, c.title, c.text, due=c.due, states=[state]))
    for i, done in enumerate(extraction.completions):
        state = State(
            memory_id("st", turn.turn_id, "completion_state", i),
            TaskStatus.DONE,
            done.ts,
            note="reported done",
            turn_id=turn.turn_id,
        )
        task_id = memory_id("task", turn.turn_id, "completion", i)
        tasks.append(Task(task_id, turn.turn_id, done.action, done.text, states=[state]))
    return tasks
