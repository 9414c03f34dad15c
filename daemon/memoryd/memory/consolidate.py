"""Fold a turn's new records into what the user's memory already holds.

:func:`consolidate` runs on the user's writer, after extraction and before the journal commit,
so its decisions are journaled with the turn and a rebuild replays them without re-deciding::

    "I live in Oslo"  → Fact(lives_in Oslo)
    "I moved to Berlin" → Fact(lives_in Berlin); the Oslo fact's validity closes (valid_to,
                           superseded_by) — it stays in the history, never deleted
    "I took my omeprazole" → the pending task "take omeprazole before dinner" gains a ``done``
                           state instead of a new record

Semantic facts. Only facts with the same subject and relation family are candidates (never a
sweep of the whole graph). In an *exclusive* family (one value at a time: where the user lives,
their job, their employer, a preference per category) a current fact with another object or the
opposite polarity is closed. In any other family only the same object with the opposite polarity
is closed ("I love sushi" → "I don't like sushi anymore"). The same object with the same
polarity reinforces the current fact: its sources and confidence grow, and no new record is kept.
Polarity is the relation's sign (``likes`` +, ``dislikes`` −) flipped by ``negated``.

Working memory. A reported completion ("took aspirin") completes the best-matching open task
when every content word of its object is in the task's title ("take aspirin after lunch"), and
is then dropped; with no open task to complete it stays a ``done`` task: the state "aspirin
taken" bears on later queries.

Procedural memory. A rule with the same conditions and actions as a stored one raises that rule's
support instead of adding a copy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memoryd.models import Effect, Fact, Memory, Rule, State, Task, TaskStatus, Turn
from memoryd.store import Journal
from memoryd.text import content_tokens

__all__ = [
    "EXCLUSIVE_RELATIONS",
    "BatchView",
    "Consolidation",
    "MemoryView",
    "consolidate",
    "family_relations",
    "polarity",
    "reinforce",
]

EXCLUSIVE_RELATIONS = frozenset({"lives_in", "works_as", "works_at", "prefers"})
"""Relations (before any ``:qualifier``) that hold one value at a time."""
OPPOSITES: dict[str, str] = {"likes": "dislikes", "dislikes": "likes"}
NEGATIVE_RELATIONS = frozenset({"dislikes"})
REINFORCE_STEP = 0.1
MAX_CONFIDENCE = 0.99


class MemoryView(Protocol):
    """What consolidation may read of the stored memory (the journal plus this batch)."""

    def current_facts(self, subject: str, relations: Sequence[str]) -> list[Fact]: ...

    def open_tasks(self) -> list[Task]: ...

    def rules_titled(self, title: str) -> list[Rule]: ...


@dataclass
class Consolidation:
    """The turn's records as they will be stored, the stored records they change, and what
    each change was (its :class:`Effect`, listed in the turn's receipt)."""

    memories: list[Memory]
    updates: list[Memory] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)

    def update(self, record: Memory, effect: str, by: str) -> None:
        self.updates = [m for m in self.updates if m.id != record.id] + [record]
        self.effects.append(Effect(record.id, effect, by))


class BatchView:
    """The journal as consolidation sees it while a batch is being prepared: records created or
    changed by earlier turns of the batch (``staged``) win over the stored ones. The records of
    ``exclude_turn`` are left out (a re-routed turn must not consolidate against itself)."""

    def __init__(self, journal: Journal, exclude_turn: str | None = None) -> None:
        self.journal = journal
        self.exclude_turn = exclude_turn
        self._staged: dict[str, Memory] = {}

    def stage(self, records: Sequence[Memory]) -> None:
        self._staged.update((m.id, m) for m in records)

    def _merged(self, stored: Sequence[Memory], kind: type) -> list[Memory]:
        merged = {m.id: self._staged.get(m.id, m) for m in stored}
        merged.update((k, m) for k, m in self._staged.items() if isinstance(m, kind))
        return [m for m in merged.values() if m.turn_id != self.exclude_turn]

    def current_facts(self, subject: str, relations: Sequence[str]) -> list[Fact]:
        stored = self.journal.current_facts(subject, relations)
        return [
            f
            for f in self._merged(stored, Fact)
            if isinstance(f, Fact)
            and f.subject == subject
            and f.relation in relations
            and f.valid_to is None
        ]

    def open_tasks(self) -> list[Task]:
        stored = self.journal.open_tasks()
        return [
            t
            for t in self._merged(stored, Task)
            if isinstance(t, Task) and t.status is TaskStatus.PENDING
        ]

    def rules_titled(self, title: str) -> list[Rule]:
        stored = self.journal.rules_titled(title)
        return [r for r in self._merged(stored, Rule) if isinstance(r, Rule) and r.title == title]


def base_relation(relation: str) -> str:
    return relation.split(":", 1)[0]


def family_relations(relation: str) -> list[str]:
    """The relations whose facts can contradict a ``relation`` fact (itself included)."""
    base, _, qualifier = relation.partition(":")
    opposite = OPPOSITES.get(base)
    if opposite is None:
        return [relation]
    suffix = f":{qualifier}" if qualifier else ""
    return sorted({relation, opposite + suffix})


def polarity(fact: Fact) -> bool:
    """True for an affirmative fact ("likes X", "allergic to X"), False for a negative one."""
    return (base_relation(fact.relation) in NEGATIVE_RELATIONS) == fact.negated


def reinforce(old: Fact, new: Fact) -> Fact:
    """``old`` stated again by ``new``: one more source, a little more confidence."""
    sources = list(dict.fromkeys([*(old.sources or [old.turn_id]), *new.sources]))
    confidence = min(MAX_CONFIDENCE, max(old.confidence, new.confidence) + REINFORCE_STEP)
    return dataclasses.replace(old, sources=sources, confidence=round(confidence, 3))


def consolidate(turn: Turn | None, memories: Sequence[Memory], view: MemoryView) -> Consolidation:
    """Decide what ``memories`` (the records built from ``turn``, or derived by an abstraction
    pass when ``turn`` is None) change in ``view``."""
    out = Consolidation(memories=[])
    for memory in memories:
        if isinstance(memory, Fact) and _fold_fact(memory, view, out):
            continue
        if isinstance(memory, Task) and turn and _fold_completion(memory, turn, view, out):
            continue
        if isinstance(memory, Rule) and _fold_rule(memory, view, out):
            continue
        out.memories.append(memory)
    return out


def _fold_fact(fact: Fact, view: MemoryView, out: Consolidation) -> bool:
    """Close what ``fact`` contradicts; True when it only restates a current fact."""
    exclusive = base_relation(fact.relation) in EXCLUSIVE_RELATIONS
    restated = False
    for old in view.current_facts(fact.subject, family_relations(fact.relation)):
        same_object = old.object.id == fact.object.id
        if same_object and polarity(old) == polarity(fact):
            out.update(reinforce(old, fact), "reinforced", fact.turn_id)
            restated = True
        elif same_object or exclusive:
            closed = dataclasses.replace(old, valid_to=fact.valid_from, superseded_by=fact.id)
            out.update(closed, "superseded", fact.id)
    return restated


def _fold_completion(task: Task, turn: Turn, view: MemoryView, out: Consolidation) -> bool:
    """Complete the open task ``task`` reports done; True when one was found."""
    if task.status is not TaskStatus.DONE or len(task.states) != 1:
        return False
    target = best_open_task(task.title, view.open_tasks())
    if target is None:
        return False
    done = State(
        id=task.states[0].id,
        status=TaskStatus.DONE,
        ts=task.states[0].ts,
        note=f"reported done: {turn.text[:120]}",
        turn_id=turn.turn_id,
    )
    out.update(dataclasses.replace(target, states=[*target.states, done]), "completed", task.id)
    return True


def best_open_task(action: str, tasks: Sequence[Task]) -> Task | None:
    """The open task whose title holds every content word of ``action``'s object (the words
    after its verb); the one with the fewest extra words, then the earliest due, wins."""
    words = content_words(action)
    wanted = set(words[1:]) or set(words)
    matches = [t for t in tasks if wanted and wanted <= set(content_words(t.title))]
    if not matches:
        return None
    return min(
        matches,
        key=lambda t: (
            len(content_words(t.title)),
            t.due is None,
            t.due.timestamp() if t.due else 0.0,
        ),
    )


def content_words(text: str) -> list[str]:
    """Content tokens with a plain plural folded ("pills" → "pill"), split on hyphens."""
    return [_fold_plural(t) for t in content_tokens(text.replace("-", " "))]


def _fold_plural(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _fold_rule(rule: Rule, view: MemoryView, out: Consolidation) -> bool:
    """Raise the support of a stored rule with the same conditions and actions."""
    key = _rule_key(rule)
    for old in view.rules_titled(rule.title):
        if _rule_key(old) == key:
            out.update(dataclasses.replace(old, support=old.support + 1), "supported", rule.id)
            return True
    return False


def _rule_key(rule: Rule) -> tuple[frozenset[str], ...]:
    """The content words of the conditions, the main actions and each branch (sorted by case)."""

    def words(texts: list[str]) -> frozenset[str]:
        return frozenset(w for t in texts for w in content_words(t))

    branches = [frozenset({case}) | words(acts) for case, acts in sorted(rule.branches.items())]
    return words(rule.conditions), words(rule.actions), *branches
