"""Fold a turn's new records into what the user's memory already holds.

:func:`consolidate` runs on the user's writer, after extraction and before the journal commit,
so its decisions are journaled with the turn and a rebuild replays them without re-deciding::

    "my line manager is Priya Shah"   → Fact(user, manager, Priya Shah)
    "I'm reporting to Marcus Lee now" → Fact(user, manager, Marcus Lee); the Priya fact's
                                        validity closes (valid_to, superseded_by): it stays in
                                        the history, never deleted
    "I took my omeprazole"            → the pending task "take omeprazole before dinner" gains a
                                        ``done`` state instead of a new record

Semantic facts, by slot: only the current facts with the fact's subject and attribute are
candidates (never a sweep of the graph, and never another subject's facts). The same value with
the same polarity reinforces the current fact (its sources and confidence grow, no new record);
with the other polarity, or stated as over, it closes it. A value the statement names as the one
it replaces (``old``: "switched from BT to Sky") is closed whatever its attribute. Otherwise, in a
slot that holds one value at a time (the inventory's ``one``: manager, home city, bank) a new
affirmative value replaces the old affirmative ones, unless the statement adds ("a second
bank account as well") or the reader is unsure of the attribute (below :data:`SURE`): then both
stay current and the older is marked ``doubted_by`` the newer (a reply says it may be out of
date). In a slot of many values (allergies, pets, languages) a new value adds; a sure ``change``
that names no old value replaces the slot's value when there is one, and marks the values as
doubted when there are several. An ending closes only the value it names (or names in part:
"cancelled virgin" ends "Virgin Media"). A value stated again (a ``state``, not a ``change``)
after the slot's current fact said it replaced that value ("part-exchanged the corsa for a
Niro", then "dad says I should've kept the corsa") is a mention of the past: stored closed,
superseded by the current fact. A fact the inventory says ends with another's value
(``ends_with``: a dose with its medicine) closes when that value's fact closes and nobody's
current fact still holds it. Facts of an attribute the inventory lacks (``other``) share no
slot: only their own value, or a value named as replaced, touches them. A stored value the turn
names without the reader reading it in its slot ("Lachlan and I split up") is put to the fact
judge (:mod:`memoryd.memory.hearing`): where it hears the value as over, an ending of it folds
like the reader's. A wrong closure is worse than none: nothing is closed on a guess.

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
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from memoryd.models import Effect, Fact, Memory, Parse, Rule, State, Task, TaskStatus, Turn
from memoryd.reader import Slots, normalise, same_thing, subject_name
from memoryd.store import Journal
from memoryd.text import content_tokens

if TYPE_CHECKING:
    from memoryd.memory.hearing import Named

__all__ = [
    "REPORT_ONLY",
    "SURE",
    "BatchView",
    "Consolidation",
    "MemoryView",
    "StagedView",
    "consolidate",
    "reinforce",
]

SURE = 0.6
"""The reader's confidence (the least of its attribute's and its kind's probabilities) at and
above which a new value may close an old one of its slot by itself."""
REPORT_ONLY = "reported, for the open task it names"
"""The note of a completion read from a turn the router did not call working: it completes
the open task it names and is dropped when it names none (never stored with this note)."""
REINFORCE_STEP = 0.1
MAX_CONFIDENCE = 0.99


class MemoryView(Protocol):
    """What consolidation may read of the stored memory (the journal plus this batch)."""

    def current_facts(self, subject: str, relations: Sequence[str]) -> list[Fact]: ...

    def current_facts_of(self, subject: str) -> list[Fact]: ...

    def current_facts_in(self, relation: str) -> list[Fact]: ...

    def current_facts_named(self, entity_ids: Sequence[str]) -> list[Fact]: ...

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
        self._stored_open: list[Task] | None = None

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

    def current_facts_of(self, subject: str) -> list[Fact]:
        stored = self.journal.current_facts_of(subject)
        return [
            f
            for f in self._merged(stored, Fact)
            if isinstance(f, Fact) and f.subject == subject and f.valid_to is None
        ]

    def current_facts_in(self, relation: str) -> list[Fact]:
        """Every subject's current facts of ``relation`` (a few: read only when a value that
        others' facts depend on ends)."""
        stored = [m.memory for m in self.journal.facts(relations=[relation])]
        return [
            f
            for f in self._merged(stored, Fact)
            if isinstance(f, Fact) and f.relation == relation and f.valid_to is None
        ]

    def current_facts_named(self, entity_ids: Sequence[str]) -> list[Fact]:
        """Every subject's current facts whose value is one of the entities (a turn's names)."""
        stored = self.journal.current_facts_named(entity_ids) if entity_ids else []
        wanted = set(entity_ids)
        return [
            f
            for f in self._merged(stored, Fact)
            if isinstance(f, Fact) and f.object.id in wanted and f.valid_to is None
        ]

    def open_tasks(self) -> list[Task]:
        """Read from the journal once per view: every change the batch makes to a task is
        staged, and staged records win."""
        if self._stored_open is None:
            self._stored_open = self.journal.open_tasks()
        stored = self._stored_open
        return [
            t
            for t in self._merged(stored, Task)
            if isinstance(t, Task) and t.status is TaskStatus.PENDING
        ]

    def rules_titled(self, title: str) -> list[Rule]:
        stored = self.journal.rules_titled(title)
        return [r for r in self._merged(stored, Rule) if isinstance(r, Rule) and r.title == title]


class StagedView:
    """Only what was staged, no journal: a reread folds its facts among themselves, as ingest
    would have folded them, without meeting the facts it replaces."""

    def __init__(self) -> None:
        self._facts: dict[str, Fact] = {}

    def stage(self, records: Sequence[Memory]) -> None:
        self._facts.update((m.id, m) for m in records if isinstance(m, Fact))

    def current_facts(self, subject: str, relations: Sequence[str]) -> list[Fact]:
        return [f for f in self.current_facts_of(subject) if f.relation in relations]

    def current_facts_of(self, subject: str) -> list[Fact]:
        return [f for f in self._facts.values() if f.subject == subject and f.valid_to is None]

    def current_facts_in(self, relation: str) -> list[Fact]:
        return [f for f in self._facts.values() if f.relation == relation and f.valid_to is None]

    def current_facts_named(self, entity_ids: Sequence[str]) -> list[Fact]:
        wanted = set(entity_ids)
        return [f for f in self._facts.values() if f.object.id in wanted and f.valid_to is None]

    def open_tasks(self) -> list[Task]:
        return []

    def rules_titled(self, title: str) -> list[Rule]:
        return []


def reinforce(old: Fact, new: Fact) -> Fact:
    """``old`` stated again by ``new``: one more source, a little more confidence."""
    sources = list(dict.fromkeys([*(old.sources or [old.turn_id]), *new.sources]))
    confidence = min(MAX_CONFIDENCE, max(old.confidence, new.confidence) + REINFORCE_STEP)
    return dataclasses.replace(
        old, sources=sources, confidence=round(confidence, 3), doubted_by=None
    )


def consolidate(
    turn: Turn | None,
    memories: Sequence[Memory],
    view: MemoryView,
    slots: Slots,
    named: Named | None = None,
) -> Consolidation:
    """Decide what ``memories`` (the records built from ``turn``, or derived by an abstraction
    pass when ``turn`` is None) change in ``view``; ``slots`` says which attributes hold one
    value at a time; ``named``, the stored values the turn names, ends those the judge hears
    as over (:mod:`memoryd.memory.hearing`)."""
    out = Consolidation(memories=[])
    for memory in memories:
        if isinstance(memory, Fact):
            kept = _fold_fact(memory, view, out, slots)
            if kept is not None:
                out.memories.append(kept)
            continue
        if isinstance(memory, Task) and turn and _fold_completion(memory, turn, view, out):
            continue
        if isinstance(memory, Task) and _report_only(memory):
            continue  # it names no open task
        if isinstance(memory, Rule) and _fold_rule(memory, view, out):
            continue
        out.memories.append(memory)
    if named is not None and turn is not None:
        said = [m for m in [*out.memories, *out.updates] if isinstance(m, Fact)]
        for ending in named.endings(turn, view, said):
            kept = _fold_fact(ending, view, out, slots)
            if kept is not None:
                out.memories.append(kept)
    _end_dependents(view, out, slots)
    return out


def _fold_fact(fact: Fact, view: MemoryView, out: Consolidation, slots: Slots) -> Fact | None:
    """Close or doubt what ``fact`` replaces (see the module docstring); the record to store,
    None when it only restates a current fact."""
    ended = fact.valid_to is not None
    sure = fact.confidence >= SURE
    restated = False
    slot = [old for old in view.current_facts(fact.subject, [fact.relation]) if old.id != fact.id]
    replaced_by = _replaced_by(fact, slot)
    if replaced_by is not None:  # "dad thinks I should've run the corsa into the ground"
        fact = dataclasses.replace(fact, valid_to=fact.valid_from, superseded_by=replaced_by.id)
        ended = True
        slot = []
    swaps = _swap(fact, slot, slots, sure)
    for old in slot:
        if _same_value(old, fact) or (fact.kind == "end" and _ends(fact, old)):
            if old.negated == fact.negated and not ended:
                out.update(reinforce(old, fact), "reinforced", fact.turn_id)
                restated = True
            else:  # "I'm not vegan any more", "actually I do eat fish now"
                _close(old, fact, out)
        elif ended or old.negated or fact.negated or _names_old(fact, old):
            continue  # an ending or a negation touches only the value it names
        elif (slots.single(fact.relation) and fact.kind != "add" and sure) or old in swaps:
            if _before(fact, old):  # a statement of the past, journaled late: history
                fact = dataclasses.replace(fact, valid_to=old.valid_from, superseded_by=old.id)
                ended = True
            else:
                _close(old, fact, out)
        elif slots.known(fact.relation) and (
            fact.kind == "change" or (slots.single(fact.relation) and fact.kind != "add")
        ):
            _doubt(old, fact, out)  # an open attribute's facts are not one slot: left alone
    if fact.old and not ended:
        for old in view.current_facts_of(fact.subject):
            if old.id != fact.id and _names_old(fact, old):
                _close(old, fact, out)
    return None if restated else fact


def _end_dependents(view: MemoryView, out: Consolidation, slots: Slots) -> None:
    """Close the facts about a value that ended in this turn which the inventory says end
    with it: a medicine stopped or replaced takes its dose ("swapped me onto citalopram"
    closes sertraline, and so "Sertraline — dose: 50mg"), unless its holder still has it."""
    for closed in [f for f in out.updates if isinstance(f, Fact) and f.valid_to is not None]:
        dependents = slots.ending_with(closed.relation)
        if not dependents or closed.negated or closed.superseded_by is None:
            continue
        if _still_held(closed, view, out):
            continue
        updated = {u.id for u in out.updates}
        for fact in view.current_facts(subject_name(closed.object.name), list(dependents)):
            if fact.id not in updated:
                _close_at(fact, closed.valid_to, closed.superseded_by, out)


def _still_held(closed: Fact, view: MemoryView, out: Consolidation) -> bool:
    """Whether a current fact of anyone (stored, or new in this turn) still holds ``closed``'s
    value in its attribute: doses are facts of the medicine, not of who takes it, so the
    user's sertraline dose stays while their mum's sertraline is the one that stopped."""
    updated = {u.id for u in out.updates}
    new = [f for f in out.memories if isinstance(f, Fact) and f.relation == closed.relation]
    return any(
        f.id not in updated and f.valid_to is None and not f.negated and _same_value(f, closed)
        for f in [*view.current_facts_in(closed.relation), *new]
    )


def _swap(fact: Fact, slot: list[Fact], slots: Slots, sure: bool) -> list[Fact]:
    """In a slot of many values, the one value a sure ``change`` that names none replaces:
    the slot's only other affirmative value ("switched her to citalopram" with sertraline
    the one medicine on record); with two or more, which one is a guess: none."""
    if not slots.known(fact.relation) or slots.single(fact.relation):
        return []
    if fact.kind != "change" or fact.old or not sure:
        return []
    if fact.negated or fact.valid_to is not None:
        return []
    others = [f for f in slot if not f.negated and not _same_value(f, fact)]
    return others if len(others) == 1 else []


def _same_value(a: Fact, b: Fact) -> bool:
    """One value: one entity (the resolver folds "NYC" into "New York City") or one name
    once case, edge punctuation and a leading article are gone ("the Co-op", "co-op"); not
    a name inside another ("kayak club" is not the "Putney kayak club")."""
    return a.object.id == b.object.id or normalise(a.object.name) == normalise(b.object.name)


def _replaced_by(fact: Fact, slot: list[Fact]) -> Fact | None:
    """The current fact of the slot that says it replaced ``fact``'s value ("part-exchanged
    the corsa for a Kia Niro", its ``old``), when ``fact`` only states that value again (a
    ``state``, not a ``change``): a mention of the value before, not a return to it."""
    if fact.kind != "state" or fact.negated or fact.valid_to is not None:
        return None
    said = [c for c in slot if c.old and not c.negated and not _same_value(c, fact)]
    return next((c for c in said if same_thing(fact.object.name, c.old or "")), None)


def _ends(ending: Fact, old: Fact) -> bool:
    """Whether an ending names ``old``'s value, in part ("cancelled virgin" of "virgin
    media")."""
    return (
        not ending.negated and not old.negated and same_thing(old.object.name, ending.object.name)
    )


def _before(fact: Fact, old: Fact) -> bool:
    return bool(fact.valid_from and old.valid_from and fact.valid_from < old.valid_from)


def _names_old(fact: Fact, old: Fact) -> bool:
    """Whether ``fact`` says it replaces ``old``'s value ("switched from BT to Sky")."""
    return fact.old is not None and not old.negated and same_thing(old.object.name, fact.old)


def _close(old: Fact, new: Fact, out: Consolidation) -> None:
    _close_at(old, new.valid_from, new.id, out)


def _close_at(old: Fact, when: datetime | None, by: str, out: Consolidation) -> None:
    """Close ``old`` at ``when``, superseded by the fact with id ``by``."""
    closed = dataclasses.replace(old, valid_to=when, superseded_by=by)
    out.update(closed, "superseded", by)


def _doubt(old: Fact, new: Fact, out: Consolidation) -> None:
    """Mark ``old`` as possibly replaced by ``new``; both stay current."""
    if old.doubted_by != new.id:
        out.update(dataclasses.replace(old, doubted_by=new.id), "doubted", new.id)


def _report_only(task: Task) -> bool:
    return len(task.states) == 1 and task.states[0].note == REPORT_ONLY


def _fold_completion(task: Task, turn: Turn, view: MemoryView, out: Consolidation) -> bool:
    """Complete the open task ``task`` reports done; True when one was found. A report the
    router did not call working (:data:`REPORT_ONLY`) must share two words with it, one when it
    calls the task off ("don't bother with the shoes")."""
    status = task.status
    if status not in (TaskStatus.DONE, TaskStatus.CANCELLED) or len(task.states) != 1:
        return False
    open_tasks = view.open_tasks()
    target = None if task.parse is Parse.CLAUSE else best_open_task(task.title, open_tasks)
    if target is None and _report_only(task):  # called off in so many words: one word will do
        shared = 1 if status is TaskStatus.CANCELLED else 2
        target = closest_open_task(task.title, open_tasks, min_shared=shared)
    elif target is None:
        target = closest_open_task(task.title, open_tasks, strict=task.parse is not Parse.CLAUSE)
    if target is None:
        return False
    if status is TaskStatus.CANCELLED and content_words(target.title)[:1] == ["cancel"]:
        status = TaskStatus.DONE  # "cancelled Disney+" does the task "cancel Disney+"
    done = State(
        id=task.states[0].id,
        status=status,
        ts=task.states[0].ts,
        note=f"reported {status.value}: {turn.text[:120]}",
        turn_id=turn.turn_id,
    )
    effect = "completed" if status is TaskStatus.DONE else "cancelled"
    out.update(dataclasses.replace(target, states=[*target.states, done]), effect, task.id)
    return True


def best_open_task(action: str, tasks: Sequence[Task]) -> Task | None:
    """The open task whose title holds every content word of ``action``'s object (the words
    after its verb); the one with the fewest extra words, then the earliest due, wins."""
    words = [w for w in content_words(action) if w not in GENERIC_TASK_WORDS]
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


GENERIC_TASK_WORDS = frozenset("reminder alarm task todo to-do thing one".split())
"""Words that name a task without saying which ("cancel the reminder")."""


def closest_open_task(
    report: str, tasks: Sequence[Task], strict: bool = False, min_shared: int = 1
) -> Task | None:
    """The open task a free-form report ("done, cancelled the parking") shares the most
    content words with (at least ``min_shared`` that name the task, not verbs of reporting);
    the earliest due wins a tie. ``strict`` (a completion a pattern read, "renew Mochi's
    insurance" for "renew her pet insurance"): the verbs must agree too, or two words be
    shared."""
    verb = content_words(report)[:1]
    words = set(content_words(report)[1:] if strict else content_words(report))
    words = {_stem(w) for w in words - GENERIC_TASK_WORDS - REPORT_WORDS}
    scored = []
    for t in tasks:
        title = content_words(t.title)
        shared = len(words & {_stem(w) for w in title})
        if shared >= min_shared and (not strict or shared >= 2 or title[:1] == verb):
            scored.append((shared, t))
    if not scored:
        return None
    best = max(n for n, _ in scored)
    return min(
        (t for n, t in scored if n == best),
        key=lambda t: (t.due is None, t.due.timestamp() if t.due else 0.0),
    )


def _stem(word: str) -> str:
    """One form for "mail", "mailing" and "mailed", "file" and "filed", for matching a report
    to its task."""
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            word = word[: -len(suffix)]
            break
    return word.rstrip("e")


REPORT_WORDS = frozenset(
    "done finished completed sorted ticked taken care dealt handled got paid booked sent "
    "bought picked collected submitted renewed cancelled canceled called returned ordered "
    "fixed signed just already finally today yesterday".split()
)
"""Words of a report that say it is done, not what is."""


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
