"""Working memory of one sentence: to-dos and reminders with their due time, and actions
reported as done."""

from __future__ import annotations

import dataclasses
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
    OPENING_FILLER,
    PRONOUN_I,
    TRAILING_FILLER,
    Sentence,
    cut_times,
    opens_clause,
    rx,
    sentences_of,
    shorten,
)
from memoryd.memory.timeparse import TimeMention
from memoryd.models import Parse, TaskStatus
from memoryd.text import content_tokens

__all__ = [
    "CLAUSE_WORDS",
    "COMPLETION_VERBS",
    "NEED_MARK",
    "NOT_TASKS",
    "REQUEST_MARK",
    "TAKE_IDIOMS",
    "TITLE_TAIL",
    "WHEN_WORDS",
    "Completion",
    "TaskCandidate",
    "due_time",
    "need_mark",
    "requested_reminder",
    "sentence_completions",
    "sentence_tasks",
    "with_referent",
]


@dataclass(frozen=True)
class TaskCandidate:
    """Something to do; ``title`` has its time expressions removed, which give ``due``."""

    title: str
    due: datetime | None
    text: str
    parse: Parse = Parse.PATTERN


@dataclass(frozen=True)
class Completion:
    """An action the speaker reports as done (or, ``status`` cancelled, as called off);
    ``action`` is in base form ("take aspirin")."""

    action: str
    ts: datetime
    text: str
    status: TaskStatus = TaskStatus.DONE
    parse: Parse = Parse.PATTERN


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
    r"(?:\b(?:don'?t|do\s+not)\s+(?:let\s+me\s+)?forget\s+to|^\s*(?:please\s+)?"
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
    r"(?:appointment|meeting|interview|exam|flight|deadline|check-?up|surgery)"
    r"(?:\s+with\s+(?:(?:dr|mr|mrs|ms|prof)\.?\s+)?(?-i:[A-Z][\w'-]+)(?:\s+(?-i:[A-Z][\w'-]+))?)?)\b"
)


_T_SCHEDULE_CUE = rx(
    r"\b(?:every|daily|nightly|before|after|with)\s+(?:\w+\s+)?(?:breakfast|lunch|dinner|"
    r"meals?|bed|bedtime|morning|evening|night|day)\b"
)


# Where a to-do's title ends: a comma before another clause, or a dash.
_TITLE_END = rx(r"\s*,\s*(?:and\s+)?(?:since|because|so|but|which|it|it's|I)\b|\s+[-–—]\s+")


TITLE_TAIL = rx(r"(?:\s+(?:at|on|by|in|for|please|tomorrow|today))+\s*$")


# Due times: a clock next to a day, words that keep a time in the past, what a mention names.
_CLOCK = rx(
    r"[\s,]*(?P<at>at\s+|@\s*|from\s+)?(?P<hour>\d{1,2})(?:[:.](?P<minute>\d{2}))?\s*"
    r"(?P<ampm>[ap]\.?m\.?)?(?![\d/])"
)
_COUNTED = rx(r"\s*[a-z]")  # after a bare number: "Saturday, 8 people" counts, it is no time
_EVENING = rx(r"\b(?:tonight|this\s+evening|tomorrow\s+(?:night|evening))\b")
_PAST_WORDS = rx(r"\b(?:last|ago|yesterday|earlier|previous)\b")
_WEEKDAY = rx(r"\b(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\b")
_ORDINAL_DAY = rx(r"\b\d{1,2}(?:st|nd|rd|th)\b")
_MONTH_NAME = rx(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b")

# What cutting the times out of a title leaves behind.
MAX_TITLE_WORDS = 12
_DANGLING = rx(
    r"\s+(?:every|each|by|on|at|from|to|due|until|till|around)(?=\s*(?:$|[,.;:–—-]|and\b|the\s*$))"
    r"|\s+[–—-]+(?=\s*$)|\s+(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)\b\.?"
)
_CLOCK_LEFT = rx(r"\s+(?:at|@)\s+\d{1,2}(?:[:.]\d{2})?\s*(?:[ap]\.?m\.?)?(?=\s|$|[,.;])")
_EMPTY_PARENS = re.compile(r"\(\s*(?:due|at|on|by)?\s*\)")
_LEADING_TIME_WORDS = rx(
    r"^(?:(?:every|each|on|at|by|around)\s+|\d{1,2}(?:[:.]\d{2})?\s*(?:[ap]\.?m\.?)?\s+)+(?:to\s+)?"
)
_ORPHAN_POSSESSIVE = re.compile(r"(?<=\s)'s\b\s*")
_TIDY_TAIL = rx(
    r"(?:\s+(?:at|on|by|in|for|from|until|till|around|before|after|the|a|an|to|and|is|are|was)|"
    r"'s|[\s,]+(?:(?:can|could|will|would)\s+you\s+)?(?:please\s+)?(?:remind|ping|nudge)\s+me"
    r"(?:\s+pl(?:ea)?se?)?)+$"
)

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


# An app's line that closes a task: "todo: done — pay council tax", "To-do: ✔ Call Octopus".
_C_LOG_DONE = rx(
    r"^\s*(?:log\s*:\s*)?(?:[\w .-]{1,24}:\s*)?(?:(?:reminder|todo|to-do|task)\s+)?"
    r"(?:(?:done|completed|finished)\s*[—–:-]|[✔✓✅☑])\s*(?P<what>.{2,120}?)\s*$"
)
_DONE_LEAD = rx(
    r"^\s*(?:(?:all\s+)?done|ok(?:ay)?|yes|yep|right|great|sorted|update)\s*[,:!.—–-]+\s*"
)
# "Remind me on March 1st.": a reminder's time and nothing to do.
_REMIND_ONLY = rx(
    r"^\s*(?:and\s+|so\s+|please\s+)*(?:(?:can|could)\s+you\s+)?(?:remind|ping|nudge|text)\s+me"
    r"(?!.*\b(?:to|that|about|of)\b)[^,;]*$"
)
# Calling a task off: "cancel the dentist", "the book club is off this week".
_C_CANCEL = rx(
    r"^\s*(?:(?:please|ok|okay|so|oh|actually)[,\s]+)*(?:(?:can|could|would)\s+you\s+(?:please\s+)?)?"
    r"(?:cancel|call\s+off|scrap|drop)\s+(?P<what>.+)$"
)
_C_CANCELLED = rx(
    r"^\s*(?P<what>(?:the\s+|my\s+|our\s+)?[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,4}?)\s+(?:is|are|'s|"
    r"has\s+been|have\s+been|was|got)\s+(?:cancelled|canceled|called\s+off|off)\b"
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
    if _C_LOG_DONE.match(s):
        return []  # "todo: done — …" closes a task (a completion), it does not open one
    upcoming = any(t.value.date() >= now.date() for t in times)
    for pattern in (_T_REMIND, _T_FORGET, _T_TODO, _T_NEED):
        m = pattern.search(s)
        if m is None or (pattern is _T_NEED and not _is_need_task(s, m, upcoming)):
            continue
        # "remind me on the 8th to book a table for Saturday": the reminder's time is the due
        before = [t for t in times if t.end <= sentence.start + m.start("what")]
        if pattern is _T_REMIND and before:
            return _task(sentence, m.start("what"), m.end("what"), before, now, due_anywhere=True)
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
    title = tidy_title(TITLE_TAIL.sub("", title))
    if all(w in FUNCTION_WORDS for w in title.lower().split()):
        return []
    due_from = times if due_anywhere else inside or times
    due = due_time(due_from[0], now, _after(sentence, due_from[0])) if due_from else None
    return [TaskCandidate(shorten(title, 120), due, sentence.text)]


def _after(sentence: Sentence, mention: TimeMention) -> str:
    """The sentence's text after ``mention`` ("" when the mention is not in it)."""
    at = mention.end - sentence.start
    return sentence.text[at:] if 0 <= at <= len(sentence.text) else ""


def due_time(mention: TimeMention, now: datetime, after: str = "") -> datetime:
    """When a task is due, from the time mention that names it, in the future.

    A time reader resolves a bare "Thursday" or "the 28th" to the nearest one, which suits a
    story ("on Thursday we went…") but not a to-do: a due time before ``now`` moves forward
    (a weekday by weeks, an ordinal day by months, a day and month by years, a bare clock time
    to the next day) unless the text says it is past ("last", "ago", "yesterday"). A due day
    takes the clock time ``after`` (the text right after the mention) starts with ("Thursday
    at 6", "Thu 18:30"): a bare hour from 1 to 7 is in the evening, as people set appointments.
    """
    value, text_at = mention.value, mention.text.lower()
    evening = _EVENING.search(text_at) is not None
    clock = _CLOCK.match(after) if mention.granularity == "day" or evening else None
    if clock and not (clock["at"] or clock["minute"] or clock["ampm"]):
        clock = None if _COUNTED.match(after, clock.end()) else clock
    if clock:
        hour = _hour(clock)
        hour = hour + 12 if evening and hour < 12 else hour  # "tonight at 9"
        value = value.replace(hour=hour, minute=int(clock["minute"] or 0))
    today = mention.granularity == "day" and not clock and value.date() == now.date()
    if value >= now or _PAST_WORDS.search(text_at) or today:
        return value  # a day without a clock time: today is not over
    if mention.granularity == "minute" and value.date() == now.date():
        return value + timedelta(days=1)
    if _WEEKDAY.search(text_at) and _ORDINAL_DAY.search(text_at):  # "by wed 25th"
        return _next_same_weekday_and_day(value, now)
    if _WEEKDAY.search(text_at):
        return value + timedelta(days=7 * (1 + (now - value).days // 7))
    if _ORDINAL_DAY.search(text_at) and not _MONTH_NAME.search(text_at):
        month = value.month % 12 + 1
        return _shift(value, value.year + (value.month == 12), month)
    if _MONTH_NAME.search(text_at) and mention.granularity == "day":
        return _shift(value, value.year + 1, value.month)
    return value


def _next_same_weekday_and_day(value: datetime, now: datetime) -> datetime:
    """The first date after ``now`` on ``value``'s day of the month and weekday, within two
    years (``value`` itself when there is none)."""
    for months in range(1, 25):
        month = (value.month - 1 + months) % 12 + 1
        year = value.year + (value.month - 1 + months) // 12
        try:
            later = value.replace(year=year, month=month)
        except ValueError:  # no such day in that month
            continue
        if later >= now and later.weekday() == value.weekday():
            return later
    return value


def _hour(clock: re.Match[str]) -> int:
    hour, meridiem = int(clock["hour"]) % 24, (clock["ampm"] or "").lower()
    if meridiem.startswith("p") and hour < 12:
        return hour + 12
    if meridiem.startswith("a") and hour == 12:
        return 0
    return hour + 12 if not meridiem and 1 <= hour <= 7 else hour


def _shift(value: datetime, year: int, month: int) -> datetime:
    try:
        return value.replace(year=year, month=month)
    except ValueError:  # the 31st in a shorter month
        return value.replace(year=year, month=month, day=28)


def sentence_completions(
    sentence: Sentence, times: list[TimeMention], now: datetime
) -> list[Completion]:
    """Actions reported as done; skipped when the sentence is about more than a day ago."""
    s = text = sentence.text
    if times and _before_yesterday(times[0], now):
        return []
    ts = _completion_ts(times, now)
    out: list[Completion] = []
    lead = _DONE_LEAD.match(s)
    if lead:  # "done, cancelled the parking": read what follows the report (same offsets)
        s = " " * lead.end() + s[lead.end() :]
    for m in _C_VERB.finditer(s):
        if CONDITIONAL.search(s, 0, m.start()) or not opens_clause(s, m.start()):
            continue
        what = _strip_times(sentence, m.start("what"), m.end("what"), times)
        base = COMPLETION_VERBS[_verb(m)]
        status = TaskStatus.CANCELLED if base == "cancel" else TaskStatus.DONE
        out.extend(Completion(a, ts, text, status) for a in _actions(base, what))
    cancel = None if out else _C_CANCEL.match(s) or _C_CANCELLED.match(s)
    if cancel and not CONDITIONAL.search(s, 0, cancel.start()):
        what = _strip_times(sentence, cancel.start("what"), cancel.end("what"), times)
        out.extend(Completion(a, ts, text, TaskStatus.CANCELLED) for a in _actions("cancel", what))
    logged = None if out else _C_LOG_DONE.match(s)
    if logged:
        what = _strip_times(sentence, logged.start("what"), logged.end("what"), times)
        if what:
            out.append(Completion(f"do {what}", ts, text))
    if not out:
        done = _C_DONE_WITH.search(s) or _C_DONE_SUFFIX.match(s)
        if done and not CONDITIONAL.search(s, 0, done.start()):
            what = _strip_times(sentence, done.start("what"), done.end("what"), times)
            if not _NOT_DONE.intersection(what.lower().split()):
                out.extend(Completion(a, ts, text) for a in _actions("finish", what))
    return out


def _before_yesterday(mention: TimeMention, now: datetime) -> bool:
    """Whether ``mention`` is more than a day ago; the current year or month ("this year")
    is not."""
    value = mention.value
    if mention.granularity == "year" and value.year == now.year:
        return False
    if mention.granularity == "month" and (value.year, value.month) == (now.year, now.month):
        return False
    return value.date() < now.date() - timedelta(days=1)


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


def tidy_title(title: str) -> str:
    """Drop what cutting the times left behind ("due", "every", "by", a dash, empty brackets),
    quotes and leading determiners; at most ``MAX_TITLE_WORDS`` words."""
    title = _EMPTY_PARENS.sub("", _DANGLING.sub("", _CLOCK_LEFT.sub("", title)))
    title = _ORPHAN_POSSESSIVE.sub("", title)  # "book Saturday's class" without "Saturday"
    title = title.strip(" .,:;'\"-–—")
    title = _LEADING_TIME_WORDS.sub("", LEADING_DET.sub("", title))
    title = re.sub(r"^(?:his|her|their)\s+", "", title, flags=re.IGNORECASE)
    title = _TIDY_TAIL.sub("", title).strip(" .,:;'\"-–—")
    return " ".join(title.split()[:MAX_TITLE_WORDS]).strip(" .,:;'\"-–—")


def when_reminded(
    tasks: list[TaskCandidate], sentences: list[Sentence], times: list[TimeMention], now: datetime
) -> list[TaskCandidate]:
    """A sentence that only says when to be reminded ("Don't let me forget to renew my
    passport. Remind me on March 1st.") gives the task before it its due time."""
    out = list(tasks)
    for sentence in sentences:
        if not out or not _REMIND_ONLY.match(sentence.text):
            continue
        local = [t for t in times if sentence.start <= t.start < sentence.end]
        before = [i for i, t in enumerate(out) if t.text != sentence.text]
        if local and before:
            i = before[-1]
            out[i] = dataclasses.replace(
                out[i], due=due_time(local[0], now, _after(sentence, local[0]))
            )
    return out


WHEN_WORDS = frozenset(
    "that this then morning afternoon evening night day week time later tomorrow tonight "
    "beforehand before after it".split()
)
"""Words of a request that only say when ("remind me that morning", "pay on time"): no action
or thing of their own."""
REFERENT_CHARS = 80
"""The most of the clauses before a request that a title takes as its referent."""
_POINTING = rx(r"\b(?:it|them|this|that|those|these|one|there|replacements?|refills?|spares?)\b")
REQUEST_MARK = rx(
    r"\b(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?(?:(?:please|pls|plz)\s+)?(?:(?:remind|ping|nudge|"
    r"text|message|buzz|alert)\s+me\b(?:\s+(?:to|that|about|of|when)\b)?|don'?t\s+(?:let\s+me\s+)?"
    r"forget(?:\s+(?:to|about)\b)?|make\s+sure(?:\s+(?:that\s+)?(?:I|to|we|he|she|they)\b)?|"
    r"remember\s+to\b|set\s+(?:me\s+)?(?:a|an)\s+(?:reminder|alarm|timer)(?:\s+(?:to|for|about)\b)?)"
)
"""Where a sentence asks to be reminded ("remind me to…", "don't let me forget…", "make sure
I…", "set a reminder for…")."""
NEED_MARK = rx(r"\b(?:(?:I|we)\s+)?(?:need|have|got)\s+to\b|\bgotta\b")
"""Where a sentence says something must be done ("have to drop it at the office")."""
_NEEDS_THING = rx(r"\bneeds?\s+(?=(?:a|an|the|my|his|her|our|their|your)\s|\w+ing\b)")


def need_mark(text: str, start: int = 0, end: int | None = None) -> re.Match[str] | None:
    """Where ``text[start:end]`` says something must be done (:data:`NEED_MARK`), else where
    it says something must be had ("robotics needs a signed permission slip by friday")."""
    end = len(text) if end is None else end
    return NEED_MARK.search(text, start, end) or _NEEDS_THING.search(text, start, end)


_ASIDE = re.compile(r"\s*\([^)]*\)")
_REFERENT_SPLIT = re.compile(r"\s*[,;]\s+|\s+(?:and|but)\s+")


def with_referent(title: str, text: str) -> str:
    """A to-do's title that only points at its thing ("send them on my lunch break", "remind
    me that morning at 10", "grab a replacement", "i need to file it") with the clauses before
    the request (or the need) that name it, up to
    ``REFERENT_CHARS``: "send them on my lunch break (kemi needs 3 months of payslips)"."""
    if len(set(content_tokens(title)) - WHEN_WORDS) >= 2 and not _POINTING.search(title):
        return title
    at = text.lower().find(title.lower())
    end = at if at >= 0 else len(text)
    marks = list(REQUEST_MARK.finditer(text, 0, end)) or list(NEED_MARK.finditer(text, 0, end))
    if not marks:
        return title
    before = sentences_of(_ASIDE.sub("", text[: marks[-1].start()]))
    sentence = before[-1].text.strip(" ,;-–—") if before else ""
    pieces = [p for p in _REFERENT_SPLIT.split(sentence) if p.strip()]
    taken: list[str] = []
    for piece in reversed(pieces):
        if taken and len(", ".join([piece, *taken])) > REFERENT_CHARS:
            break
        taken.insert(0, piece.strip())
    referent = OPENING_FILLER.sub("", ", ".join(taken)).strip(" ,")
    if len(content_tokens(referent)) < 2:
        return title
    return f"{title} ({shorten(referent, REFERENT_CHARS)})"
