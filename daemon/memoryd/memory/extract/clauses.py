"""Rules and tasks read from the clause, when the router's label asks for that type and no
specific pattern of :mod:`.rules` or :mod:`.tasks` matched (facts: :mod:`.clause_facts`). A
turn the router calls procedural or working must still become a memory of that type; these
readers take the clause apart by its function words only (a trigger and an action, a request
and a due time), never by a domain's vocabulary::

    clause_rules("Whenever I fly long-haul, remind me to book an aisle seat")
        → if "I fly long-haul" then "remind me to book an aisle seat"
    clause_tasks("Don't let me forget the parent-teacher meeting on Thursday at 6", …)
        → "the parent-teacher meeting", due Thursday 18:00

When even the clause cannot be read the sentence itself is kept (``parse: generic``): a rule
applies ``always``, a task is titled by the request.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime

from memoryd.memory.extract.rules import (
    RuleCandidate,
    request_in_condition,
    rule_tags,
    steps,
)
from memoryd.memory.extract.sentences import (
    EMOJI,
    IMPERATIVES,
    OPENING_FILLER,
    Sentence,
    cut_times,
    rx,
    sentences_of,
    shorten,
)
from memoryd.memory.extract.tasks import (
    REQUEST_MARK,
    WHEN_WORDS,
    Completion,
    TaskCandidate,
    due_time,
    need_mark,
    tidy_title,
)
from memoryd.memory.timeparse import TimeMention
from memoryd.models import Parse, TaskStatus
from memoryd.text import content_tokens

NEGATED_CHANGE = rx(r"\b(?:no\s+longer|not\s+\w+(?:\s+\w+)?\s+any\s*more|anymore|any\s+more)\b")
"""A negation that says something changed ("I don't need it anymore"): a reminder with a time
ahead that says so is called off, not moved."""

__all__ = ["asks", "clause_completions", "clause_rules", "clause_tasks", "reports_done"]

# Rules: a trigger clause (prefix, or after the action), a standing instruction, a goal.
_TRIGGER = (
    r"(?:if|when|whenever|every\s+time|each\s+time|any\s*time|as\s+soon\s+as|once|in\s+case|"
    r"unless|before|after|during|while|until|for\s+(?:anything|any|everything|all)\b|"
    r"on\s+(?:the\s+)?(?:days\b|(?:[\w-]+\s+){1,2}(?:days|nights|mornings|evenings|holidays)\b|"
    r"weeknights|"
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)days|weekends|weekdays|(?:(?:mon|tues|wednes|"
    r"thurs|fri|satur|sun)day|weekday|weekend)\s+(?:mornings|afternoons|evenings|nights))|"
    r"every\s+(?:\w+\s+)?(?:morning|evening|night|day|week|weekday|weekend|month|year|monday|"
    r"tuesday|wednesday|thursday|friday|saturday|sunday)s?|each\s+(?:morning|evening|night|day|"
    r"week|month)|"
    r"at\s+the\s+(?:start|end)\s+of\s+(?:each|every|the)\s+\w+|"
    r"on\s+the\s+(?:\d{1,2}(?:st|nd|rd|th)|first|last)\s+of\s+(?:every|each|the)\s+month|"
    r"on\s+the\s+(?:first|last)\s+\w+|"
    r"(?:every|each)\s+(?:\d{1,2}(?:st|nd|rd|th)|first|last)\s+(?:\w+\s+)?of\s+(?:the|every|each)\s+"
    r"month|(?:every|each)\s+(?:quarter|fortnight|term|semester|season)\b|"
    r"(?:every|each)\s+[\w-]+(?=\s*,)|"  # "every payday, …"
    r"any\s+(?=[\w'-]+\s+[^,]{2,60},))"  # "any day the avalanche risk is 4 or higher, …"
)
_RULE_PREFIX_COMMA = rx(
    rf"^(?P<kw>{_TRIGGER})\b\s*(?P<cond>[^,:]*?)(?:\s*,(?!\d)\s*(?:then\s+)?|\s*:\s+|\s+then\s+)"
    r"(?P<act>.+)$"
)
_RULE_PREFIX = rx(
    rf"^(?P<kw>{_TRIGGER})\b\s*(?P<cond>.*?)(?:\s*,(?!\d)\s*(?:then\s+)?|\s*:\s+|\s+then\s+|"
    r"(?<=\s)(?=(?:remind|nudge|ping|please|pls|make\s+sure|remember\s+to)\b)|"
    r"(?<!\bI\s)(?<!\bwe\s)(?<!\byou\s)(?<!\bhe\s)(?<!\bshe\s)(?<!\bthey\s)(?<=\s)"
    r"(?=(?:" + "|".join(sorted(IMPERATIVES)) + r")\b)|"
    r"(?<!\bI)(?<!\bwe)(?<!\byou)(?<!\bhe)(?<!\bshe)(?<!\bthey)"  # "whenever I book…": a verb
    r"\s+(?=(?:remind|please|make\s+sure|remember|always|never|don't|do\s+not|can\s+you|could\s+you|"
    r"you\s+(?:should|need|must)|I\s+(?:want|need|like|always|usually|have|should|must|will|'ll)|"
    r"I'll|I'd|I\s+[a-z]+|we\s+[a-z]+|tell|ask|text|call|book|put|set|turn|switch|add|send|check|"
    r"ping|let|keep|suggest|give|avoid)\b))"
    r"(?P<act>.+)$"
)
MAX_LEAD_WORDS = 3
"""Words before a trigger that opens the rule anyway ("and in general, whenever…", "the night
before any exam, …"): a longer lead is the action of a rule whose trigger follows it."""
_LEAD_END = rx(rf"(?:[,.!]|\b(?:so|and|but)|{EMOJI})\s*$")
"""A clause before the trigger that ends in a comma, a conjunction or an emoji ("Priya is
vegetarian, so whenever I ask…", "training mon/wed/fri 6am 😩 on training days…"): the rule
starts at its trigger."""
_RULE_POSTFIX_END = rx(rf"^(?P<act>.+?)\s*,?\s+(?P<kw>{_TRIGGER})(?P<cond>)\W*$")
_NESTED_TRIGGER = rx(
    rf"^(?P<kw>{_TRIGGER})\s*,?\s+(?P<rest>(?:if|when|whenever|every\s+time|any\s*time)\b.+)$"
)
_TIMED = rx(rf"^(?P<kw>{_TRIGGER})\b[\s,]*(?P<act>.+)$")
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
_CLAUSE_SPLIT = re.compile(r"\s+[—–-]+\s+|\s*;\s*|:\s+")
# "Got it: …", "Noted - …", "One thing: …": an acknowledgement or an aside, not a condition.
_ACK = rx(
    r"^(?:got\s+it|noted|ok(?:ay)?|sure|done|understood|will\s+do|no\s+problem|sounds\s+good|"
    r"great|perfect|right|alright|all\s+set|one\s+(?:more\s+)?thing|fyi|btw|reminder\s+set|"
    r"updated|thanks|thank\s+you|nice|cool|so\s+you\s+know|"
    r"(?:and\s+)?(?:(?:new|house|one|a|another)\s+)?rule(?:\s+for\s+[^:,]{1,30})?(?=\s*:))\b[\s!.,:;—–-]*"
)
_TOPIC = rx(r"^(?P<cond>[^:,]{3,50}?)\s*:\s+(?P<act>.+)$")
_SAYING = rx(
    r"\b(?:say|says|said|saying|tell\s+you|telling\s+you|mention|text\s+you|think|feel|know|"
    r"ask|that)\s*$"
)
_OWN_SUBJECT = rx(r"^(?:I|we|you)\b")
_NEXT_SUBJECT = re.compile(r"(?<=\w)\s+(?=(?:I|we)(?:'m|'ll|'d|'ve)?\s+[a-z])")
_ASKED = rx(
    rf"^(?:(?:please|pls)\s+)?(?:remind\s+me|make\s+sure|don'?t\s+let\s+me|tell\s+me|"
    rf"(?:{'|'.join(IMPERATIVES)})\s)"
)
_WANT_TO = rx(
    r"^(?:morning\s+|evening\s+|night\s+)?(?:I|we)\s+(?:want|need|have|'d\s+like|would\s+like|"
    r"try|plan|mean)\s+to\s+(?P<what>.+)$"
)
_BARE_REMINDER = rx(
    r"^(?:(?:can|could)\s+you\s+)?(?:please\s+|pls\s+)?(?:remind|nudge|ping)\s+me"
    r"(?:\s+(?:pls|please|then|too|of\s+it|about\s+it))?\W*$|^give\s+me\s+a\s+(?:nudge|reminder)\W*$"
)
_ALWAYS = rx(r"^(?:please\s+)?(?:always|never|don't\s+ever|make\s+sure\s+(?:to|you)\s+always)\b")
_GOAL = rx(r"^(?P<kw>to|for|how\s+to)\s+(?P<cond>[^,:]{3,60}?)\s*[,:]\s*(?P<act>.+)$")

# Tasks: the request around the action.
_REQUEST = rx(
    r"^(?:(?:hey|hi|ok|okay|so|oh|also|and|btw|quick\s+one|one\s+more\s+thing)\b[,:!\s]*)*"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|please\s+|pls\s+)?"
    r"(?:(?:remind|ping|nudge|text|message|tell|buzz|alert)\s+me\s+(?:to|that|about|of|when)?|set\s+(?:me\s+)?(?:a|an)\s+(?:reminder|alarm|timer)"
    r"\s*(?:to|for|about)?|don'?t\s+(?:let\s+me\s+)?forget\s+(?:to|about)?|do\s+not\s+(?:let\s+me\s+)?"
    r"forget\s+(?:to|about)?|make\s+sure\s+(?:I|that\s+I|to|we)?|remember\s+to|note\s+to\s+self:?|"
    r"I\s+(?:really\s+|still\s+|also\s+)?(?:need\s+to|have\s+to|must|should|gotta|got\s+to|ought\s+to|"
    r"want\s+to|'ll|will|am\s+going\s+to|'m\s+going\s+to|have|'ve\s+got)|we\s+(?:need\s+to|have\s+to|"
    r"have|'ve\s+got|should)|need\s+to|gotta|there's|there\s+is|todo:?|to-do:?|reminder:?|task:?)?"
    r"\s*(?P<what>.+)$"
)
_TO_CANCEL = rx(r"\bto\s+(?:cancel|call\s+off|scrap|drop|skip)\b")
_CANCEL = rx(
    r"\b(?:cancel(?:led|ed)?|call(?:ed)?\s+off|scrap(?:ped)?|"
    r"drop(?:ped)?(?!(?:\s+[\w'-]+){0,4}\s+(?:off|by|in)\b)|skip(?:ped)?|"
    r"no\s+need\s+to|don't\s+need\s+to|(?:is|are|'s)\s+(?:cancelled|canceled|off))\b"
)
_CALLED_OFF = rx(
    r"\b(?:(?:drop|cancel|scrap|delete|remove|kill|ditch|clear)\s+(?:that|the|this|my)\s+"
    r"(?:[\w'-]+\s+){0,2}(?:reminder|task|alarm|to-?do)s?\b|"
    r"^(?:(?:ok|okay|actually|oh|so)\W+)?(?:scrap|skip|ditch|drop)\s+(?:the|that|my)\s+\w|"
    r"no\s+need\s+(?:for|to)|(?:don't|do\s+not)\s+(?:need\s+(?:it|that|the|to)|bother|"
    r"worry\s+about)|"
    r"never\s+mind|not\s+needed|no\s+longer\s+need|(?<!don't\s)(?<!not\s)(?<!never\s)"
    r"(?<!n't\s)forget\s+(?:about\s+)?(?:the|that|it|my)\b)"
)
"""A request called off in so many words ("no need for the mat reminder", "forget the video",
"you can drop that reminder")."""
_ASKS = rx(
    r"\b(?:remind|ping|nudge|alert|don'?t\s+(?:let\s+me\s+)?forget|make\s+sure|remember\s+to|"
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
    r"got\s+(?:the|my|them|it(?!\s*(?:[,.!:;—–-]|$)))|returned|ordered|fixed|signed\s+up)\b|"
    r"[✔✓✅☑]"
)
MAX_REPORT_WORDS = 8
_PAST_REPORT = rx(
    r"^(?:(?:ok|okay|so|right|also)\W+)?(?:(?:I|we)(?:'ve)?\s+)?(?:just\s+|finally\s+|already\s+)?"
    r"(?!(?:noted|updated|saved|logged|recorded|got\s+it)\b)"  # an acknowledgement ("Noted: …")
    r"(?:[a-z]{3,}ed|sent|paid|bought|got|did|made|took|gave|wrote|rang|put|brought|sold|told|"
    r"left|set|hung|fixed)\b(?!\s+(?:to|that|if|about)\b)"
)
# A thing and what became of it, in a few words: "TAX RETURN FILED", "hub posted back".
_PARTICIPLE_REPORT = rx(
    r"^(?:(?:the|my|our)\s+)?(?!(?:i|i'm|we|we're|he|she|they|it|it's|that|this|so|really|very|"
    r"just|am|is|are|was|were|be|been|feel|feeling|got|get|getting)\b)[a-z][\w'-]*"
    r"(?:\s+[a-z][\w'-]*){0,3}?\s+(?:[a-z]{3,}ed|sent|paid|done|sorted)"
    r"(?:\s+(?:back|off|in|out|up|on|down|away))?(?:\W*$|\s*[,;]|\s+[^\w\s])"
)
_LOG_PREFIX = re.compile(r"^\s*(?:log\s*:\s*)?(?:\[[^\]]{1,30}\]\s*)?(?:[\w .-]{1,24}:\s+)?")
_TITLE_STOP = rx(
    r"\s*(?:,(?!\d)|[;!?()])|\s+[-–—]\s+|\s+(?:because|cause|since|so\s+that|so|but|which|otherwise|"
    r"or\s+(?:else|I|I'll|you|he|she|they|we|it)|if\s+(?:not|possible)|please)\b"
)
_DATE_WORD = rx(
    r"^(?:\d[\d:.]*(?:st|nd|rd|th|am|pm)?|(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*|"
    r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*)$"
)
"""A word that only says when ("Fri", "12", "jun")."""
_GERUND = rx(r"\w+ing\b")
_CLAUSE_COMMA = rx(r"\s*(?:,(?!\d)|;)\s*")
# A message's app and sender ("Email: Habito - Your mortgage offer is ready"): the subject
# after them says what to do, the sender does not.
_MESSAGE_FROM = rx(
    r"^\s*(?:e-?mail|sms|text|message|whatsapp|slack|teams|imessage|messenger|signal|telegram)"
    r"\s*:\s*[^-–—:]{1,40}?\s+[-–—]\s+"
)
_QUOTED = re.compile(r"[\"“](?P<what>[^\"”]{2,80})[\"”]")


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
    text = _ACK.sub("", OPENING_FILLER.sub("", s.text).strip()).strip()
    clauses = [c.strip() for c in _CLAUSE_SPLIT.split(text) if c.strip()]
    for clause in clauses:
        for pattern in (_STANDING, _STANDING_TAIL):
            m = pattern.match(clause)
            if m:  # "from now on, for anything under 4 hours, take the train": its condition
                act = OPENING_FILLER.sub("", m["act"].strip())
                inner = _prefix_rule(act, s.text) or _postfix_rule(act, s.text)
                return inner or _rule(m["kw"], "", m["act"], s.text)
        found = _prefix_rule(OPENING_FILLER.sub("", clause), s.text)
        if found:
            return found
    found = _reminded_when(clauses, s.text)
    if found:
        return found
    m = _TOPIC.match(text)
    if m and not _ACK.match(m["cond"]):
        return _rule("", m["cond"], m["act"], s.text)
    m = _RULE_POSTFIX.match(text)
    lead = m is not None and (len(m["act"].split()) <= MAX_LEAD_WORDS or _LEAD_END.search(m["act"]))
    found = _after_lead(m, s) if m and lead else None
    if found:
        return found
    if m and len(m["act"].split()) >= 2:
        return _rule(m["kw"], m["cond"], m["act"], s.text)
    m = _GOAL.match(text)
    if m:
        return _rule(m["kw"], m["cond"], m["act"], s.text)
    if _ALWAYS.match(text):
        return _rule("always", "", text, s.text)
    return None


def _postfix_rule(clause: str, text: str) -> RuleCandidate | None:
    """ "no screens after 6pm on school nights": a time trigger after the action."""
    for pattern in (_RULE_POSTFIX_END, _RULE_POSTFIX):
        m = pattern.match(clause)
        if m and _TIME_TRIGGER.match(m["kw"]) and len(m["act"].split()) >= 2:
            return _rule(m["kw"], m["cond"], m["act"], text)
    return None


def _reminded_when(clauses: list[str], text: str) -> RuleCandidate | None:
    """ "On the 1st of every month he gets a NexGard chew - please remind me": a time trigger
    and what happens then, followed by a bare reminder request, is a rule to remind of it."""
    for i, clause in enumerate(clauses[:-1]):
        m = _TIMED.match(OPENING_FILLER.sub("", clause))
        if (
            m
            and _TIME_TRIGGER.match(m["kw"])
            and _BARE_REMINDER.match(clauses[i + 1].split(",")[0])
        ):
            return _rule(m["kw"], "", m["act"], text)
    return None


def _after_lead(m: re.Match[str], s: Sentence) -> RuleCandidate | None:
    """The rule whose trigger follows a short lead (``m`` is a postfix match); a lead before
    "before" or "after" is part of its condition ("the night before any exam")."""
    found = _prefix_rule(m.string[m.start("kw") :], s.text)
    if found and found.conditions[0].startswith(("before", "after")):
        lead = m["act"].strip(" ,").lower()
        return dataclasses.replace(found, conditions=[f"{lead} {found.conditions[0]}"])
    return found


def _prefix_rule(clause: str, text: str) -> RuleCandidate | None:
    """A rule whose trigger opens ``clause``: up to its comma if it has one, else up to the
    word that starts the action."""
    nested = _NESTED_TRIGGER.match(clause)
    if nested:  # "on weeknights if i'm still gaming after 11pm tell me to go to bed"
        inner = _prefix_rule(nested["rest"], text)
        if inner:
            when = " ".join(nested["kw"].lower().split())
            return dataclasses.replace(inner, conditions=[f"{when}, {inner.conditions[0]}"])
    for pattern in (_RULE_PREFIX_COMMA, _RULE_PREFIX):
        m = pattern.match(clause)
        if m and (m["cond"].strip() or _TIME_TRIGGER.match(m["kw"])):
            cond, act = _second_subject(*request_in_condition(m["cond"], m["act"]))
            cond, act = _wanted(m["kw"], cond, act)
            return _rule(m["kw"], cond, act, text)
    return None


def _wanted(kw: str, cond: str, act: str) -> tuple[str, str]:
    """ "every saturday morning I want to do a water change, remind me pls": after a time
    trigger, what one wants to do is the action of a bare reminder request; a request or an
    instruction right after it is the action ("every community day make sure i pop a lucky
    egg, forgot both today"), what follows its comma a reason."""
    if not _TIME_TRIGGER.match(kw):
        return cond, act
    wanted = _WANT_TO.match(cond)
    if wanted and _BARE_REMINDER.match(act):
        return "", wanted["what"]
    if _ASKED.match(cond.strip()):
        return "", cond
    return cond, act


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
    sentences = sentences_of(text)
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
    text = _MESSAGE_FROM.sub("", s.text, count=1)
    if text == s.text and ":" in s.text[:30]:
        text = _LOG_PREFIX.sub("", s.text, count=1)
    offset = s.start + len(s.text) - len(text)
    mark = REQUEST_MARK.search(text) or need_mark(text)
    if mark:
        after = _cut(text[mark.end() :], offset + mark.end(), times)
        if (_says_what(after) or mark.start() == 0) and not _GERUND.match(text, mark.end()):
            return after
        asked = mark.re is REQUEST_MARK  # else the mark is the need itself
        need = need_mark(text, 0, mark.start()) if asked else mark
        start = _need_start(text, need) if need else 0  # "also need to cancel X, remind me…"
        return _cut(text[start : mark.start() if asked else len(text)], offset + start, times)
    m = _REQUEST.match(text)
    what, at = (m["what"], offset + m.start("what")) if m else (text, offset)
    if m and not _ASKS.search(text, 0, m.start("what")):
        what, at = _timed_clause(what, at, times)
    return _cut(what, at, times)


def _need_start(text: str, need: re.Match[str]) -> int:
    """Where a need's action starts: after its mark ("need to cancel X"), or at its clause's
    start when the thing needs doing ("€200 deposit needs paying by the 13th")."""
    if not _GERUND.match(text, need.end()):
        return need.end()
    return max((m.end() for m in _CLAUSE_COMMA.finditer(text, 0, need.start())), default=0)


def _says_what(title: str) -> bool:
    """Whether a title names something to do, not only when ("at 5", "that morning")."""
    return any(w not in WHEN_WORDS and not _DATE_WORD.match(w) for w in content_tokens(title))


def _timed_clause(text: str, offset: int, times: list[TimeMention]) -> tuple[str, int]:
    """From the first clause of ``text`` that names a time and, without it, still says what to
    do in two words ("our celebrant is Maria, she wants the form signed by 2pm on thursday" →
    the second; "Physio - Marta, Thu 2 Apr 10:00" → all); else the whole text; with its
    offset."""
    start = 0
    for stop in [*_CLAUSE_COMMA.finditer(text), None]:
        end = stop.start() if stop else len(text)
        local = [t for t in times if offset + start <= t.start < offset + end]
        words = content_tokens(cut_times(text[start:end], offset + start, local))
        if local and len([w for w in words if not _DATE_WORD.match(w)]) >= 2:
            return text[start:], offset + start
        start = stop.end() if stop else start
    return text, offset


def _cut(what: str, at: int, times: list[TimeMention]) -> str:
    """``what`` (at text offset ``at``) up to its clause's end, without times, tidied."""
    return tidy_title(cut_times(_TITLE_STOP.split(what, maxsplit=1)[0], at, times))


def clause_tasks(text: str, times: list[TimeMention], now: datetime) -> list[TaskCandidate]:
    """One task per sentence that asks for a reminder in so many words ("remind me…", "make
    sure I…") or says something must be done by a time ahead ("have to drop it at the office
    by 5pm on the 12th"); with none, one from the sentence that asks at all ("can you…",
    "need to…"), else one that names a time, else the first. The action is the title; the due
    time is the request's first upcoming time, those after its request mark first
    ("registration closes April 2, remind me to register on March 30" is due March 30).
    ``generic`` when the request leaves no title."""
    sentences = sentences_of(text)
    if not sentences:
        return []
    asking = _requests(sentences, times, now) or [_asking(sentences, times)]
    return [_task(s, text, times, now) for s in asking]


def asks(text: str, times: list[TimeMention], now: datetime) -> bool:
    """Whether ``text`` asks for a reminder in so many words or says something must be done
    by a time ahead ("asthma review done. need to collect it from boots tomorrow at 4")."""
    return bool(_requests(sentences_of(text), times, now))


def _requests(sentences: list[Sentence], times: list[TimeMention], now: datetime) -> list[Sentence]:
    return [
        s
        for s in sentences
        if REQUEST_MARK.search(s.text) or (need_mark(s.text) and _ahead(s, times, now))
    ]


def _ahead(s: Sentence, times: list[TimeMention], now: datetime) -> bool:
    """Whether the sentence names a time from today on."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return any(s.start <= t.start < s.end and t.value >= today for t in times)


def _task(s: Sentence, text: str, times: list[TimeMention], now: datetime) -> TaskCandidate:
    mark = REQUEST_MARK.search(s.text) or need_mark(s.text)
    after = s.start + mark.end() if mark else s.start
    local = [t for t in times if s.start <= t.start < s.end] or times
    local = [t for t in local if t.start >= after] + [t for t in local if t.start < after]
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    # as a deadline: "by the 20th" said on the 5th is not the 20th just gone
    upcoming = [t for t in local if due_time(t, now) >= today]
    due_from = upcoming or local
    due = due_time(due_from[0], now, text[due_from[0].end :]) if due_from else None
    title = _title(s, times)
    called_off = _CANCEL.search(title if REQUEST_MARK.search(s.text) else s.text)
    if title and not (called_off and not _TO_CANCEL.search(s.text)):
        return TaskCandidate(shorten(title, 120), due, text, Parse.CLAUSE)
    return TaskCandidate(shorten(s.text, 120), due, text, Parse.GENERIC)


def _asking(sentences: list[Sentence], times: list[TimeMention]) -> Sentence:
    for s in sentences:
        if _ASKS.search(s.text):
            return s
    for s in sentences:
        if any(s.start <= t.start < s.end for t in times):
            return s
    return sentences[0]


def clause_completions(
    text: str, times: list[TimeMention], now: datetime, report_words: int = MAX_REPORT_WORDS
) -> list[Completion]:
    """A report that something is done or called off ("got the JR Pass, that one's done",
    "paid it", "skip the dentist, it's cancelled", a short line opening with a past verb,
    "entered wilmslow 👍", or closing with one, "tax return filed"; "no need for the mat
    reminder", "forget the video"), as one
    completion whose action is the report itself; consolidation matches it to the open task it
    shares most words with. A short line has at most ``report_words`` words. A time ahead makes
    a plan, not a report: in the turn (the sentence, for a request called off in so many
    words), unless the report opens its sentence in a clause of its own that plans nothing
    ("paid the county entry 👍 coach says sessions move to tuesdays from next week"); a
    question is no report either."""
    sentences = [s for s in sentences_of(text) if not s.question]
    plans = any(t.value > now for t in times)
    marked = [(s, _CALLED_OFF.search(s.text)) for s in sentences]
    marked.sort(key=lambda sm: sm[1] is None)  # "drop that reminder" first
    for s, called_off in marked:
        planned = any(s.start <= t.start < s.end and t.value > now for t in times)
        if called_off and planned and not NEGATED_CHANGE.search(s.text):
            continue  # "never mind, I'll do it friday" moves it; "… anymore" calls it off
        if plans and not called_off and not _reported_first(s, times, now):
            continue
        short_past = len(s.text.split()) <= report_words and (
            _PAST_REPORT.match(s.text) or _PARTICIPLE_REPORT.match(s.text)
        )
        if _DONE_REPORT.search(s.text) or short_past or called_off:
            cancelled = called_off or _CANCEL.search(s.text)
            status = TaskStatus.CANCELLED if cancelled else TaskStatus.DONE
            action = shorten(OPENING_FILLER.sub("", s.text).strip(" .!"), 120)
            return [Completion(action, now, text, status, Parse.CLAUSE)]
    return []


_CLAUSE_END = re.compile(rf"\s*(?:[,;:!?]|\s[-–—]\s|{EMOJI})\s*")
"""Where a report's clause ends: punctuation, a dash or an emoji."""


def _reported_first(s: Sentence, times: list[TimeMention], now: datetime) -> bool:
    """Whether ``s`` opens with a report of something done in a clause of its own that names no
    time ahead and no intent: "paid the county entry 👍 …", "booked the flights, we fly
    friday"."""
    first = _CLAUSE_END.split(s.text, maxsplit=1)[0]
    end = s.start + len(first)
    opens = (_DONE_REPORT.search(first) and _PAST_REPORT.match(first)) or _PARTICIPLE_REPORT.match(
        first
    )
    return bool(opens) and not any(s.start <= t.start < end and t.value > now for t in times)


def reports_done(text: str) -> bool:
    """Whether ``text`` says outright that something is done ("done, paid it", "that one's
    done", "ticked off", "✅"), which makes it working memory whatever else it is."""
    return any(_EXPLICIT_DONE.search(s.text) for s in sentences_of(text) if not s.question)
