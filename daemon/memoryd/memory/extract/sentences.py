"""Sentences and the patterns every extractor shares: the first-person subject, adverbs,
negation, where an object ends, hedges, list separators, time cutting."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.memory.timeparse import TimeMention

__all__ = [
    "ADV",
    "CLAUSE_OPENERS",
    "CONDITIONAL",
    "FIRST_PERSON",
    "FLAGS",
    "FUNCTION_WORDS",
    "IMPERATIVES",
    "LEADING_DET",
    "LIST_SPLIT",
    "NEG",
    "NON_OBJECTS",
    "OBJ",
    "OPENING_FILLER",
    "PRONOUN_I",
    "TRAILING_FILLER",
    "Sentence",
    "cut_times",
    "opens_clause",
    "overlaps",
    "rx",
    "sentences_of",
    "shorten",
    "split_sentences",
]


IMPERATIVES = frozenset(
    "take call buy pay book schedule pick send email text submit renew refill water feed walk "
    "clean finish check cancel return bring order drink prepare review write visit "
    "apply measure stretch".split()
)


# Words that cannot start the object of a fact or an action: pronouns, clause openers,
# prepositions and verbs ("the things I love makes…", "a pic I took at the park").
NON_OBJECTS = frozenset(
    "it it's that that's this them you you're him her those these everything anything "
    "something nothing how what when where why who your his their our its which one ones all "
    "i i'm we he she they there there's to do be with for in on at about from of by is are "
    "was were makes made means recently again too so as while when because same".split()
)


# Words with no content of their own: a condition or title made only of these says nothing.
FUNCTION_WORDS = frozenset(
    "i i'm me it it's that this there all can could will would do does did so the a an same "
    "too as well you we they he she is are be".split()
)


EMOJI = "[\U0001f000-\U0001faff\u2600-\u27bf]"
"""One emoji or pictograph, as a character class for patterns ("😩", "✅")."""

PRONOUN_I = r"(?<![\w'])I"


ADV = (
    r"(?:\s+(?:really|also|actually|still|now|just|absolutely|totally|so|very|quite|severely|"
    r"mildly|deathly|kind\s+of|kinda|sort\s+of|pretty|truly|always|currently|recently|"
    r"definitely|genuinely|seriously)){0,3}"
)


NEG = r"(?P<neg>\s+(?:don't|do\s+not|no\s+longer|never|not))?"


OBJ = (
    r"(?P<obj>[^.;:!?()\"\n]+?)"
    r"(?=\s*(?:[.;:!?()\"\n]|$)"
    r"|\s*,\s*(?:and\s+|but\s+|so\s+|then\s+)?(?:I|I'm|I've|my|we|he|she|they|it|it's|that|"
    r"which|who|but|so|because|though|although|then|when|while|especially|also|plus|lol|"
    r"haha|since|as|the|this|these|those|there|what|how|you|your|to|cause|cuz)\b"
    r"|\s*,\s*'cause\b"
    r"|\s+(?:but|so|because|since|as|when|whenever|while|which|who|though|although|if|"
    r"unless|until|then|whereas|cause|cuz)\b|\s+'cause\b"
    r"|\s+and\s+(?:I|I'm|I've|my|we|he|she|they|it|then|also)\b)"
)


FLAGS = re.IGNORECASE


def rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, FLAGS)


_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)|\n+")


_ABBREVIATION = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|St|Prof|vs|etc)|\b[ap]\.m)$", re.IGNORECASE)


CONDITIONAL = rx(
    r"\b(?:if|unless|suppose|supposing|whether|in\s+case|imagine|pretend|wish|hope|hoping|"
    r"maybe|might|would|could|wonder)\b|'d\b"
)


FIRST_PERSON = rx(r"(?<![\w'])(?:I|my|me)\b")


LIST_SPLIT = rx(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+")


OPENING_FILLER = rx(
    r"^(?:(?:so|and|but|oh|ok|okay|well|also|btw|fyi|yeah|hey|hi|anyway|actually)\b[,\s]*)+"
)
"""The fillers a chat clause opens with ("so, and also …")."""
LEADING_DET = rx(r"^(?:(?:a|an|the|some|my|our|his|her|their|this|these|those|any|to)\s+)+")


TRAILING_FILLER = rx(
    r"(?:\s+(?:every\s+\w+|each\s+\w+|once\s+a\s+\w+|twice\s+a\s+\w+|\w+\s+times\s+a\s+\w+|"
    r"daily|nightly|a\s+lot|so\s+much|very\s+much|too|as\s+well|now|anymore|any\s+more|"
    r"these\s+days|lately|again|recently|right\s+now|at\s+all|though|tbh|lol|haha|too\s+much|"
    r"for\s+sure|either))+$"
)


# Words after which "I" starts a new clause ("and I took…", "yesterday I took…").
CLAUSE_OPENERS = frozenset(
    "and so but then also just yesterday today tonight finally already recently anyway btw "
    "well morning night evening afternoon week weekend ago earlier lol haha oh yes yeah ok "
    "okay hey guess though because cause 'cause since think know honestly "
    "really actually definitely totally now still monday tuesday wednesday thursday friday "
    "saturday sunday mon tue wed thu fri sat sun".split()
)


@dataclass(frozen=True)
class Sentence:
    start: int
    text: str  # without the closing punctuation
    question: bool = False

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def split_sentences(text: str) -> list[Sentence]:
    """Split at . ! ? and line breaks, but not after "Dr." or "a.m."; keep the offsets."""
    out: list[Sentence] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.group() == "." and _ABBREVIATION.search(text, max(0, m.start() - 5), m.start()):
            continue
        _add_sentence(out, text, start, m.start(), "?" in m.group())
        start = m.end()
    _add_sentence(out, text, start, len(text), False)
    return out


def sentences_of(text: str) -> list[Sentence]:
    """The non-blank sentences of ``text``, curly apostrophes made straight (the offsets hold:
    one character for one)."""
    return [s for s in split_sentences(text.replace("\u2019", "'")) if s.text.strip()]


def _add_sentence(out: list[Sentence], text: str, start: int, end: int, question: bool) -> None:
    chunk = text[start:end]
    stripped = chunk.lstrip()
    if stripped.strip():
        out.append(Sentence(start + len(chunk) - len(stripped), stripped.rstrip(), question))


def overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < e and s < end for s, e in spans)


def cut_times(segment: str, at: int, times: list[TimeMention]) -> str:
    """``segment`` (found at text offset ``at``) without the time expressions inside it."""
    for t in sorted(times, key=lambda t: -t.start):
        lo, hi = t.start - at, t.end - at
        if lo >= 0 and hi <= len(segment):
            segment = segment[:lo] + segment[hi:]
    return " ".join(segment.split())


def shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def opens_clause(s: str, at: int) -> bool:
    """Whether the "I" at ``at`` starts a clause; in "a photo I took" it does not."""
    before = s[:at].rstrip()
    if not before or before[-1] in ",;:-–—(!":
        return True
    return before.split()[-1].lower() in CLAUSE_OPENERS
