"""Whether a chat clause states anything of anyone, and whom a word can name: the judgements
:mod:`.clause_facts` makes before it keeps a value or a sentence, by function words only::

    VERDICT.match("so bold")                 → a verdict on the moment, no fact
    cannot_stand_alone(["loving", "it"])     → True: the value points back
    of_speaker("Keep up the amazing work!")  → False: said to the listener
    names_nobody("Try")                      → True: a verb, not a person
"""

from __future__ import annotations

import re

from memoryd.memory.extract.names import CAPITAL_STOPWORDS
from memoryd.memory.extract.sentences import IMPERATIVES, NON_OBJECTS, rx

__all__ = [
    "NOT_PEOPLE",
    "OPENERS",
    "VERDICT",
    "cannot_stand_alone",
    "named",
    "names_nobody",
    "no_subject",
    "of_speaker",
]

_SPEAKER = rx(r"(?<![\w'])(?:I|I'm|I've|I'd|I'll|my|me|mine|we|we're|we've|our|us)(?![\w'])")
_FIRST_PERSON = frozenset("i i'm i've i'd my we we're we've we'd our".split())
_LISTENER = frozenset("you you're youre your yours yourself y'all ya ur".split())
_EXCLAMATIONS = frozenset(
    "wow thanks thank congrats congratulations sounds great awesome cool nice good aww yay "
    "omg lol haha let's lets".split()
)
_BRACKETED = re.compile(r"\[[^\]]*\]")

OPENERS = frozenset(
    "and but so then now yes yeah oh ok okay also well today yesterday sometimes usually fyi "
    "btw honestly actually anyway plus hey hi morning".split()
)
NOT_PEOPLE = frozenset(
    "here let today tonight tomorrow yesterday everyone everybody someone somebody anyone "
    "nobody life time weather thing things work week weekend day night morning what's".split()
)
"""Lowercase words before "'s" that name no person or pet ("here's", "let's", "life's")."""
_INSTRUCTION_VERBS = frozenset(
    "try keep start stop avoid use make let add get put go swap switch aim focus think "
    "remember consider mix pair plan set".split()
)
_CONJUNCTIONS = frozenset(
    "while since though although because until unless once whether even when if as".split()
)
_SUBJECTLESS = frozenset("been being got had just gotta need hope wish miss talk".split())
"""Words that open a sentence whose subject, the speaker, is left out ("Been so busy…")."""

_INTENT = rx(r"(?<![\w'])(?:gonna|let's|let\s+me|can't\s+wait)(?![\w'])")

# How one feels about the moment, or what one thinks of a thing: not a fact about anyone
# ("I'm so excited", "the trip was amazing", "Finding balance is key", "Adoption sounds
# awesome"); a fear or an allergy is ("so scared of heights", "really allergic to nuts").
VERDICT = rx(
    r"^(?:(?:so+|really|very|super|just|pretty|totally|absolutely|quite|kinda|more|most|such|"
    r"truly|incredibly|extremely|definitely|indeed|always|a\s+bit|a\s+little|a|an|the|been|"
    r"being|getting|feeling|doing|not)\s+)*"
    r"(?:(?:sounds?|looks?|seems?|feels?)\s|(?:can|could|must|might|may|will|would)\s+"
    r"(?:be|feel|get)\s|(?:so+|such|too|very|super|pretty|totally|absolutely|truly|incredibly|"
    r"amazingly|extremely|completely|seriously|feeling)\s+(?!(?:allergic|into|afraid|scared|"
    r"terrified|fond|keen|passionate|intolerant|sensitive|close|vegan|vegetarian|involved|"
    r"interested)\b)|"
    r"key|vital|crucial|important|essential|necessary|must|priceless|calming|comforting|rough|"
    r"cute|content|lazy|busy|easy|difficult|tricky|fine|ok|okay|alright|excellent|valuable|"
    r"helpful|useful|tiring|exhausting|stressful|hectic|intense|on\s+fire|blast|best|worst|"
    r"alone|well|better|proud|excited|glad|happy|thrilled|"
    r"sure|sorry|grateful|thankful|stoked|lucky|blessed|inspired|amazed|curious|delighted|"
    r"honou?red|touched|relieved|sad|upset|nervous|worried|stressed|impressed|pumped|psyched|"
    r"overwhelmed|bummed|disappointed|jealous|motivated|determined|confident|hopeful|eager|"
    r"amazing|great|awesome|beautiful|lovely|nice|good|fun|wonderful|incredible|cool|fantastic|"
    r"tough|hard|crazy|wild|special|perfect|gorgeous|stunning|brilliant|terrible|awful|"
    r"horrible|insane|unreal|epic|breathtaking|magical|huge|exciting|inspiring|fascinating|"
    r"interesting|rewarding|fulfilling|challenging|scary)\b"
)

_NAME_WORD = re.compile(r"\b[A-Z][a-z]{2,}\b")
_VOCATIVE = re.compile(
    r"(?:^|[.!?]\s+)(?:(?i:hey|hi|hello|thanks|thank\s+you|wow|yeah|yes|oh|sorry|congrats|dear|"
    r"aw+|ha+|way\s+to\s+go|no\s+problem)[,!]?\s+)?(?P<name>[A-Z][a-z]{2,})\s*(?:[,!?.]|$)"
)

_REFERRING = frozenset("it them this that these those him there here so me us one ones".split())
_REFERRING_LEAD = frozenset("it them him there here".split())
_DANGLING = frozenset(
    "a an the my our his their to of on in at for with from about into by and or but than as "
    "what where when how which who whose is are was were be been being has have had do does "
    "did can could will would should like just some sure however much many".split()
)


def cannot_stand_alone(words: list[str]) -> bool:
    """Whether a value says nothing on its own: it speaks of the listener ("here for you",
    "appreciates your support"), ends on a word that points back or leads on ("loving it",
    "read a few of them", "working on", "sharing what") or opens with one ("them a lot more")."""
    bare = [w.strip(".,!?;:'\"()").lower() for w in words]
    bare = [w for w in bare if w] or [""]
    return (
        not _LISTENER.isdisjoint(bare)
        or bare[-1] in _REFERRING
        or bare[-1] in _DANGLING
        or bare[0] in _REFERRING_LEAD
    )


def of_speaker(text: str) -> bool:
    """Whether a chat sentence may state something of its speaker: it opens with them (a
    first-person word), or with a thing of theirs and names them or runs on ("Lemon cake beats
    everything"); not when it opens with a pronoun, an activity or a word to the listener ("It's
    awesome how…", "Exploring nature is so special", "Keep up the good work"), speaks to or of
    the listener anywhere ("I admire what you do"), says what one is about to do ("gonna make
    it", "let's…") or is a bare exclamation ("Wow, Caroline")."""
    text = _BRACKETED.sub("", text)
    words = [w.strip(".,!?;:'\"").lower() for w in text.split()]
    words = [w for w in words if w and w not in OPENERS]
    if not words or not _LISTENER.isdisjoint(words) or _INTENT.search(text):
        return False
    lead = words[0]
    if lead in _FIRST_PERSON:
        return True
    if lead in NON_OBJECTS or lead in _EXCLAMATIONS or lead.endswith("ing"):
        return False
    if names_nobody(lead) or lead in _SUBJECTLESS:
        return False
    return _SPEAKER.search(text) is not None or len(words) >= 3


def names_nobody(word: str) -> bool:
    """Whether a capitalised word leading a clause is no one's name: an opener, a stopword, or
    a verb giving an instruction ("Try pairing squats with rowing", "Keep notes")."""
    lower = word.lower()
    return (
        lower in OPENERS
        or word.capitalize() in CAPITAL_STOPWORDS
        or lower in IMPERATIVES
        or lower in _INSTRUCTION_VERBS
    )


def no_subject(word: str) -> bool:
    """Whether a capitalised word opening a clause is no person or pet it could be about: an
    activity ("Seeing this pic…", "Joining a church…"), a conjunction ("While roses…") or a word
    whose subject, the speaker, is left out ("Been ages since…", "Life does…")."""
    lower = word.lower()
    return (
        lower.endswith("ing")
        or lower in _CONJUNCTIONS
        or lower in _SUBJECTLESS
        or lower in NOT_PEOPLE
        or VERDICT.match(lower) is not None
    )


def named(text: str) -> list[str]:
    """The names in ``text`` a pronoun after it may stand for: not an opener and not the
    listener called by name ("Hey Maria, …", "Thanks, Joanna!")."""
    called = {m["name"] for m in _VOCATIVE.finditer(text)}
    return [
        n
        for n in _NAME_WORD.findall(text)
        if not names_nobody(n) and n not in called and not no_subject(n)
    ]
