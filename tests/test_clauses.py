"""Type-true construction: the clause readers of rules, tasks and reports
(memoryd.memory.extract.clauses), due times, and what a turn's labels build from them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from memoryd.encoder import Encoder
from memoryd.memory.build import build_memories
from memoryd.memory.extract import (
    clause_completions,
    clause_rules,
    clause_tasks,
    extract,
    reports_done,
    with_referent,
)
from memoryd.models import Fact, Label, Memory, Parse, Role, Rule, Task, TaskStatus, Turn
from memoryd.reader import FactReader

# Monday 30 March 2026, 10:00 UTC.
NOW = datetime(2026, 3, 30, 10, 0, tzinfo=UTC)


def _tasks(text: str) -> list[tuple[str, str | None]]:
    times = extract(text, NOW).times
    return [(t.title, t.due.isoformat() if t.due else None) for t in clause_tasks(text, times, NOW)]


@pytest.mark.parametrize(
    ("text", "conditions", "actions"),
    [
        (
            "Whenever I fly long-haul, remind me to book an aisle seat",
            ["I fly long-haul"],
            ["remind me to book an aisle seat"],
        ),
        ("on rainy days I take the bus to work", ["on rainy days"], ["I take the bus to work"]),
        ("from now on reply to me in Portuguese", ["from now on"], ["reply to me in Portuguese"]),
        (
            "If my balance is under 1,000 by the 20th, move 200 from savings",
            ["my balance is under 1,000 by the 20th"],
            ["move 200 from savings"],
        ),
        (
            "when I say I'm off to bed, lock the back door",
            ["I say I'm off to bed"],
            ["lock the back door"],
        ),
        (
            "Every Friday evening, send me the week's expenses",
            ["every friday evening"],
            ["send me the week's expenses"],
        ),
        ("On Sunday evenings, water the ferns", ["on sunday evenings"], ["water the ferns"]),
        (  # a trigger after a short lead still opens the rule
            "And the night before any flight, remind me to check in online",
            ["the night before any flight"],
            ["remind me to check in online"],
        ),
        (
            "In general, whenever a friend has a baby, give me a heads-up to send flowers",
            ["a friend has a baby"],
            ["give me a heads-up to send flowers"],
        ),
        (
            "bread machine: flour first, then water, then the yeast on top",
            ["bread machine"],
            ["flour first", "water", "the yeast on top"],
        ),
        (  # any "every <thing>," is a time trigger
            "Every payday, remind me to move £600 into the house fund.",
            ["every payday"],
            ["remind me to move £600 into the house fund"],
        ),
        (  # a lead ending in an emoji is a clause of its own
            "Ellie swims for the club, training mon/wed/fri 6am 😩 on training days remind me at "
            "5:30 to wake her",
            ["on training days"],
            ["remind me at 5:30 to wake her"],
        ),
        (  # "rule:" opens a rule; "any <thing> …," is a trigger
            "and rule: any email from monash with 'census date' in the subject, remind me that "
            "night to check my units",
            ["any email from monash with 'census date' in the subject"],
            ["remind me that night to check my units"],
        ),
        (
            "every 1st of the month remind me to take the meter readings",
            ["every 1st of the month"],
            ["remind me to take the meter readings"],
        ),
        (
            "from now on, every quarter remind me to pay the estimated tax",
            ["every quarter"],
            ["remind me to pay the estimated tax"],
        ),
        (  # a clause before the trigger ending in "so" is no action; "keep" starts one
            "Priya is vegetarian btw, so whenever I ask you for dinner ideas for the two of us "
            "keep them meat-free",
            ["I ask you for dinner ideas for the two of us"],
            ["keep them meat-free"],
        ),
    ],
)
def test_clause_rules_read_trigger_and_action(
    text: str, conditions: list[str], actions: list[str]
) -> None:
    (rule,) = clause_rules(text)
    assert (rule.conditions, rule.actions, rule.parse) == (conditions, actions, Parse.CLAUSE)


@pytest.mark.parametrize(
    ("text", "conditions", "actions"),
    [
        (  # read by the clause reader
            "before I renew any insurance remind me to check the comparison sites first, we said",
            ["before I renew any insurance"],
            ["remind me to check the comparison sites first"],
        ),
        (
            "whenever I message you in French please fix my grammar, even the accents",
            ["I message you in French"],
            ["please fix my grammar"],
        ),
        (  # an action after the comma is the next step; a reason with a subject is none
            "every time i pack a box make sure i label it with the room, and write FRAGILE on "
            "anything with glass in it",
            ["every time i pack a box"],
            ["make sure i label it with the room", "write FRAGILE on anything with glass in it"],
        ),
        (
            "whenever I book a hotel pls remind me to add my Bonvoy number, I keep losing points",
            ["I book a hotel"],
            ["pls remind me to add my Bonvoy number"],
        ),
    ],
)
def test_a_request_inside_the_trigger_is_the_action(
    text: str, conditions: list[str], actions: list[str]
) -> None:
    (rule,) = clause_rules(text)
    assert (rule.conditions, rule.actions) == (conditions, actions)


def test_the_rule_patterns_find_the_request_inside_the_trigger_too() -> None:
    text = "whenever I message you in French please fix my grammar, even the accents"
    (rule,) = extract(text, NOW).rules
    assert (rule.conditions, rule.actions, rule.parse) == (
        ["I message you in French"],
        ["please fix my grammar"],
        Parse.PATTERN,
    )


def test_a_rule_without_a_trigger_is_a_standing_one() -> None:
    (rule,) = clause_rules("No more than two coffees for me, whatever I say")
    assert (rule.conditions, rule.parse) == (["always"], Parse.GENERIC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Don't let me forget the parent-teacher meeting on Thursday at 6",
            ("parent-teacher meeting", "2026-04-02T18:00:00+00:00"),
        ),
        (
            "ping me tomorrow at 8:45 to call the landlord",
            ("call the landlord", "2026-03-31T08:45:00+00:00"),
        ),
        (
            'Calendar: "Boiler service" Fri 2 Apr 09:00',
            ("Boiler service", "2026-04-02T09:00:00+00:00"),
        ),
        (
            "The recycling goes out Tuesday, make sure we put the glass box out",
            ("put the glass box out", "2026-03-31T00:00:00+00:00"),
        ),
    ],
)
def test_clause_tasks_read_the_request_and_its_due_time(text: str, expected: tuple) -> None:
    assert _tasks(text) == [expected]


def test_each_reminder_asked_for_is_a_task_due_when_the_request_says() -> None:
    text = (
        "Stretch every morning. And remind me Friday to book the dentist. "
        "Also remind me to call Sam on Sunday"
    )
    assert _tasks(text) == [
        ("book the dentist", "2026-04-03T00:00:00+00:00"),
        ("call Sam", "2026-04-05T00:00:00+00:00"),
    ]
    # the time after the request is its due time, and a one-word action is still the title
    assert _tasks("entries close April 20, remind me to enter on April 10") == [
        ("enter", "2026-04-10T00:00:00+00:00")
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # an amount's thousands comma ends no title
        (
            "WE BOOKED A VENUE. need to pay the £2,000 deposit by friday 4pm",
            ("pay the £2,000 deposit", "2026-04-03T16:00:00+00:00"),
        ),
        # the time after the need is the due, and "or she'll…" is no part of the action
        (
            "her birthday is 18 April, need to book dinner at Chin Chin by wednesday 5pm or "
            "she'll kill me",
            ("book dinner at Chin Chin", "2026-04-01T17:00:00+00:00"),
        ),
        # with no request, the clause that names the time says what to do
        (
            "also our celebrant is Maria Costa, she wants the NOIM form signed by 2pm on thursday"
            " 2 april",
            ("she wants the NOIM form signed", "2026-04-02T14:00:00+00:00"),
        ),
        # something that must be had by a time is a to-do too
        (
            "robotics needs a signed permission slip + $150 fee by friday",
            ("signed permission slip + $150 fee", "2026-04-03T00:00:00+00:00"),
        ),
        # a thing that needs doing is the action
        (
            "€200 deposit needs paying by the 3rd",
            ("€200 deposit needs paying", "2026-04-03T00:00:00+00:00"),
        ),
        (  # from its own clause, not the lead before it
            "ok so, €200 deposit needs paying by the 3rd",
            ("€200 deposit needs paying", "2026-04-03T00:00:00+00:00"),
        ),
        (
            "the car needs servicing, remind me friday",
            ("car needs servicing", "2026-04-03T00:00:00+00:00"),
        ),
        # a bare "remind me at 5" names no action: the need before it does
        (
            "the car needs an MOT by friday, remind me at 5",
            ("MOT", "2026-04-03T00:00:00+00:00"),
        ),
        # the need before a bare "remind me <when>" is no part of the title
        (
            "also need to cancel Disney+ before it renews, remind me on the 3rd at 6pm",
            ("cancel Disney+ before it renews", "2026-04-03T18:00:00+00:00"),
        ),
        # "dont" as people type it
        (
            "and dont let me forget the permission slip for the farm trip, has to be signed and "
            "back by friday 9am",
            ("permission slip for the farm trip", "2026-04-03T09:00:00+00:00"),
        ),
        # the deadline after the request, though the reader found the 15th just gone
        (
            "entries close 23 april, remind me to pay her the entry fee by the 15th",
            ("pay her the entry fee", "2026-04-15T00:00:00+00:00"),
        ),
        # a word of calling off outside the request does not call it off
        (
            "she says I should skip grade 5, remind me to pay her the fee on friday",
            ("pay her the fee", "2026-04-03T00:00:00+00:00"),
        ),
        # a clause of dates alone says nothing to do
        (
            "OpenTable: Booking confirmed — Dishoom, Fri 10 Apr, 19:30, 2 people.",
            ("Booking confirmed", "2026-04-10T19:30:00+00:00"),
        ),
        # the end of a month; a day named today is due today
        (
            "my accountant says I gotta register for an ABN before end of month",
            ("register for an ABN", "2026-03-31T00:00:00+00:00"),
        ),
        ("she needs my 1099s by march 30", ("1099s", "2026-03-30T00:00:00+00:00")),
        # a number of people after the day is no clock time
        (
            "hosting a dinner party sat 11 april, 8 people, remind me",
            ("hosting a dinner party", "2026-04-11T00:00:00+00:00"),
        ),
    ],
)
def test_a_task_is_titled_by_its_action_and_due_by_its_deadline(text: str, expected: tuple) -> None:
    assert _tasks(text) == [expected]


def test_an_acknowledgement_reports_nothing_done() -> None:
    for text in ("Congratulations!! Noted: £18k budget, about 90 guests.", "Got it, swimming."):
        assert clause_completions(text, extract(text, NOW).times, NOW) == []


def test_a_message_log_line_is_titled_by_its_subject_not_its_sender() -> None:
    assert _tasks("Email: Hartley Dental - Your check-up needs rebooking") == [
        ("Your check-up needs rebooking", None)
    ]
    # a calendar entry's first part is the event, not a sender
    assert _tasks("Calendar: Physio - Marta Kowalski, Thu 2 Apr 10:00")[0][0] == "Physio"


def test_a_past_weekday_or_ordinal_is_due_next_time() -> None:
    x = extract("Remind me on the 28th to pay the window cleaner", NOW)
    (task,) = x.tasks
    assert task.due == datetime(2026, 4, 28, tzinfo=UTC)
    # a weekday and a day of the month: the next date that is both (Feb 25 and Mar 25 2026
    # are Wednesdays; on March 10 the reader finds the nearer, gone by)
    now = datetime(2026, 3, 10, 10, tzinfo=UTC)
    (task,) = extract("remind me to get the curry leaves by wed 25th", now).tasks
    assert task.due == datetime(2026, 3, 25, tzinfo=UTC)


def test_reports_of_done_and_cancelled() -> None:
    (done,) = clause_completions("got the parking permit, that one's done", [], NOW)
    assert (done.status, done.parse) == (TaskStatus.DONE, Parse.CLAUSE)
    (off,) = clause_completions("the plumber visit got cancelled", [], NOW)
    assert off.status is TaskStatus.CANCELLED
    assert (
        clause_completions("I'll book the vet tomorrow", extract("tomorrow", NOW).times, NOW) == []
    )
    assert reports_done("Done, paid the council tax") and not reports_done("done with the book?")
    # a report in a clause of its own beside a plan is still a report; a need is none
    for text, reported in [
        ("paid the county entry 👍 coach says sessions move to tuesdays from next week", True),
        ("need to get the car fixed, garage opens next week", False),
        ("TFN form handed in. remind me to book her hair appt by end of april", True),
    ]:
        found = clause_completions(text, extract(text, NOW).times, NOW)
        assert [c.status for c in found] == ([TaskStatus.DONE] if reported else [])


@pytest.mark.parametrize(
    ("text", "off"),
    [
        ("no need for the mat reminder, my sister gave me her old one", True),
        ("she called back. And forget the video, she'll watch me in the session", True),
        ("never mind the plumber, the landlord is sending someone", True),
        ("don't forget the video for Marta", False),  # a request, not a cancellation
    ],
)
def test_a_request_called_off_in_so_many_words_is_cancelled(text: str, off: bool) -> None:
    found = clause_completions(text, [], NOW)
    assert [c.status for c in found] == ([TaskStatus.CANCELLED] if off else [])


def test_a_request_called_off_beside_a_plan_is_still_cancelled() -> None:
    text = "Physio moved to the 3rd of April. And forget the video, she'll check my form then"
    (off,) = clause_completions(text, extract(text, NOW).times, NOW)
    assert off.status is TaskStatus.CANCELLED and "video" in off.action


@pytest.mark.parametrize(
    ("title", "text", "expected"),
    [
        (
            "send them on my lunch break",
            "kemi needs 3 months of payslips. remind me at 12:30 to send them on my lunch break",
            "send them on my lunch break (kemi needs 3 months of payslips)",
        ),
        (  # an aside is left out, and the clauses nearest the request are kept
            "email them about it",
            "the rent is going up in April and the agency charged me a £35 late fee (my bank's "
            "fault). remind me to email them about it by tuesday",
            "email them about it (the rent is going up in April, the agency charged me a £35 late "
            "fee)",
        ),
        (
            "morning",
            "so I need to finish the grant report, it's due friday. remind me that morning at 9",
            "morning (I need to finish the grant report, it's due friday)",
        ),
        (  # a replacement points at what it replaces; a dash before the request is no clause
            "grab a replacement at Bunnings",
            "the dripper line has sprung a leak - remind me to grab a replacement at Bunnings",
            "grab a replacement at Bunnings (the dripper line has sprung a leak)",
        ),
        ("buy oat milk", "remind me to buy oat milk", "buy oat milk"),  # it names its thing
        ("call it in", "remind me to call it in", "call it in"),  # nothing before to name it
        (  # "on time" only says when
            "I pay on time",
            "sem 1 fees ($19,400) due 31/03 or they cancel my enrolment. pls make sure I pay on "
            "time",
            "I pay on time (sem 1 fees due 31/03 or they cancel my enrolment)",
        ),
        (  # a need, not only a request, is what the clauses before it explain
            "file it",
            "also quarterly sales tax is due, i need to file it by april 15 at 5pm",
            "file it (quarterly sales tax is due)",
        ),
    ],
)
def test_a_title_that_only_points_gets_the_clauses_that_name_its_thing(
    title: str, text: str, expected: str
) -> None:
    assert with_referent(title, text) == expected


def test_a_report_beside_a_request_still_opens_the_task(built: Built) -> None:
    text = "sent the thank-you emails. they want a case study by friday, remind me to get it done"
    tasks = [m for m in built(text, Label.WORKING) if isinstance(m, Task)]
    assert [t.status for t in tasks] == [TaskStatus.PENDING, TaskStatus.DONE]
    assert "case study" in tasks[0].title
    # so does something that must be done by a time ahead
    text = (
        "review done. nurse switched my preventer to fostair. need to collect it from boots tmrw "
        "at 4"
    )
    tasks = [m for m in built(text, Label.WORKING) if isinstance(m, Task)]
    assert [(t.title, t.status) for t in tasks] == [
        ("collect it from boots (nurse switched my preventer to fostair)", TaskStatus.PENDING),
        ("finish review", TaskStatus.DONE),
    ]


def _turn(text: str, *labels: Label, role: Role = Role.USER, turn_id: str = "t1") -> Turn:
    return Turn(turn_id, "s1", role, text, NOW, labels=labels)


Built = Callable[..., list[Memory]]


@pytest.fixture
def built(encoder: Encoder, reader: FactReader) -> Built:
    """The records a turn's labels build, with the facts the real reader reads of it."""

    def build(text: str, *labels: Label, role: Role = Role.USER) -> list[Memory]:
        turn = _turn(text, *labels, role=role)
        states, offsets = encoder.reading(text)
        facts = [] if role is Role.ASSISTANT else reader.read(text, states, offsets)
        return build_memories(turn, extract(text, NOW), facts, reader.slots)

    return build


def test_the_label_decides_the_type_and_the_parse_is_recorded(built: Built) -> None:
    (rule,) = [
        m for m in built("on rainy days I cycle in", Label.PROCEDURAL) if isinstance(m, Rule)
    ]
    (task,) = [m for m in built("dentist Thursday at 3", Label.WORKING) if isinstance(m, Task)]
    assert (rule.parse, task.parse) == (Parse.CLAUSE, Parse.CLAUSE)
    assert task.due == datetime(2026, 4, 2, 15, 0, tzinfo=UTC)


def test_a_chat_turn_routed_to_a_request_keeps_the_facts_said_beside_it(built: Built) -> None:
    text = "My landlord is Foxtons. Remind me to email them about the deposit on Friday"
    records = built(text, Label.WORKING)
    assert [(f.relation, f.object.name) for f in records if isinstance(f, Fact)] == [
        ("landlord", "Foxtons")
    ]
    assert [t.title for t in records if isinstance(t, Task)] == [
        "email them about the deposit (My landlord is Foxtons)"
    ]


def test_an_assistant_confirmation_opens_no_task_and_makes_no_generic_rule(built: Built) -> None:
    records = built(
        "Sure, reminder set for 5pm.", Label.PROCEDURAL, Label.WORKING, role=Role.ASSISTANT
    )
    assert [type(m).__name__ for m in records] == ["Episode"]


def test_a_long_turn_called_noise_keeps_its_episode(built: Built) -> None:
    long = (
        "Wow, love that painting! So cool you found such a helpful group, what's it done for you?"
    )
    assert [type(m).__name__ for m in built(long, Label.FRAGMENTED)] == ["Episode"]
    assert built("haha thanks so much!", Label.FRAGMENTED) == []


@pytest.mark.parametrize(
    ("text", "done"),
    [
        ("entered wilmslow 👍", True),  # a short line opening with a past verb reports it done
        ("I emailed the landlord", True),
        ("I wanted to ask you something", False),
        ("I moved to Leeds in 2019 and I love it here, the people are great", False),  # too long
        ("TAX RETURN FILED. owe £3,210", True),  # or closing with one
        ("peloton trial cancelled", True),
        ("I'm really excited", False),
        ("feeling exhausted", False),
    ],
)
def test_a_short_past_report_is_a_completion(text: str, done: bool) -> None:
    assert bool(clause_completions(text, [], NOW)) is done


def test_a_request_keeps_the_pattern_facts_said_beside_it(built: Built) -> None:
    text = "I work at Monzo. remind me to send the contract on friday"
    facts = [m for m in built(text, Label.WORKING) if isinstance(m, Fact)]
    assert [(f.relation, f.object.name) for f in facts] == [("employer", "Monzo")]


@pytest.mark.parametrize(
    ("text", "condition", "action"),
    [
        # "on … nights/holidays" is a time trigger, before or after the action
        ("from now on no screens after 6pm on school nights", "on school nights", "no screens"),
        ("on public holidays pay the crew time and a half", "on public holidays", "pay the crew"),
        # a trigger inside a time trigger keeps both; "tell me to" is the action
        (
            "from now on on weeknights if i'm still gaming after 11pm tell me to go to bed, "
            "work is suffering lol",
            "on weeknights, i'm still gaming after 11pm",
            "tell me to go to bed",
        ),
        ("if the kids tell me they're hungry, give them fruit", "the kids tell me", "give them"),
        # a request or an instruction right after a time trigger is the action
        (
            "every community day make sure i pop a lucky egg, forgot both today",
            "every community day",
            "make sure i pop a lucky egg",
        ),
        (
            "every friday send bean there their invoice before 5, they pay faster",
            "every friday",
            "send",
        ),
    ],
)
def test_time_triggers_read_around_their_actions(text: str, condition: str, action: str) -> None:
    (rule,) = clause_rules(text)
    assert rule.conditions[0].startswith(condition)
    assert rule.actions[0].startswith(action)


@pytest.mark.parametrize(
    ("text", "condition", "action"),
    [
        # the action starts right after a time trigger
        (
            "on office days remind me at 7 to pack my badge because I always forget it",
            "on office days",
            "remind me at 7",
        ),
        # what one wants to do is the action of a bare reminder request
        (
            "every saturday morning I want to do a 25% water change, remind me pls",
            "every saturday morning",
            "do a 25% water change",
        ),
        # "saying I'm…" does not start the action
        (
            "If I message you saying I'm hungry before noon, remind me to drink water",
            "I message you saying I'm hungry before noon",
            "remind me to drink water",
        ),
        # a verb right after the trigger's subject is the trigger's
        ("whenever I book a hotel pls remind me to add my Bonvoy number", "I book a hotel", "pls"),
        # a time trigger and what happens then, then a bare reminder request
        (
            "On the 1st of every month he gets a NexGard chew - please remind me",
            "on the 1st of every month",
            "he gets a NexGard chew",
        ),
    ],
)
def test_rule_triggers_and_actions_read_from_their_clauses(
    text: str, condition: str, action: str
) -> None:
    (rule,) = clause_rules(text)
    assert rule.conditions == [condition]
    assert rule.actions[0].startswith(action)


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("scrap the mailing — found a local lab that does same day dev", TaskStatus.CANCELLED),
        ("don't need to ring them on the 18th anymore 🙌", TaskStatus.CANCELLED),
        ("table booked 👍 also deleted bumble", TaskStatus.DONE),
        ("never mind, I'll ring them tomorrow", None),  # moved, not called off
    ],
)
def test_reports_read_in_more_ways(text: str, status: TaskStatus | None) -> None:
    found = clause_completions(text, extract(text, NOW).times, NOW)
    assert [c.status for c in found][:1] == ([status] if status else [])


def test_a_reminder_called_off_wins_over_a_third_party_report() -> None:
    text = (
        "the campsite people cancelled on us so we're renting elsewhere. "
        "and jamie's already booked ullapool so you can drop that reminder"
    )
    (off,) = clause_completions(text, [], NOW)
    assert off.status is TaskStatus.CANCELLED
    assert "ullapool" in off.action


def test_a_need_with_a_time_ahead_is_a_task_beside_a_request() -> None:
    text = (
        "they need my DBS form back, have to drop it at the church office by 5pm on the 12th. "
        "also every time i've got a shift make sure i wear closed toe shoes"
    )
    tasks = clause_tasks(text, extract(text, NOW).times, NOW)
    assert any("church office" in t.title for t in tasks)
    assert any("closed toe shoes" in t.title for t in tasks)


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("dropped the DBS form off on my lunch break ✅", TaskStatus.DONE),  # delivered it
        ("so don't worry about the grout anymore", TaskStatus.CANCELLED),
    ],
)
def test_phrasal_reports(text: str, status: TaskStatus) -> None:
    (found,) = clause_completions(text, [], NOW)
    assert found.status is status
