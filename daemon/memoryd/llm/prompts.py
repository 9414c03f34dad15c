"""Every prompt memoryd sends to an LLM, with the JSON schema its answer must fit."""

from __future__ import annotations

from typing import Any

from memoryd.llm.base import Prompt, schema_problem

# ------------------------------------------------------------------------- turn labelling

# The router's labels (memoryd.models.LABELS; a test keeps the two equal).
LABEL_NAMES: tuple[str, ...] = ("episodic", "semantic", "procedural", "working", "fragmented")
FRAGMENTED = "fragmented"
# Longest turn text put into a labelling prompt; the rest is cut (a label needs the gist only).
MAX_TURN_CHARS = 2000

LABEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "labels": {
            "type": "array",
            "items": {"enum": list(LABEL_NAMES)},
            "minItems": 1,
            "maxItems": 4,
            "uniqueItems": True,
        }
    },
    "required": ["labels"],
    "additionalProperties": False,
}

_LABEL_SYSTEM = """\
You sort the turns of a conversation between a user and an assistant into kinds of memory.
Give every kind that fits the turn, from this list:
- episodic: something that happened or will happen at a point in time, an event.
- semantic: a lasting fact about the user or people they know: a preference, a trait, a \
relation, where they live or work.
- procedural: how something is done: steps, rules, "if ... then ...", "whenever ...", habits \
stated as a routine.
- working: a current task: a to-do, a reminder, something pending, or an action just finished.
- fragmented: nothing worth remembering: a greeting, a thanks or ok, a reaction, a generic \
question, system or transport noise.
A turn can have several of the first four kinds. "fragmented" never goes with another kind.
Reply with a JSON object only, like {"labels": ["semantic"]}.

Examples:
Turn: I ran my first half marathon in Lisbon last Sunday.
{"labels": ["episodic"]}
Turn: My sister Ana is allergic to peanuts.
{"labels": ["semantic"]}
Turn: When I say "deploy", first run the tests, then push the main branch.
{"labels": ["procedural"]}
Turn: Remind me to renew my passport before Friday.
{"labels": ["working"]}
Turn: haha ok, thanks!
{"labels": ["fragmented"]}"""


def label_prompt(text: str) -> Prompt:
    """The prompt that asks which kinds of memory one turn holds (answer: LABEL_SCHEMA)."""
    text = " ".join(text.split())
    if len(text) > MAX_TURN_CHARS:
        text = text[:MAX_TURN_CHARS] + " [...]"
    return Prompt(system=_LABEL_SYSTEM, user=f"Turn: {text}")


def parse_labels(obj: dict[str, Any]) -> tuple[str, ...]:
    """The labels of an answer to :func:`label_prompt`, in LABEL_NAMES order.

    "fragmented" next to a content label is dropped: the content wins. Raises ValueError if
    ``obj`` does not fit LABEL_SCHEMA.
    """
    problem = schema_problem(obj, LABEL_SCHEMA)
    if problem is not None:
        raise ValueError(f"not a labelling answer: {problem}")
    given = set(obj["labels"])
    if given != {FRAGMENTED}:
        given.discard(FRAGMENTED)
    return tuple(name for name in LABEL_NAMES if name in given)


# ------------------------------------------------------------------------- tier sufficiency

SUFFICIENT = "sufficient"
SEARCH_MORE = "search_more"
MAX_CONTEXT_LINES = 20
MAX_LINE_CHARS = 300

_SUFFICIENCY_SYSTEM = """\
You decide whether remembered notes are enough to answer a question about the user.
Read the question and the notes. If the notes hold the facts the answer needs, reply \
{"verdict": "sufficient"}. If a fact the answer needs is missing from them, reply \
{"verdict": "search_more"}: an older archive will then be searched. Reply with the JSON only."""


def sufficiency_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"verdict": {"enum": [SUFFICIENT, SEARCH_MORE]}},
        "required": ["verdict"],
        "additionalProperties": False,
    }


def sufficiency_prompt(question: str, lines: list[str]) -> Prompt:
    """Question and the first tier's hits, one per line (answer: :func:`sufficiency_schema`)."""
    notes = "\n".join(f"- {' '.join(line.split())[:MAX_LINE_CHARS]}" for line in lines)
    question = " ".join(question.split())[:MAX_TURN_CHARS]
    return Prompt(
        system=_SUFFICIENCY_SYSTEM,
        user=f"Question: {question}\nNotes:\n{notes[: MAX_CONTEXT_LINES * MAX_LINE_CHARS]}",
    )


# ------------------------------------------------------------------------- importance

IMPORTANCE_BATCH = 8

_IMPORTANCE_SYSTEM = """\
You rate how much each memory of a personal assistant's user matters for the future, \
from 1 (forget it) to 10 (must never be forgotten). Weigh three things:
- behaviour: does it say how the user lives, acts or wants to be treated (habits, \
preferences, health, commitments)?
- reasoning: would it help answer or plan something later (a fact, a rule, a date, a name)?
- persistence: will it still hold in weeks or months, or is it a passing remark?
Small talk and greetings are 1-2; a passing event 3-5; a lasting preference, relation or \
routine 6-8; health, safety and firm commitments 9-10.
Reply with a JSON object only: {"scores": [{"n": 1, "importance": 7}, ...]}, one entry per \
memory, using the numbers given."""


def _integer(least: int, most: int) -> dict[str, Any]:
    """An integer in ``[least, most]``, its values listed: llama.cpp's grammar enforces an
    ``enum`` but not ``minimum``/``maximum`` (Gemma 270M answered an importance of 15)."""
    return {
        "type": "integer",
        "minimum": least,
        "maximum": most,
        "enum": list(range(least, most + 1)),
    }


def importance_schema(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "scores": {
                "type": "array",
                "minItems": count,
                "maxItems": count,
                "items": {
                    "type": "object",
                    "properties": {
                        "n": _integer(1, count),
                        "importance": _integer(1, 10),
                    },
                    "required": ["n", "importance"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["scores"],
        "additionalProperties": False,
    }


def importance_prompt(texts: list[str]) -> Prompt:
    """Numbered memories to rate (answer: :func:`importance_schema` of ``len(texts)``)."""
    lines = "\n".join(
        f"{n}. {' '.join(t.split())[:MAX_LINE_CHARS]}" for n, t in enumerate(texts, start=1)
    )
    return Prompt(system=_IMPORTANCE_SYSTEM, user=f"Memories:\n{lines}")


def parse_importance(obj: dict[str, Any], count: int) -> dict[int, int]:
    """Position (0-based) → importance from an answer to :func:`importance_prompt`. Raises
    ValueError if ``obj`` does not fit the schema; a position rated twice keeps its first."""
    problem = schema_problem(obj, importance_schema(count))
    if problem is not None:
        raise ValueError(f"not an importance answer: {problem}")
    out: dict[int, int] = {}
    for item in obj["scores"]:
        out.setdefault(item["n"] - 1, item["importance"])
    return out
