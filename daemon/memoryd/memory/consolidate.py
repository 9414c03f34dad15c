"""Fold a turn's new records into what the user's memory already holds.

:func:`consolidate` runs on the user's writer, after extraction and before the journal commit,
so its decisions are journaled with the turn and a rebuild replays them without re-deciding::

    "I live in Oslo"  → Fact(lives_in Oslo)
    "I moved to Berlin" → Fact(lives_in Berlin); the Oslo fact's validity closes (valid_to,
                           superseded_by) — it stays in the history, never deleted
    "I took my omeprazole" → the pending task "take omeprazole before dinner" gains a ``done``
                           state instead of a new record ("cancel the dentist" a
                           ``cancelled`` one)

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
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memoryd.models import Effect, Fact, Memory, Parse, Rule, State, Task, TaskStatus, Turn
from memoryd.store import Journal
from memoryd.text import content_tokens

__all__ = [
    "EXCLUSIVE_RELATIONS",
    "REPORT_ONLY",
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
BROAD_RELATIONS = frozenset({"is", "has", "uses", "states", "does", "about", "needs", "gets"})
"""Relations that hold many unrelated values: an update replaces only values of its kind."""
OPPOSITES: dict[str, str] = {"likes": "dislikes", "dislikes": "likes"}
NEGATIVE_RELATIONS = frozenset({"dislikes"})
REPORT_ONLY = "reported, for the open task it names"
"""The note of a completion read from a turn the router did not call working: it completes
the open task it names and is dropped when it names none (never stored with this note)."""
REINFORCE_STEP = 0.1
MAX_CONFIDENCE = 0.99


class MemoryView(Protocol):
    """What consolidation may read of the stored memory (the journal plus this batch)."""

    def current_facts(self, subject: str, relations: Sequence[str]) -> list[Fact]: ...

    def current_facts_of(self, subject: str) -> list[Fact]: ...

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
        if isinstance(memory, Task) and _report_only(memory):
            continue  # it names no open task
        if isinstance(memory, Rule) and _fold_rule(memory, view, out):
            continue
        out.memories.append(memory)
    return out


def _fold_fact(fact: Fact, view: MemoryView, out: Consolidation) -> bool:
    """Close what ``fact`` contradicts; True when it only restates a current fact.

    Besides the rules of the module docstring: a negation ("I don't drink coffee") closes the
    current affirmative facts of its relation whose value shares a content word with its own
    ("three coffees a day"); a state stated as over ("I used to live in Leeds") closes the
    current one it names and is stored closed. An update ("switched to oat milk", "not doing
    16:8 anymore") closes every current value of its relation (a negated one only those it
    shares a word with: "I don't play squash anymore" leaves tennis), and in any relation the
    current values of the same kind: the same head word ("whole milk" for "oat milk"), or, for
    a negated update, any shared content word; and the values its sentence names outside its
    own, in its own relation too ("the lido closed, I'm swimming at the leisure centre
    instead" closes "swims at the lido"; "switched from BT to Community Fibre" closes "uses
    BT for the bills")."""
    base = base_relation(fact.relation)
    renews = fact.update and not fact.negated  # "I don't play squash anymore" ends squash only
    exclusive = base in EXCLUSIVE_RELATIONS or (renews and base not in BROAD_RELATIONS)
    ended = fact.valid_to is not None
    restated = False
    words = set(content_words(fact.object.name))
    family = view.current_facts(fact.subject, family_relations(fact.relation))
    for old in family:
        same_object = old.object.id == fact.object.id
        overlaps = bool(words & set(content_words(old.object.name)))
        if same_object and polarity(old) == polarity(fact) and not ended:
            out.update(reinforce(old, fact), "reinforced", fact.turn_id)
            restated = True
        elif (
            same_object
            or (exclusive and not ended)
            or ((ended or polarity(old) != polarity(fact)) and overlaps)
            or (fact.update and not ended and _named_by_update(old, fact, words))
        ):
            _close(old, fact, out)
    if fact.update and not restated:
        seen = {f.id for f in family}
        for old in view.current_facts_of(fact.subject):
            if old.id in seen or old.id == fact.id:
                continue
            if _same_kind(old, fact, words) or _named_by_update(old, fact, words):
                _close(old, fact, out)
    return restated


def _close(old: Fact, new: Fact, out: Consolidation) -> None:
    closed = dataclasses.replace(old, valid_to=new.valid_from, superseded_by=new.id)
    out.update(closed, "superseded", new.id)


def _named_by_update(old: Fact, new: Fact, words: set[str]) -> bool:
    """Whether the sentence of an update ``new`` names the value of ``old`` it replaces, a
    word of it that is not in the new value ("the cetirizine made me drowsy, switched to
    fexofenadine", "cut the thursday class, doing saturday instead")."""
    if not polarity(old):
        return False
    named = set(content_words(old.object.name)) & set(content_words(new.text))
    return bool(named - words)


def _same_kind(old: Fact, new: Fact, words: set[str]) -> bool:
    """Whether an update ``new`` replaces ``old`` of another relation (see :func:`_fold_fact`)."""
    if not polarity(old):
        return False
    kinds = [r.partition(":") for r in (old.relation, new.relation)]
    if all(base == "attribute" for base, _, _ in kinds):
        heads = [thing.split()[-1] if thing.split() else "" for _, _, thing in kinds]
        if heads[0] and heads[0] == heads[1]:
            return True  # "my CFA Level I exam is on May 20" → "rescheduled the CFA exam"
        things = [{_stem(w) for w in thing.lower().split()} for _, _, thing in kinds]
        if things[0] & things[1] and all(_AMOUNT.match(f.object.name) for f in (old, new)):
            return True  # "grocery category is $650/mo" → "bumped groceries to $800"
    doings = [_doing(base, thing) for base, _, thing in kinds]
    if doings[0] and doings[0] == doings[1]:
        return True  # "we meet first monday of the month" → "meetings are first thursday now"
    theirs = content_words(old.object.name)
    if new.negated:
        return bool(words & set(theirs))
    ours = content_words(new.object.name)
    return bool(ours and theirs) and ours[-1] == theirs[-1] and set(ours) != set(theirs)


_AMOUNT = re.compile(r"^[£$€¥₹]?\s?\d")


def _doing(base: str, thing: str) -> str:
    """The activity an ``attribute:<thing>`` or a verb's relation is about, one form for both
    ("attribute:meeting" and "meets", "attribute:recording" and "records"); "" for relations
    of the vocabulary ("lives_in", "has")."""
    if base == "attribute":
        word = thing.split()[-1] if thing.split() else ""
    elif "_" not in base and base.endswith("s") and base not in ("has", "is", "does", "uses"):
        word = base[:-1]
    else:
        return ""
    return _stem(word.lower())


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
