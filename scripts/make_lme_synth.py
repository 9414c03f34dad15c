"""Generate a synthetic LongMemEval-format file to benchmark tiered search at haystack scale.

Each instance is one question over a haystack of --sessions sessions of --turns turns (user and
assistant alternating, user first). Filler sessions are everyday chat built from templates: each
session picks a topic with its own vocabulary, plus names and places, so sessions differ
lexically. One or two "answer" sessions hold the needle: user turns with ``has_answer: true``,
placed mostly in the older three quarters of the timeline and sometimes in the recent quarter.
The question paraphrases the needle (some words shared, not a copy). Question types cycle through
the official set; knowledge-update and multi-session have two answer sessions in time order.
Dates ascend; the question comes after the last session. Same arguments, same file.
``--reply-sentences N`` makes each assistant reply N sentences long (LongMemEval's replies often
run past 256 tokens; 14 sentences are about 230 tokens), for benchmarks of long turns.

    python scripts/make_lme_synth.py --instances 50 --out eval-data/longmemeval_synth.json
    memoryd eval longmemeval eval-data/longmemeval_synth.json

Nothing here is copied from LongMemEval; only its JSON layout is followed.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

SEED = 1234
START = datetime(2023, 1, 2, 9, 0)
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"
RECENT_SHARE = 0.3
"""Share of needles placed in the most recent quarter of the haystack."""

NAMES = "Hana Marco Leila Tariq Zoe Nils Chloe Ravi Priya Tom Aisha Luca Ines Kenji Omar".split()
CITIES = "Oslo Lisbon Denver Toronto Kyoto Nairobi Austin Dublin Krakow Seattle Porto".split()
PLACES = (
    "the farmers market|the climbing gym|the art museum|the riverside park|the old library|"
    "the botanical garden|the night market|the harbour|the bowling alley|the county fair"
).split("|")
DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|the weekend".split("|")
TOPICS: dict[str, list[str]] = {
    t: words.split()
    for t, words in {
        "baking": "sourdough starter croissants oven rye flour proofing baguette",
        "gardening": "tomatoes compost seedlings mulch raised-beds aphids watering",
        "running": "intervals sneakers tempo hamstring mileage trail stopwatch",
        "cooking": "risotto saffron skillet marinade paella garlic broth",
        "travel": "itinerary hostel layover passport backpack ferry visa",
        "music": "guitar chords metronome amplifier ukulele scales setlist",
        "photography": "aperture tripod lens exposure darkroom portraits shutter",
        "finance": "budget savings mortgage spreadsheet invoices taxes pension",
        "fitness": "kettlebell deadlift squats protein stretching rowing plank",
        "reading": "novel paperback chapters bookmark audiobook anthology memoir",
        "movies": "trailer sequel director soundtrack cinema screenplay documentary",
        "home repair": "drywall faucet grout drill hinges caulk plumber",
        "pets": "kitten leash vet kibble aquarium parrot grooming",
        "coding": "python debugger refactor database compiler repository deadline",
        "cycling": "derailleur saddle helmet gravel spokes commute tubeless",
        "knitting": "yarn needles scarf mittens cardigan wool stitches",
        "coffee": "espresso grinder latte beans pour-over roast barista",
        "camping": "tent lantern sleeping-bag campfire kayak canoe marshmallows",
        "languages": "vocabulary grammar flashcards Spanish pronunciation tutor verbs",
        "board games": "dice strategy expansion meeple tournament chess puzzle",
    }.items()
}
USER_LINES = [
    "I've been spending a lot of time on {a} and {b} lately, any advice?",
    "My friend {name} got me into {topic}, and now I keep thinking about {a}.",
    "Last {day} I tried {a} at {place}, it went better than expected.",
    "What's a good way to improve my {b} without buying new {c}?",
    "Can you explain how {a} and {c} fit together for a beginner?",
    "{name} says {b} is overrated, do you agree?",
    "I want a simple weekly plan for {topic} that includes {c}.",
    "Do you think {a} is worth it if I only have an hour on {day}?",
]
ASSISTANT_LINES = [
    "Good question! Start small with {a} and add {b} once it feels routine.",
    "Many people find that {c} makes {topic} much more enjoyable.",
    "It depends on your goals, but {b} usually pays off within a few weeks.",
    "Try pairing {a} with {c}; keep notes so you can see progress.",
    "{name} has a point, though {b} still helps most beginners.",
    "A short session on {day} focused on {a} is a great habit.",
]

QUESTION_TYPES = [
    "single-session-user",
    "single-session-preference",
    "multi-session",
    "temporal-reasoning",
    "knowledge-update",
]
Needle = tuple[list[str], str, str]
"""(one user statement per answer session, in time order; question; answer)."""


def _needle(question_type: str, rng: random.Random) -> Needle:
    name, (city, other) = rng.choice(NAMES), rng.sample(CITIES, 2)
    pet = rng.choice(["tortoise", "hamster", "cockatiel", "ferret", "rabbit"])
    course = rng.choice(["pottery", "salsa", "woodworking", "sushi-making", "improv"])
    dish = rng.choice(["Ethiopian", "Georgian", "Peruvian", "Sichuan", "Lebanese"])
    relation = rng.choice(["cousin", "sister", "uncle", "roommate", "colleague"])
    item = rng.choice(["road bike", "standing desk", "telescope", "sewing machine"])
    needles: dict[str, Needle] = {
        "single-session-user": (
            [f"We finally picked a name for the {pet} we adopted: {name}."],
            f"What is my new {pet} called?",
            name,
        ),
        "single-session-preference": (
            [f"Honestly {dish} cooking is my favourite, the spicier the better."],
            "Can you suggest a spicy dinner place I would like?",
            f"A {dish} restaurant",
        ),
        "multi-session": (
            [
                f"I went to my first {course} class in {city} and loved it.",
                f"Just got back from another {course} class, my second one so far.",
            ],
            f"How many {course} lessons have I taken?",
            "Two",
        ),
        "temporal-reasoning": (
            [f"I bought a second-hand {item} from a seller in {city} today."],
            f"How long ago did I get the {item}?",
            "The time since that session's date",
        ),
        "knowledge-update": (
            [
                f"My {relation} {name} lives in {city} and loves it there.",
                f"Big news: {name} just moved from {city} to {other} for a new job.",
            ],
            f"Which city is my {relation} {name} living in now?",
            other,
        ),
    }
    return needles[question_type]


def _fill(template: str, topic: str, rng: random.Random) -> str:
    a, b, c = rng.sample(TOPICS[topic], 3)
    name, day, place = rng.choice(NAMES), rng.choice(DAYS), rng.choice(PLACES)
    return template.format(a=a, b=b, c=c, topic=topic, name=name, day=day, place=place)


def _reply(topic: str, sentences: int, rng: random.Random) -> str:
    return " ".join(_fill(rng.choice(ASSISTANT_LINES), topic, rng) for _ in range(sentences))


def _session(
    turns: int, rng: random.Random, needle: str | None, reply_sentences: int = 1
) -> list[dict[str, Any]]:
    """``turns`` alternating turns on one topic, each assistant reply ``reply_sentences``
    sentences; ``needle`` replaces one random user turn."""
    topic = rng.choice(list(TOPICS))
    out = [
        {"role": "user", "content": _fill(rng.choice(USER_LINES), topic, rng)}
        if i % 2 == 0
        else {"role": "assistant", "content": _reply(topic, reply_sentences, rng)}
        for i in range(turns)
    ]
    if needle is not None:
        users = [t for t in out if t["role"] == "user"]
        for t in users:
            t["has_answer"] = False
        target = rng.choice(users)
        target["content"], target["has_answer"] = needle, True
    return out


def _needle_positions(count: int, sessions: int, rng: random.Random) -> list[int]:
    """``count`` distinct session indices in ascending order, most in the older 3/4."""
    recent_from = max(1, sessions * 3 // 4)
    positions: set[int] = set()
    while len(positions) < count:
        recent = rng.random() < RECENT_SHARE
        positions.add(
            rng.randrange(recent_from, sessions) if recent else rng.randrange(recent_from)
        )
    return sorted(positions)


def _dates(count: int, start: datetime, rng: random.Random) -> list[datetime]:
    dates, when = [], start
    for _ in range(count):
        when += timedelta(days=rng.randint(1, 4), minutes=rng.randint(0, 600))
        dates.append(when)
    return dates


def make_instance(
    index: int, sessions: int, turns: int, rng: random.Random, reply_sentences: int = 1
) -> dict[str, Any]:
    """One LongMemEval-format instance; its question type cycles with ``index``."""
    question_type = QUESTION_TYPES[index % len(QUESTION_TYPES)]
    statements, question, answer = _needle(question_type, rng)
    positions = dict(
        zip(_needle_positions(len(statements), sessions, rng), statements, strict=True)
    )
    ids = [
        f"answer_synth{index:04d}_{j}" if j in positions else f"synth{index:04d}_{j}"
        for j in range(sessions)
    ]
    dates = _dates(sessions + 1, START + timedelta(days=index), rng)
    return {
        "question_id": f"synth_{index:04d}",
        "question_type": question_type,
        "question": question,
        "answer": answer,
        "question_date": dates[-1].strftime(DATE_FORMAT),
        "haystack_dates": [d.strftime(DATE_FORMAT) for d in dates[:-1]],
        "haystack_session_ids": ids,
        "haystack_sessions": [
            _session(turns, rng, positions.get(j), reply_sentences) for j in range(sessions)
        ],
        "answer_session_ids": [ids[j] for j in sorted(positions)],
    }


def generate(
    instances: int, sessions: int, turns: int, seed: int = SEED, reply_sentences: int = 1
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [make_instance(i, sessions, turns, rng, reply_sentences) for i in range(instances)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=50, help="questions (default 50)")
    parser.add_argument("--sessions", type=int, default=40, help="sessions each (default 40)")
    parser.add_argument("--turns", type=int, default=10, help="turns per session (default 10)")
    parser.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    parser.add_argument(
        "--reply-sentences", type=int, default=1, help="sentences per assistant reply (default 1)"
    )
    parser.add_argument("--out", type=Path, default=Path("eval-data/longmemeval_synth.json"))
    args = parser.parse_args(argv)
    if args.instances < 1 or args.sessions < 2 or args.turns < 2 or args.reply_sentences < 1:
        parser.error(
            "need --instances >= 1, --sessions >= 2, --turns >= 2 and --reply-sentences >= 1"
        )
    data = generate(args.instances, args.sessions, args.turns, args.seed, args.reply_sentences)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {len(data)} instances to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
