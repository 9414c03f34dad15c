"""Rule-based extractors: times, entity mentions, rules, to-dos and completed actions.

:func:`extract` reads one turn with precompiled regular expressions and small vocabularies and
returns an :class:`Extraction`: resolved times, typed entity mentions, if-then rules, to-dos and
completed actions. It is pure, deterministic and fast. Facts are not read here: the learned fact
reader (:mod:`memoryd.reader`) reads them, and its values come in as ``values`` so that the
mentions type them as it did::

    >>> x = extract("remind me to take omeprazole at 8", datetime(2023, 5, 8, tzinfo=UTC))
    >>> [t.title for t in x.tasks]
    ['take omeprazole']

Which records a turn becomes is decided elsewhere (``build.build_memories``, by router label);
this package extracts everything it can find regardless of label, one module per kind of memory:
:mod:`.rules`, :mod:`.tasks` (to-dos and completions), :mod:`.clauses` (rules and tasks read
from the clause when no pattern does), :mod:`.mentions`, with the vocabularies of :mod:`.names`
and :mod:`.health` and the shared patterns of :mod:`.sentences`. Questions and hypotheticals
("if I were…", "maybe I'll…") yield no to-dos or completions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memoryd.memory.extract.clauses import (
    asks,
    clause_completions,
    clause_rules,
    clause_tasks,
    reports_done,
)
from memoryd.memory.extract.health import is_health_related, related_drug_terms
from memoryd.memory.extract.mentions import EntityMention, KnownValue, entity_mentions
from memoryd.memory.extract.names import canonical_name, entity_id, entity_ids
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
    "REQUEST_MARK",
    "Completion",
    "EntityMention",
    "Extraction",
    "KnownValue",
    "RuleCandidate",
    "TaskCandidate",
    "asks",
    "canonical_name",
    "clause_completions",
    "clause_rules",
    "clause_tasks",
    "entity_id",
    "entity_ids",
    "extract",
    "is_health_related",
    "related_drug_terms",
    "reports_done",
    "split_sentences",
    "with_referent",
]


@dataclass(frozen=True)
class Extraction:
    """Everything found in one text; each list is in text order."""

    times: list[TimeMention]
    entities: list[EntityMention]
    rules: list[RuleCandidate]
    tasks: list[TaskCandidate]
    completions: list[Completion]


def extract(text: str, now: datetime, values: Sequence[KnownValue] = ()) -> Extraction:
    """Run every extractor over ``text``; relative times resolve against ``now``. ``values``
    are the reader's fact values, typed mentions first."""
    text = text.replace("\u2019", "'")
    times = find_times(text, now)
    sentences = split_sentences(text)
    rules: list[RuleCandidate] = []
    tasks: list[TaskCandidate] = []
    completions: list[Completion] = []
    for sentence in sentences:
        if sentence.question:
            tasks.extend(requested_reminder(sentence, times, now))
            continue
        local = [t for t in times if sentence.start <= t.start < sentence.end]
        rules.extend(sentence_rules(sentence))
        tasks.extend(sentence_tasks(sentence, local, now))
        completions.extend(sentence_completions(sentence, local, now))
    entities = entity_mentions(text, times, values, {s.start for s in sentences})
    tasks = when_reminded(tasks, sentences, times, now)
    return Extraction(times, entities, rules, tasks, completions)
