"""First-person facts (the user is always the subject) from patterns over one sentence:
"I'm allergic to X", "I live in Y", "my sister Anna", "I love Z", … and their vocabulary."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from memoryd.memory.extract.health import (
    BODY_PARTS,
    CONDITION_PHRASE,
    CONDITIONS,
    MED_WORDS,
    WORD,
    is_drug,
)
from memoryd.memory.extract.names import (
    CAPITAL_STOPWORDS,
    PETS,
    PLACE_KEYS,
    POSSESSIONS,
    RELATIONSHIP_WORDS,
    canonical_name,
)
from memoryd.memory.extract.phrases import (
    DEICTIC_DETERMINERS,
    is_aspect,
    is_gerund,
    list_items,
    max_words,
    object_text,
    raw_object,
    usable,
)
from memoryd.memory.extract.sentences import (
    ADV,
    CONDITIONAL,
    FIRST_PERSON,
    LEADING_DET,
    LIST_SPLIT,
    NEG,
    OBJ,
    PRONOUN_I,
    Sentence,
    opens_clause,
    overlaps,
    rx,
)
from memoryd.memory.timeparse import TimeMention
from memoryd.models import EntityType, Parse

__all__ = [
    "GENERIC_ROLES",
    "IDENTITY_WORDS",
    "INTENSIFIERS",
    "LANGUAGES",
    "NEGATED_CHANGE",
    "NEGATIVE_VERBS",
    "OCCUPATIONS",
    "RELATIONS",
    "FactCandidate",
    "Located",
    "sentence_facts",
]


# The controlled relation vocabulary of first-person facts (the user is always the subject).
RELATIONS: tuple[str, ...] = (
    "likes", "dislikes", "allergic_to", "has_condition", "lives_in", "works_as", "works_at",
    "has_skill", "owns", "relationship", "takes_medication", "prefers", "is",
)  # fmt: skip


@dataclass(frozen=True)
class FactCandidate:
    """``user -[relation]-> object``.

    ``qualifier`` narrows the relation where the vocabulary needs it: the kind of relative
    ("sister" in "my sister Anna"), the category of a favourite ("food"), the kind of thing owned
    ("dog" in "a dog named Max"); empty otherwise. ``ended``: the state is over ("I used to
    live in Leeds"); ``update``: the statement replaces the relation's current values
    ("switched to green tea", "moved to Bristol"); ``parse``: how it was read.
    """

    relation: str
    object: str
    object_type: EntityType
    negated: bool
    text: str
    confidence: float
    qualifier: str = ""
    ended: bool = False
    update: bool = False
    parse: Parse = Parse.PATTERN


NEGATED_CHANGE = rx(r"\b(?:no\s+longer|not\s+\w+(?:\s+\w+)?\s+any\s*more|anymore|any\s+more)\b")
"""A negation that says something changed ("I'm not a teacher anymore"): an update, which ends
the values it names in any relation, not only its own."""


OCCUPATIONS = frozenset(
    "nurse doctor teacher engineer developer programmer designer lawyer accountant chef "
    "cook pilot driver artist writer musician scientist researcher student pharmacist "
    "dentist therapist counselor counsellor manager consultant architect electrician "
    "plumber carpenter firefighter officer paramedic surgeon photographer journalist "
    "professor librarian cashier waiter waitress barista baker farmer mechanic "
    "veterinarian vet analyst painter dancer singer actor actress coach trainer".split()
)


IDENTITY_WORDS = frozenset(
    "vegetarian vegan pescatarian diabetic introvert extrovert introverted extroverted "
    "left-handed right-handed christian muslim jewish buddhist hindu atheist single married "
    "divorced widowed retired pregnant transgender gay lesbian bisexual".split()
)


LANGUAGES = frozenset(
    "english spanish french german italian portuguese chinese mandarin cantonese japanese "
    "korean arabic hindi russian dutch swedish greek polish turkish".split()
)


# "I'm a rookie" / "a total beginner" says nothing without the domain the context supplies.
GENERIC_ROLES = frozenset(
    "newbie rookie beginner novice amateur pro expert natural mess wreck fan believer person "
    "guy girl type kind one sucker".split()
)


INTENSIFIERS = frozenset("total complete real true big huge absolute bit little".split())


# Liking verbs that state the opposite: "I hate X" is dislikes, "I don't hate X" is likes.
NEGATIVE_VERBS = frozenset(
    {"hate", "hated", "dislike", "detest", "loathe", "can't stand", "cannot stand"}
)


_F_ALLERGY = rx(rf"{PRONOUN_I}(?:'m|\s+am){NEG}{ADV}\s+allergic\s+to\s+{OBJ}")


_F_ALLERGY_HAVE = rx(
    rf"{PRONOUN_I}\s+have\s+(?:an?\s+|severe\s+|a\s+severe\s+)?allerg(?:y|ies)\s+to\s+{OBJ}"
)


_F_ALLERGY_MY = rx(r"\bmy\s+(?P<obj>\w+(?:\s+\w+)?)\s+allergy\b")


_F_DIAGNOSED = rx(
    rf"{PRONOUN_I}(?:'ve|\s+have|\s+was|\s+got|\s+am|'m)?(?:\s+been)?{ADV}\s+"
    rf"(?:diagnosed\s+with|suffer(?:ing)?\s+from|suffers\s+from|living\s+with)\s+{OBJ}"
)


_F_HAVE = rx(
    rf"{PRONOUN_I}(?:{ADV}{NEG}{ADV}\s+(?:have\s+got|have)|'ve\s+got|'ve\s+(?:always\s+)?had)"
    rf"\s+{OBJ}"
)


_F_INJURY = rx(
    r"(?<![\w'])I\s+(?:just\s+)?(?:hurt|injured|broke|sprained|twisted|pulled|tore|fractured|"
    r"strained|dislocated|bruised)\s+my\s+(?:left\s+|right\s+)?"
    rf"(?P<part>{'|'.join(BODY_PARTS)})\b"
)


def _first_person(simple: str, progressive: str) -> str:
    """ "I (have) (adverbs) (not) <simple>" or "I'm (not) (adverbs) <progressive>"; a negation
    lands in group ``neg`` or ``not``."""
    return (
        rf"{PRONOUN_I}(?:(?:'ve|\s+have)?{ADV}{NEG}{ADV}\s+(?:{simple})|"
        rf"(?:'m|\s+am)(?P<not>\s+not)?{ADV}\s+(?:{progressive}))"
    )


_F_LIVE = rx(_first_person("live|moved|relocated", "living|based") + rf"\s+(?:in|to|into)\s+{OBJ}")


_F_WORK_AS = rx(_first_person("work", "working") + rf"\s+as\s+{OBJ}")


_F_WORK_AT = rx(
    _first_person(r"work|started\s+working|got\s+a\s+job", "working|employed")
    + rf"\s+(?:at|for|by)\s+{OBJ}"
)


_EMPLOYER = rx(r"^(?P<job>.+?)\s+(?:at|for|with)\s+(?P<org>.+)$")


_F_SKILL = rx(
    rf"{PRONOUN_I}{ADV}(?:\s+(?:know\s+how\s+to|can\s+play|play\s+the|can\s+speak|speak)|"
    rf"(?:'m|\s+am){ADV}\s+(?:good|great|skilled|fluent)\s+(?:at|in))\s+{OBJ}"
)


_F_OWN = rx(rf"{PRONOUN_I}{ADV}\s+own\s+{OBJ}")


_F_MED = rx(_first_person(r"take|started\s+taking|use", "taking|on") + rf"\s+{OBJ}")


_F_LIKE = rx(
    rf"{PRONOUN_I}(?:{ADV}(?P<neg>\s+(?:don't|do\s+not|never|no\s+longer))?{ADV}\s+"
    r"(?P<verb>love|like|enjoy|adore|hate|dislike|detest|loathe|can't\s+stand|cannot\s+stand)|"
    rf"(?:'m|\s+am)(?P<not>\s+not)?{ADV}\s+(?:(?:a\s+)?(?:big\s+|huge\s+|massive\s+|"
    r"lifelong\s+|long-time\s+)?fan\s+of|(?:a\s+)?(?:total\s+|real\s+|big\s+)?sucker\s+for|into|"
    r"(?:obsessed\s+with|passionate\s+about|crazy\s+about))|"
    rf"(?:'ve|\s+have)\s+always\s+(?P<past>loved|liked|enjoyed|hated))\s+{OBJ}"
)


_F_FAVOURITE = rx(
    rf"\bmy\s+(?:all-time\s+)?(?:favou?rite|fave)\s+(?P<kind>[a-z][\w\s-]{{0,30}}?)\s+"
    rf"(?:is|are)\s+{OBJ}"
)


_F_FAVOURITE_REV = rx(
    r"(?:^|[,;]\s*)(?P<obj>(?:[\w'-]+\s+){0,3}[\w'-]+)\s+(?:is|are)\s+my\s+(?:all-time\s+)?"
    r"(?:favou?rite|fave)(?:\s+(?P<kind>[a-z]+))?"
)


_F_PREFER = rx(rf"{PRONOUN_I}{ADV}\s+prefer\s+{OBJ}")


_F_MY_RELATIVE = re.compile(
    rf"\b[Mm]y\s+(?P<kind>{'|'.join(sorted(RELATIONSHIP_WORDS | PETS, key=len, reverse=True))})"
    r",?\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b"
)


_F_IS_MY_RELATIVE = re.compile(
    r"\b(?P<name>[A-Z][a-z]+)\s+is\s+my\s+(?:(?:older|younger|little|big|best|twin)\s+)?"
    rf"(?P<kind>{'|'.join(sorted(RELATIONSHIP_WORDS, key=len, reverse=True))})\b(?!')"
)


_F_IDENTITY = rx(
    rf"{PRONOUN_I}(?:'m|\s+am|'ve\s+been|\s+have\s+been)(?P<neg>\s+not)?{ADV}\s+(?P<art>an?\s+)?{OBJ}"
)


_NAMED = re.compile(
    r"^(?P<kind>[\w\s-]+?)\s+(?:named|called)\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)$"
)


_MED_TAIL = rx(r"\s+(?:in\s+the|at|before|after|with|for|when|twice|once|every)\b.*$")


_RELATIVE_LIST = re.compile(r",?\s+(?:and|or|&)\s")


Located = tuple[FactCandidate, int]


_FactHandler = Callable[[re.Match[str], "Sentence", list[TimeMention]], list[Located]]


def sentence_facts(sentence: Sentence, times: list[TimeMention]) -> list[Located]:
    """First-person facts of one sentence, each with the text offset of its object."""
    s = sentence.text
    if not FIRST_PERSON.search(s):
        return []
    lower = s.lower()
    out: list[Located] = []
    taken: list[tuple[int, int]] = []
    for pattern, handler, triggers in _FACT_RULES:
        if not any(t in lower for t in triggers):
            continue
        for m in pattern.finditer(s):
            if (
                CONDITIONAL.search(s, 0, m.start())
                or overlaps(taken, m.start(), m.end())
                or (m.group()[:1] in "Ii" and not opens_clause(s, m.start()))
            ):
                continue
            found = handler(m, sentence, times)
            if found:
                taken.append((m.start(), m.end()))
                out.extend(found)
    return out


def _fact(
    m: re.Match[str],
    sentence: Sentence,
    relation: str,
    obj: str,
    kind: EntityType,
    confidence: float,
    *,
    negated: bool = False,
    qualifier: str = "",
) -> Located:
    """A fact located where ``obj`` occurs in ``m`` (else at ``m``); long objects lose
    confidence."""
    found = sentence.text.find(obj, m.start(), m.end())
    start = sentence.start + (found if found >= 0 else m.start())
    confidence = round(confidence - (0.1 if len(obj.split()) > 4 else 0.0), 2)
    update = negated and NEGATED_CHANGE.search(sentence.text) is not None
    candidate = FactCandidate(
        relation, obj, kind, negated, sentence.text, confidence, qualifier, update=update
    )
    return candidate, start


def _list_facts(
    m: re.Match[str],
    sentence: Sentence,
    times: list[TimeMention],
    relation: str,
    kind: EntityType,
    confidence: float,
    negated: bool = False,
) -> list[Located]:
    """One fact per item of a list object ("ibuprofen, aspirin and penicillin"); none when the
    object points at the context ("this quote", "their work", "the colour and texture") or any
    item is not a self-contained phrase."""
    raw = raw_object(m, sentence, times)
    first = raw.lower().split()[:1]
    if not first or first[0] in DEICTIC_DETERMINERS:
        return []
    items = list_items(raw)
    if items and all(is_gerund(i) for i in items):
        # parallel gerund phrases split reliably: drop only the items that do not stand alone
        items = [i for i in items if usable(i, 10)]
    if not items or not all(usable(i, max_words(i)) for i in items):
        return []
    if first[0] == "the" and any(is_aspect(i) for i in items):
        return []
    return [_fact(m, sentence, relation, i, kind, confidence, negated=negated) for i in items]


def _negated(m: re.Match[str]) -> bool:
    groups = m.groupdict()
    return bool(groups.get("neg") or groups.get("not"))


def _h_allergy(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    return _list_facts(m, s, t, "allergic_to", EntityType.OBJECT, 0.9, _negated(m))


def _h_condition(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    return _list_facts(m, s, t, "has_condition", EntityType.OTHER, 0.9)


def _h_injury(m: re.Match[str], s: Sentence, _t: list[TimeMention]) -> list[Located]:
    """ "I hurt my knee" → has_condition "knee injury"."""
    injury = f"{m['part'].lower()} injury"
    return [_fact(m, s, "has_condition", injury, EntityType.OTHER, 0.7)]


def _h_have(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    """ "I have X": a condition, a relative or a pet/possession; anything else is not a fact."""
    obj = object_text(m, s, t)
    if not usable(obj):
        return []
    negated = _negated(m)
    named = _NAMED.match(obj)
    if named:
        kind = LEADING_DET.sub("", named["kind"]).lower()
        relation = "relationship" if kind.split()[-1] in RELATIONSHIP_WORDS else "owns"
        return [_relation(m, s, relation, named["name"], kind)]
    items = [LEADING_DET.sub("", i).strip() for i in LIST_SPLIT.split(obj)]
    typed = _have_relation(items)
    if typed is None:
        return []
    relation, kind, confidence = typed
    return [_fact(m, s, relation, i, kind, confidence, negated=negated) for i in items]


def _have_relation(items: list[str]) -> tuple[str, EntityType, float] | None:
    """What "I have <items>" states, judged by each item's head noun; None when unsure."""
    if not all(items):
        return None
    heads = [i.lower().split()[-1] for i in items]
    if all(
        h in CONDITIONS or CONDITION_PHRASE.search(i) for h, i in zip(heads, items, strict=True)
    ):
        return "has_condition", EntityType.OTHER, 0.85
    if all(h in RELATIONSHIP_WORDS for h in heads):
        return "relationship", EntityType.PERSON, 0.75
    if all(h in PETS or h in POSSESSIONS for h in heads):
        return "owns", EntityType.OBJECT, 0.75
    return None


def _relation(m: re.Match[str], s: Sentence, relation: str, name: str, qualifier: str) -> Located:
    """A named relative or pet: relationship → PERSON, owns → OBJECT."""
    kind = EntityType.PERSON if relation == "relationship" else EntityType.OBJECT
    return _fact(m, s, relation, name, kind, 0.8, qualifier=qualifier)


def _h_place(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    """ "I live in / moved to X": only a capitalised or known place (not "a new apartment")."""
    obj = object_text(m, s, t)
    if not usable(obj, 5) or not (obj[0].isupper() or canonical_name(obj) in PLACE_KEYS):
        return []
    return [_fact(m, s, "lives_in", obj, EntityType.PLACE, 0.9, negated=_negated(m))]


def _h_work_as(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    """ "I work as a nurse (at St Mary's)": works_as, plus works_at for a named employer."""
    obj, negated = object_text(m, s, t), _negated(m)
    split = _EMPLOYER.match(obj)
    job, employer = (split["job"], split["org"]) if split else (obj, "")
    if not usable(job, 5):
        return []
    facts = [_fact(m, s, "works_as", job, EntityType.OTHER, 0.9, negated=negated)]
    if employer and usable(employer, 5):
        org = LEADING_DET.sub("", employer)
        facts.append(_fact(m, s, "works_at", org, EntityType.ORGANISATION, 0.85, negated=negated))
    return facts


def _h_work_at(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    obj = object_text(m, s, t)
    if not usable(obj, 5):
        return []
    return [_fact(m, s, "works_at", obj, EntityType.ORGANISATION, 0.85, negated=_negated(m))]


def _h_skill(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    first = object_text(m, s, t).lower().split()[:1]
    if "speak" in m.group().lower() and not (first and first[0] in LANGUAGES):
        return []
    return _list_facts(m, s, t, "has_skill", EntityType.OTHER, 0.75)


def _h_own(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    return _list_facts(m, s, t, "owns", EntityType.OBJECT, 0.85)


def _h_medication(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    """ "I take X every morning": only when X names a drug or a kind of medication."""
    obj = _MED_TAIL.sub("", object_text(m, s, t))
    words = [w.lower() for w in WORD.findall(obj)]
    if not any(w in MED_WORDS or is_drug(w) for w in words) or not usable(obj):
        return []
    items = [LEADING_DET.sub("", i).strip() for i in LIST_SPLIT.split(obj)]
    return [
        _fact(m, s, "takes_medication", i, EntityType.OBJECT, 0.85, negated=_negated(m))
        for i in items
        if i
    ]


def _h_like(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    verb = " ".join((m["verb"] or m["past"] or "").lower().split())
    negative = verb in NEGATIVE_VERBS or bool(m["not"])
    relation = "dislikes" if negative != bool(m["neg"]) else "likes"
    return _list_facts(m, s, t, relation, EntityType.OBJECT, 0.75)


def _h_favourite(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    obj = object_text(m, s, t)
    if not usable(obj, 5):
        return []
    kind = " ".join((m["kind"] or "").lower().split())
    return [_fact(m, s, "prefers", obj, EntityType.OBJECT, 0.85, qualifier=kind)]


def _h_prefer(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    obj = re.split(r"\s+(?:to|over|rather\s+than|instead\s+of)\s+", object_text(m, s, t))[0]
    if not usable(obj, 5):
        return []
    return [_fact(m, s, "prefers", obj, EntityType.OBJECT, 0.8)]


def _h_my_relative(m: re.Match[str], s: Sentence, _t: list[TimeMention]) -> list[Located]:
    kind, name = m["kind"].lower(), m["name"]
    if name.split()[0] in CAPITAL_STOPWORDS:
        return []
    if m.re is _F_MY_RELATIVE and "," in m.group() and _RELATIVE_LIST.match(s.text, m.end()):
        return []  # "my sister, Anna and I": a list of people, not a name in apposition
    return [_relation(m, s, "owns" if kind in PETS else "relationship", name, kind)]


def _h_identity(m: re.Match[str], s: Sentence, t: list[TimeMention]) -> list[Located]:
    """ "I'm a nurse" (works_as), "I'm a vegetarian", "I'm vegan" (is)."""
    obj = object_text(m, s, t)
    words = obj.lower().split()
    if not words or not usable(obj, 4):
        return []
    if m["art"]:
        if words[0] in ("bit", "little", "lot", "tad", "fan", "big", "huge", "part", "member"):
            return []
    elif words[0] not in IDENTITY_WORDS:
        return []
    been = "been" in s.text[m.start() : m.start("obj")].lower()
    if been and not (words[-1] in OCCUPATIONS or words[0] in IDENTITY_WORDS):
        return []  # "I've been a nurse/vegan (for years)", not "I've been a fool"
    if words[-1] in GENERIC_ROLES and all(w in INTENSIFIERS for w in words[:-1]):
        return []  # "I'm still a rookie", "a total beginner": at what, the context says
    negated = bool(m["neg"])
    if words[-1] in OCCUPATIONS:
        return [_fact(m, s, "works_as", obj, EntityType.OTHER, 0.8, negated=negated)]
    return [_fact(m, s, "is", obj, EntityType.OTHER, 0.75, negated=negated)]


# (pattern, handler, triggers): a pattern runs only on a sentence whose lower-cased text holds
# one of its triggers. Order matters: a span claimed by an earlier pattern is not read again.
_FACT_RULES: tuple[tuple[re.Pattern[str], _FactHandler, tuple[str, ...]], ...] = (
    (_F_ALLERGY, _h_allergy, ("allergic",)),
    (_F_ALLERGY_HAVE, _h_allergy, ("allerg",)),
    (_F_ALLERGY_MY, _h_allergy, ("allergy",)),
    (_F_DIAGNOSED, _h_condition, ("diagnosed", "suffer", "living with")),
    (_F_INJURY, _h_injury, ("hurt", "injur", "broke", "sprain", "twist", "pull", "tore",
                            "fractur", "strain", "disloc", "bruis")),
    (_F_MY_RELATIVE, _h_my_relative, ("my ",)),
    (_F_IS_MY_RELATIVE, _h_my_relative, ("is my",)),
    (_F_FAVOURITE, _h_favourite, ("favo", "fave")),
    (_F_FAVOURITE_REV, _h_favourite, ("favo", "fave")),
    (_F_LIVE, _h_place, ("live", "living", "moved", "relocated", "based")),
    (_F_WORK_AS, _h_work_as, ("work",)),
    (_F_WORK_AT, _h_work_at, ("work", "job", "employed")),
    (_F_MED, _h_medication, ("take", "taking", " on ", "use")),
    (_F_LIKE, _h_like, ("love", "like", "enjoy", "adore", "hate", "detest", "loathe", "stand",
                        "fan of", "into", "obsessed", "passionate", "crazy", "sucker")),
    (_F_PREFER, _h_prefer, ("prefer",)),
    (_F_SKILL, _h_skill, ("know how", "play", "speak", "good at", "great at", "skilled",
                          "fluent")),
    (_F_OWN, _h_own, (" own ",)),
    (_F_HAVE, _h_have, ("have", "'ve")),
    (_F_IDENTITY, _h_identity, ("i'm", "i am", "been")),
)  # fmt: skip
