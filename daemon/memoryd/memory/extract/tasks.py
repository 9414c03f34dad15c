"""Working memory of one sentence: to-dos and reminders with their due time, and actions
reported as done."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from memoryd.memory.extract.health import is_health_related
from memoryd.memory.extract.sentences import (
    CONDITIONAL,
    FUNCTION_WORDS,
    IMPERATIVES,
    LEADING_DET,
    LIST_SPLIT,
    NON_OBJECTS,
    PRONOUN_I,
    TRAILING_FILLER,
    Sentence,
    cut_times,
    opens_clause,
    rx,
    shorten,
)
from memoryd.memory.timeparse import TimeMention

__all__ = [
    "CLAUSE_WORDS",
    "COMPLETION_VERBS",
    "NOT_TASKS",
    "TAKE_IDIOMS",
    "TITLE_TAIL",
    "Completion",
    "TaskCandidate",
    "requested_reminder",
    "sentence_completions",
    "sentence_tasks",
]


@dataclass(frozen=True)
class TaskCandidate:
    """Something to do; ``title`` has its time expressions removed, which give ``due``."""

    title: str
    due: datetime | None
    text: str


@dataclass(frozen=True)
class Completion:
    """An action the speaker reports as done; ``action`` is in base form ("take aspirin")."""

    action: str
    ts: datetime
    text: str


# Past-tense verbs that report a finished action, with the base form used in Completion.action.
COMPLETION_VERBS: dict[str, str] = {
    "took": "take", "did": "do", "finished": "finish", "completed": "complete",
    "called": "call", "bought": "buy", "paid": "pay", "sent": "send", "cleaned": "clean",
    "fed": "feed", "walked": "walk", "watered": "water", "picked up": "pick up",
    "booked": "book", "submitted": "submit", "emailed": "email", "texted": "text",
    "returned": "return", "renewed": "renew", "refilled": "refill", "ordered": "order",
    "scheduled": "schedule", "cancelled": "cancel", "canceled": "cancel",
}  # fmt: skip


# After "I need to / have to / should", these start a figure of speech, not a to-do.
NOT_TASKS = frozenset("say admit tell confess agree thank be have ask go get know".split())


# A clause that follows a listed object rather than continuing the list.
CLAUSE_WORDS = frozenset(
    "i i'm i've we he she they it it's you is are was were be been now then".split()
)


# Tasks.
_T_REMIND = rx(
    r"^\s*(?:(?:hey|hi|ok|okay|also|and|so|oh)\b[^,]{0,20},?\s*)?(?:please\s+)?"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:remind\s+me|set\s+(?:a|an)\s+(?:reminder|alarm)|reminder)\s*(?::\s*|"
    r"(?:\s+(?:at|on|by|in)\s+[^,]+?\s+)?\s*(?:to|that|about|for)\s+)(?P<what>.+)$"
)


_T_REQUEST = rx(r"^\s*(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?remind\b")


_T_NEED = rx(
    rf"{PRONOUN_I}(?:\s+(?:really|still|also|definitely|just))?(?:\s+(?:need\s+to|have\s+to|"
    r"have\s+got\s+to|gotta|must|(?P<should>should))|'ve\s+got\s+to)\s+(?P<what>.+)$"
)


_T_FORGET = rx(
    r"(?:\b(?:don't|do\s+not)\s+(?:let\s+me\s+)?forget\s+to|^\s*(?:please\s+)?"
    r"(?:remember|make\s+sure)\s+to)\s+(?P<what>.+)$"
)


_T_TODO = rx(r"^\s*(?:to-?do|task)\s*:?\s+(?P<what>.+)$")


_T_LOG = rx(
    r"^\s*(?:log\s*:\s*)?(?P<what>(?:[\w-]+\s+)?(?:alarm|reminder|timer|appointment|meeting|"
    r"event|alert))\s+(?:set|scheduled|booked|created|added)\s+(?:for|at|on)\b"
)


_T_IMPERATIVE = rx(rf"^\s*(?:please\s+)?(?P<what>(?:{'|'.join(IMPERATIVES)})\b.+)$")


_T_APPOINTMENT = rx(
    r"\b(?:I\s+have|I've\s+got|there's|my)\s+(?:an?\s+)?(?P<what>(?:[\w'-]+\s+){0,3}?"
    r"(?:appointment|meeting|interview|exam|flight|deadline|check-?up|surgery))\b"
)


_T_SCHEDULE_CUE = rx(
    r"\b(?:every|daily|nightly|before|after|with)\s+(?:\w+\s+)?(?:breakfast|lunch|dinner|"
    r"meals?|bed|bedtime|morning|evening|night|day)\b"
)


# Where a to-do's title ends: a comma before another clause, or a dash.
_TITLE_END = rx(r"\s*,\s*(?:and\s+)?(?:since|because|so|but|which|it|it's|I)\b|\s+[-–—]\s+")


TITLE_TAIL = rx(r"(?:\s+(?:at|on|by|in|for|please|tomorrow|today))+\s*$")


# Completions.
_C_VERB = rx(
    rf"(?:{PRONOUN_I}|^\s*)(?:\s+(?:already|just|finally|also))*\s*"
    rf"(?P<verb>{'|'.join(sorted(COMPLETION_VERBS, key=len, reverse=True))})\s+(?P<what>.+)$"
)


_C_DONE_WITH = rx(r"\b(?:done|finished)\s+with\s+(?P<what>.+)$")


_C_DONE_SUFFIX = rx(
    r"^\s*(?P<what>(?:the\s+|my\s+)?[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,3}?)\s+(?:is\s+|are\s+)?"
    r"(?:done|completed|finished)\s*$"
)


_CLAUSE_END = rx(r"\s*,?\s+(?:but|because|so|since|while|which|when)\b|\s+[-–—]\s+")


# "Took a bit of work", "took a while", "took care": idioms, not a completed "take".
TAKE_IDIOMS = frozenset(
    "bit while ages forever time place part care trial look chance first step turns "
    "advantage note breath deep".split()
)


_NOT_DONE = frozenset("well nicely good great job all let when what you your".split())


_PAST_VERB = rx(r"^(?:\w+ed|went|had|got|came|saw|felt|was|were|made|ate|ran|spent)\b")


def sentence_tasks(
    sentence: Sentence, times: list[TimeMention], now: datetime
) -> list[TaskCandidate]:
    """To-dos, reminders and scheduled constraints of one sentence (at most one)."""
    s = sentence.text
    upcoming = any(t.value.date() >= now.date() for t in times)
    for pattern in (_T_REMIND, _T_FORGET, _T_TODO, _T_NEED):
        m = pattern.search(s)
        if m is None or (pattern is _T_NEED and not _is_need_task(s, m, upcoming)):
            continue
        return _task(sentence, m.start("what"), m.end("what"), times, now)
    m = _T_LOG.match(s)
    if m and times:
        return _task(sentence, m.start("what"), m.end("what"), times, now, due_anywhere=True)
    m = _T_IMPERATIVE.match(s)
    if m and (upcoming or _T_SCHEDULE_CUE.search(s) or (not times and is_health_related(s))):
        return _task(sentence, m.start("what"), m.end("what"), times, now)
    m = _T_APPOINTMENT.search(s)
    if m and upcoming:
        return _task(sentence, m.start("what"), m.end("what"), times, now, due_anywhere=True)
    return []


def requested_reminder(
    sentence: Sentence, times: list[TimeMention], now: datetime
) -> list[TaskCandidate]:
    """ "Can you remind me to call mom at 5?" asks for a reminder although it is a question."""
    m = _T_REMIND.search(sentence.text) if _T_REQUEST.match(sentence.text) else None
    local = [t for t in times if sentence.start <= t.start < sentence.end]
    return _task(sentence, m.start("what"), m.end("what"), local, now) if m else []


def _is_need_task(s: str, m: re.Match[str], upcoming: bool) -> bool:
    """ "I need to call mom" is a to-do; "I have to say…", "I should have…" are not, and "I
    should…" is one only with a time to do it by."""
    first = re.match(r"[\w']*", m["what"].lower())[0]  # type: ignore[index]  # [\w']* always matches
    if (m["should"] and not upcoming) or not opens_clause(s, m.start()):
        return False
    return first not in NOT_TASKS and not CONDITIONAL.search(s, 0, m.start())


def _task(
    sentence: Sentence,
    start: int,
    end: int,
    times: list[TimeMention],
    now: datetime,
    *,
    due_anywhere: bool = False,
) -> list[TaskCandidate]:
    """A task titled by ``sentence.text[start:end]`` minus its time expressions."""
    lo, hi = sentence.start + start, sentence.start + end
    inside = [t for t in times if lo <= t.start and t.end <= hi]
    title = _TITLE_END.split(cut_times(sentence.text[start:end], lo, inside))[0]
    title = TITLE_TAIL.sub("", title).strip(" ,;:-")
    if all(w in FUNCTION_WORDS for w in title.lower().split()):
        return []
    due_from = times if due_anywhere else inside or times
    due = _due(due_from[0], now) if due_from else None
    return [TaskCandidate(shorten(title, 120), due, sentence.text)]


def _due(mention: TimeMention, now: datetime) -> datetime:
    """A bare clock time already past today means the next day ("alarm set for 7:00" at 22:00)."""
    value = mention.value
    if mention.granularity == "minute" and value < now and value.date() == now.date():
        return value + timedelta(days=1)
    return value


def sentence_completions(
    sentence: Sentence, times: list[TimeMention], now: datetime
) -> list[Completion]:
    """Actions reported as done; skipped when the sentence is about more than a day ago."""
    s = sentence.text
    if times and times[0].value.date() < now.date() - timedelta(days=1):
        return []
    ts = _completion_ts(times, now)
    out: list[Completion] = []
    for m in _C_VERB.finditer(s):
        if CONDITIONAL.search(s, 0, m.start()) or not opens_clause(s, m.start()):
            continue
        what = _strip_times(sentence, m.start("what"), m.end("what"), times)
        out.extend(Completion(a, ts, s) for a in _actions(COMPLETION_VERBS[_verb(m)], what))
    if not out:
        done = _C_DONE_WITH.search(s) or _C_DONE_SUFFIX.match(s)
        if done and not CONDITIONAL.search(s, 0, done.start()):
            what = _strip_times(sentence, done.start("what"), done.end("what"), times)
            if not _NOT_DONE.intersection(what.lower().split()):
                out.extend(Completion(a, ts, s) for a in _actions("finish", what))
    return out


def _completion_ts(times: list[TimeMention], now: datetime) -> datetime:
    """When it was done: the first time mentioned that is not in the future, else ``now``. A
    bare "today" (midnight) says less than ``now`` does, so it gives ``now``."""
    past = next((t for t in times if t.value <= now), None)
    if past is None or (
        past.value.date() == now.date() and past.value.hour == 0 == past.value.minute
    ):
        return now
    return past.value


def _verb(m: re.Match[str]) -> str:
    return " ".join(m["verb"].lower().split())


def _strip_times(sentence: Sentence, start: int, end: int, times: list[TimeMention]) -> str:
    text = cut_times(sentence.text[start:end], sentence.start + start, times)
    return TITLE_TAIL.sub("", TRAILING_FILLER.sub("", text)).strip(" ,;:-")


def _actions(base: str, what: str) -> list[str]:
    """Split "aspirin and my blood-pressure pill" into one action per object. A part led by
    another completion verb starts a new action; the list ends at the first part that is not a
    short object (another clause, a past verb, a pronoun, a preposition)."""
    actions: list[str] = []
    clause = _CLAUSE_END.split(what)[0]
    for part in LIST_SPLIT.split(clause):
        verb = next((v for v in COMPLETION_VERBS if part.lower().startswith(v + " ")), None)
        if verb:
            base, part = COMPLETION_VERBS[verb], part[len(verb) :].strip()
        obj = LEADING_DET.sub("", TRAILING_FILLER.sub("", part)).strip()
        words = obj.lower().split()
        if (
            not words
            or len(words) > 8
            or words[0] in NON_OBJECTS
            or part.split()[0].lower() in NON_OBJECTS
            or (base == "take" and words[0] in TAKE_IDIOMS)
            or (actions and not verb and CLAUSE_WORDS.intersection(words))
            or _PAST_VERB.match(obj)
        ):
            break
        actions.append(f"{base} {obj}")
    return actions
