"""Timestamp parsing and time-expression resolution (memoryd.memory.timeparse)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memoryd.memory.timeparse import find_times, parse_timestamp

# Monday 8 May 2023, 13:56 UTC: the first LoCoMo session's time.
NOW = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T15:56:00+02:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08 13:56", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("2023-05-08", datetime(2023, 5, 8, tzinfo=UTC)),
        ("  2023-05-08  ", datetime(2023, 5, 8, tzinfo=UTC)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:05 am on 1 January, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
        ("12:30 pm on 15 Sept, 2023", datetime(2023, 9, 15, 12, 30, tzinfo=UTC)),
        ("8 May, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ],
)
def test_parse_timestamp_returns_aware_utc(raw: str, expected: datetime) -> None:
    value = parse_timestamp(raw)
    assert value == expected
    assert value.tzinfo is UTC


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "is not ISO-8601"),
        ("yesterday", "is not ISO-8601"),
        ("2023-13-01", "is not ISO-8601"),
        ("31 February, 2023", "does not exist"),
        ("13:00 pm on 8 May, 2023", "does not exist"),
        ("1:75 pm on 8 May, 2023", "does not exist"),
    ],
)
def test_parse_timestamp_rejects_with_a_clear_message(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_timestamp(raw)


def _found(text: str, now: datetime = NOW) -> list[tuple[str, str, str]]:
    return [(m.text, m.value.isoformat(), m.granularity) for m in find_times(text, now)]


def _day(iso: str) -> str:
    return datetime.fromisoformat(iso).replace(tzinfo=UTC).isoformat()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # absolute dates
        ("we met on 8 May 2023", [("on 8 May 2023", _day("2023-05-08"), "day")]),
        ("it was 27 June, 2023", [("27 June, 2023", _day("2023-06-27"), "day")]),
        ("May 8th works", [("May 8th", _day("2023-05-08"), "day")]),
        ("by May 20", [("by May 20", _day("2023-05-20"), "day")]),
        ("the 3rd of March", [("the 3rd of March", _day("2023-03-03"), "day")]),
        ("Dec 30th", [("Dec 30th", _day("2022-12-30"), "day")]),  # nearest year
        ("due 2023-05-08", [("2023-05-08", _day("2023-05-08"), "day")]),
        ("on Friday the 13th", [("on Friday the 13th", _day("2023-01-13"), "day")]),
        ("on the 17th", [("on the 17th", _day("2023-05-17"), "day")]),
        ("in June", [("in June", _day("2023-06-01"), "month")]),
        ("in May 2022", [("in May 2022", _day("2022-05-01"), "month")]),
        ("back in 2019", [("back in 2019", _day("2019-01-01"), "year")]),
        # clock times
        ("at 5pm", [("at 5pm", _day("2023-05-08T17:00"), "minute")]),
        ("at 17:30", [("at 17:30", _day("2023-05-08T17:30"), "minute")]),
        ("1:56 pm", [("1:56 pm", _day("2023-05-08T13:56"), "minute")]),
        ("around 7 a.m.", [("around 7 a.m.", _day("2023-05-08T07:00"), "minute")]),
        ("at noon", [("at noon", _day("2023-05-08T12:00"), "minute")]),
        ("at 5 o'clock", [("at 5 o'clock", _day("2023-05-08T05:00"), "minute")]),
        # date and clock merge into one mention
        (
            "1:56 pm on 8 May, 2023",
            [("1:56 pm on 8 May, 2023", _day("2023-05-08T13:56"), "minute")],
        ),
        ("tomorrow at 5pm", [("tomorrow at 5pm", _day("2023-05-09T17:00"), "minute")]),
        (
            "tomorrow evening at 7pm",
            [("tomorrow evening at 7pm", _day("2023-05-09T19:00"), "minute")],
        ),
        # relative days
        ("today", [("today", _day("2023-05-08"), "day")]),
        ("tonight", [("tonight", _day("2023-05-08T21:00"), "day")]),
        ("this morning", [("this morning", _day("2023-05-08T09:00"), "day")]),
        ("this evening", [("this evening", _day("2023-05-08T19:00"), "day")]),
        ("yesterday", [("yesterday", _day("2023-05-07"), "day")]),
        ("last night", [("last night", _day("2023-05-07T21:00"), "day")]),
        ("tomorrow", [("tomorrow", _day("2023-05-09"), "day")]),
        ("the day before yesterday", [("the day before yesterday", _day("2023-05-06"), "day")]),
        ("the day after tomorrow", [("the day after tomorrow", _day("2023-05-10"), "day")]),
        # weekdays (NOW is a Monday)
        ("last Friday", [("last Friday", _day("2023-05-05"), "day")]),
        ("last Monday", [("last Monday", _day("2023-05-01"), "day")]),
        ("next Monday", [("next Monday", _day("2023-05-15"), "day")]),
        ("this Monday", [("this Monday", _day("2023-05-08"), "day")]),
        ("I ran on Friday", [("on Friday", _day("2023-05-05"), "day")]),
        ("I will call her on Friday", [("on Friday", _day("2023-05-12"), "day")]),
        # offsets
        ("two weeks ago", [("two weeks ago", _day("2023-04-24"), "day")]),
        ("3 days ago", [("3 days ago", _day("2023-05-05"), "day")]),
        ("a few months ago", [("a few months ago", _day("2023-02-08"), "month")]),
        ("a few years back", [("a few years back", _day("2020-01-01"), "year")]),
        ("in 2 hours", [("in 2 hours", _day("2023-05-08T15:56"), "minute")]),
        ("in 3 days", [("in 3 days", _day("2023-05-11"), "day")]),
        # periods
        ("last week", [("last week", _day("2023-05-01"), "day")]),
        ("next week", [("next week", _day("2023-05-15"), "day")]),
        ("last month", [("last month", _day("2023-04-01"), "month")]),
        ("last year", [("last year", _day("2022-01-01"), "year")]),
        ("last weekend", [("last weekend", _day("2023-05-06"), "day")]),
        ("next weekend", [("next weekend", _day("2023-05-13"), "day")]),
        ("last summer", [("last summer", _day("2022-06-01"), "month")]),
        ("this winter", [("this winter", _day("2023-12-01"), "month")]),
    ],
)
def test_find_times_resolves_against_now(text: str, expected: list[tuple[str, str, str]]) -> None:
    assert _found(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I walked 5 miles at 5",  # a bare number is not a clock time
        "May I ask you something?",  # "May" the verb
        "my heart rate peaked at 160 bpm",
        "the 2000 steps",
        "2023-02-30",  # no such day
        "13:00 pm",
    ],
)
def test_find_times_ignores_what_is_not_a_time(text: str) -> None:
    assert find_times(text, NOW) == []


def test_find_times_returns_offsets_in_text_order() -> None:
    text = "Last night I went for a run, and tomorrow at 5pm I rest; in 3 days I travel."
    found = find_times(text, NOW)
    assert [m.text for m in found] == ["Last night", "tomorrow at 5pm", "in 3 days"]
    assert all(text[m.start : m.end] == m.text for m in found)
    assert all(m.value.tzinfo is UTC for m in found)


def test_find_times_takes_a_naive_now_as_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    assert find_times("yesterday", naive) == find_times("yesterday", NOW)


def test_find_times_is_deterministic() -> None:
    text = "last Friday at 5pm, then two weeks ago and in June"
    assert find_times(text, NOW) == find_times(text, NOW)


def test_find_times_reads_days_and_clocks_on_the_speakers_clock() -> None:
    # 12:00 in New York is 16:00 UTC; "tonight at 9" is 21:00 there, 01:00 UTC the next day
    new_york = timezone(timedelta(hours=-4))
    now = datetime(2026, 10, 14, 12, 0, tzinfo=new_york)
    (tonight,) = find_times("remind me tonight at 9pm", now)
    assert tonight.value == datetime(2026, 10, 14, 21, 0, tzinfo=new_york)
    assert tonight.value.astimezone(UTC) == datetime(2026, 10, 15, 1, 0, tzinfo=UTC)
    (tomorrow,) = find_times("tomorrow", datetime(2026, 10, 14, 22, 0, tzinfo=new_york))
    assert tomorrow.value.date().isoformat() == "2026-10-15"  # in UTC it is already the 15th


def test_an_iso_time_with_an_offset_in_the_text_is_absolute() -> None:
    tokyo = timezone(timedelta(hours=9))
    now = datetime(2026, 12, 1, 14, 0, tzinfo=tokyo)
    (found,) = find_times("call at 2026-12-02T02:30:00Z", now)
    assert found.value == datetime(2026, 12, 2, 11, 30, tzinfo=tokyo)


def test_a_deadline_on_a_day_of_the_month() -> None:
    now = datetime(2026, 10, 10, 10, 0, tzinfo=UTC)
    (found,) = find_times("remind me to book British Gas by the 31st", now)
    assert (found.text, found.value.date().isoformat()) == ("by the 31st", "2026-10-31")
    assert [m.text for m in find_times("the 3rd time this week", now)] == ["this week"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # A hedge or a place in the day between a date and its clock time joins them.
        ("by 25 march, say 6pm", [("by 25 march, say 6pm", _day("2023-03-25T18:00"), "minute")]),
        (
            "at CVS tomorrow after work, like 7:30pm",
            [("tomorrow after work, like 7:30pm", _day("2023-05-09T19:30"), "minute")],
        ),
        # The words of a title between them do not.
        (
            "tomorrow call the dentist at 3pm",
            [
                ("tomorrow", _day("2023-05-09"), "day"),
                ("at 3pm", _day("2023-05-08T15:00"), "minute"),
            ],
        ),
        # An ordinal after a comma names a day ("on payday, the 28th").
        ("order the shoes on payday, the 28th", [("the 28th", _day("2023-04-28"), "day")]),
        # "that morning" is the day named before it.
        (
            "the deadline is friday the 12th. remind me that morning",
            [
                ("friday the 12th", _day("2023-05-12"), "day"),
                ("that morning", _day("2023-05-12T09:00"), "day"),
            ],
        ),
        ("remind me that morning", []),
        # "the night before" is the day before the one named before it
        (
            "the engineer comes thursday, remind me the night before at 9pm",
            [
                ("thursday", _day("2023-05-11"), "day"),
                ("the night before at 9pm", _day("2023-05-10T21:00"), "minute"),
            ],
        ),
        ("ring the surgery tmrw", [("tmrw", _day("2023-05-09"), "day")]),  # as people type it
        ("order it on payday the 28th", [("the 28th", _day("2023-04-28"), "day")]),
        # Numeric dates: a number above 12 is the day; a year or a preposition is needed.
        ("by 15/06/2024", [("by 15/06/2024", _day("2024-06-15"), "day")]),
        ("bills on 10/14", [("on 10/14", _day("2023-10-14"), "day")]),
        ("scored 7/10 at trivia", []),
        # A weekday and the date it names are one mention: the date decides, the clock stays.
        ("by noon friday may 26", [("by noon friday may 26", _day("2023-05-26T12:00"), "minute")]),
        (
            "signed by 2pm on thursday 1 june",
            [("by 2pm on thursday 1 june", _day("2023-06-01T14:00"), "minute")],
        ),
        (
            "by thursday the 11th, 12 noon",
            [("by thursday the 11th, 12 noon", _day("2023-05-11T12:00"), "minute")],
        ),
        # "at" inside a word is no preposition of the date
        ("the flat 14 march viewing", [("14 march", _day("2023-03-14"), "day")]),
        # an ordinal after "by" needs no "the"; a weekday may be short, and a tie goes ahead
        ("send it by 13th", [("by 13th", _day("2023-05-13"), "day")]),
        ("by wed 17th 5pm", [("by wed 17th 5pm", _day("2023-05-17T17:00"), "minute")]),
        ("fri arvo", [("fri arvo", _day("2023-05-05T15:00"), "day")]),
        ("sat 14 march", [("sat 14 march", _day("2023-03-14"), "day")]),
        ("we sat down, the sun was out, I wed her", []),
        ("by end of april", [("by end of april", _day("2023-04-30"), "day")]),
        ("at the end of the month", [("at the end of the month", _day("2023-05-31"), "day")]),
    ],
)
def test_find_times_reads_hedged_appositive_anaphoric_and_numeric_dates(
    text: str, expected: list[tuple[str, str, str]]
) -> None:
    assert _found(text) == expected


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(-5, "2023-04-03"), (1, "2023-03-04"), (0, "2023-03-04")],
)
def test_an_ambiguous_numeric_date_reads_month_first_only_on_an_american_clock(
    offset: int, expected: str
) -> None:
    now = NOW.astimezone(timezone(timedelta(hours=offset)))
    [mention] = find_times("on 4/3", now)
    assert mention.value.date().isoformat() == expected
