"""Facts read from the clause, when the router calls a turn semantic and no pattern of
:mod:`.facts` matched: a subject, a verb and its value, found by function words only, never by a
domain's vocabulary::

    clause_facts("I drink three coffees a day, usually a flat white")
        → drinks "three coffees a day"                          parse: clause
    clause_facts("I've switched to oat milk, no more whole milk")
        → uses "oat milk" (an update), not uses "whole milk"    parse: clause

When the clause cannot be read the sentence itself is kept: a fact that ``states`` it
(``parse: generic``). A clause that states nothing of anyone (a past event, a verdict on the
moment, a sentence about the listener, a value that cannot stand alone: :mod:`.stated`) is no
fact at all.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection

from memoryd.memory.extract.facts import NEGATED_CHANGE, FactCandidate
from memoryd.memory.extract.health import is_health_related
from memoryd.memory.extract.names import canonical_name
from memoryd.memory.extract.phrases import list_items, max_words
from memoryd.memory.extract.sentences import (
    CONDITIONAL,
    EMOJI,
    LEADING_DET,
    NON_OBJECTS,
    OPENING_FILLER,
    Sentence,
    rx,
    sentences_of,
    shorten,
)
from memoryd.memory.extract.stated import (
    NOT_PEOPLE,
    OPENERS,
    VERDICT,
    cannot_stand_alone,
    named,
    names_nobody,
    no_subject,
    of_speaker,
)
from memoryd.memory.extract.verbs import (
    PAST_FORMS,
    VERB_RELATIONS,
    lemma_of,
    participle,
    verb_relation,
)
from memoryd.memory.timeparse import TimeMention
from memoryd.models import EntityType, Parse

__all__ = ["GENERIC_RELATION", "clause_facts", "fact_is_ended"]

GENERIC_RELATION = "states"
"""The relation of a fact kept as its sentence."""
MAX_OBJECT_WORDS = 12

_EVENT_TIME = rx(
    r"\b(?:yesterday|last\s+night|this\s+(?:morning|afternoon|evening)|today|earlier|"
    r"just\s+now|tonight|ago)\b"
)
_NOT_VERBS = frozenset(
    "can could will would should must might may shall a an the my your our his her their to not be "
    "wanna gonna gotta both all least thing things picture regular "
    "just really also still always usually never often sometimes now only even actually "
    "currently generally normally mostly definitely probably think guess feel know mean hope "
    "want wish wonder last for of on in at with about from by as each sometimes".split()
)

_BE = rx(
    r"(?<![\w'])(?:I'?m|I\s+am|I've\s+been|I\s+have\s+been|we're|we\s+are)\s+(?!(?:going|gonna|off\s+to|"
    r"about|trying|thinking|not\s+sure|just\s+(?:wondering|checking)))(?P<rest>.+)$"
)
_MY = rx(
    r"(?:(?<![\w'])(?:my|our|the)\s+|^(?!(?:it|this|that|these|those|he|she|they|there|what|"
    r"who|which|here|you|i|we|everything|nothing|something)\b))(?P<noun>[\w'-]+(?:\s+[\w'-]+){0,3}?)(?:'s|\s+is|\s+are|\s+was|"
    r"\s+ended\s+up\s+being|\s+turned\s+out\s+to\s+be|\s+will\s+be|"
    r"\s+were|\s+has|\s+=|:)\s+(?P<rest>.+)$"
)
# "Dr. Bakker is my supervisor now", "Foxtons is our letting agent": a name is the value (it
# comes before the verb, so ``rest``, where a hedge would have to start, is empty at the end).
_NAME_IS_MY = re.compile(
    r"(?:^|(?<=\s))(?P<value>[A-Z][\w.'&-]*(?:\s+(?:[A-Z][\w.'&-]*|de|van|von|da|del|le))*)"
    r"(?:\s+is|'s)\s+(?:now\s+)?(?:[Mm]y|[Oo]ur)\s+(?:new\s+)?(?P<noun>[a-z][\w'-]*(?:\s+[a-z][\w'-]*)?)"
    r"(?P<rest>)\b"
)
_MY_CLAUSE = rx(
    r"(?<![\w'])(?:my|our)\s+(?P<noun>[\w'-]+(?:\s+[\w'-]+)?)\s+(?P<rest>(?:\w+s|\w+ed|"
    r"can|can't|will|won't|doesn't|don't|never|always|usually|only)\b.+)$"
)
_THIRD = re.compile(
    r"(?:^|(?<=[,;]\s))(?:(?P<noun>[A-Z][a-z]+|[Hh]e|[Ss]he|[Tt]hey)(?:'s|\s+is|\s+has|\s+was|"
    r"'s\s+been|\s+has\s+been)?|(?P<lower>[a-z]{3,})(?='s\s)'s(?:\s+been)?)\s+(?P<rest>(?:[a-z]+s|[a-z]+ed|[a-z]+ing|an?|on|in|at|into|"
    r"allergic|scared|afraid|vegan|vegetarian|gluten|(?:mad|crazy|nuts|obsessed|keen|fond|"
    r"passionate|big)\s+(?:about|on|with|of))\b.+|\d{1,3}(?:\s+(?:years?\s+old|yo))?(?=\s+(?:and|now)\b|\s*$))"
)
_STOPPED = rx(
    r"^(?:(?P<who>[A-Z][a-z]+|he|she|they|I|we)(?:'ve|'s|\s+has|\s+have)?\s+)?(?:just\s+)?"
    r"(?:quit|stopped|dropped|ditched|gave\s+up(?:\s+on)?|packed\s+in|cancelled)\s+"
    r"(?!(?:[\w'-]+\s+){0,4}(?:off|by|in)\b)(?P<rest>.+)$"  # "dropped the form off" delivered it
)
# A name with what it is in brackets: "Biscuit (our beagle, he's 4)", "Dr Okafor (the
# neurologist)", "CS50P (harvard's python course)".
_APPOSITION = re.compile(
    r"(?<![\w'])(?P<name>[A-Z][\w.'&-]*(?:\s+[A-Z][\w.'&-]*){0,2})\s+\((?P<what>[^()?!]{3,60})\)"
)
_NOT_APPOSITIVE = rx(
    r"^\s*(?:lol|haha|jk|sic|e\.g|i\.e|see|or|and|but|which|who|that|if|so|i|i'm|we|you|he|"
    r"she|they|it|it's|also|even|not|yes|no|[\d:./-]+(?:\s*[ap]m)?\s*$)\b"
)
# A label before a colon that introduces a clause of its own: "Big news: he's moved to
# Glasgow", "plot twist: de vries is going on sabbatical" (not "my address: 12 Harrow Road").
_LABEL_COLON = rx(
    r"^(?P<label>[\w' -]{2,30}?):\s+(?P<rest>(?:(?:I|I'm|I've|we|we're|he|he's|she|she's|they|"
    r"they're|my|our)\s|[a-z][\w.'-]*(?:\s+[a-z][\w.'-]*){0,2}\s+(?:is|'s|has|was|are|were)\s).+)$"
)
_NEW = rx(r"^new\s+")
_IS_MY = rx(r"^(?:now\s+)?(?:my|our)\s+(?:new\s+)?(?P<what>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,2})$")
_LEADING_PREP = rx(r"^(?:in|at|to|with|for|on|doing)\s+")
"""A preposition that opens an object ("I work at Monzo" → Monzo)."""
# "bedtime's 8pm now", "rent's £950": a thing and its amount, with "'s" for "is"
_COUNTED = rx(
    r"^(?:(?:the|my|our)\s+)?(?P<noun>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)'s\s+(?P<rest>[£$€]?\d.*)$"
)
# "we agreed bedtime's 8pm now", "we decided that the budget is £500": the decision itself
_DECIDED = rx(
    r"^(?:(?:so|and)\s+)?(?:we|I|they)\s+(?:(?:have|'ve)\s+)?(?:agreed|decided|settled\s+on)"
    r"\s+(?:that\s+)?(?P<rest>(?!to\b|on\b)\w.+)$"
)
_BECAME = rx(r"^(?:[a-z]+ed|chosen|given|taken|made)\s+(?:as\s+|to\s+)?\w")
_ARTICLE = rx(r"^\s*(?:a|an)\s")
_AND_ARTICLE = rx(r"\s+and\s+(?:a|an)\s")
_CHANGE_LABEL = rx(r"\b(?:update[sd]?|change[sd]?|correction|twist|switch|new)\b")
_LIST_AND = rx(r",?\s+(?:and|or|&)\s+\S")
_VERB_CLAUSE = rx(
    r"(?<![\w'])(?:I|we)(?:'ve|\s+have)?\s+(?P<adv>(?:(?:really|also|still|always|usually|normally|generally|finally|recently|"
    r"already|eventually|officially|"
    r"mostly|often|only|just|now|currently|actually|tend\s+to|try\s+to|basically)\s+)*)"
    r"(?P<neg>(?:don'?t|do\s+not|doesn'?t|no\s+longer|never|can'?t|cannot|won'?t|didn'?t|"
    r"used\s+to|stopped|quit)\s+)?(?P<verb>[a-z][\w'-]*)(?P<rest>.*)$"
)
_SWITCH = rx(
    r"\b(?P<verb>switch(?:ed|ing)?|chang(?:ed|ing)|mov(?:ed|ing)|convert(?:ed|ing)|"
    r"swap(?:ped|ping)|upgrad(?:ed|ing)|downgrad(?:ed|ing)|transferr(?:ed|ing))"
    r"(?:\s+(?:him|her|them|us|me))?(?:\s+(?:over|back|across))?(?:\s+from\s+(?P<old>.+?))?\s+(?:to|for|into|in\s+with)\s+(?P<new>.+)$"
)
# "rescheduled the exam to August 18", "moved my piano lesson to Thursdays"
_RESCHEDULE = rx(
    r"\b(?:rescheduled|moved|pushed(?:\s+back)?|postponed|brought\s+forward|changed|shifted|"
    r"raised|increased|lowered|reduced|cut|put|putting|bumped|hiked|upped|dropped|raising|"
    r"increasing|lowering|reducing|cutting|bumping|hiking|moving|pushing|changing|shifting)\s+"
    r"(?P<thing>(?:the|my|our)\s+[\w' -]{2,40}?|[a-z]+ing|"
    r"(?!(?:back|up|down|over|off|out|it|that|this|them)\b)[a-z][\w-]+(?=\s+to\s+[£$€¥₹]?\d))"
    r"\s+(?:(?:up|down)\s+)?"
    r"(?:to|until|till)\s+"
    r"(?P<new>.+)$|(?P<thing2>(?:the|my|our)\s+[\w' -]{2,40}?|^[\w-]{3,20}(?:\s+[\w-]{3,20})?)"
    r"(?:'s|\s+has|\s+have|\s+is|\s+are)?\s+(?:gone|went|goes|going|moving|"
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
_STOP_VERBS = frozenset({"stop", "quit", "drop", "ditch", "cancel"})
_JOIN_VERBS = frozenset({"join", "sign", "enrol", "enroll", "subscribe"})
_SIGNED_UP = rx(r"^up\s+(?:to|for|with)?\s*")
_OFF = rx(r"^off\s+(?!work\b|sick\b|duty\b)")  # "off to" never reaches it: see _BE
_DROPPED_SUBJECT_VERBS = (
    r"got|bought|joined|started|booked|signed\s+up|switched|moved|finished|ordered|renewed|"
    r"cancelled|canceled|upgraded|downgraded|adopted|picked\s+up|set\s+up"
)
# "got the citi bike membership", "joined a choir": chat drops the speaker before a verb
_DROPPED_SUBJECT = rx(rf"^(?:{_DROPPED_SUBJECT_VERBS})\s")
# "me, Rohan and Ananya share a 3bhk", "Niamh and I watch…": the speaker among others is "we"
_WITH_ME = re.compile(
    r"^(?:[Mm]e|I)(?:,\s*[A-Z][\w'-]*)*\s+(?:and|&)\s+[A-Z][\w'-]*(?=\s+[a-z])|"
    r"^[A-Z][\w'-]*(?:,\s*[A-Z][\w'-]*)*\s+(?:and|&)\s+(?:I|me)(?=\s+[a-z])"
)
_FACT_CLAUSES = rx(
    r"\s*[,;]\s+(?:and\s+|but\s+|so\s+)?(?=(?:I|I'm|I've|I'd|my|we|we're|we've|our|no\s+more|"
    r"not|she's|he's|they're|she|he|they|no\s+[A-Z]|" + _DROPPED_SUBJECT_VERBS + r")\b)|"
    r"\s+(?:and|but|so)\s+(?=(?:I|I'm|I've|my|we|we're|our)\b)|\s+[—–]\s+|"
    r"\s*,\s+(?=(?:the\s+|my\s+|our\s+)?[a-z][\w'-]*(?:\s+[a-z][\w'-]*)?\s+(?:is|are)\s)|"
    r"\s+(?:and|but|so)\s+(?=[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*)*\s+(?:is|'s)\s+(?:now\s+)?(?:my|our)\s)"
    r"|\s+(?:and|but|so)\s+(?=(?:the\s+|my\s+|our\s+)?[a-z][\w'-]*\s+"
    r"(?:[a-z]+ed|has|have|is|are|was|were)\s)"
    # an emoji between words: "rosa's moving back to portugal 😢 her last clean is thursday"
    rf"|\s*{EMOJI}(?:{EMOJI}|[\ufe0f\u200d])*\s+"
    r"(?=\w)"
)
# A thing one now has because it was just put in place: "got the nest installed", "set up the
# rachio for the garden", "all 9 hue bulbs are paired finally".
_PUT_IN_PLACE = rx(
    r"^(?:(?:I|we)(?:'ve|\s+have)?\s+)?(?:just\s+|finally\s+)?(?:got|had)\s+(?P<had>(?:the|a|an|my|"
    r"our|new)\s+[\w' -]{2,40}?)\s+(?:installed|fitted|put\s+in|set\s+up|delivered|connected)\b"
    r"|^(?:(?:I|we)(?:'ve|\s+have)?\s+)?(?:just\s+|finally\s+)?(?:set\s+up|installed|fitted)\s+"
    r"(?P<set>(?:the|a|an|my|our|new|\d+)\s+.+)$"
    r"|^(?:all\s+)?(?P<are>(?:the\s+|my\s+|our\s+|\d+\s+)?[\w' -]{2,40}?)\s+"
    r"(?:is|are|'s|'re|got)\s+(?:now\s+|finally\s+|all\s+)?"
    r"(?:installed|paired|set\s+up|connected|fitted)\b"
)
_TRIGGER_LEAD = rx(r"^(?:every\s+time|each\s+time|whenever|any\s*time)\s")
"""A clause that opens as a rule's trigger: what follows is a condition, not a fact."""
_RELATIVE = rx(r"\b(?:what|how|where|why|who|whom|which|whatever|wherever)\s+$")
_NO_MORE = re.compile(
    r"^(?:[Aa]nd\s+)?(?:(?i:no\s+more|not\s+any\s+more|not)\s+(?P<rest>.+)|[Nn]o\s+(?P<name>[A-Z].*))$"
)
"""A value called off: "no more whole milk", "not 3:15", "no Sky" (a name: not "no idea")."""
# "I'm at the gym in Newtown now", "doing saturday 9am instead": the value replaces the old one
_UPDATE_CUE = rx(r"\b(?:now|these\s+days|nowadays|instead)\b")
_ENDED = rx(
    r"\b(?:used\s+to|until\s+(?:last|recently|\d{4}|a\s+few|this)|up\s+until|back\s+then|"
    r"stopped|quit|gave\s+up|formerly|previously|once\s+upon)\b"
)
_OBJECT_END = rx(
    r"\s*,(?!\d)|\s*:(?!\d)|\s*[;!?()\"]|\s+(?:it|it's|she|she's|he|he's|they|they're|I|I'm|we|you)\s+(?=[a-z])|\s+[-–—]\s+|\s+(?:but|because|cause|so|since|which|who|when|whenever|while|"
    r"though|although|if|unless|and\s+(?:I|I'm|I've|we|it|then|also|my)|or\s+(?:I|we))\b|"
    r"\s+(?:not|instead\s+of|rather\s+than)\s+(?=\S)"  # "19 sept not the 12th"
)
_LIST_END = rx(_OBJECT_END.pattern.replace(r"\s*,(?!\d)|", "", 1))
"""Where an object ends when its commas separate the items of a list."""
_TRAIL = rx(
    r"(?:\s+(?:now|anymore|any\s+more|these\s+days|lately|again|too|as\s+well|though|tbh|lol|"
    r"haha|instead|at\s+all|either|really|honestly|actually|today|yesterday|at\s+the\s+moment|"
    r"right\s+now|from\s+now\s+on|for\s+now|for\s+(?:me|us)|all\s+in|completely|for\s+good|"
    r"obviously|of\s+course|"
    r"nowadays|as\s+of\s+(?:today|now|this\s+\w+)|"
    r"and|or|but|so|then))+$"
)
_TRAIL_TIME = rx(
    r"(?:\s+(?:in|since|from|until|till|during|around|for|back\s+in)\s+(?:(?:19|20)\d\d|(?:a|an|\w+)\s+"
    r"(?:years?|months?|weeks?|days?|decades?)|last\s+\w+|ages)|\s+(?:last|this)\s+(?:year|month|week|"
    r"summer|winter|spring|autumn|fall)|\s+\w+\s+(?:years?|months?|weeks?)\s+ago)+$"
)


_EMOJI = re.compile(f"(?:{EMOJI}|\ufe0f)+")


def _clean(phrase: str) -> str:
    """The object phrase up to its clause's end, without fillers and determiners. Times stay:
    in a fact they are often the value ("my painting time is Sunday mornings")."""
    phrase = _EMOJI.sub("", _OBJECT_END.split(phrase, maxsplit=1)[0])
    phrase = _TRAIL_TIME.sub("", " " + phrase.strip(" .,'\"-"))
    phrase = _TRAIL.sub("", phrase.strip(" .,'\"-")).strip(" .,'\"-")
    return LEADING_DET.sub("", phrase).strip(" .,'\"-")


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
    clause: str | None = None,
) -> FactCandidate | str | None:
    """A clause fact of sentence ``s``; over when its verb is past or its ``clause`` (default:
    the sentence) says it ended ("used to…, she's been an indoor cat since": only the first).
    "unstated" when the value cannot stand alone (:func:`cannot_stand_alone`)."""
    words = obj.split()
    if not words or len(words) > MAX_OBJECT_WORDS:
        return None
    if cannot_stand_alone(words):
        return "unstated"
    ended = (past or fact_is_ended(s.text if clause is None else clause)) and not negated
    confidence = 0.55 if len(words) <= 4 else 0.45
    return FactCandidate(
        relation, obj, kind, negated, s.text, confidence, ended=ended, update=update,
        parse=Parse.CLAUSE,
    )  # fmt: skip


def _sentence_facts(
    s: Sentence, times: list[TimeMention], earlier: str = ""
) -> tuple[list[FactCandidate], bool]:
    """The facts the clause reading finds in one sentence, at most one per clause, and whether
    a clause was read as stating none (a past event, a verdict on the moment). A question
    only when it opens with a statement ("I'm vegetarian, can you…?"); nothing after a hedge
    ("if", "maybe"). A switch or a "no more" takes the relation of the clause before it; a
    pronoun may name someone in the ``earlier`` sentences of the turn."""
    text = _WITH_ME.sub("we", OPENING_FILLER.sub("", s.text))
    if s.question and _QUESTION_START.match(text):
        return [], False
    out: list[FactCandidate] = []
    judged = False
    for clause in (c for c in _FACT_CLAUSES.split(text) if c and c.strip()):
        if CONDITIONAL.match(clause):
            break
        if _TRIGGER_LEAD.match(clause):
            continue
        previous = out[-1].relation if out else None
        clause = clause.strip()
        clause = f"I {clause}" if _DROPPED_SUBJECT.match(clause) else clause
        read = _clause_fact(clause, s, times, previous, earlier)
        if isinstance(read, FactCandidate):
            out.append(read)
        elif isinstance(read, list):
            out += read
        judged = judged or isinstance(read, str)  # "I had sushi yesterday" states nothing
    return out, judged


def _clause_fact(
    text: str, s: Sentence, times: list[TimeMention], previous: str | None, earlier: str
) -> FactCandidate | list[FactCandidate] | str | None:
    decided = _DECIDED.match(text)
    if decided:  # "we agreed bedtime's 8pm now": what was agreed
        return _clause_fact(decided["rest"], s, times, previous, earlier)
    counted = _COUNTED.match(text)
    if counted and not names_nobody(counted["noun"].split()[0]):
        update = _UPDATE_CUE.search(text) is not None
        noun = canonical_name(counted["noun"])
        return _fact(f"attribute:{noun}", _clean(counted["rest"]), s, update=update, clause=text)
    labelled = _LABEL_COLON.match(text)
    if labelled:  # "Big news: he's moved to Glasgow": the clause after the label, which
        at = s.text.find(labelled["rest"])  # names nobody
        rest = Sentence(s.start + at, s.text[at:], s.question) if at >= 0 else s
        read = _clause_fact(labelled["rest"], rest, times, previous, earlier)
        if not _CHANGE_LABEL.search(labelled["label"]):
            return read
        if isinstance(read, FactCandidate):  # "update: the sitter is Priya" replaces the old
            return dataclasses.replace(read, update=True)
        return (
            [dataclasses.replace(f, update=True) for f in read] if isinstance(read, list) else read
        )
    moved = _RESCHEDULE.search(text)
    if moved and not CONDITIONAL.search(text, 0, moved.start()) and _a_thing(moved):
        thing = canonical_name(moved["thing"] or moved["thing2"])
        new = _clean(moved["new"] or moved["new2"])
        return _fact(f"attribute:{thing}", new, s, update=True, clause=text)
    switch = _SWITCH.search(text)
    if switch and not CONDITIONAL.search(text, 0, switch.start()):
        relation = _switch_relation(text, switch, previous)
        if relation:
            return _fact(relation, _clean(switch["new"]), s, update=True, clause=text)
    placed = _PUT_IN_PLACE.match(text)
    if placed and not NON_OBJECTS.intersection(_thing_placed(placed).lower().split()[:1]):
        return _fact("has", _clean(_thing_placed(placed)), s, clause=text)
    stop = _STOPPED.match(text)
    if stop:  # "Noah quit swimming", "Dropped Organic Chem": a negated update
        who = _who(stop["who"], s, text[: stop.start()], earlier)
        relation = f"about:{who}" if who else "does"
        return _fact(relation, _clean(stop["rest"]), s, negated=True, update=True, clause=text)
    no_more = _NO_MORE.match(text)
    value = no_more and (no_more["rest"] or no_more["name"])
    if value and not VERDICT.match(value):  # not "Not easy facing setbacks"
        return _fact(previous or "uses", _clean(value), s, negated=True, update=True, clause=text)
    negated_change = NEGATED_CHANGE.search(text) is not None
    update = negated_change or bool(_UPDATE_CUE.search(text))
    found = [(p, m) for p in _CLAUSE_PATTERNS if (m := p.search(text))]
    for pattern, m in sorted(found, key=lambda pm: pm[1].start()):  # the clause's own subject
        if CONDITIONAL.search(text, 0, m.start("rest")) or _RELATIVE.search(text, 0, m.start()):
            continue  # a hedge, or a clause inside another ("what I'm doing is…")
        read = _read(pattern, m, s, times, negated_change, update=update, earlier=earlier)
        if isinstance(read, FactCandidate) and pattern in (_BE, _VERB_CLAUSE):
            verb_first = pattern is _VERB_CLAUSE and read.object.startswith(m["verb"])
            start = m.start("verb" if verb_first else "rest")  # "we've Netflix, Apple TV…"
            return _listed(read, m.string[start:])
        if read is not None:
            return read
    return None


def _thing_placed(m: re.Match[str]) -> str:
    return str(m["had"] or m["set"] or m["are"])


def _listed(read: FactCandidate, rest: str) -> list[FactCandidate]:
    """One fact per item when the object read is the first of a list ("I pay for netflix,
    spotify family, the NYT and icloud 200gb": the object stops at a comma, the list does not)
    or holds one of "a … and a …" ("I'm a UK 9 in shoes and a medium in tops")."""
    raw = _LIST_END.split(_EMOJI.sub("", rest), maxsplit=1)[0]
    commas = "," in raw and _LIST_AND.search(raw) is not None
    articles = _AND_ARTICLE.search(raw) is not None and _ARTICLE.match(raw) is not None
    if not commas and not articles:
        return [read]
    items = [_clean(i) for i in list_items(raw)]
    items = [_LEADING_PREP.sub("", i) for i in items]
    if len(items) < 2 or not all(0 < len(i.split()) <= max_words(i) for i in items):
        return [read]
    if items[0] != read.object and not (articles and read.object.startswith(items[0])):
        return [read]
    return [dataclasses.replace(read, object=i) for i in items]


_CLAUSE_PATTERNS = (_NAME_IS_MY, _BE, _VERB_CLAUSE, _MY, _MY_CLAUSE, _THIRD)
"""Ties on position go in this order."""


def _switch_relation(text: str, switch: re.Match[str], previous: str | None) -> str | None:
    """What a switch changes: the thing before it ("netball's moved to…"), where one lives
    ("we moved to Bristol"), else the clause before's relation, else ``uses``; None when
    the switch has a subject that is not adjacent ("…since we moved to the flat" inside a
    longer clause) or is nobody's. A lead before a comma is not the subject ("big news, mum's
    moved in with…")."""
    before = text[: switch.start()].rsplit(",", 1)[-1].lstrip()
    if before.strip() and not _SWITCH_SUBJECT.match(before):
        return None
    subject = _SWITCH_SUBJECT.match(before)
    noun = subject["noun"].lower() if subject else ""
    if noun in ("he", "she", "they", "he's", "she's", "they've", "they're"):
        if switch["verb"].lower().startswith("mov"):
            return None  # "he's moved to Glasgow": their move, read as a clause about them
        return previous or "uses"  # "the vet switched him to…": a change made for us
    if noun in ("i", "we", "i've", "we've", "i'm", "we're", "i have", "we have"):
        return "lives_in" if switch["verb"].lower().startswith("mov") else previous or "uses"
    if noun.split(" ", 1)[0] in NON_OBJECTS:
        return None  # "everything went to plan": nothing of ours changed
    return f"attribute:{noun}" if noun else previous or "uses"


def _read(
    pattern: re.Pattern[str],
    m: re.Match[str],
    s: Sentence,
    times: list[TimeMention],
    negated_change: bool,
    update: bool,
    earlier: str = "",
) -> FactCandidate | str | None:
    """The fact one clause pattern's match states ("event" for a past event, "verdict" for how
    one feels or what one thinks of a thing)."""
    if pattern is _NAME_IS_MY:
        if names_nobody(m["value"].split()[0]):
            return None
        noun = canonical_name(_TRAIL.sub("", m["noun"]))
        return _fact(f"attribute:{noun}", m["value"], s, update=update, clause=m.string)
    obj = _clean(m["rest"])
    if VERDICT.match(obj):
        return "verdict"
    if pattern is _MY:
        if not _owned(m):
            return None
        raw = _TRAIL.sub("", _OBJECT_END.split(m["rest"], maxsplit=1)[0].strip(" .,!")).strip()
        mine = _IS_MY.match(raw)  # "haliburton is my starting PG now": the value is the name
        value = LEADING_DET.sub("", m["noun"])
        if mine and value.split()[0].lower() not in NON_OBJECTS:
            what = canonical_name(_TRAIL.sub("", mine["what"]))
            return _fact(f"attribute:{what}", value, s, update=update, clause=m.string)
        noun = _noun(m)
        renewed = _NEW.match(noun)  # "New flat is on Harrow Road": it replaces the old one
        noun = noun[renewed.end() :] if renewed and noun[renewed.end() :] else noun
        return _fact(f"attribute:{noun}", obj, s, update=update or bool(renewed), clause=m.string)
    if pattern is _MY_CLAUSE:
        return _fact(f"about:{_noun(m)}", obj, s, clause=m.string)
    if pattern is _THIRD:
        lower = m["lower"]  # "maya's started year 2", "sam's vegetarian", typed lowercase
        if lower and (lower in NON_OBJECTS or lower in NOT_PEOPLE or names_nobody(lower)):
            return None
        subject = m["noun"] or lower
        who = _who(subject, s, m.string[: m.start("noun" if m["noun"] else "lower")], earlier)
        return _fact(f"about:{who}", obj, s, update=update, clause=m.string) if who else None
    if pattern is _BE:
        off = _OFF.match(obj) is not None  # "I'm off upwork completely": no longer on it
        negated = off or obj.lower().startswith(("not ", "no longer ")) or negated_change
        obj = re.sub(r"^(?:not|no\s+longer|off)\s+", "", obj, flags=re.IGNORECASE)
        return _fact(
            "is", obj, s, negated=negated, kind=EntityType.OTHER, update=update or off,
            clause=m.string,
        )  # fmt: skip
    before = m.string[: m.start()].split()
    if before and before[-1][:1].isupper() and before[-1].lower() not in OPENERS:
        return None  # "my CFA Level I exam": a name, not the speaker
    verb = m["verb"].lower()
    has_aux = re.search(r"'ve\s|\shave\s", m.group()[:12], re.IGNORECASE) is not None
    if has_aux and not participle(verb) and not verb.endswith("ly"):
        obj = _clean(f"{m['verb']}{m['rest']}")  # "I have crohn's", "an injured knee"
        verb = "have"
    if "'" in verb or verb.endswith("ly"):
        return None  # "I haven't…", "I totally…": no verb of a state
    lemma = lemma_of(verb)
    if lemma in ("have", "get") and re.match(r"\s+to\s", m["rest"]):
        return "obligation"  # "we had to say goodbye", "I've got to go": nothing one has
    became = _BECAME.match(obj) if verb == "got" else None
    if became:  # "got voted treasurer", "got promoted to team lead": what one is now
        return _fact("is", obj, s, kind=EntityType.OTHER, update=update, clause=m.string)
    if verb == "got" and re.search(
        r"'ve\s+got|have\s+got|got\s+(?:a|an|the|our|my|new)\b", m.group(), re.IGNORECASE
    ):
        verb = lemma = "have"  # "we've got Prime", "we got a puppy": a possession now
    if lemma in _NOT_VERBS or len(lemma) < 2:
        return None
    perfect = re.search(r"(?:'ve|\bhave)\s+(?:\w+\s+)*?" + re.escape(m["verb"]), m.group(), re.I)
    past = not perfect and (verb in PAST_FORMS or (verb.endswith("ed") and verb != lemma))
    neg = (m["neg"] or "").lower()
    if lemma in _STOP_VERBS:  # "I've dropped Pilates", "we quit the gym"
        lemma, neg, past = "do", "stopped", False
    elif lemma in _JOIN_VERBS:  # "signed up to volunteer at…", "joined a choir": a member now
        lemma, past, obj = "join", False, _SIGNED_UP.sub("", obj)
    elif past and (_is_event(s, times) or lemma not in VERB_RELATIONS):
        return "event"  # a past verb that names no state ("I made a cake") is an event
    negated = (bool(neg) and not neg.startswith("used")) or negated_change
    obj = _LEADING_PREP.sub("", obj)
    obj = LEADING_DET.sub("", obj)
    if lemma == "have" and is_health_related(obj):  # "I've got a sprained wrist": a condition,
        return _fact(
            "has_condition",
            obj,
            s,
            negated=negated,
            kind=EntityType.OTHER,
            past=past,
            clause=m.string,
        )
    return _fact(
        verb_relation(lemma), obj, s, negated=negated, update=update, past=past, clause=m.string
    )


def _who(subject: str | None, s: Sentence, before: str, earlier: str = "") -> str:
    """The person or pet a third-person clause is about: its name, or for a pronoun the first
    name before it in the sentence (``before``: the clause's text before the subject), else in
    the ``earlier`` sentences of the turn ("" when there is none, or the word names nobody:
    "It", "Your")."""
    if not subject:
        return ""
    if subject.lower() not in ("he", "she", "they", "he's", "she's", "they're"):
        return "" if names_nobody(subject) or no_subject(subject) else subject.lower()
    at = s.text.find(before) if before else -1
    preceding = s.text[: at + len(before)] if at >= 0 else s.text.split(subject, 1)[0]
    names = named(preceding) or named(earlier)
    return names[0].lower() if names else ""  # the subject before, not a place after a verb


def _owned(m: re.Match[str]) -> bool:
    """Whether an "X is Y" clause is about the speaker's thing: "my"/"our"/"the" before it, or
    a bare noun with a verb ("Rent is £900"); not a bare word before "'s" ("Let's…",
    "Life's…") nor a word that is not a noun ("Your…", "Here…")."""
    head = m.group().split(maxsplit=1)[0].lower()
    if head in ("my", "our", "the"):
        return True
    noun = m["noun"].split()[0]
    tail = m.string[m.end("noun") : m.start("rest")].strip().lower()
    return tail != "'s" and not names_nobody(noun) and noun.lower() not in NON_OBJECTS


def _noun(m: re.Match[str]) -> str:
    """The thing of an "X is Y" clause, one form for "standup" and "standups"."""
    return canonical_name(m["noun"])


def _a_thing(moved: re.Match[str]) -> bool:
    """Whether a change's subject names a thing ("standups moving to 10:00"), not a pronoun
    ("everything went to plan", "it moved to…")."""
    words = (moved["thing"] or moved["thing2"]).split()
    if words[0].lower() in ("the", "my", "our"):
        return True
    return words[0].lower() not in NON_OBJECTS and not names_nobody(words[0])


def clause_facts(
    text: str,
    times: list[TimeMention],
    covered: Collection[str] = (),
    chat: bool = True,
    requests: Collection[str] = (),
) -> list[FactCandidate]:
    """Facts read clause by clause from the sentences no pattern read (``covered``: the texts of
    those a pattern did); from the sentences of a rule, a to-do or a report (``requests``) only
    the changes ("the rent's going up to £1,525, remind me to…"). The sentence itself
    (``generic``) when nothing was read, no sentence was a pattern's or a request's and no
    clause was read as stating nothing (a past event, a verdict). In ``chat`` a kept sentence
    must be about the speaker (:func:`of_speaker`); a device's log line has no speaker to
    name."""
    sentences = sentences_of(text)
    out: list[FactCandidate] = []
    judged = False
    for s in (s for s in sentences if s.text not in covered):
        out += _appositions(s) if chat else []
        facts, said_none = _sentence_facts(s, times, text[: s.start])
        if s.text in requests:  # a change said beside a request still changes the value
            out += [f for f in facts if f.update]
        else:
            out += facts
            judged = judged or said_none
    if out or covered or requests or judged:
        return out
    statements = [
        s
        for s in sentences
        if not s.question and not CONDITIONAL.search(s.text) and (not chat or of_speaker(s.text))
    ]
    if not statements or any(
        _PAST_EVENT.search(s.text) and _is_event(s, times) for s in statements
    ):
        return []  # only hypotheticals and questions, or a past event: nothing to state
    s = max(statements, key=lambda x: len(x.text))
    obj = shorten(OPENING_FILLER.sub("", s.text).strip(" .!"), 80)
    return [
        FactCandidate(
            GENERIC_RELATION, obj, EntityType.OTHER, False, s.text, 0.4, parse=Parse.GENERIC
        )
    ]


def _appositions(s: Sentence) -> list[FactCandidate]:
    """What the sentence says a name is in brackets after it ("Luna (husky cross, 2)" → about
    luna: "husky cross, 2"); not an aside ("(lol)", "(or so)") nor a time ("(9am)")."""
    out = []
    for m in _APPOSITION.finditer(s.text):
        name = m["name"].split()
        while name and names_nobody(name[0]):
            name = name[1:]
        what = LEADING_DET.sub("", m["what"].strip(" ,.;:-"))
        if not name or not what or _NOT_APPOSITIVE.match(m["what"]):
            continue
        who = canonical_name(" ".join(name))
        fact = _fact(f"about:{who}", what, s, kind=EntityType.OTHER, clause=m.group())
        out += [fact] if isinstance(fact, FactCandidate) else []
    return out
