"""Every prompt memoryd sends to an LLM, with the JSON schema its answer must fit."""

from __future__ import annotations

from typing import Any

from memoryd.llm.base import Prompt, schema_problem

# ------------------------------------------------------------------------- turn labelling

# The router's labels (memoryd.memory.models.LABELS; a test keeps the two equal).
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
