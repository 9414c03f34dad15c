"""Type-true construction: a fact, rule or task read from the clause, when the router's label
asks for that type and no specific pattern matched.

The patterns of :mod:`.facts`, :mod:`.rules` and :mod:`.tasks` are precise and narrow; a turn
the router calls semantic, procedural or working must still become a memory of that type. These
readers take the clause apart by its function words only (a subject and a verb, a trigger and an
action, a request and a due time), never by a domain's vocabulary::

    clause_facts("I drink three coffees a day, usually a flat white")
        → drinks "three coffees a day"                          parse: clause
    clause_rules("Whenever I fly long-haul, remind me to book an aisle seat")
        → if "I fly long-haul" then "remind me to book an aisle seat"
    clause_tasks("Don't let me forget the parent-teacher meeting on Thursday at 6", …)
        → "the parent-teacher meeting", due Thursday 18:00

When even the clause cannot be read the sentence itself is kept (``parse: generic``): a fact
``states`` the sentence, a rule applies ``always``, a task is titled by the request.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import datetime

from memoryd.memory.extract.facts import FactCandidate
from memoryd.memory.extract.health import is_health_related
from memoryd.memory.extract.rules import RuleCandidate, rule_tags, steps
from memoryd.memory.extract.sentences import (
    CONDITIONAL,
    LEADING_DET,
    Sentence,
    cut_times,
    rx,
    shorten,
    split_sentences,
)
from memoryd.memory.extract.tasks import Completion, TaskCandidate, due_time, tidy_title
from memoryd.memory.timeparse import TimeMention
from memoryd.models import EntityType, Parse, TaskStatus

__all__ = [
    "GENERIC_RELATION",
    "clause_completions",
    "clause_facts",
    "clause_rules",
    "clause_tasks",
    "fact_is_ended",
    "reports_done",
]

GENERIC_RELATION = "states"
"""The relation of a fact kept as its sentence."""
MAX_OBJECT_WORDS = 12

# Verbs of a first-person clause and the relation they state (lemma → relation); any other verb
# states itself ("I collect stamps" → collects).
VERB_RELATIONS: dict[str, str] = {
    "live": "lives_in", "work": "works_at", "take": "takes", "have": "has", "own": "owns",
    "like": "likes", "love": "likes", "enjoy": "likes", "adore": "likes", "hate": "dislikes",
    "dislike": "dislikes", "prefer": "prefers", "drink": "drinks", "eat": "eats",
    "use": "uses", "play": "plays", "speak": "speaks", "study": "studies", "drive": "drives",
    "ride": "rides", "wear": "wears", "support": "supports", "follow": "follows",
    "attend": "attends", "go": "goes_to", "shop": "shops_at", "bank": "banks_with",
    "volunteer": "volunteers", "need": "needs", "keep": "keeps", "grow": "grows",
    "read": "reads", "watch": "watches", "listen": "listens_to", "avoid": "avoids",
    "get": "gets", "pay": "pays", "earn": "earns", "run": "runs", "train": "trains",
    "swim": "swims", "cycle": "cycles", "walk": "walks", "sleep": "sleeps", "cook": "cooks",
    "collect": "collects", "teach": "teaches", "rent": "rents", "do": "does",
}  # fmt: skip
_IRREGULAR = {
    "has": "have", "had": "have", "went": "go", "goes": "go", "took": "take", "ate": "eat",
    "drank": "drink", "drove": "drive", "wore": "wear", "ran": "run", "swam": "swim",
    "rode": "ride", "spoke": "speak", "taught": "teach", "kept": "keep", "grew": "grow",
    "got": "get", "paid": "pay", "studies": "study", "studied": "study", "lived": "live",
    "worked": "work", "loved": "love", "liked": "like", "used": "use", "played": "play",
    "was": "be", "were": "be", "am": "be", "is": "be", "are": "be", "been": "be",
}  # fmt: skip
_PAST_FORMS = frozenset(
    "had went took ate drank drove wore ran swam rode spoke taught kept grew got paid was were "
    "did made saw met bought sold left".split()
)
_EVENT_TIME = rx(
    r"\b(?:yesterday|last\s+night|this\s+(?:morning|afternoon|evening)|today|earlier|"
    r"just\s+now|tonight|ago)\b"
)
_NOT_VERBS = frozenset(
    "can could will would should must might may shall a an the my your our his her their to not be "
    "just really also still always usually never often sometimes now only even actually "
    "currently generally normally mostly definitely probably think guess feel know mean hope "
    "want wish wonder".split()
)

_SUBJECT = rx(r"(?<![\w'])(?:I|we)(?![\w'])")
_BE = rx(
    r"(?<![\w'])(?:I'm|I\s+am|I've\s+been|I\s+have\s+been|we're|we\s+are)\s+(?!(?:going|gonna|"
    r"about|trying|thinking|not\s+sure|so|too|just\s+(?:wondering|checking)))(?P<rest>.+)$"
)
_MY = rx(
    r"(?:(?<![\w'])(?:my|our|the)\s+|^(?!(?:it|this|that|these|those|he|she|they|there|what|"
    r"who|which|here|you|i|we|everything|nothing|something)\b))(?P<noun>[\w'-]+(?:\s+[\w'-]+){0,3}?)(?:'s|\s+is|\s+are|\s+was|"
    r"\s+were|\s+has|\s+=|:)\s+(?P<rest>.+)$"
)
_MY_CLAUSE = rx(
    r"(?<![\w'])(?:my|our)\s+(?P<noun>[\w'-]+(?:\s+[\w'-]+)?)\s+(?P<rest>(?:\w+s|\w+ed|"
    r"can|can't|will|won't|doesn't|don't|never|always|usually|only)\b.+)$"
)
_THIRD = re.compile(
    r"(?:^|(?<=[,;]\s))(?P<noun>[A-Z][a-z]+|[Hh]e|[Ss]he|[Tt]hey)(?:'s|\s+is|\s+has|\s+was|"
    r"'s\s+been|\s+has\s+been)?\s+(?P<rest>(?:[a-z]+s|[a-z]+ed|[a-z]+ing|an?|on|in|at|into|"
    r"allergic|scared|afraid|vegan|vegetarian|gluten)\b.+)$"
)
_STOPPED = rx(
    r"^(?:(?P<who>[A-Z][a-z]+|he|she|they|I|we)(?:'ve|'s|\s+has|\s+have)?\s+)?(?:just\s+)?"
    r"(?:quit|stopped|dropped|ditched|gave\s+up(?:\s+on)?|packed\s+in|cancelled)\s+(?P<rest>.+)$"
)
_DETERMINERS = frozenset("a an the my our some two three".split())
_NAME_WORD = re.compile(r"\b[A-Z][a-z]{2,}\b")
_VERB_CLAUSE = rx(
    r"(?<![\w'])(?:I|we)(?:'ve|\s+have)?\s+(?P<adv>(?:(?:really|also|still|always|usually|normally|generally|finally|recently|"
    r"already|eventually|officially|"
    r"mostly|often|only|just|now|currently|actually|tend\s+to|try\s+to|basically)\s+)*)"
    r"(?P<neg>(?:don'?t|do\s+not|doesn'?t|no\s+longer|never|can'?t|cannot|won'?t|didn'?t|"
    r"used\s+to|stopped|quit)\s+)?(?P<verb>[a-z][\w'-]*)(?P<rest>.*)$"
)
_SWITCH = rx(
    r"\b(?P<verb>switch(?:ed|ing)?|chang(?:ed|ing)|mov(?:ed|ing)|gone|went|convert(?:ed|ing)|"
    r"swap(?:ped|ping)|upgrad(?:ed|ing)|downgrad(?:ed|ing)|transferr(?:ed|ing))"
    r"(?:\s+(?:over|back|across))?(?:\s+from\s+(?P<old>.+?))?\s+(?:to|for|into)\s+(?P<new>.+)$"
)
# "rescheduled the exam to August 18", "moved my piano lesson to Thursdays"
_RESCHEDULE = rx(
    r"\b(?:rescheduled|moved|pushed(?:\s+back)?|postponed|brought\s+forward|changed|shifted|"
    r"raised|increased|lowered|reduced|cut|put|putting|bumped)\s+"
    r"(?P<thing>(?:the|my|our)\s+[\w' -]{2,40}?)\s+(?:(?:up|down)\s+)?(?:to|until|till)\s+"
    r"(?P<new>.+)$|(?P<thing2>(?:the|my|our)\s+[\w' -]{2,40}?)\s+(?:has\s+|have\s+|is\s+)?"
    r"(?:gone|went|goes|going|"
    r"moved|changed|risen|rose|dropped|fallen|fell)\s+(?:up\s+|down\s+)?to\s+(?P<new2>.+)$"
)
_PAST_EVENT = rx(
    r"(?<![\w'])(?:I|we)\s+(?:\w+ed|had|went|took|ate|got|was|were|did|made|saw|met)\b"
)
_QUESTION_START = rx(
    r"^(?:what|what's|whats|why|how|who|where|when|which|is|are|was|were|do|does|did|should|"
    r"shall|can|could|would|will|any|have|has)\b"
)
_SWITCH_SUBJECT = rx(
    r"^(?:the\s+|my\s+|our\s+)?(?P<noun>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)(?:'s|'ve|'m|'d|\s+has|\s+is|"
    r"\s+have|\s+had)?(?:\s+(?:just|finally|now|recently|already|also))?\s*$"
)
_OPENERS = frozenset(
    "and but so then now yes yeah oh ok okay also well today yesterday sometimes usually fyi "
    "btw honestly actually anyway plus hey hi morning".split()
)
_STOP_VERBS = frozenset({"stop", "quit", "drop", "ditch", "cancel"})
_FACT_CLAUSES = rx(
    r"\s*[,;]\s+(?:and\s+|but\s+|so\s+)?(?=(?:I|I'm|I've|I'd|my|we|we're|we've|our|no\s+more|"
    r"not)\b)|\s+(?:and|but|so)\s+(?=(?:I|I'm|I've|my|we|we're|our)\b)|\s+[—–]\s+"
)
_NO_MORE = rx(r"^(?:and\s+)?(?:no\s+more|not\s+any\s+more|not)\s+(?P<rest>.+)$")
_NOW = rx(r"\b(?:now|these\s+days|nowadays)\b")
_NEGATED_CHANGE = rx(r"\b(?:no\s+longer|not\s+\w+(?:\s+\w+)?\s+any\s*more|anymore|any\s+more)\b")
_ENDED = rx(
    r"\b(?:used\s+to|until\s+(?:last|recently|\d{4}|a\s+few|this)|up\s+until|back\s+then|"
    r"stopped|quit|gave\s+up|formerly|previously|once\s+upon)\b"
)
_OBJECT_END = rx(
    r"\s*,(?!\d)|\s*:(?!\d)|\s*[;!?()\"]|\s+(?:it|it's|she|she's|he|he's|they|they're|I|I'm|we|you)\s+(?=[a-z])|\s+[-–—]\s+|\s+(?:but|because|cause|so|since|which|who|when|whenever|while|"
    r"though|although|if|unless|and\s+(?:I|I'm|I've|we|it|then|also|my)|or\s+(?:I|we))\b"
)
_TRAIL = rx(
    r"(?:\s+(?:now|anymore|any\s+more|these\s+days|lately|again|too|as\s+well|though|tbh|lol|"
    r"haha|instead|at\s+all|either|really|honestly|actually|today|yesterday|at\s+the\s+moment|"
    r"right\s+now|from\s+now\s+on|for\s+now|nowadays))+$"
)
_TRAIL_TIME = rx(
    r"(?:\s+(?:in|since|from|until|till|during|around|for|back\s+in)\s+(?:(?:19|20)\d\d|(?:a|an|\w+)\s+"
    r"(?:years?|months?|weeks?|days?|decades?)|last\s+\w+|ages)|\s+(?:last|this)\s+(?:year|month|week|"
    r"summer|winter|spring|autumn|fall)|\s+\w+\s+(?:years?|months?|weeks?)\s+ago)+$"
)
_LEAD = rx(r"^(?:(?:so|and|but|oh|ok|okay|well|also|btw|fyi|yeah|hey|hi|anyway|actually)\b[,\s]*)+")

# Rules: a trigger clause (prefix, or after the action), a standing instruction, a goal.
_TRIGGER = (
    r"(?:if|when|whenever|every\s+time|each\s+time|any\s*time|as\s+soon\s+as|once|in\s+case|"
    r"unless|before|after|during|while|until|for\s+(?:anything|any|everything|all)\b|"
    r"on\s+(?:the\s+)?(?:days\b|(?:\w+\s+){1,2}days|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days|weekends|weekdays)|every\s+(?:\w+\s+)?"
    r"(?:morning|evening|night|day|week|weekday|weekend|month|year|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday)s?|each\s+(?:morning|evening|night|day|week|month)|"
    r"at\s+the\s+(?:start|end)\s+of\s+(?:each|every|the)\s+\w+|on\s+the\s+(?:first|last)\s+\w+)"
)
_RULE_PREFIX_COMMA = rx(
    rf"^(?P<kw>{_TRIGGER})\b\s*(?P<cond>[^,:]*?)(?:\s*,(?!\d)\s*(?:then\s+)?|\s*:\s+|\s+then\s+)"
    r"(?P<act>.+)$"
)
_RULE_PREFIX = rx(
    rf"^(?P<kw>{_TRIGGER})\b\s*(?P<cond>.*?)(?:\s*,(?!\d)\s*(?:then\s+)?|\s*:\s+|\s+then\s+|"
    r"\s+(?=(?:remind|please|make\s+sure|remember|always|never|don't|do\s+not|can\s+you|could\s+you|"
    r"you\s+(?:should|need|must)|I\s+(?:want|need|like|always|usually|have|should|must|will|'ll)|"
    r"I'll|I'd|I\s+[a-z]+|we\s+[a-z]+|tell|ask|text|call|book|put|set|turn|switch|add|send|check|"
    r"ping|let)\b))"
    r"(?P<act>.+)$"
)
_RULE_POSTFIX = rx(rf"^(?P<act>.+?)\s*,?\s+(?P<kw>{_TRIGGER})\b\s*(?P<cond>.+)$")
_STANDING = rx(
    r"^(?P<kw>from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|by\s+default|as\s+a\s+rule|"
    r"from\s+today)\b[,:\s]*(?P<act>.+)$"
)
_STANDING_TAIL = rx(
    r"^(?P<act>.+?)[,\s]+(?P<kw>from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|"
    r"by\s+default)\W*$"
)
_TIME_TRIGGER = rx(r"^(?:every|each|on|at\s+the)\b")
_CLAUSE_SPLIT = re.compile(r"\s+[—–-]+\s+|\s*;\s*")
_TOPIC = rx(r"^(?P<cond>[^:,]{3,50}?)\s*:\s+(?P<act>.+)$")
_SAYING = rx(r"\b(?:say|says|said|tell\s+you|mention|text\s+you|think|feel|know|ask)\s*$")
_OWN_SUBJECT = rx(r"^(?:I|we|you)\b")
_NEXT_SUBJECT = re.compile(r"(?<=\w)\s+(?=(?:I|we)(?:'m|'ll|'d|'ve)?\s+[a-z])")
_ALWAYS = rx(r"^(?:please\s+)?(?:always|never|don't\s+ever|make\s+sure\s+(?:to|you)\s+always)\b")
_GOAL = rx(r"^(?P<kw>to|for|how\s+to)\s+(?P<cond>[^,:]{3,60}?)\s*[,:]\s*(?P<act>.+)$")

# Tasks: the request around the action.
_REQUEST = rx(
    r"^(?:(?:hey|hi|ok|okay|so|oh|also|and|btw|quick\s+one|one\s+more\s+thing)\b[,:!\s]*)*"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|please\s+|pls\s+)?"
    r"(?:(?:remind|ping|nudge|text|message|tell|buzz|alert)\s+me\s+(?:to|that|about|of|when)?|set\s+(?:me\s+)?(?:a|an)\s+(?:reminder|alarm|timer)"
    r"\s*(?:to|for|about)?|don't\s+(?:let\s+me\s+)?forget\s+(?:to|about)?|do\s+not\s+(?:let\s+me\s+)?"
    r"forget\s+(?:to|about)?|make\s+sure\s+(?:I|that\s+I|to|we)?|remember\s+to|note\s+to\s+self:?|"
    r"I\s+(?:really\s+|still\s+|also\s+)?(?:need\s+to|have\s+to|must|should|gotta|got\s+to|ought\s+to|"
    r"want\s+to|'ll|will|am\s+going\s+to|'m\s+going\s+to|have|'ve\s+got)|we\s+(?:need\s+to|have\s+to|"
    r"have|'ve\s+got|should)|need\s+to|gotta|there's|there\s+is|todo:?|to-do:?|reminder:?|task:?)?"
    r"\s*(?P<what>.+)$"
)
_TO_CANCEL = rx(r"\bto\s+(?:cancel|call\s+off|scrap|drop|skip)\b")
_REQUEST_MARK = rx(
    r"\b(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?(?:please\s+)?(?:(?:remind|ping|nudge|"
    r"text|message|buzz|alert)\s+me\b(?:\s+(?:to|that|about|of|when)\b)?|don't\s+(?:let\s+me\s+)?"
    r"forget(?:\s+(?:to|about)\b)?|make\s+sure(?:\s+(?:that\s+)?(?:I|to|we|he|she|they)\b)?|"
    r"remember\s+to\b|set\s+(?:me\s+)?(?:a|an)\s+(?:reminder|alarm|timer)(?:\s+(?:to|for|about)\b)?)"
)
_CANCEL = rx(
    r"\b(?:cancel(?:led|ed)?|call(?:ed)?\s+off|scrap(?:ped)?|drop(?:ped)?|skip(?:ped)?|"
    r"no\s+need\s+to|don't\s+need\s+to|(?:is|are|'s)\s+(?:cancelled|canceled|off))\b"
)
_ASKS = rx(
    r"\b(?:remind|ping|nudge|alert|don't\s+(?:let\s+me\s+)?forget|make\s+sure|remember\s+to|"
    r"(?:can|could|would|will)\s+you|please|need\s+to|have\s+to|got\s+to|gotta|must|"
    r"add|book|schedule|set\s+(?:a|an|up)|put)\b"
)
_EXPLICIT_DONE = rx(
    r"(?:^|[,.;!]\s*|\b(?:that|it|all|one|that\s+one|job)(?:'s|\s+is)?\s+)(?:(?:all\s+)?done|sorted|"
    r"ticked\s+off|finished)\b(?!\s+(?:with\s+)?(?:the|my|a|it|by|at|in)\b)|[✔✓✅☑]"
)
_DONE_REPORT = rx(
    r"\b(?:done|finished|completed|sorted|ticked\s+off|taken\s+care\s+of|dealt\s+with|handled|"
    r"paid|booked|sent|bought|picked\s+up|collected|submitted|renewed|cancell?ed|called\s+off|"
    r"got\s+(?:the|my|it|them)|returned|ordered|fixed|signed\s+up)\b|[✔✓✅☑]"
)
_LOG_PREFIX = re.compile(r"^\s*(?:log\s*:\s*)?(?:\[[^\]]{1,30}\]\s*)?(?:[\w .-]{1,24}:\s+)?")
_TITLE_STOP = rx(
    r"\s*[,;!?()]|\s+[-–—]\s+|\s+(?:because|cause|since|so\s+that|so|but|which|otherwise|or\s+else|"
    r"if\s+(?:not|possible)|please)\b"
)
_QUOTED = re.compile(r"[\"“](?P<what>[^\"”]{2,80})[\"”]")


def _sentences(text: str) -> list[Sentence]:
    return [s for s in split_sentences(text.replace("\u2019", "'")) if s.text.strip()]


def _clean(phrase: str) -> str:
    """The object phrase up to its clause's end, without fillers and determiners. Times stay:
    in a fact they are often the value ("my painting time is Sunday mornings")."""
    phrase = _OBJECT_END.split(phrase, maxsplit=1)[0]
    phrase = _TRAIL.sub("", _TRAIL_TIME.sub("", phrase.strip(" .,'\"-"))).strip(" .,'\"-")
    return LEADING_DET.sub("", phrase).strip(" .,'\"-")


def _lemma(verb: str) -> str:
    v = verb.lower()
    if v in _IRREGULAR:
        return _IRREGULAR[v]
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if v.endswith(suffix) and len(v) - len(suffix) >= 3:
            stem = v[: -len(suffix)] + repl
            if suffix in ("ing", "ed") and re.search(r"([bdgmnprt])\1$", stem):
                stem = stem[:-1]  # stopped → stop, swimming → swim
            return stem + "e" if (stem + "e") in VERB_RELATIONS else stem
    return v


def _relation(lemma: str) -> str:
    if lemma in VERB_RELATIONS:
        return VERB_RELATIONS[lemma]
    if re.search(r"[^aeiou]y$", lemma):
        return lemma[:-1] + "ies"  # carry → carries
    return lemma + ("es" if lemma.endswith(("s", "sh", "ch", "x", "o")) else "s")


def _is_event(s: Sentence, times: list[TimeMention]) -> bool:
    """A past verb with a day or a clock time is an event ("I had sushi yesterday"); with a year
    or none it is a state that ended ("I lived in Paris in 2010")."""
    local = [t for t in times if s.start <= t.start < s.end]
    return _EVENT_TIME.search(s.text) is not None or any(
        t.granularity in ("day", "minute") for t in local
    )


def fact_is_ended(text: str) -> bool:
    """Whether a sentence states a state that is over ("used to", "until last year")."""
    return _ENDED.search(text) is not None


def _fact(
    relation: str,
    obj: str,
    s: Sentence,
    *,
    negated: bool = False,
    update: bool = False,
    kind: EntityType = EntityType.OBJECT,
    past: bool = False,
) -> FactCandidate | None:
    words = obj.split()
    if not words or len(words) > MAX_OBJECT_WORDS:
        return None
    ended = (past or fact_is_ended(s.text)) and not negated
    confidence = 0.55 if len(words) <= 4 else 0.45
    return FactCandidate(
        relation, obj, kind, negated, s.text, confidence, ended=ended, update=update,
        parse=Parse.CLAUSE,
    )  # fmt: skip


def _sentence_facts(s: Sentence, times: list[TimeMention]) -> list[FactCandidate]:
    """The facts the clause reading finds in one sentence, at most one per clause. A question
    only when it opens with a statement ("I'm vegetarian, can you…?"); nothing after a hedge
    ("if", "maybe"). A switch or a "no more" takes the relation of the clause before it."""
    text = _LEAD.sub("", s.text)
    if s.question and _QUESTION_START.match(text):
        return []
    out: list[FactCandidate] = []
    for clause in (c for c in _FACT_CLAUSES.split(text) if c and c.strip()):
        if CONDITIONAL.match(clause):
            break
        read = _clause_fact(clause.strip(), s, times, out[-1].relation if out else None)
        if isinstance(read, FactCandidate):  # "event": "I had sushi yesterday" states nothing
            out.append(read)
    return out


def _clause_fact(
    text: str, s: Sentence, times: list[TimeMention], previous: str | None
) -> FactCandidate | str | None:
    moved = _RESCHEDULE.search(text)
    if moved and not CONDITIONAL.search(text, 0, moved.start()):
        thing = LEADING_DET.sub("", moved["thing"] or moved["thing2"]).lower()
        new = _clean(moved["new"] or moved["new2"])
        return _fact(f"attribute:{' '.join(thing.split())}", new, s, update=True)
    switch = _SWITCH.search(text)
    if switch and not CONDITIONAL.search(text, 0, switch.start()):
        relation = _switch_relation(text, switch, previous)
        if relation:
            return _fact(relation, _clean(switch["new"]), s, update=True)
    stop = _STOPPED.match(text)
    if stop:  # "Noah quit swimming", "Dropped Organic Chem": a negated update
        who = _who(stop["who"], s)
        relation = f"about:{who}" if who else "does"
        return _fact(relation, _clean(stop["rest"]), s, negated=True, update=True)
    no_more = _NO_MORE.match(text)
    if no_more:
        return _fact(previous or "uses", _clean(no_more["rest"]), s, negated=True, update=True)
    negated_change = _NEGATED_CHANGE.search(text) is not None
    update = negated_change or bool(_NOW.search(text))
    for pattern in (_BE, _VERB_CLAUSE, _MY, _MY_CLAUSE, _THIRD):
        m = pattern.search(text)
        if m is None or CONDITIONAL.search(text, 0, m.start("rest")):
            continue
        read = _read(pattern, m, s, times, negated_change, update=update)
        if read is not None:
            return read
    return None


def _switch_relation(text: str, switch: re.Match[str], previous: str | None) -> str | None:
    """What a switch changes: the thing before it ("netball's moved to…"), where one lives
    ("we moved to Bristol"), else the clause before's relation, else ``uses``; None when
    the switch has a subject that is not adjacent ("…since we moved to the flat" inside a
    longer clause) or is nobody's."""
    before = text[: switch.start()]
    if before.strip() and not _SWITCH_SUBJECT.match(before):
        return None
    subject = _SWITCH_SUBJECT.match(before)
    noun = subject["noun"].lower() if subject else ""
    if noun in ("i", "we", "i've", "we've", "i'm", "we're", "i have", "we have"):
        return "lives_in" if switch["verb"].lower().startswith("mov") else previous or "uses"
    return f"attribute:{noun}" if noun else previous or "uses"


def _read(
    pattern: re.Pattern[str],
    m: re.Match[str],
    s: Sentence,
    times: list[TimeMention],
    negated_change: bool,
    update: bool,
) -> FactCandidate | str | None:
    """The fact one clause pattern's match states ("event" for a past event)."""
    obj = _clean(m["rest"])
    if pattern is _MY:
        return _fact(f"attribute:{_noun(m)}", obj, s, update=update)
    if pattern is _MY_CLAUSE:
        return _fact(f"about:{_noun(m)}", obj, s)
    if pattern is _THIRD:
        who = _who(m["noun"], s)
        return _fact(f"about:{who}", obj, s, update=update) if who else None
    if pattern is _BE:
        negated = obj.lower().startswith(("not ", "no longer ")) or negated_change
        obj = re.sub(r"^(?:not|no\s+longer)\s+", "", obj, flags=re.IGNORECASE)
        return _fact("is", obj, s, negated=negated, kind=EntityType.OTHER)
    before = m.string[: m.start()].split()
    if before and before[-1][:1].isupper() and before[-1].lower() not in _OPENERS:
        return None  # "my CFA Level I exam": a name, not the speaker
    verb = m["verb"].lower()
    if verb in _DETERMINERS and re.search(r"'ve\s|\shave\s", m.group()[:12], re.IGNORECASE):
        obj = _clean(f"{m['verb']}{m['rest']}")  # "I have an injured knee": "have" is the verb
        verb = "have"
    lemma = _lemma(verb)
    if verb == "got" and re.search(
        r"'ve\s+got|have\s+got|got\s+(?:a|an|our|my|new)\b", m.group(), re.IGNORECASE
    ):
        verb = lemma = "have"  # "we've got Prime", "we got a puppy": a possession now
    if lemma in _NOT_VERBS or len(lemma) < 2:
        return None
    perfect = re.search(r"(?:'ve|\bhave)\s+(?:\w+\s+)*?" + re.escape(m["verb"]), m.group(), re.I)
    past = not perfect and (verb in _PAST_FORMS or (verb.endswith("ed") and verb != lemma))
    neg = (m["neg"] or "").lower()
    if lemma in _STOP_VERBS:  # "I've dropped Pilates", "we quit the gym"
        lemma, neg, past = "do", "stopped", False
    elif past and _is_event(s, times):
        return "event"
    negated = (bool(neg) and not neg.startswith("used")) or negated_change
    obj = re.sub(r"^(?:in|at|to|with|for|on|doing)\s+", "", obj, flags=re.IGNORECASE)
    obj = LEADING_DET.sub("", obj)
    if lemma == "have" and is_health_related(obj):  # "I've got a sprained wrist": a condition,
        return _fact("has_condition", obj, s, negated=negated, kind=EntityType.OTHER, past=past)
    return _fact(_relation(lemma), obj, s, negated=negated, update=update, past=past)


def _who(subject: str | None, s: Sentence) -> str:
    """The person or pet a third-person clause is about: its name, or for a pronoun the last
    name before it in the sentence ("" when there is none)."""
    if not subject:
        return ""
    if subject.lower() not in ("he", "she", "they", "he's", "she's", "they're"):
        return subject.lower()
    names = [n for n in _NAME_WORD.findall(s.text) if n.lower() not in _OPENERS]
    return names[-1].lower() if names else ""


def _noun(m: re.Match[str]) -> str:
    return " ".join(m["noun"].lower().split())


def clause_facts(
    text: str, times: list[TimeMention], covered: Collection[str] = ()
) -> list[FactCandidate]:
    """Facts read clause by clause from the sentences a pattern did not read (``covered``: the
    texts of those it did); the sentence itself (``generic``) when none can be and no pattern
    read any."""
    out = [f for s in _sentences(text) if s.text not in covered for f in _sentence_facts(s, times)]
    if out or covered:
        return out
    sentences = _sentences(text)
    statements = [s for s in sentences if not s.question and not CONDITIONAL.search(s.text)]
    if not statements or any(
        _PAST_EVENT.search(s.text) and _is_event(s, times) for s in statements
    ):
        return []  # only hypotheticals and questions, or a past event: nothing to state
    s = max(statements, key=lambda x: len(x.text))
    obj = shorten(_LEAD.sub("", s.text).strip(" .!"), 80)
    return [
        FactCandidate(
            GENERIC_RELATION, obj, EntityType.OTHER, False, s.text, 0.4, parse=Parse.GENERIC
        )
    ]


def _rule(kw: str, cond: str, act: str, text: str) -> RuleCandidate | None:
    kw = " ".join(kw.lower().split())
    cond = cond.strip(" ,.:;")
    condition = f"{kw} {cond}".strip() if kw not in ("if", "when", "whenever") or not cond else cond
    actions = steps(act.strip(" ,.:;"))
    if not actions or not condition:
        return None
    title = shorten(f"{condition} → {actions[0]}")
    return RuleCandidate(
        title, [condition], actions, text, [], rule_tags([condition], text), Parse.CLAUSE
    )


def _sentence_rule(s: Sentence) -> RuleCandidate | None:
    """Try, in order: a standing instruction or a trigger clause at the start of any clause
    of the sentence, a "topic: steps" line, a trigger after the action, a goal ("to X, Y"),
    an "always/never" instruction."""
    text = _LEAD.sub("", s.text).strip()
    clauses = [c.strip() for c in _CLAUSE_SPLIT.split(text) if c.strip()]
    for clause in clauses:
        for pattern in (_STANDING, _STANDING_TAIL):
            m = pattern.match(clause)
            if m:  # "from now on, for anything under 4 hours, take the train": its condition
                inner = _prefix_rule(_LEAD.sub("", m["act"].strip()), s.text)
                return inner or _rule(m["kw"], "", m["act"], s.text)
        found = _prefix_rule(_LEAD.sub("", clause), s.text)
        if found:
            return found
    m = _TOPIC.match(text)
    if m:
        return _rule("", m["cond"], m["act"], s.text)
    m = _RULE_POSTFIX.match(text)
    if m and len(m["act"].split()) >= 2:
        return _rule(m["kw"], m["cond"], m["act"], s.text)
    m = _GOAL.match(text)
    if m:
        return _rule(m["kw"], m["cond"], m["act"], s.text)
    if _ALWAYS.match(text):
        return _rule("always", "", text, s.text)
    return None


def _prefix_rule(clause: str, text: str) -> RuleCandidate | None:
    """A rule whose trigger opens ``clause``: up to its comma if it has one, else up to the
    word that starts the action."""
    for pattern in (_RULE_PREFIX_COMMA, _RULE_PREFIX):
        m = pattern.match(clause)
        if m and (m["cond"].strip() or _TIME_TRIGGER.match(m["kw"])):
            cond, act = _second_subject(m["cond"], m["act"])
            return _rule(m["kw"], cond, act, text)
    return None


def _second_subject(cond: str, act: str) -> tuple[str, str]:
    """ "when I learn a new word I write it out ten times": a trigger with its own subject ends
    where a second subject starts the action."""
    m = _NEXT_SUBJECT.search(cond)
    if m is None or not _OWN_SUBJECT.match(cond) or _SAYING.search(cond[: m.start()]):
        return cond, act
    return cond[: m.start()], f"{cond[m.end() :]}, {act}".strip(" ,")


def clause_rules(text: str) -> list[RuleCandidate]:
    """Rules read from trigger and action clauses; the turn as a standing rule (``generic``)
    when no sentence has a trigger."""
    sentences = _sentences(text)
    found = [r for r in (_sentence_rule(s) for s in sentences if not s.question) if r]
    if found:
        return found
    body = " ".join(s.text for s in sentences if not s.question) or text.strip()
    actions = steps(body.strip(" .")) or [body]
    return [
        RuleCandidate(
            shorten(f"always → {actions[0]}"), ["always"], actions, text, [],
            rule_tags([], text), Parse.GENERIC,
        )
    ]  # fmt: skip


def _title(s: Sentence, times: list[TimeMention]) -> str:
    """The request's action without times: a quoted name when a log line has one; else what
    follows the request ("…, make sure he wears the blue shirt"), or what precedes it when
    the request ends the sentence ("her jab is on the 16th, please remind me that morning")."""
    quoted = _QUOTED.search(s.text)
    if quoted and ":" in s.text[: quoted.start() + 1]:
        return tidy_title(quoted["what"])
    text = _LOG_PREFIX.sub("", s.text, count=1) if ":" in s.text[:30] else s.text
    offset = s.start + len(s.text) - len(text)
    mark = _REQUEST_MARK.search(text)
    if mark:
        after = _cut(text[mark.end() :], offset + mark.end(), times)
        if len(after.split()) >= 2 or mark.start() == 0:
            return after
        return _cut(text[: mark.start()], offset, times)
    m = _REQUEST.match(text)
    what, at = (m["what"], offset + m.start("what")) if m else (text, offset)
    return _cut(what, at, times)


def _cut(what: str, at: int, times: list[TimeMention]) -> str:
    """``what`` (at text offset ``at``) up to its clause's end, without times, tidied."""
    return tidy_title(cut_times(_TITLE_STOP.split(what, maxsplit=1)[0], at, times))


def clause_tasks(text: str, times: list[TimeMention], now: datetime) -> list[TaskCandidate]:
    """One task from the turn's request: the sentence that asks ("remind me…", "can you…",
    "make sure I…"), else one that names a time, else the first; its action is the title and
    its first upcoming time the due time (else its first time). ``generic`` when the request
    leaves no title."""
    sentences = _sentences(text)
    if not sentences:
        return []
    s = _asking(sentences, times)
    local = [t for t in times if s.start <= t.start < s.end] or times
    upcoming = [t for t in local if t.value >= now.replace(hour=0, minute=0, second=0)]
    due_from = upcoming or local
    due = due_time(due_from[0], now, text[due_from[0].end :]) if due_from else None
    title = _title(s, times)
    if title and not (_CANCEL.search(s.text) and not _TO_CANCEL.search(s.text)):
        return [TaskCandidate(shorten(title, 120), due, text, Parse.CLAUSE)]
    return [TaskCandidate(shorten(s.text, 120), due, text, Parse.GENERIC)]


def _asking(sentences: list[Sentence], times: list[TimeMention]) -> Sentence:
    for s in sentences:
        if _ASKS.search(s.text):
            return s
    for s in sentences:
        if any(s.start <= t.start < s.end for t in times):
            return s
    return sentences[0]


def clause_completions(text: str, times: list[TimeMention], now: datetime) -> list[Completion]:
    """A report that something is done or called off ("got the JR Pass, that one's done",
    "paid it", "skip the dentist, it's cancelled"), as one completion whose action is the
    report itself; consolidation matches it to the open task it shares most words with. None
    when the turn names a time ahead (a plan, not a report) or asks a question."""
    sentences = [s for s in _sentences(text) if not s.question]
    if not sentences or any(t.value > now for t in times):
        return []
    for s in sentences:
        if _DONE_REPORT.search(s.text):
            status = TaskStatus.CANCELLED if _CANCEL.search(s.text) else TaskStatus.DONE
            action = shorten(_LEAD.sub("", s.text).strip(" .!"), 120)
            return [Completion(action, now, text, status, Parse.CLAUSE)]
    return []


def reports_done(text: str) -> bool:
    """Whether ``text`` says outright that something is done ("done, paid it", "that one's
    done", "ticked off", "✅"), which makes it working memory whatever else it is."""
    return any(_EXPLICIT_DONE.search(s.text) for s in _sentences(text) if not s.question)
