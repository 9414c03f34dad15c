"""Cheap rule-based extractors: the hot path's only "understanding" of a turn.

:func:`extract` reads one turn with precompiled regular expressions and small vocabularies and
returns an :class:`Extraction`: resolved times, typed entity mentions, first-person facts,
if-then rules, to-dos and completed actions. It is pure, deterministic and fast (well under a
millisecond for a chat turn); it aims at precision over recall, because an LLM pass can add what
it misses later but nobody removes a wrong fact::

    >>> x = extract("I'm allergic to ibuprofen", datetime(2023, 5, 8, tzinfo=UTC))
    >>> [(f.relation, f.object) for f in x.facts]
    [('allergic_to', 'ibuprofen')]

Which records a turn becomes is decided elsewhere (``build.build_memories``, by router label);
this package extracts everything it can find regardless of label, one module per kind of memory:
:mod:`.facts` (with :mod:`.phrases`, what an object is), :mod:`.rules`, :mod:`.tasks` (to-dos
and completions), :mod:`.mentions`, with the vocabularies of :mod:`.names` and :mod:`.health`
and the shared patterns of :mod:`.sentences`. Questions and hypotheticals
("if I were allergic…", "maybe I'm…") yield no facts, to-dos or completions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memoryd.memory.extract.clause_facts import clause_facts
from memoryd.memory.extract.clauses import (
    asks,
    clause_completions,
    clause_rules,
    clause_tasks,
    reports_done,
)
from memoryd.memory.extract.facts import RELATIONS, FactCandidate, Located, sentence_facts
from memoryd.memory.extract.health import is_health_related, related_drug_terms
from memoryd.memory.extract.mentions import EntityMention, entity_mentions
from memoryd.memory.extract.names import canonical_name, entity_id
from memoryd.memory.extract.rules import RuleCandidate, sentence_rules
from memoryd.memory.extract.sentences import split_sentences
from memoryd.memory.extract.tasks import (
    REQUEST_MARK,
    Completion,
    TaskCandidate,
    requested_reminder,
    sentence_completions,
    sentence_tasks,
    when_reminded,
    with_referent,
)
from memoryd.memory.timeparse import TimeMention, find_times

__all__ = [
    "RELATIONS",
    "REQUEST_MARK",
    "Completion",
    "EntityMention",
    "Extraction",
    "FactCandidate",
    "RuleCandidate",
    "TaskCandidate",
    "asks",
    "canonical_name",
    "clause_completions",
    "clause_facts",
    "clause_rules",
    "clause_tasks",
    "entity_id",
    "extract",
    "is_health_related",
    "related_drug_terms",
    "reports_done",
    "with_referent",
]


@dataclass(frozen=True)
class Extraction:
    """Everything found in one text; each list is in text order."""

    times: list[TimeMention]
    entities: list[EntityMention]
    facts: list[FactCandidate]
    rules: list[RuleCandidate]
    tasks: list[TaskCandidate]
    completions: list[Completion]


def extract(text: str, now: datetime) -> Extraction:
    """Run every extractor over ``text``; relative times resolve against ``now``."""
    text = text.replace("\u2019", "'")
    times = find_times(text, now)
    sentences = split_sentences(text)
    facts: list[Located] = []
    rules: list[RuleCandidate] = []
    tasks: list[TaskCandidate] = []
    completions: list[Completion] = []
    for sentence in sentences:
        if sentence.question:
            tasks.extend(requested_reminder(sentence, times, now))
            continue
        local = [t for t in times if sentence.start <= t.start < sentence.end]
        facts.extend(sentence_facts(sentence, local))
        rules.extend(sentence_rules(sentence))
        tasks.extend(sentence_tasks(sentence, local, now))
        completions.extend(sentence_completions(sentence, local, now))
    entities = entity_mentions(text, times, facts, {s.start for s in sentences})
    tasks = when_reminded(tasks, sentences, times, now)
    return Extraction(times, entities, [f for f, _ in facts], rules, tasks, completions)
