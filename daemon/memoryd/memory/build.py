"""Turn one routed turn and its extraction into typed memory records.

The router's labels pick the record types; the extraction fills them::

    turn.labels == (Label.SEMANTIC,), text "I'm allergic to ibuprofen"
    → [Fact(relation="allergic_to", object=Entity(name="ibuprofen", type=OBJECT), ...)]

- a turn labelled only ``fragmented`` becomes nothing (it stays in the journal) unless it is a
  chat turn with more than ``KEEP_FRAGMENT_WORDS`` content words, when it keeps an Episode;
  next to another label ``fragmented`` is ignored, and a turn with no label is treated as
  episodic;
- ``episodic`` gives one :class:`Episode`; ``procedural`` one :class:`Rule` per rule candidate;
  ``working`` one :class:`Task` per to-do (user and log turns: an assistant's "reminder set"
  confirms one) and one per reported completion or cancellation (matching it to an open task
  is the working-memory store's job);
- facts come from the fact reader (:mod:`memoryd.reader`), whatever the label: each fact a user
  or log turn states about now (not a question, a hypothetical, a plan, someone else's opinion
  or a past period) is one :class:`Fact`, an ending stored already closed; an assistant's turn
  states none (its "I" is not the user);
- the type follows the label: when a label's patterns find nothing, the clause readers
  (:mod:`memoryd.memory.extract.clauses`) build the rule or task from the clause
  (``parse: clause``) or keep the sentence (``parse: generic``); such a record keeps the turn's
  Episode beside it (it may say less than the turn, and the timeline stays whole), a
  ``semantic`` label with no fact keeps the Episode, and a label that still yields nothing
  (an assistant's "Will do!") yields an Episode, so every kept turn has at least one
  searchable record, and no turn has more than one Episode;
- strong evidence adds its label to the router's (:func:`evidence_labels`): a health fact
  (allergy, condition, medication) is kept as semantic; a health to-do ("take omeprazole 30
  min before dinner"), a reported health action ("I took aspirin") and a user's explicit report
  that something is done ("done, cancelled the broadband", "that one's done") and a reminder
  asked for with its time ("remind me on June 28 to…") as working; a health rule ("if I take an
  NSAID with aspirin, check the bleeding risk") as procedural; whatever the classifier said,
  because forgetting them can hurt the user. The turn's journaled labels stay the router's.

A fact about the speaker has the turn's speaker as subject when the client names one
(two-person logs such as LoCoMo), else "user"; a fact about someone or something else has them
(:func:`memoryd.reader.subject_name`: "my sister Aoife" → "Aoife").

Ids are a hash of (turn id, kind, index): rebuilding from the journal recreates the same ids.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC

from memoryd.memory.consolidate import REPORT_ONLY
from memoryd.memory.extract import (
    REQUEST_MARK,
    Completion,
    Extraction,
    RuleCandidate,
    TaskCandidate,
    asks,
    clause_completions,
    clause_rules,
    clause_tasks,
    entity_id,
    is_health_related,
    reports_done,
    split_sentences,
    with_referent,
)
from memoryd.models import (
    Entity,
    EntityType,
    Episode,
    Fact,
    Header,
    Label,
    Memory,
    MemoryType,
    Mention,
    Parse,
    Role,
    Rule,
    RuleNode,
    RuleNodeKind,
    State,
    Task,
    TaskStatus,
    Turn,
    index_text,
    memory_type,
)
from memoryd.reader import READ_KINDS, ReadFact, Slots, subject_name
from memoryd.text import content_tokens

__all__ = [
    "HEALTH_ATTRIBUTES",
    "build_memories",
    "build_reports",
    "evidence_labels",
    "fact_values",
    "importance",
    "memory_id",
]

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

KEEP_FRAGMENT_WORDS = 4
"""A fragmented chat turn with more content words than this still keeps its Episode: the router
may call a chatty reaction noise ("Wow, love that painting! Did you make it?"), and a dropped
turn costs more than a noisy one kept (docs/decisions.md#router-fragment-word-limit). A log
line called noise ("sync complete") is dropped whatever its length."""

REPORT_WORDS = 16
"""The longest report line read from a turn the router did not call working
(:func:`build_reports`); a working turn's reports are shorter (``clauses.MAX_REPORT_WORDS``),
but a report that must share two words with an open task may say more ("posted the virgin hub
back at the post office")."""

WHOLE_PARSES = frozenset({Parse.PATTERN, Parse.READER})
"""A record read whole (a fact the reader read, a rule or task a pattern read) needs no Episode
beside it for its label; one read from the clause or kept as the sentence does (and a turn
whose facts do not hold all it says keeps its Episode: :func:`_facts_hold`)."""
WORD_STEM = 4
"""Letters two words share to count as one in :func:`_facts_hold` ("live" and "lives" of a
fact's "lives in: Lisbon")."""
HEALTH_ATTRIBUTES = frozenset({"allergy", "condition", "medication"})
"""Attributes whose facts are kept as semantic whatever the router said, and make the health
profile of a health query."""

_FIRST_PERSON = re.compile(r"(?<![\w'])(?:I|I'm|I've|my|me|mine)(?![\w'])", re.IGNORECASE)
_ROLE_RANK = {"subject": 0, "object": 1, "mention": 2}


def memory_id(prefix: str, turn_id: str, kind: str, index: int | str) -> str:
    """A deterministic id such as ``fact_1a2b…`` for the ``index``-th ``kind`` of a turn."""
    digest = hashlib.sha1(f"{turn_id}\x1f{kind}\x1f{index}".encode()).hexdigest()
    return f"{prefix}_{digest[:16]}"


def evidence_labels(turn: Turn, extraction: Extraction, facts: Sequence[ReadFact]) -> set[Label]:
    """Labels the extraction and the reader prove on their own (see the module docstring)."""
    labels = set()
    if turn.role is not Role.ASSISTANT and any(
        f.attribute in HEALTH_ATTRIBUTES and f.kind in READ_KINDS for f in facts
    ):
        labels.add(Label.SEMANTIC)
    if any(is_health_related(c.action) for c in extraction.completions) or any(
        is_health_related(t.text) for t in extraction.tasks
    ):
        labels.add(Label.WORKING)
    if turn.role is not Role.ASSISTANT and (
        reports_done(turn.text)
        or any(t.due and REQUEST_MARK.search(t.text) for t in extraction.tasks)
    ):
        labels.add(Label.WORKING)
    if any(is_health_related(r.text) for r in extraction.rules):
        labels.add(Label.PROCEDURAL)
    return labels


def build_memories(
    turn: Turn, extraction: Extraction, facts: Sequence[ReadFact], slots: Slots
) -> list[Memory]:
    """The typed records for one turn, Episode first; each carries its importance header.
    ``facts`` are what the reader read of the turn."""
    evidence = evidence_labels(turn, extraction, facts)
    labels = (set(turn.labels) | evidence) - {Label.FRAGMENTED}
    stated = _facts(turn, facts, slots)
    if not labels and Label.FRAGMENTED in turn.labels:
        if turn.role is Role.LOG or len(content_tokens(turn.text)) <= KEEP_FRAGMENT_WORDS:
            return _with_importance(stated)
        episode = _episode(turn, extraction)  # "Wow, love that painting! Did you make it?"
        return _with_importance([episode, *stated])
    done = _completions(turn, extraction, labels)
    by_label: dict[Label, list[Memory]] = {
        Label.SEMANTIC: stated,
        Label.PROCEDURAL: _rules(turn, _rule_candidates(turn, extraction, labels)),
        Label.WORKING: _tasks(turn, _task_candidates(turn, extraction, labels, done), done),
    }
    typed = [  # facts come whatever the label: the reader decides what a turn states
        m
        for label, found in by_label.items()
        if label in labels or label is Label.SEMANTIC
        for m in found
    ]
    wants_episode = (
        not labels
        or Label.EPISODIC in labels
        or any(not by_label[label] for label in labels - {Label.EPISODIC})
        or any(getattr(m, "parse", Parse.PATTERN) not in WHOLE_PARSES for m in typed)
        or not _facts_hold(turn.text, typed)
    )
    records: list[Memory] = [_episode(turn, extraction)] if wants_episode else []
    return _with_importance(records + typed)


def _facts_hold(text: str, typed: Sequence[Memory]) -> bool:
    """Whether the turn's records hold all it says, when the reader read facts of it: each
    content word of ``text`` is in the text one record is found by (a fact: its subject and
    statement, :func:`memoryd.models.index_text`). The rest of a turn that says more than its
    facts ("I've got stuff with sentimental value, like my hand-painted bowl. A friend made it
    for my 18th birthday …" read as no more than a friend's name) stays findable in its
    Episode."""
    if not any(getattr(m, "parse", None) is Parse.READER for m in typed):
        return True
    held = {w[:WORD_STEM] for m in typed for w in content_tokens(index_text(m))}
    return all(w[:WORD_STEM] in held for w in content_tokens(text))


def _with_importance(records: list[Memory]) -> list[Memory]:
    for record in records:
        record.header = Header(importance=importance(record))
    return records


def fact_values(facts: Sequence[ReadFact], slots: Slots) -> list[tuple[str, EntityType, int]]:
    """The reader's values as typed mentions for :func:`memoryd.memory.extract.extract`."""
    return [(f.value, slots.value_type(f.attribute), f.start) for f in facts]


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
        event_time=extraction.times[0].value.astimezone(UTC) if extraction.times else None,
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


def _rule_candidates(turn: Turn, extraction: Extraction, labels: set[Label]) -> list[RuleCandidate]:
    """The pattern rules; for a procedural turn with none, the clause reading (an assistant's
    reply only when it has a trigger or steps: "Will do!" is no rule)."""
    if extraction.rules or Label.PROCEDURAL not in labels:
        return extraction.rules
    found = clause_rules(turn.text)
    if turn.role is Role.ASSISTANT:
        return [r for r in found if r.parse is not Parse.GENERIC]
    return found


def _task_candidates(
    turn: Turn, extraction: Extraction, labels: set[Label], done: list[Completion]
) -> list[TaskCandidate]:
    """The pattern to-dos; for a working turn with none, the clause reading, unless the turn
    reports something ``done`` (its completions, :func:`_completions`) and asks for nothing
    ("sent the thank-yous. remind me to get the case study done" asks for one, "review done.
    need to collect it tomorrow at 4" too). An
    assistant's reply opens no task ("Reminder set for 5 pm" confirms the user's); its
    completions and cancellations count."""
    if turn.role is Role.ASSISTANT:
        return []
    if extraction.tasks or Label.WORKING not in labels:
        return extraction.tasks
    if done and not asks(turn.text, extraction.times, turn.local_ts):
        return []
    return clause_tasks(turn.text, extraction.times, turn.local_ts)


def _facts(turn: Turn, facts: Sequence[ReadFact], slots: Slots) -> list[Memory]:
    """One Fact per fact the reader found that states something about now, unless the
    assistant said it. An ending ("gave up the allotment") is stored already closed, at the
    turn's time: it closes what it names (:mod:`memoryd.memory.consolidate`) and stays in the
    history."""
    if turn.role is Role.ASSISTANT:
        return []
    out: list[Memory] = []
    for i, f in enumerate(f for f in facts if f.kind in READ_KINDS):
        value_type = slots.value_type(f.attribute)
        out.append(
            Fact(
                id=memory_id("fact", turn.turn_id, "fact", i),
                turn_id=turn.turn_id,
                relation=f.attribute,
                object=Entity(entity_id(f.value, value_type), f.value, value_type),
                text=sentence_of(turn.text, f.start, f.end),
                subject=(turn.speaker or "user") if f.subject is None else subject_name(f.subject),
                confidence=round(f.confidence, 3),
                valid_from=turn.ts,
                valid_to=turn.ts if f.kind == "end" else None,
                negated=f.negated,
                sources=[turn.turn_id],
                parse=Parse.READER,
                kind=f.kind,
                old=f.old,
                label=slots.label(f.attribute, f.negated),
            )
        )
    return out


def sentence_of(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` that holds characters ``[start, end)`` (the fact's source)."""
    for sentence in split_sentences(text):
        if sentence.start <= start < sentence.end:
            return sentence.text.strip()
    return text.strip()


def _rules(turn: Turn, candidates: list[RuleCandidate]) -> list[Memory]:
    return [
        Rule(
            id=memory_id("rule", turn.turn_id, "rule", i),
            turn_id=turn.turn_id,
            title=c.title,
            text=c.text,
            # "otherwise": the else-branch's ``when``, as abstract.OTHERWISE (A_proc) has it
            nodes=_rule_nodes(turn.turn_id, i, c.conditions, c.actions, {"otherwise": c.otherwise}),
            tags=list(c.tags),
            parse=c.parse,
        )
        for i, c in enumerate(candidates)
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


def _completions(turn: Turn, extraction: Extraction, labels: set[Label]) -> list[Completion]:
    """The pattern completions; for a working turn with no to-do and none, the clause reading
    of a report ("done, cancelled the parking")."""
    if extraction.completions or extraction.tasks or Label.WORKING not in labels:
        return extraction.completions
    return clause_completions(turn.text, extraction.times, turn.local_ts)


def build_reports(turn: Turn, extraction: Extraction, facts: Sequence[ReadFact]) -> list[Memory]:
    """What a user's turn the router did not call working reports done or called off
    ("posted the virgin hub back", "TAX RETURN FILED", "no need to order one"), as completions
    that only update: each completes the open task it names and is otherwise dropped
    (:data:`memoryd.memory.consolidate.REPORT_ONLY`), so a story told in the past tense never
    becomes a to-do of its own. Empty for other turns: :func:`build_memories` keeps theirs."""
    labels = set(turn.labels) | evidence_labels(turn, extraction, facts)
    if turn.role is not Role.USER or Label.WORKING in labels or labels == {Label.FRAGMENTED}:
        return []
    done = extraction.completions or clause_completions(
        turn.text, extraction.times, turn.local_ts, report_words=REPORT_WORDS
    )
    return _tasks(turn, [], done, note=REPORT_ONLY)


def _tasks(
    turn: Turn,
    candidates: list[TaskCandidate],
    completions: list[Completion],
    note: str | None = None,
) -> list[Memory]:
    """Open to-dos (pending at the turn's time; a title that only points at its thing gets the
    clauses that name it, :func:`with_referent`) and reported completions (done, or
    cancelled, at their time; their state's note is ``note`` when given)."""
    tasks: list[Memory] = []
    for i, c in enumerate(candidates):
        state = State(
            memory_id("st", turn.turn_id, "task_state", i),
            TaskStatus.PENDING,
            turn.ts,
            note="created",
            turn_id=turn.turn_id,
        )
        task_id = memory_id("task", turn.turn_id, "task", i)
        due = None if c.due is None else c.due.astimezone(UTC)
        title = with_referent(c.title, turn.text)
        tasks.append(
            Task(task_id, turn.turn_id, title, c.text, due=due, states=[state], parse=c.parse)
        )
    for i, done in enumerate(completions):
        state = State(
            memory_id("st", turn.turn_id, "completion_state", i),
            done.status,
            done.ts.astimezone(UTC),
            note=note or f"reported {done.status.value}",
            turn_id=turn.turn_id,
        )
        task_id = memory_id("task", turn.turn_id, "completion", i)
        tasks.append(
            Task(task_id, turn.turn_id, done.action, done.text, states=[state], parse=done.parse)
        )
    return tasks
