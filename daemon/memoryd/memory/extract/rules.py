"""If/when-then rules of one sentence: prefix ("if X, A"), postfix ("always A when X"),
arrows, else-branches and step lists."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.memory.extract.health import (
    AMBIGUOUS_CONDITIONS,
    CONDITIONS,
    WORD,
    is_drug,
    is_health_related,
)
from memoryd.memory.extract.names import canonical_name
from memoryd.memory.extract.sentences import FUNCTION_WORDS, IMPERATIVES, Sentence, rx, shorten
from memoryd.models import Parse

__all__ = [
    "MAX_RULE_TAGS",
    "RuleCandidate",
    "request_in_condition",
    "rule_tags",
    "sentence_rules",
    "steps",
]


@dataclass(frozen=True)
class RuleCandidate:
    """Conditions (all must hold) and actions (in order); ``title`` is "<first condition> →
    <first action>". ``otherwise`` are the else-branch's actions (in order; [] if none) and
    ``tags`` a few lower-case topics ("health", the drugs and conditions the conditions name)."""

    title: str
    conditions: list[str]
    actions: list[str]
    text: str
    otherwise: list[str]
    tags: list[str]
    parse: Parse = Parse.PATTERN


# Rules.
_R_PREFIX = rx(
    r"^\s*(?:and\s+|so\s+|also\s+|please\s+|remember(?:\s*:\s*|\s+that\s+)|rule\s*:\s*)?"
    r"(?P<kw>if|when|whenever|every\s+time|each\s+time|any\s*time|before|after|once)\s+"
    r"(?P<cond>.+?)(?:\s*,\s*(?:then\s+)?|\s*:\s+(?:then\s+)?|\s+then\s+)(?P<act>.+)$"
)


_R_POSTFIX = rx(
    rf"^\s*(?P<act>(?:always|never|please|remember\s+to|make\s+sure\s+(?:to|you)|don't|"
    rf"do\s+not|{'|'.join(IMPERATIVES)})\b.+?)(?<!\beven)\s+(?P<kw>if|when|whenever|every\s+time|before|"
    r"after)\s+(?P<cond>.+)$"
)


# A postfix "before/after X" makes a rule only after a standing instruction.
_R_ADVICE = rx(r"^\s*(?:always|never|remember\s+to|make\s+sure)\b")


# A request inside what was read as the condition: "whenever I book a hotel pls remind me to
# add my Bonvoy number, I keep losing the points" has its action at "pls remind me", not after
# the comma.
_REQUEST_IN_CONDITION = rx(
    r"\s+(?=(?:(?:can|could|would|will)\s+(?:you|u)\s+)?(?:(?:please|pls|plz)\s+)?"
    r"(?:remind|ping|nudge|alert)\s+me\b|tell\s+me\s+to\b|(?:please|pls|plz)\s+\w|give\s+me\s+a\s+"
    r"(?:nudge|shout|reminder|ping|heads[\s-]?up)\b|make\s+sure\b|don'?t\s+let\s+me\b)"
)


_R_ARROW = re.compile(r"\s*(?:->|→|=>)\s*")


_R_PAST = rx(
    r"\b(?:was|were|had|did|went|got|came|used\s+to|ago|yesterday|last|left|arrived|felt|met|"
    r"saw|took|made|gave|told|said|found|thought|knew|began|became|won|lost|ran|ate|wrote|"
    r"bought|brought)\b|\b(?:I|we|he|she|they|you)\s+\w+ed\b"
)


# An action must be something to do: an instruction, or a habit in the present tense.
_R_ACTION = rx(
    rf"^(?:(?:please|just|first|always|never|don't|do\s+not|make\s+sure|remember|try|avoid|stop|"
    rf"keep|skip|use|ask|tell|wait|go|get|put|turn|set|add|eat|rest|sit|breathe|wash|wear|look|"
    rf"let|find|start|see|consult|contact|notify|lock|close|open|charge|switch|save|run|"
    rf"{'|'.join(IMPERATIVES)})\b|you\s+(?:should|need\s+to|must|have\s+to)\b|"
    r"I\s+(?:always\s+|usually\s+|often\s+|just\s+|then\s+)*(?!was\b|got\b|had\b|did\b|"
    r"can\b|could\b|will\b|would\b|might\b|\w+ed\b)\w+)"
)


_R_NOT_ACTION = rx(
    r"^(?:just\s+|please\s+)?let\s+me\s+know\b|^(?:I\s+)?(?:try|look)\s+(?:it|this|that)\s+out\b"
)


_R_CHITCHAT = rx(
    r"^(?:you\s+(?:ever\s+)?(?:want|need|like|wanna|have\s+time|don't\s+mind|get\s+a\s+chance)|"
    r"that's\s+ok|possible|anything|not|only|so)\b"
)


_ACTION_SPLIT = rx(r"\s*(?:,\s*then\s+|,?\s+and\s+then\s+|;\s*|\s+then\s+)")


_CONDITION_SPLIT = rx(r"\s*,?\s+(?:and|or)\s+(?=(?:I|I'm|it|it's|you|we|he|she|they|there|my)\b)")


# The else-branch after a separator: ", otherwise B", "; else B", ", or else B", "; if not, B".
_R_ELSE = rx(
    r"(?:\s*[,;]\s*|\s+[-–—]\s+)(?:and\s+|but\s+|or\s+)?"
    r"(?:(?:otherwise|else)\b\s*[,:]?|if\s+not\s*[,:])\s*"
)


# Where a sentence holds several rules: "If X, A; if Y, B" (not "; if not, B", an else).
_R_CLAUSES = rx(r"\s*;\s*(?:and\s+|but\s+)?(?=(?:if|when|whenever)\s+(?!not\b))")


# A comma list of steps ("take off your shoes, wash your hands") when every item is an action.
_STEP_LIST = rx(r"\s*,\s*(?:and\s+)?")


MAX_RULE_TAGS = 3


def sentence_rules(sentence: Sentence) -> list[RuleCandidate]:
    """If/when-then rules of one sentence: prefix ("if X, A" / "when X: A, then B"), postfix
    ("always A when X") or arrows.

    A rule may end in an else-branch ("If X, A, otherwise B" / "else B" / "or else B" /
    "; if not, B"); it is kept in ``otherwise`` when its first step is an action and it is not
    narrated in the past, else dropped (the main line stays). Clauses joined by "; if …"
    ("If it's sunny, cycle; if it rains, take the bus") become separate rules: a pattern cannot
    tell exclusive cases from independent rules, and separate rules are right in both readings;
    such a sentence keeps no else-branch, whose scope is unclear.
    """
    s = sentence.text
    if _R_ARROW.search(s):
        parts = [p.strip() for p in _R_ARROW.split(s) if p.strip()]
        if len(parts) >= 2:
            return [_rule([parts[0]], parts[1:], [], s)]
    clauses = [c.strip() for c in _R_CLAUSES.split(s) if c.strip()]
    if len(clauses) == 1:
        found = [_clause_rule(s, keep_else=True)]
    else:
        found = [_clause_rule(c, keep_else=False) for c in clauses]
    return [r for r in found if r is not None]


def _clause_rule(s: str, keep_else: bool) -> RuleCandidate | None:
    m = _R_PREFIX.match(s) or _R_POSTFIX.match(s)
    if m is None:
        return None
    cond, act = request_in_condition(m["cond"], m["act"])
    # The else-branch ends the sentence: after the actions (prefix) or the condition (postfix).
    if m.re is _R_PREFIX:
        act, otherwise = _split_else(act)
    else:
        cond, otherwise = _split_else(cond)
    if _R_PAST.search(cond) or _R_CHITCHAT.match(cond):
        return None
    keyword = " ".join(m["kw"].lower().split())
    if m.re is _R_POSTFIX and keyword in ("before", "after") and not _R_ADVICE.match(m["act"]):
        return None  # "Take omeprazole 30 min before dinner" is a to-do, not a rule
    conditions = [c.strip() for c in _CONDITION_SPLIT.split(cond) if c.strip()]
    if keyword in ("before", "after", "once"):
        conditions = [f"{keyword} {c}" for c in conditions]
    actions = steps(act)
    if not _meaningful(conditions) or not actions or not _is_action(actions[0]):
        return None
    branch = steps(otherwise) if keep_else else []
    if branch and (not _is_action(branch[0]) or _R_PAST.search(otherwise)):
        branch = []
    return _rule(conditions, actions, branch, s)


def request_in_condition(cond: str, act: str) -> tuple[str, str]:
    """The condition and action of a trigger clause, moved to the request when one sits inside
    what was read as the condition; what followed it is a step when it is an action ("…, and
    write FRAGILE on anything with glass"), else no step (a reason, "I keep losing the
    points")."""
    m = _REQUEST_IN_CONDITION.search(cond)
    if m is None or not cond[: m.start()].strip():
        return cond, act
    rest = _AND.sub("", act.strip(" ,"))
    request = cond[m.end() :]
    step = rest and _is_action(rest) and not _SUBJECT.match(rest)
    return cond[: m.start()], f"{request}, then {rest}" if step else request


_AND = rx(r"^(?:and|also|then)\s+")
_SUBJECT = rx(r"^(?:I|we|you|he|she|they|it)\b")


def _split_else(text: str) -> tuple[str, str]:
    """``text`` before its else-marker and the else-branch after it ("" if there is none)."""
    m = _R_ELSE.search(text)
    if m is None:
        return text, ""
    return text[: m.start()], text[m.end() :].strip(" ,")


def steps(text: str) -> list[str]:
    """Actions in order: split at "then" and ";", and at commas when every item is an action."""
    out: list[str] = []
    for part in _ACTION_SPLIT.split(text):
        part = part.strip(" ,")
        if not part:
            continue
        items = [i.strip(" ,") for i in _STEP_LIST.split(part) if i.strip(" ,")]
        out += items if len(items) > 1 and all(_is_action(i) for i in items) else [part]
    return out


def _meaningful(conditions: list[str]) -> bool:
    """Each condition has a content word ("whenever I can" and "after that" say nothing)."""
    return bool(conditions) and all(
        any(
            w not in FUNCTION_WORDS and w not in ("before", "after", "once")
            for w in c.lower().split()
        )
        for c in conditions
    )


def _is_action(text: str) -> bool:
    return bool(_R_ACTION.match(text)) and not _R_NOT_ACTION.match(text)


def _rule(
    conditions: list[str], actions: list[str], otherwise: list[str], text: str
) -> RuleCandidate:
    title = shorten(f"{conditions[0]} → {actions[0]}")
    return RuleCandidate(title, conditions, actions, text, otherwise, rule_tags(conditions, text))


def rule_tags(conditions: list[str], text: str) -> list[str]:
    """Tags: 'health' for a health-related rule, then the drugs and conditions it names
    (canonical names; its conditions' first, then the rest in text order); at most
    MAX_RULE_TAGS."""
    tags = ["health"] if is_health_related(text) else []
    for word in WORD.findall(" ".join([*conditions, text])):
        if is_drug(word) or word.lower() in CONDITIONS - AMBIGUOUS_CONDITIONS:
            tags.append(canonical_name(word))
    return list(dict.fromkeys(tags))[:MAX_RULE_TAGS]
