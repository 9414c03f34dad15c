"""Timestamps and time expressions, resolved without any date library.

Two jobs: :func:`parse_timestamp` reads the timestamps clients send (ISO-8601, date-only, or the
LoCoMo session format) into timezone-aware UTC; :func:`find_times` finds the dates, clock times and
relative expressions inside a turn and resolves them against the turn's own time::

    >>> now = parse_timestamp("1:56 pm on 8 May, 2023")
    >>> [(m.text, m.value.date().isoformat()) for m in find_times("I ran yesterday", now)]
    [('yesterday', '2023-05-07')]

Conventions (all on the clock of ``now``: "tonight at 9" said at 12:00-04:00 is 21:00-04:00;
all deterministic):
- a day-granular value is midnight of that day, except parts of the day, which carry a
  representative hour (morning 09:00, afternoon 15:00, evening 19:00, night 21:00);
- a clock time alone ("at 5pm") falls on ``now``'s date; a date next to a clock time
  ("tomorrow at 5pm", "1:56 pm on 8 May, 2023") merges into one minute-granular mention;
- "last <weekday>" is the latest such day before today, "next <weekday>" the first after today,
  "this <weekday>" the first from today on; a bare "on <weekday>" looks forward when its sentence
  speaks of the future (will, need to, remind…) and back otherwise;
- "last/next week" is ``now`` ∓ 7 days (day granularity), "last/next month" the first of that
  month, "last/next year" the first of January of that year;
- a day and month without a year take the year that puts the date nearest to ``now``, and
  "on the 17th" (or "by", "before", "until", "due" the 17th) the nearest month;
- "last/this/next summer" is the first month of that season (month granularity, northern
  hemisphere); "N days/weeks ago" (or "back") keeps day granularity, months and years keep
  their own;
- numeric dates like 5/8/2023 are not read (day-month order is ambiguous).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

__all__ = ["Granularity", "TimeMention", "find_times", "parse_timestamp"]

Granularity = Literal["minute", "day", "month", "year"]


@dataclass(frozen=True)
class TimeMention:
    """A time expression found in a text: ``text[start:end]`` resolved to ``value``, on the
    clock (the UTC offset) of the ``now`` it was read against."""

    text: str
    start: int
    end: int
    value: datetime
    granularity: Granularity


MONTHS: dict[str, int] = {
    name: i
    for i, full in enumerate(calendar.month_name)
    if full
    for name in {full.lower(), full[:3].lower()}
}
MONTHS["sept"] = 9
WEEKDAYS: dict[str, int] = {name.lower(): i for i, name in enumerate(calendar.day_name)}
NUMBER_WORDS: dict[str, int] = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a few": 3, "a couple of": 2, "a couple": 2, "couple of": 2, "several": 3,
}  # fmt: skip
TOMORROW_SPELLINGS = frozenset(
    "tmrw tmr tmw tomoz 2moro 2morrow tomorow tommorow tommorrow".split()
)
"""How people type "tomorrow" in chat."""
SEASONS: dict[str, int] = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
PARTS_OF_DAY: dict[str, int] = {
    "morning": 9, "afternoon": 15, "arvo": 15, "evening": 19, "night": 21,
}  # fmt: skip
# Words that make a bare weekday ("on Friday") point forward rather than back.
FUTURE_CUES = re.compile(
    r"\b(?:will|shall|gonna|going to|plan(?:ning)?|remind|need to|have to|must|should|"
    r"tomorrow|next|upcoming|can't wait|looking forward|schedul\w*|due)\b|'ll\b",
    re.IGNORECASE,
)

_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_FULL_MONTH = "|".join(m for m in calendar.month_name if m)
_WEEKDAY = "|".join(WEEKDAYS)
_WEEKDAY_ABBR = "mon|tue|tues|thu|thur|thurs|fri"
_WEEKDAY_ABBR_WORD = "sat|sun|wed|weds"  # also words: a weekday only beside a time or a date
_WEEKDAY_SHORT = (
    rf"(?:{_WEEKDAY_ABBR}|{_WEEKDAY_ABBR_WORD})(?![a-z])|" + _WEEKDAY
)  # "wed 18th": only next to a day of the month
_NUMBER = r"\d{1,3}|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
_PREP = r"(?:\b(?:on|at|by|until|till|since|around|from)\s+)?"
_AMPM = r"(?P<ap>[ap])(?:m\b|\.m\b\.?)"

_LOCOMO = re.compile(
    rf"^(?:(?P<h>\d{{1,2}}):(?P<mi>\d{{2}})\s*{_AMPM}\s+on\s+)?"
    rf"(?P<d>\d{{1,2}})\s+(?P<mo>{_MONTH}),?\s+(?P<y>\d{{4}})$",
    re.IGNORECASE,
)


def parse_timestamp(s: str) -> datetime:
    """Parse a client timestamp into an aware UTC datetime.

    Accepts ISO-8601 with or without an offset (a naive value is taken as UTC), an ISO date, and
    the LoCoMo session format ("1:56 pm on 8 May, 2023", also without the clock part).
    """
    text = s.strip()
    match = _LOCOMO.match(text)
    if match:
        value = _locomo_value(match)
        if value is None:
            raise ValueError(f"timestamp {s!r} names a day or time that does not exist")
        return value
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"timestamp {s!r} is not ISO-8601 (e.g. 2023-05-08T13:56:00Z, 2023-05-08) "
            "nor the LoCoMo form '1:56 pm on 8 May, 2023'"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _locomo_value(match: re.Match[str]) -> datetime | None:
    day = _date(int(match["y"]), MONTHS[match["mo"].lower()], int(match["d"]))
    if day is None:
        return None
    if match["h"] is None:
        return _at(day)
    clock = _clock(int(match["h"]), int(match["mi"]), match["ap"])
    return None if clock is None else _at(day, clock)


@dataclass(frozen=True)
class _Found:
    """A resolved match before overlap removal; ``clock`` marks a time of day without a date."""

    start: int
    end: int
    value: datetime
    granularity: Granularity
    clock: bool = False


_Resolver = Callable[[re.Match[str], datetime, str], "tuple[datetime, Granularity] | None"]


def _date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _at(day: date, clock: time = time()) -> datetime:
    return datetime.combine(day, clock, tzinfo=UTC)


def _clock(hour: int, minute: int, ampm: str | None) -> time | None:
    if minute > 59:
        return None
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm.lower() == "p" else 0)
    elif hour > 23:
        return None
    return time(hour, minute)


def _number(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else NUMBER_WORDS[word]


def _month_offset(day: date, months: int) -> tuple[int, int]:
    """(year, month) ``months`` months from ``day``'s month."""
    year, month = divmod(day.year * 12 + day.month - 1 + months, 12)
    return year, month + 1


def _add_months(day: date, months: int) -> date:
    year, month = _month_offset(day, months)
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _nearest_year(month: int, day: int, today: date) -> date | None:
    """The date with this month and day nearest to ``today`` (a year-less date)."""
    options = [_date(today.year + k, month, day) for k in (-1, 0, 1)]
    valid = [d for d in options if d is not None]
    return min(valid, key=lambda d: abs((d - today).days)) if valid else None


def _sentence_around(text: str, start: int, end: int) -> str:
    left = max(text.rfind(c, 0, start) for c in ".!?\n")
    rights = [i for i in (text.find(c, end) for c in ".!?\n") if i != -1]
    return text[left + 1 : min(rights, default=len(text))]


def _shift_weekday(today: date, weekday: int, mode: str) -> date:
    """Resolve a weekday: ``past`` (< today), ``future`` (> today) or ``upcoming`` (>= today)."""
    ahead = (weekday - today.weekday()) % 7
    if mode == "past":
        return today - timedelta(days=(today.weekday() - weekday) % 7 or 7)
    if mode == "future":
        return today + timedelta(days=ahead or 7)
    return today + timedelta(days=ahead)


def _with_part(day: date, part: str | None) -> datetime:
    return _at(day, time(PARTS_OF_DAY[part.lower()])) if part else _at(day)


def _r_clock(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity] | None:
    """A clock time on ``now``'s date; a bare number ("at 5") is not taken as a time."""
    if m["word"]:
        clock: time | None = time(12) if m["word"].lower() == "noon" else time(0)
    elif m["mi"] is None and m["ap"] is None and m["oclock"] is None:
        return None
    else:
        clock = _clock(int(m["h"]), int(m["mi"] or 0), m["ap"])
    return None if clock is None else (_at(now.date(), clock), "minute")


def _r_iso(m: re.Match[str], now: datetime, _text: str) -> tuple[datetime, Granularity] | None:
    """An ISO date or time; one with an offset ("…T10:00+02:00", "…Z") is an absolute time."""
    try:
        value = parse_timestamp(m["iso"])
    except ValueError:
        return None
    if _OFFSET.search(m["iso"]):
        value = value.astimezone(now.tzinfo)
    return value, ("day" if m["h"] is None else "minute")


_OFFSET = re.compile(r"(?:Z|[+-]\d\d:?\d\d)$", re.IGNORECASE)


def _r_day_month(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity] | None:
    month, day = MONTHS[m["mo"].lower()], int(m["d"])
    found = _date(int(m["y"]), month, day) if m["y"] else _nearest_year(month, day, now.date())
    return None if found is None else (_at(found), "day")


def _r_month_year(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity] | None:
    """Resolve "in June", "May 2023"; a bare month needs a preposition or a year (not "May I")."""
    if m["pre"] is None and m["y"] is None:
        return None
    year = int(m["y"]) if m["y"] else now.year
    return _at(date(year, MONTHS[m["mo"].lower()], 1)), "month"


def _r_year(m: re.Match[str], _now: datetime, _text: str) -> tuple[datetime, Granularity]:
    return _at(date(int(m["y"]), 1, 1)), "year"


def _weekday_index(word: str) -> int:
    """Monday 0 … Sunday 6, from a weekday's name or its abbreviation ("thurs", "wed")."""
    return next(i for name, i in WEEKDAYS.items() if name.startswith(word.lower()[:3]))


def _r_weekday_nth(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity] | None:
    """Resolve "Friday the 13th" to the nearest month whose ``nth`` falls on that weekday."""
    weekday, nth, today = _weekday_index(m["wd"]), int(m["n"]), now.date()
    candidates = [_date(*_month_offset(today, k), nth) for k in range(-12, 13)]
    hits = [d for d in candidates if d is not None and d.weekday() == weekday]
    if not hits:
        return None  # a tie goes to the one ahead: a weekday and its date are mostly plans
    return _at(min(hits, key=lambda d: (abs((d - today).days), d < today))), "day"


def _r_weekday(m: re.Match[str], now: datetime, text: str) -> tuple[datetime, Granularity]:
    mod = (m["mod"] or "").lower()
    if mod == "last" or mod == "since":
        mode = "past"
    elif mod == "next":
        mode = "future"
    elif mod in ("this", "by", "until", "till"):
        mode = "upcoming"
    else:
        future = FUTURE_CUES.search(_sentence_around(text, m.start(), m.end()))
        mode = "future" if future else "past"
    day = _shift_weekday(now.date(), _weekday_index(m["wd"]), mode)
    return _with_part(day, m["pod"]), "day"


def _r_named_day(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity]:
    word = " ".join(m["word"].lower().split())
    word = "tomorrow" if word in TOMORROW_SPELLINGS else word
    offsets = {
        "today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1, "last night": -1,
        "the day before yesterday": -2, "the day after tomorrow": 2,
    }  # fmt: skip
    day = now.date() + timedelta(days=offsets[word])
    part = m["pod"] or ("night" if word in ("tonight", "last night") else None)
    return _with_part(day, part), "day"


def _r_this_part(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity]:
    return _with_part(now.date(), m["pod"]), "day"


def _r_offset(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity]:
    """Resolve "3 days ago", "in 2 hours": ``now`` moved by a count of units."""
    count = _number(m["n"]) * (-1 if "ago" in m.groupdict() else 1)
    unit = m["unit"].lower()
    if unit in ("minute", "min", "hour"):
        delta = timedelta(minutes=count) if unit != "hour" else timedelta(hours=count)
        return now + delta, "minute"
    if unit in ("day", "week"):
        days = count * (7 if unit == "week" else 1)
        return _at(now.date() + timedelta(days=days)), "day"
    if unit == "month":
        return _at(_add_months(now.date(), count)), "month"
    return _at(date(now.year + count, 1, 1)), "year"


def _r_nth_day(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity] | None:
    """Resolve "on the 17th" to the nearest date with that day of the month."""
    nth, today = int(m["n"]), now.date()
    candidates = [_date(*_month_offset(today, k), nth) for k in (-1, 0, 1)]
    valid = [d for d in candidates if d is not None]
    if not valid:
        return None
    return _at(min(valid, key=lambda d: abs((d - today).days))), "day"


def _r_season(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity]:
    """Resolve "last summer", "this winter" to the first month of that season (northern
    hemisphere: spring March, summer June, fall September, winter December)."""
    first = SEASONS[m["season"].lower()]
    today, mod = now.date(), m["mod"].lower()
    start = date(today.year - (1 if first == 12 and today.month < 3 else 0), first, 1)
    ongoing_or_past = start <= today
    if mod in ("last", "past"):
        ended = _add_months(start, 3) <= today
        start = start if ended else date(start.year - 1, first, 1)
    elif mod == "next" and ongoing_or_past:
        start = date(start.year + 1, first, 1)
    return _at(start), "month"


def _r_relative_period(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity]:
    """Resolve "last week", "this month", "next year", "last weekend"."""
    step = {"last": -1, "past": -1, "this": 0, "next": 1}[m["mod"].lower()]
    unit, today = m["unit"].lower(), now.date()
    if unit == "week":
        return _at(today + timedelta(days=7 * step)), "day"
    if unit == "weekend":
        mode = {-1: "past", 0: "upcoming", 1: "future"}[step]
        saturday = _shift_weekday(today, 5, mode)
        if step == 1:
            saturday += timedelta(days=7 if today.weekday() >= 5 else 0)
        return _at(saturday), "day"
    if unit == "month":
        return _at(_add_months(today.replace(day=1), step)), "month"
    return _at(date(today.year + step, 1, 1)), "year"


def _r_month_end(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity]:
    """Resolve "end of the month", "end of april (2025)": the month's last day, this year's
    unless a year is named (a to-do's due time moves a day gone by forward: ``due_time``)."""
    today = now.date()
    month = MONTHS[m["mo"].lower()] if m["mo"] else today.month
    year = int(m["y"]) if m["y"] else today.year
    return _at(_add_months(date(year, month, 1), 1) - timedelta(days=1)), "day"


def _r_numeric_date(m: re.Match[str], now: datetime, _: str) -> tuple[datetime, Granularity] | None:
    """Resolve "on 10/14", "by 15/06/2026": a number above 12 is the day; when both could be
    months, a speaker on a clock west of UTC-2 (the Americas) writes month first, others day
    first. Without a year or a preposition the numbers may be a score or a fraction: no date."""
    if m["pre"] is None and m["y"] is None:
        return None
    a, b = int(m["a"]), int(m["b"])
    offset = now.utcoffset() or timedelta()
    month_first = b > 12 or (a <= 12 and offset < timedelta(hours=-2))
    month, day = (a, b) if month_first else (b, a)
    if not 1 <= month <= 12:
        return None
    if m["y"] is None:
        found = _nearest_year(month, day, now.date())
    else:
        found = _date(int(m["y"]) + (2000 if len(m["y"]) == 2 else 0), month, day)
    return None if found is None else (_at(found), "day")


def _r_that_day(m: re.Match[str], now: datetime, text: str) -> tuple[datetime, Granularity] | None:
    """Resolve "that morning", "that day" to the last date named before it in the text ("HR
    deadline is Friday the 27th, remind me that morning"), "the night before" to the day
    before it ("the engineer is coming thursday, remind me the night before at 9pm")."""
    before = [
        f
        for f in _non_overlapping(_candidates(text[: m.start()], now))
        if f.granularity == "day" and not f.clock
    ]
    if not before:
        return None
    pod = m["pod"] or m["pod_before"]
    day = before[-1].value.date() - timedelta(days=1 if m["pod_before"] else 0)
    return _with_part(day, None if pod.lower() == "day" else pod), "day"


@dataclass(frozen=True)
class _Pattern:
    """A time pattern; it runs only when the lower-cased text contains one of ``triggers``
    (most turns hold no digit and no date word, so most patterns are skipped cheaply)."""

    regex: re.Pattern[str]
    resolve: _Resolver
    triggers: tuple[str, ...]
    clock: bool = False


def _pattern(
    regex: str, resolve: _Resolver, triggers: tuple[str, ...], clock: bool = False
) -> _Pattern:
    return _Pattern(re.compile(regex, re.IGNORECASE), resolve, triggers, clock)


_DIGITS = tuple("0123456789")
_PATTERNS: tuple[_Pattern, ...] = (
    _pattern(
        rf"(?:\b(?:on|by|before|until|till|due|from)\s+(?:the\s+)?|(?:(?<=,\s)|(?<=day\s))the\s+)"
        rf"(?P<n>\d{{1,2}})(?:st|nd|rd|th)\b"
        rf"(?!\s+(?:of\s+)?(?:{_MONTH})\b)",
        _r_nth_day,
        ("st", "nd", "rd", "th"),
    ),
    _pattern(
        r"(?:\b(?P<pre>on|by|before|until|till|due|from)\s+)?\b(?P<a>\d{1,2})/(?P<b>\d{1,2})"
        r"(?:/(?P<y>\d{4}|\d{2}))?\b(?![/:.]\d)",
        _r_numeric_date,
        ("/",),
    ),
    _pattern(
        r"\b(?:that\s+(?P<pod>morning|afternoon|evening|night|day)|the\s+(?P<pod_before>morning|"
        r"afternoon|evening|night|day)\s+before)\b",
        _r_that_day,
        ("that morning", "that afternoon", "that evening", "that night", "that day", "before"),
    ),
    _pattern(
        r"\b(?P<mod>last|this|next|past)\s+(?P<season>spring|summer|fall|autumn|winter)\b",
        _r_season,
        ("spring", "summer", "fall", "autumn", "winter"),
    ),
    _pattern(
        rf"(?:\b(?:at|by|around|from|until|till)\s+)?\b(?:(?:12\s+)?(?P<word>noon|midnight)|"
        rf"(?P<h>\d{{1,2}})(?::(?P<mi>\d{{2}}))?(?:\s*{_AMPM}|(?P<oclock>\s+o'?clock\b))?)"
        r"(?![\w:/-])",
        _r_clock,
        (*_DIGITS, "noon", "midnight"),
        clock=True,
    ),
    _pattern(
        rf"{_PREP}\b(?P<iso>\d{{4}}-\d{{2}}-\d{{2}}"
        r"(?:[T ](?P<h>\d{2}):\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?)\b",
        _r_iso,
        ("-",),
    ),
    _pattern(
        rf"{_PREP}\b(?:the\s+)?(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<mo>{_MONTH})\b\.?"
        r"(?:,?\s+(?P<y>\d{4})\b)?",
        _r_day_month,
        _DIGITS,
    ),
    _pattern(
        rf"{_PREP}\b(?P<mo>{_MONTH})\.?\s+(?:the\s+)?(?P<d>\d{{1,2}}){_ORD}\b"
        r"(?:,?\s+(?P<y>\d{4})\b)?",
        _r_day_month,
        _DIGITS,
    ),
    _pattern(
        rf"(?:\b(?P<pre>in|during|since|until|by|of|from|early|late|mid)\s+)?"
        rf"\b(?P<mo>(?-i:{_FULL_MONTH}))(?:,?\s+(?P<y>\d{{4}}))?\b(?![-/])",
        _r_month_year,
        tuple(m.lower() for m in calendar.month_name if m),
    ),
    _pattern(
        r"\b(?:back\s+)?(?:in|since|during|until|by|from)\s+(?P<y>(?:19|20)\d{2})\b(?![-/])",
        _r_year,
        ("19", "20"),
    ),
    _pattern(
        rf"(?:\b(?:on|by|before|until|till|due)\s+)?\b(?P<wd>{_WEEKDAY_SHORT})\.?\s+(?:the\s+)?"
        r"(?P<n>\d{1,2})(?:st|nd|rd|th)\b",
        _r_weekday_nth,
        ("st", "nd", "rd", "th"),
    ),
    _pattern(
        rf"(?:\b(?P<mod>last|next|this|on|by|until|till|since)\s+)?\b(?P<wd>(?:{_WEEKDAY})\b|"
        rf"(?:{_WEEKDAY_ABBR})\b\.?|"  # "sat", "sun", "wed" only before a time
        rf"(?:{_WEEKDAY_ABBR_WORD})\b\.?(?=\s+(?:morning|afternoon|arvo|evening|night|\d)))"
        r"(?:\s+(?P<pod>morning|afternoon|arvo|evening|night)\b)?",
        _r_weekday,
        ("day", "mon", "tue", "wed", "thu", "fri", "sat", "sun"),
    ),
    _pattern(
        r"\b(?P<word>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|today|"
        r"tonight|last\s+night|yesterday|tomorrow|"
        + "|".join(sorted(TOMORROW_SPELLINGS, key=len, reverse=True))
        + r")\b"
        r"(?:\s+(?P<pod>morning|afternoon|arvo|evening|night)\b)?",
        _r_named_day,
        ("today", "tonight", "night", "yesterday", "tom", "tm", "2mor"),
    ),
    _pattern(r"\bthis\s+(?P<pod>morning|afternoon|evening)\b", _r_this_part, ("this",)),
    _pattern(
        rf"\b(?P<n>{_NUMBER})\s+(?P<unit>min(?:ute)?|hour|day|week|month|year)s?\s+"
        r"(?P<ago>ago|back|earlier)\b",
        _r_offset,
        ("ago", "back", "earlier"),
    ),
    _pattern(
        rf"\bin\s+(?P<n>{_NUMBER})\s+(?P<unit>min(?:ute)?|hour|day|week|month|year)s?\b",
        _r_offset,
        ("min", "hour", "day", "week", "month", "year"),
    ),
    _pattern(
        r"\b(?P<mod>last|past|this|next)\s+(?P<unit>weekend|week|month|year)\b",
        _r_relative_period,
        ("week", "month", "year"),
    ),
    _pattern(
        rf"(?:\b(?:by|before|until|till|at|on)\s+)?(?:the\s+)?\bend\s+of\s+(?:the\s+|this\s+)?"
        rf"(?:month\b|(?P<mo>{_MONTH})\b(?:,?\s+(?P<y>\d{{4}})\b)?)",
        _r_month_end,
        ("end of",),
    ),
)
# Between a date and its clock time: "at", "on", or words that hedge it or place it in the day
# ("by 25 March, say 6pm", "tomorrow after work, like 7:30pm"); never the words of a title.
_JOIN_GAP = re.compile(
    r"[\s,]*(?:(?:say|like|around|about|maybe|ideally|probably|roughly|approx|ish|"
    r"(?:after|before)\s+(?:work|school|lunch|dinner|breakfast|class|the\s+gym))[\s,]+){0,2}"
    r"(?:(?:at|on|@)\b)?[\s,]*",
    re.IGNORECASE,
)


def find_times(text: str, now: datetime) -> list[TimeMention]:
    """Find and resolve the time expressions in ``text`` against ``now``, in text order.

    Overlapping matches keep the earliest, then the longest; an adjacent date and clock time
    merge into one minute-granular mention.
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    found = _merge_adjacent(text, _non_overlapping(_candidates(text, now)))
    return [
        TimeMention(text[f.start : f.end], f.start, f.end, _on_clock(f.value, now), f.granularity)
        for f in found
    ]


def _on_clock(value: datetime, now: datetime) -> datetime:
    """A resolver's value on ``now``'s clock: days and clock times are built as wall times
    (tagged UTC by :func:`_at`), which are the speaker's own; an absolute value is moved."""
    if value.tzinfo is UTC:
        return value.replace(tzinfo=now.tzinfo)
    return value.astimezone(now.tzinfo)


def _candidates(text: str, now: datetime) -> list[_Found]:
    lower = text.lower()
    out: list[_Found] = []
    for p in _PATTERNS:
        if not any(t in lower for t in p.triggers):
            continue
        for m in p.regex.finditer(text):
            resolved = p.resolve(m, now, text)
            if resolved is not None:
                out.append(_Found(m.start(), m.end(), resolved[0], resolved[1], p.clock))
    return out


def _non_overlapping(found: list[_Found]) -> list[_Found]:
    kept: list[_Found] = []
    for f in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if not kept or f.start >= kept[-1].end:
            kept.append(f)
    return kept


def _merge_adjacent(text: str, found: list[_Found]) -> list[_Found]:
    """Join "tomorrow at 5pm" and "1:56 pm on 8 May" into one minute-granular mention, and a
    weekday with the date it names ("by noon friday april 24", "thursday 2 april"): the date
    decides the day, the weekday's clock time stays."""
    out: list[_Found] = []
    for f in found:
        prev = out[-1] if out else None
        if prev is not None and _joinable(text, prev, f):
            day, clock = (f, prev) if prev.clock else (prev, f)
            value = datetime.combine(day.value.date(), clock.value.timetz())
            out[-1] = _Found(prev.start, f.end, value, "minute")
        elif prev is not None and _names_weekday_of(text, prev, f):
            value = datetime.combine(f.value.date(), prev.value.timetz())
            out[-1] = _Found(prev.start, f.end, value, prev.granularity)
        else:
            out.append(f)
    return out


_ENDS_WITH_WEEKDAY = re.compile(rf"\b(?:{_WEEKDAY_SHORT})\.?$", re.IGNORECASE)


def _names_weekday_of(text: str, a: _Found, b: _Found) -> bool:
    """A mention ending with a weekday right before a day-granular date: "friday, 24 april"."""
    return (
        not a.clock
        and b.granularity == "day"
        and not b.clock
        and _ENDS_WITH_WEEKDAY.search(text[a.start : a.end]) is not None
        and re.fullmatch(r"[\s,]*(?:the\s+)?", text[a.end : b.start]) is not None
    )


def _joinable(text: str, a: _Found, b: _Found) -> bool:
    """A clock time and a day-granular date separated only by spaces, commas, "at" or "on"."""
    day = a if b.clock else b
    return (
        a.clock != b.clock
        and day.granularity == "day"
        and _JOIN_GAP.fullmatch(text[a.end : b.start]) is not None
    )
