"""What the router's head reads: the turn's embedding, cue features of its form, and hashed
word n-grams.

A sentence embedding says what a turn is about; whether it is a rule, a to-do or a fact is
often in a few function words ("whenever…", "don't let me forget…", "I no longer…", "usually",
a ``key=value`` log line) that an averaged embedding dilutes. Two views keep them:

- :func:`cue_vector` marks those forms with hand-written patterns of English function words
  and log formats (not of any domain's vocabulary), each a value in [0, 1] scaled by
  :data:`CUE_SCALE`;
- :func:`ngram_vector` hashes the turn's lower-cased words and word pairs into
  :data:`NGRAM_DIM` buckets (L2-normalised), so that the head can learn its own cues from the
  corpus ("let me forget", "no longer", "every time").

:func:`features` concatenates them to the embedding::

    features(vec, "Whenever I fly long-haul, book me an aisle seat")   # (FEATURE_DIM,)

A head trained before these existed has the embedding's width only and gets the embedding
alone; one trained with cues but no n-grams gets the first ``384 + len(CUES)`` columns.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

__all__ = [
    "CUES",
    "CUES_VERSION",
    "CUE_SCALE",
    "NGRAM_DIM",
    "cue_vector",
    "features",
    "ngram_vector",
]

CUES_VERSION = 2
"""Bumped whenever :data:`CUES` or the n-gram hashing changes; the manifest records it."""
NGRAM_DIM = 2048
"""Hash buckets of :func:`ngram_vector`."""
CUE_SCALE = 0.25
"""Cue values are scaled to about the size of the embedding's largest components."""

_F = re.IGNORECASE


def _has(pattern: str) -> Callable[[str], float]:
    rx = re.compile(pattern, _F)
    return lambda text: 1.0 if rx.search(text) else 0.0


_DAYS = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_WORDS = re.compile(r"[\w'’-]+")
_IMPERATIVE = re.compile(
    r"^\s*(?:please\s+|pls\s+|ok(?:ay)?,?\s+|so\s+|and\s+|also\s+)?"
    r"(?:add|book|buy|call|cancel|check|clean|email|find|get|grab|message|order|pay|pick|put|"
    r"remind|renew|reply|reschedule|return|schedule|send|set|text|turn|switch|move|make|take|"
    r"bring|pack|print|water|feed|walk|refill|submit|email|ping|note|log|save|start|stop|"
    r"open|close|lock|unlock|play|keep|use|try|avoid|skip|wear|mute|snooze|dim|write|draft|"
    r"look\s+up|sign\s+up|top\s+up|sort\s+out|don't|do\s+not|never|always)\b",
    _F,
)
_GREETING = re.compile(
    r"^\W*(?:hi|hey|hello|hiya|yo|morning|good\s+(?:morning|night|evening|afternoon)|thanks|"
    r"thank\s+you|thx|ty|cheers|ok|okay|k|kk|cool|nice|great|awesome|lol|haha\w*|yes|yeah|yep|"
    r"no|nope|sure|bye|night|np|no\s+worries|sounds\s+good|got\s+it|perfect|wow|omg|aw+|ugh|"
    r"hmm+|you're\s+welcome|welcome|sorry|fine|alright|right)\b",
    _F,
)


def _log_form(text: str) -> float:
    """A device or app line: ``key: value``, ``key=value``, ``[app]``, ``log:``."""
    head = text.lstrip()[:40]
    return (
        1.0
        if re.match(r"(?:log\s*:|\[[\w .-]+\]|[\w .-]{1,24}:\s|[\w.-]+=)", head, _F)
        and not re.match(r"(?:re|fwd|ps|btw|note|update|edit)\s*:", head, _F)
        else 0.0
    )


def _length(text: str) -> float:
    return min(1.0, len(_WORDS.findall(text)) / 30.0)


def _short(text: str) -> float:
    return 1.0 if len(_WORDS.findall(text)) <= 3 else 0.0


CUES: tuple[tuple[str, Callable[[str], float]], ...] = (
    ("conditional", _has(
        rf"\b(?:if|when|whenever|every\s+time|each\s+time|any\s*time|unless|in\s+case|as\s+soon\s+as|"
        rf"once\s+(?:i|it|the|we|you)|on\s+\w+\s+days|on\s+{_DAYS}s|(?:before|after)\s+(?:i|we|you|"
        rf"every|each|my|the|going|leaving|bed|work|meals?|breakfast|lunch|dinner))\b")),
    ("standing", _has(
        r"\b(?:from\s+now\s+on|going\s+forward|in\s+future|in\s+the\s+future|by\s+default|"
        r"always|never|as\s+a\s+rule|from\s+today)\b")),
    ("reminder", _has(
        r"\b(?:remind|reminder|don'?t\s+(?:let\s+me\s+)?forget|make\s+sure|remember\s+to|"
        r"set\s+(?:an?\s+|me\s+an?\s+)?(?:alarm|timer|reminder)|to-?do|todo|nudge\s+me|ping\s+me)\b")),
    ("request", _has(r"^\W*(?:can|could|would|will)\s+you\b|\bplease\b|\bpls\b")),
    ("imperative", lambda text: 1.0 if _IMPERATIVE.match(text) else 0.0),
    ("obligation", _has(
        r"\b(?:i\s+need\s+to|i\s+have\s+to|i've\s+got\s+to|i\s+got\s+to|gotta|i\s+must|i\s+should|"
        r"i'm\s+going\s+to|i\s+am\s+going\s+to|i'll|i\s+will|i\s+plan|planning\s+to|need\s+to|"
        r"have\s+to|due|deadline)\b")),
    ("future_time", _has(
        rf"\b(?:tomorrow|tonight|tmrw|tmr|later|next\s+\w+|this\s+(?:evening|afternoon|weekend|"
        rf"week)|on\s+{_DAYS}|{_DAYS}|by\s+\w+|in\s+\d+\s+\w+|at\s+\d|\d\s*(?:am|pm)|\d{{1,2}}:\d{{2}}|"
        r"noon|midnight|upcoming|soon)\b")),
    ("past_time", _has(
        r"\b(?:yesterday|last\s+\w+|ago|earlier|this\s+morning|just\s+now|the\s+other\s+day|"
        r"over\s+the\s+weekend|back\s+in|in\s+(?:19|20)\d\d)\b")),
    ("past_verb", _has(
        r"\b(?:\w{3,}ed|went|had|got|was|were|did|saw|met|ate|ran|took|made|came|left|bought|"
        r"found|lost|won|spent|drove|flew|gave|told|said|broke|fell|slept|caught|paid)\b")),
    ("completion", _has(
        r"\b(?:already|done|finished|completed|sorted|dealt\s+with|ticked\s+off|checked\s+off)\b"
        r"|✓|✅|\bjust\s+(?:did|took|paid|sent|booked|called|finished)\b")),
    ("stative", _has(
        r"\b(?:i'm|i\s+am|i've\s+been|i\s+have|i've\s+got|i\s+live|i\s+work|i\s+like|i\s+love|"
        r"i\s+hate|i\s+prefer|i\s+own|i\s+drink|i\s+eat|i\s+take|i\s+use|i\s+speak|i\s+play|"
        r"i\s+don't|my\s+[\w-]+(?:\s+[\w-]+)?\s+(?:is|are|has|was)|(?:he|she|they)\s+(?:is|are|has|"
        r"lives|works))\b")),
    ("habit", _has(
        r"\b(?:usually|normally|generally|typically|tend\s+to|every\s+(?:day|morning|evening|night|"
        r"week|month|weekend)|daily|weekly|nightly|most\s+(?:days|mornings|evenings|nights|weeks)|"
        r"(?:once|twice|\w+\s+times)\s+a\s+\w+|a\s+day|a\s+week|per\s+(?:day|week)|always|never)\b")),
    ("change", _has(
        r"\b(?:no\s+longer|anymore|any\s+more|not\s+\w+\s+now|stopped|quit|switched|moved\s+to|"
        r"moved\s+in|changed\s+to|used\s+to|gave\s+up|instead|now\s+i|these\s+days|since)\b")),
    ("question", lambda text: 1.0 if text.rstrip().endswith("?") else 0.0),
    ("wh_start", _has(
        r"^\W*(?:what|what's|whats|why|how|who|where|when|which|is|are|do|does|did|should|"
        r"shall|any)\b")),
    ("log_form", _log_form),
    ("measure", _has(
        r"\d\s*(?:bpm|kcal|cal|km|mi|miles|kg|lbs?|steps|min|mins|h|hrs?|%|mg|ml|°)|[£$€]\s?\d|"
        r"\d{1,2}:\d{2}")),
    ("noise", _has(
        r"\b(?:sync(?:ed|ing)?|battery|updated?|connected|disconnected|heartbeat|backup|signal|"
        r"wi-?fi|bluetooth|firmware|restarted|online|offline|ping|ok|success(?:ful)?|version)\b")),
    ("greeting", lambda text: 1.0 if _GREETING.match(text) else 0.0),
    ("howto", _has(
        r"\b(?:how\s+to|to\s+\w+\s+(?:it|the|a|your)\b.*,\s*(?:first|just|hold|press)|step|"
        r"first,|then|next,|finally|hold\s+(?:down|the)|press|tap|click|go\s+to\s+settings)\b")),
    ("second_person", _has(r"\b(?:you|your|you're|you've|you'll)\b")),
    ("first_person", _has(r"\b(?:i|i'm|i've|i'll|i'd|my|me|mine|we|our|us)\b")),
    ("digits", _has(r"\d")),
    ("length", _length),
    ("short", _short),
)  # fmt: skip
"""(name, function of the text) pairs, in the order of the cue vector."""


def cue_vector(text: str) -> np.ndarray:
    """The cues of one text, ``(len(CUES),)`` float32, each scaled by :data:`CUE_SCALE`."""
    text = text.replace("\u2019", "'")
    return np.array([CUE_SCALE * cue(text) for _, cue in CUES], dtype=np.float32)


_TOKEN = re.compile(r"[a-z0-9']+|[^\sa-z0-9']")


def ngram_vector(text: str) -> np.ndarray:
    """Words, word pairs and the first word of ``text`` hashed (CRC-32) into ``NGRAM_DIM``
    buckets, set to 1 and L2-normalised; ``(NGRAM_DIM,)`` float32."""
    words = _TOKEN.findall(text.lower().replace("\u2019", "'"))
    grams = [*words, *(f"{a} {b}" for a, b in pairwise(words))]
    grams.append(f"<s> {words[0]}" if words else "<s>")
    out = np.zeros(NGRAM_DIM, dtype=np.float32)
    buckets = {zlib.crc32(g.encode()) % NGRAM_DIM for g in grams}
    out[list(buckets)] = 1.0 / np.sqrt(len(buckets))
    return out


def _extra(text: str) -> np.ndarray:
    return np.concatenate([cue_vector(text), ngram_vector(text)])


def features(x: np.ndarray, texts: str | Sequence[str], width: int | None = None) -> np.ndarray:
    """The head's input: the embedding(s) ``x`` with the cues and n-grams of ``texts`` appended,
    cut to ``width`` columns (a head's input width: older heads read fewer)."""
    x = np.asarray(x, dtype=np.float32)
    if width is not None and width == x.shape[-1]:
        return x
    if isinstance(texts, str):
        out = np.concatenate([x, _extra(texts)])
        return out[:width] if width else out
    extra = (
        np.stack([_extra(t) for t in texts])
        if len(texts)
        else np.zeros((0, len(CUES) + NGRAM_DIM), dtype=np.float32)
    )
    out = np.concatenate([x, extra], axis=1)
    return out[:, :width] if width else out
