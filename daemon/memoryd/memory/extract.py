"""Cheap rule-based extractors: the hot path's only "understanding" of a turn.

:func:`extract` reads one turn with precompiled regular expressions and small vocabularies and
returns an :class:`Extraction`: resolved times, typed entity mentions, first-person facts,
if-then rules, to-dos and completed actions. It is pure, deterministic and fast (well under a
millisecond for a chat turn); it aims at precision over recall, because an LLM pass can add what
it misses later but nobody removes a wrong fact::

    >>> x = extract("I'm allergic to ibuprofen", datetime(2023, 5, 8, tzinfo=UTC))
    >>> [(f.relation, f.object) for f in x.facts]
    [('allergic_to', 'ibuprofen')]

Which records a turn becomes is decided elsewhere (``build.build_memories``, by router label);
this module extracts everything it can find regardless of label. Questions and hypotheticals
("if I were allergic…", "maybe I'm…") yield no facts, to-dos or completions.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from memoryd.memory.timeparse import TimeMention, find_times
from memoryd.models import EntityType

__all__ = [
    "RELATIONS",
    "Completion",
    "EntityMention",
    "Extraction",
    "FactCandidate",
    "RuleCandidate",
    "TaskCandidate",
    "canonical_name",
    "entity_id",
    "extract",
    "is_health_related",
    "related_drug_terms",
]

MentionRole = Literal["subject", "object", "mention"]

# The controlled relation vocabulary of first-person facts (the user is always the subject).
RELATIONS: tuple[str, ...] = (
    "likes", "dislikes", "allergic_to", "has_condition", "lives_in", "works_as", "works_at",
    "has_skill", "owns", "relationship", "takes_medication", "prefers", "is",
)  # fmt: skip


@dataclass(frozen=True)
class EntityMention:
    """An entity named in the text at offset ``start``; ``role`` is "subject" when it opens a
    clause, "object" when a verb or a fact takes it, "mention" otherwise. A time entity's name is
    its resolved value ("2023-05-07"), so mentions of one day share an id."""

    name: str
    type: EntityType
    role: MentionRole
    start: int


@dataclass(frozen=True)
class FactCandidate:
    """``user -[relation]-> object``.

    ``qualifier`` narrows the relation where the vocabulary needs it: the kind of relative
    ("sister" in "my sister Anna"), the category of a favourite ("food"), the kind of thing owned
    ("dog" in "a dog named Max"); empty otherwise.
    """

    relation: str
    object: str
    object_type: EntityType
    negated: bool
    text: str
    confidence: float
    qualifier: str = ""


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


@dataclass(frozen=True)
class TaskCandidate:
    """Something to do; ``title`` has its time expressions removed, which give ``due``."""

    title: str
    due: datetime | None
    text: str


@dataclass(frozen=True)
class Completion:
    """An action the speaker reports as done; ``action`` is in base form ("take aspirin")."""

    action: str
    ts: datetime
    text: str


@dataclass(frozen=True)
class Extraction:
    """Everything found in one text; each list is in text order."""

    times: list[TimeMention]
    entities: list[EntityMention]
    facts: list[FactCandidate]
    rules: list[RuleCandidate]
    tasks: list[TaskCandidate]
    completions: list[Completion]


# ---------------------------------------------------------------------------------------------
# Vocabularies (lower case). Short on purpose: each entry is a precision cue, not a dictionary.

ALIASES: dict[str, str] = {
    "nyc": "new york city", "new york": "new york city", "ny": "new york city",
    "la": "los angeles", "sf": "san francisco", "san fran": "san francisco",
    "uk": "united kingdom", "britain": "united kingdom", "great britain": "united kingdom",
    "us": "united states", "usa": "united states", "america": "united states",
    "united states of america": "united states",
    "mom": "mother", "mum": "mother", "mommy": "mother", "mama": "mother",
    "dad": "father", "daddy": "father", "papa": "father",
    "grandma": "grandmother", "granny": "grandmother", "grandpa": "grandfather",
    "bp": "blood pressure", "advil": "ibuprofen", "motrin": "ibuprofen",
    "tylenol": "acetaminophen", "paracetamol": "acetaminophen",
}  # fmt: skip
# Words whose final "s" is not a plural, and singulars ending in "ie" (so "-ies" is not "-y").
INVARIANT_WORDS = frozenset(
    "news series species diabetes herpes measles mumps rabies scabies gas texas glasses "
    "pants jeans shorts scissors clothes physics mathematics maths politics economics "
    "athletics gymnastics aerobics lens".split()
)
IE_SINGULARS = frozenset(
    "cookie movie smoothie brownie selfie hoodie calorie rookie veggie zombie pie tie lie "
    "genie prairie sweetie aussie".split()
)
FIRST_NAMES = frozenset(
    "james john robert michael william david richard joseph thomas charles chris daniel "
    "matthew anthony mark paul steven andrew joshua kevin brian george tim timothy ryan jason "
    "jack tom max sam ben alex nick jon joe mike dave steve luke adam leo noah liam ethan "
    "mary patricia jennifer linda elizabeth barbara susan jessica sarah karen lisa nancy "
    "betty sandra ashley emily michelle amanda melissa anna emma olivia sophia mia isabella "
    "grace chloe lily ella kate katie laura rachel julia maria sofia caroline melanie mel "
    "jolene nate maya zoe amy claire lucy hannah".split()
)
PLACES = frozenset(
    "london paris berlin madrid rome tokyo beijing shanghai sydney melbourne toronto "
    "vancouver montreal chicago boston seattle portland denver austin dallas houston miami "
    "atlanta phoenix detroit philadelphia washington dublin amsterdam barcelona lisbon vienna "
    "prague munich zurich stockholm oslo copenhagen helsinki athens istanbul dubai mumbai "
    "delhi bangalore singapore seoul bangkok cairo nairobi lagos "
    "france germany spain italy japan china india canada mexico brazil argentina australia "
    "england scotland ireland wales sweden norway denmark "
    "finland poland greece turkey egypt kenya nigeria portugal netherlands switzerland "
    "austria belgium russia ukraine korea thailand vietnam indonesia philippines "
    "california florida oregon hawaii alaska europe asia africa".split()
) | {
    "new york city", "los angeles", "san francisco", "san diego", "las vegas", "hong kong",
    "mexico city", "cape town", "united kingdom", "united states", "new zealand",
    "south africa", "south korea", "north carolina", "new jersey",
}  # fmt: skip
ORGANISATIONS = frozenset(
    "google apple microsoft amazon meta facebook netflix spotify starbucks ikea nasa ibm "
    "tesla uber walmart costco youtube instagram twitter".split()
)
ORG_SUFFIXES = frozenset(
    "inc corp corporation ltd llc co company university college school hospital clinic bank "
    "institute foundation group society association church museum library airlines labs "
    "academy agency studio studios".split()
)
PLACE_SUFFIXES = frozenset(
    "street st avenue ave road rd park lake river mountain mountains beach city county state "
    "island islands valley bay airport station square bridge canyon falls".split()
)
PERSON_TITLES = ("Mr", "Mrs", "Ms", "Miss", "Dr", "Prof", "Aunt", "Uncle")
RELATIONSHIP_WORDS = frozenset(
    "sister brother mom mum mother dad father son daughter wife husband partner boyfriend "
    "girlfriend fiance fiancee friend cousin aunt uncle grandma grandmother grandpa "
    "grandfather niece nephew boss colleague coworker roommate neighbor neighbour kids "
    "children kid child baby sibling siblings parents stepdad stepmom twin bestie".split()
)
PETS = frozenset(
    "dog dogs puppy cat cats kitten horse parrot hamster rabbit bunny bird fish turtle "
    "snake guinea pig pup".split()
)
POSSESSIONS = frozenset(
    "car bike bicycle motorcycle house apartment flat boat truck van camper garden "
    "piano guitar violin laptop".split()
)
DRUGS = frozenset(
    "aspirin ibuprofen acetaminophen paracetamol naproxen nsaid nsaids omeprazole pantoprazole "
    "metformin insulin lisinopril amlodipine losartan atorvastatin simvastatin levothyroxine "
    "warfarin clopidogrel amoxicillin penicillin prednisone sertraline fluoxetine melatonin "
    "antihistamine antihistamines antibiotic antibiotics statin statins advil tylenol "
    "motrin".split()
)
# Common endings of generic drug names (ACE inhibitors, beta blockers, statins, PPIs, …).
# Drug classes a user names instead of a drug ("a painkiller"): each class and its members, so
# that a rule about "an NSAID with aspirin" applies to "I want a painkiller".
DRUG_CLASSES: dict[str, frozenset[str]] = {
    "nsaid": frozenset("ibuprofen aspirin naproxen diclofenac advil motrin".split()),
    "painkiller": frozenset(
        "nsaid ibuprofen aspirin naproxen diclofenac acetaminophen paracetamol advil motrin "
        "tylenol codeine".split()
    ),
    "antacid": frozenset("omeprazole pantoprazole".split()),
    "blood thinner": frozenset("aspirin warfarin clopidogrel".split()),
}
DRUG_CLASS_NAMES: dict[str, str] = {
    "nsaids": "nsaid", "painkillers": "painkiller", "analgesic": "painkiller",
    "analgesics": "painkiller", "antacids": "antacid", "blood thinners": "blood thinner",
}  # fmt: skip
DRUG_SUFFIXES = (
    "pril", "olol", "sartan", "statin", "prazole", "cillin", "mycin", "floxacin", "profen",
    "dipine", "formin", "tidine", "oxetine", "triptan",
)  # fmt: skip
MED_WORDS = frozenset(
    "pill pills medication medications medicine medicines meds tablet tablets capsule capsules "
    "vitamin vitamins supplement supplements inhaler drops dose".split()
)
CONDITIONS = frozenset(
    "hypertension diabetes asthma arthritis migraine migraines injury injuries cancer "
    "depression anxiety adhd autism epilepsy insomnia eczema psoriasis allergies flu covid "
    "fever headache headaches backache concussion fracture sprain reflux heartburn "
    "cholesterol apnea ptsd ocd disorder syndrome disease infection tumor tumour ulcer hernia "
    "pain hypothyroidism hyperthyroidism anemia anaemia cold condition".split()
)
# Condition words too common in other senses to mark a text as health-related ("a cold drink").
AMBIGUOUS_CONDITIONS = frozenset({"cold", "condition", "disorder"})
BODY_PARTS = (
    "knee ankle back wrist shoulder arm leg hip neck elbow foot hand finger toe hamstring acl "
    "ribs rib head"
).split()
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
# Words that refer to something only the conversation can resolve: an object holding one is not
# a standing fact ("having them around", "the taste it adds", "making him happy").
REFERRING_WORDS = frozenset(
    "it its it's itself them they their theirs him his he she her hers us this these those "
    "something anything everything nothing someone somebody anyone anybody everyone "
    "everybody".split()
)
# Determiners that point at a thing in the conversation or someone else's ("I love this quote",
# "I love their work"): a reaction to what was just shown, not a standing preference.
DEICTIC_DETERMINERS = frozenset("this that these those his her their its your such".split())
# Nouns that after "the" name an aspect of the thing at hand rather than something one can like
# in general ("I love the colours and texture", "the way it turned out", "the vibe").
ASPECT_NOUNS = frozenset(
    "way idea thought feeling feel color colour texture smell taste look sound vibe energy "
    "rush atmosphere design detail message theme concept structure view scenery quote name "
    "part moment result effect shape style tone mood setting quality sense lighting "
    "composition pic picture photo shot video".split()
)
# Attributive adjectives: an object ending in one is a noun phrase cut by a list split ("a safe,
# inviting place" → "a safe") unless a copula gerund precedes it ("being healthy").
DANGLING_ADJECTIVES = frozenset(
    "safe warm welcoming inviting supportive loving caring positive peaceful quiet calm cozy "
    "cosy friendly beautiful happy healthy strong comfortable creative open inclusive kind "
    "nice great good new old big small little cute amazing awesome wonderful lovely special "
    "cool sweet fresh bright".split()
)
# Gerunds that say nothing without their object ("I love to help" → "helping").
LIGHT_GERUNDS = frozenset(
    "helping doing making having getting being seeing trying taking giving putting going".split()
)
COPULA_GERUNDS = frozenset("being feeling staying getting keeping looking becoming".split())
# Head nouns that coordinated genre words share ("fantasy and sci-fi movies": both are movies).
GENRE_HEADS = frozenset(
    "movies films books novels music songs shows series games podcasts stories comics "
    "food dishes".split()
)
# Words in an object that make it a clause rather than a noun phrase ("skill is awesome").
CLAUSE_MARKERS = frozenset(
    "i i'm i've i'll you you're we is are was were am has had does did can will would".split()
)
# "I'm a rookie" / "a total beginner" says nothing without the domain the context supplies.
GENERIC_ROLES = frozenset(
    "newbie rookie beginner novice amateur pro expert natural mess wreck fan believer person "
    "guy girl type kind one sucker".split()
)
INTENSIFIERS = frozenset("total complete real true big huge absolute bit little".split())
# Words ending in "-ing" that are not gerunds.
NOT_GERUNDS = frozenset(
    "thing things nothing something anything everything king ring rings spring string wing "
    "wings evening morning ceiling clothing wedding sibling siblings bring sing "
    "sting swing".split()
)
_PREPOSITIONS = frozenset("to with about for in on of at from into by like over".split())
# Capitalised words that start sentences or phrases but never name an entity.
CAPITAL_STOPWORDS = frozenset(
    "I I'm I've I'll I'd The A An And But So Or If When Whenever Before After Then Always "
    "Never Hey Hi Hello Thanks Thank Yes No Yeah Yep Nope Oh Wow Ok Okay OK Sure Great Good "
    "Nice Awesome Cool Congrats Congratulations Sounds Love Glad Sorry Please Remember Take "
    "Don't Do Did Can Could Would Should Will Is Are Was Were Have Has Had Let Let's Just Also "
    "My Your Our Their His Her We You He She They It It's That That's This These Those What "
    "What's Why How Who Where Which There Here Today Tomorrow Yesterday Tonight Not Maybe Well "
    "Anyway Btw Lol Haha Omg Dear Remind Todo TODO Log Last Next Every Each Once Some Any All "
    "Actually Definitely Totally Really Honestly Especially Speaking Being Check Call Buy Pay "
    "Make Get Go Went Wishing Happy Hope Sending Keep Enjoy Bye See Right Absolutely "
    "Exactly Agreed Indeed True Same Awww Aww Ah Hmm Mine Yours One Two Three Plus "
    "Note Reminder Alarm Done Finished January February March April May June July August "
    "September October November December Monday Tuesday Wednesday Thursday Friday Saturday "
    "Sunday".split()
)
# Liking verbs that state the opposite: "I hate X" is dislikes, "I don't hate X" is likes.
NEGATIVE_VERBS = frozenset(
    {"hate", "hated", "dislike", "detest", "loathe", "can't stand", "cannot stand"}
)
GREETINGS = frozenset("hey hi hello thanks thank dear congrats congratulations bye yo".split())
OBJECT_VERBS = frozenset(
    "met saw visited called love like miss missed took take bought meet see visit call "
    "adore hate watched read".split()
)
IMPERATIVES = frozenset(
    "take call buy pay book schedule pick send email text submit renew refill water feed walk "
    "clean finish check cancel return bring order drink prepare review write visit "
    "apply measure stretch".split()
)
# Past-tense verbs that report a finished action, with the base form used in Completion.action.
COMPLETION_VERBS: dict[str, str] = {
    "took": "take", "did": "do", "finished": "finish", "completed": "complete",
    "called": "call", "bought": "buy", "paid": "pay", "sent": "send", "cleaned": "clean",
    "fed": "feed", "walked": "walk", "watered": "water", "picked up": "pick up",
    "booked": "book", "submitted": "submit", "emailed": "email", "texted": "text",
    "returned": "return", "renewed": "renew", "refilled": "refill", "ordered": "order",
    "scheduled": "schedule", "cancelled": "cancel", "canceled": "cancel",
}  # fmt: skip
# After "I need to / have to / should", these start a figure of speech, not a to-do.
NOT_TASKS = frozenset("say admit tell confess agree thank be have ask go get know".split())
# Words that cannot start the object of a fact or an action: pronouns, clause openers,
# prepositions and verbs ("the things I love makes…", "a pic I took at the park").
NON_OBJECTS = frozenset(
    "it it's that that's this them you you're him her those these everything anything "
    "something nothing how what when where why who your his their our its which one ones all "
    "i i'm we he she they there there's to do be with for in on at about from of by is are "
    "was were makes made means recently again too so as while when because same".split()
)
# A clause that follows a listed object rather than continuing the list.
CLAUSE_WORDS = frozenset(
    "i i'm i've we he she they it it's you is are was were be been now then".split()
)
# Words with no content of their own: a condition or title made only of these says nothing.
FUNCTION_WORDS = frozenset(
    "i i'm me it it's that this there all can could will would do does did so the a an same "
    "too as well you we they he she is are be".split()
)
# Health and safety words for is_health_related (with DRUGS, MED_WORDS and CONDITIONS).
HEALTH_WORDS = frozenset(
    "allergic allergy allergies bpm bleeding bleed pain painful painkiller painkillers hurt "
    "hurts hurting ache aches aching sore injury injured doctor hospital "
    "emergency symptom symptoms surgery pregnant dizzy overdose risk safety danger dangerous "
    "warning prescription pharmacy clinic diagnosed".split()
)

# ---------------------------------------------------------------------------------------------
# Precompiled patterns.

_I = r"(?<![\w'])I"
_ADV = (
    r"(?:\s+(?:really|also|actually|still|now|just|absolutely|totally|so|very|quite|severely|"
    r"mildly|deathly|kind\s+of|kinda|sort\s+of|pretty|truly|always|currently|recently|"
    r"definitely|genuinely|seriously)){0,3}"
)
_NEG = r"(?P<neg>\s+(?:don't|do\s+not|no\s+longer|never|not))?"
_OBJ = (
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
_FLAGS = re.IGNORECASE


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, _FLAGS)


_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)|\n+")
_ABBREVIATION = re.compile(r"(?:\b(?:Dr|Mr|Mrs|Ms|St|Prof|vs|etc)|\b[ap]\.m)$")
_CONDITIONAL = _rx(
    r"\b(?:if|unless|suppose|supposing|whether|in\s+case|imagine|pretend|wish|hope|hoping|"
    r"maybe|might|would|could|wonder)\b|'d\b"
)
_FIRST_PERSON = _rx(r"(?<![\w'])(?:I|my|me)\b")

_F_ALLERGY = _rx(rf"{_I}(?:'m|\s+am){_NEG}{_ADV}\s+allergic\s+to\s+{_OBJ}")
_F_ALLERGY_HAVE = _rx(
    rf"{_I}\s+have\s+(?:an?\s+|severe\s+|a\s+severe\s+)?allerg(?:y|ies)\s+to\s+{_OBJ}"
)
_F_ALLERGY_MY = _rx(r"\bmy\s+(?P<obj>\w+(?:\s+\w+)?)\s+allergy\b")
_F_DIAGNOSED = _rx(
    rf"{_I}(?:'ve|\s+have|\s+was|\s+got|\s+am|'m)?(?:\s+been)?{_ADV}\s+"
    rf"(?:diagnosed\s+with|suffer(?:ing)?\s+from|suffers\s+from|living\s+with)\s+{_OBJ}"
)
_F_HAVE = _rx(
    rf"{_I}(?:{_ADV}{_NEG}{_ADV}\s+(?:have\s+got|have)|'ve\s+got|'ve\s+(?:always\s+)?had)"
    rf"\s+{_OBJ}"
)
_F_INJURY = _rx(
    r"(?<![\w'])I\s+(?:just\s+)?(?:hurt|injured|broke|sprained|twisted|pulled|tore|fractured|"
    r"strained|dislocated|bruised)\s+my\s+(?:left\s+|right\s+)?"
    rf"(?P<part>{'|'.join(BODY_PARTS)})\b"
)


def _first_person(simple: str, progressive: str) -> str:
    """ "I (have) (adverbs) (not) <simple>" or "I'm (not) (adverbs) <progressive>"; a negation
    lands in group ``neg`` or ``not``."""
    return (
        rf"{_I}(?:(?:'ve|\s+have)?{_ADV}{_NEG}{_ADV}\s+(?:{simple})|"
        rf"(?:'m|\s+am)(?P<not>\s+not)?{_ADV}\s+(?:{progressive}))"
    )


_F_LIVE = _rx(
    _first_person("live|moved|relocated", "living|based") + rf"\s+(?:in|to|into)\s+{_OBJ}"
)
_F_WORK_AS = _rx(_first_person("work", "working") + rf"\s+as\s+{_OBJ}")
_F_WORK_AT = _rx(
    _first_person(r"work|started\s+working|got\s+a\s+job", "working|employed")
    + rf"\s+(?:at|for|by)\s+{_OBJ}"
)
_EMPLOYER = _rx(r"^(?P<job>.+?)\s+(?:at|for|with)\s+(?P<org>.+)$")
_F_SKILL = _rx(
    rf"{_I}{_ADV}(?:\s+(?:know\s+how\s+to|can\s+play|play\s+the|can\s+speak|speak)|"
    rf"(?:'m|\s+am){_ADV}\s+(?:good|great|skilled|fluent)\s+(?:at|in))\s+{_OBJ}"
)
_F_OWN = _rx(rf"{_I}{_ADV}\s+own\s+{_OBJ}")
_F_MED = _rx(_first_person(r"take|started\s+taking|use", "taking|on") + rf"\s+{_OBJ}")
_F_LIKE = _rx(
    rf"{_I}(?:{_ADV}(?P<neg>\s+(?:don't|do\s+not|never|no\s+longer))?{_ADV}\s+"
    r"(?P<verb>love|like|enjoy|adore|hate|dislike|detest|loathe|can't\s+stand|cannot\s+stand)|"
    rf"(?:'m|\s+am)(?P<not>\s+not)?{_ADV}\s+(?:(?:a\s+)?(?:big\s+|huge\s+|massive\s+|"
    r"lifelong\s+|long-time\s+)?fan\s+of|(?:a\s+)?(?:total\s+|real\s+|big\s+)?sucker\s+for|into|"
    r"(?:obsessed\s+with|passionate\s+about|crazy\s+about))|"
    rf"(?:'ve|\s+have)\s+always\s+(?P<past>loved|liked|enjoyed|hated))\s+{_OBJ}"
)
_F_FAVOURITE = _rx(
    rf"\bmy\s+(?:all-time\s+)?(?:favou?rite|fave)\s+(?P<kind>[a-z][\w\s-]{{0,30}}?)\s+"
    rf"(?:is|are)\s+{_OBJ}"
)
_F_FAVOURITE_REV = _rx(
    r"(?:^|[,;]\s*)(?P<obj>(?:[\w'-]+\s+){0,3}[\w'-]+)\s+(?:is|are)\s+my\s+(?:all-time\s+)?"
    r"(?:favou?rite|fave)(?:\s+(?P<kind>[a-z]+))?"
)
_F_PREFER = _rx(rf"{_I}{_ADV}\s+prefer\s+{_OBJ}")
_F_MY_RELATIVE = re.compile(
    rf"\b[Mm]y\s+(?P<kind>{'|'.join(sorted(RELATIONSHIP_WORDS | PETS, key=len, reverse=True))})"
    r",?\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b"
)
_F_IS_MY_RELATIVE = re.compile(
    r"\b(?P<name>[A-Z][a-z]+)\s+is\s+my\s+(?:(?:older|younger|little|big|best|twin)\s+)?"
    rf"(?P<kind>{'|'.join(sorted(RELATIONSHIP_WORDS, key=len, reverse=True))})\b(?!')"
)
_F_IDENTITY = _rx(
    rf"{_I}(?:'m|\s+am|'ve\s+been|\s+have\s+been)(?P<neg>\s+not)?{_ADV}\s+(?P<art>an?\s+)?{_OBJ}"
)
_NAMED = re.compile(
    r"^(?P<kind>[\w\s-]+?)\s+(?:named|called)\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)$"
)
_LIST_SPLIT = _rx(r"\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+")
_LEADING_DET = _rx(r"^(?:(?:a|an|the|some|my|our|his|her|their|this|these|those|any|to)\s+)+")
_TRAILING_FILLER = _rx(
    r"(?:\s+(?:every\s+\w+|each\s+\w+|once\s+a\s+\w+|twice\s+a\s+\w+|\w+\s+times\s+a\s+\w+|"
    r"daily|nightly|a\s+lot|so\s+much|very\s+much|too|as\s+well|now|anymore|any\s+more|"
    r"these\s+days|lately|again|recently|right\s+now|at\s+all|though|tbh|lol|haha|too\s+much|"
    r"for\s+sure|either))+$"
)
_MED_TAIL = _rx(r"\s+(?:in\s+the|at|before|after|with|for|when|twice|once|every)\b.*$")
_WORD = re.compile(r"[A-Za-z][A-Za-z-]*")
_CONDITION_PHRASE = _rx(
    r"\b(?:high|low)\s+(?:blood\s+pressure|cholesterol|blood\s+sugar)\b|\bsleep\s+apnea\b|"
    r"\b\w+(?:itis|osis|emia|algia|pathy)\b"
)
_HEALTH_PHRASE = _rx(r"blood[\s-](?:pressure|sugar)|heart\s+rate")
# Fact objects: a dash ends one ("pottery - the creativity…"); adverbs and durations around it
# are not part of it ("bowling itself", "also cheese pizza", "vegetarian for ten years").
_DASH_TAIL = re.compile(r"\s+[-–—]+\s+.*$|\s*[–—].*$")
_FACT_FILLER = _rx(
    r"(?:\s+(?:sometimes|often|itself|themselves|honestly|personally|to\s+be\s+honest|"
    r"in\s+general|the\s+most|most\s+of\s+all|big\s+time|a\s+ton|really|actually|anyway|"
    r"especially|for\s+(?:\w+\s+){0,2}(?:years?|months?|weeks?|decades?|ages|while|time)))+$"
)
_LEADING_ADVERBS = _rx(
    r"^(?:(?:also|really|just|even|still|both|especially|totally|absolutely|actually|mostly|"
    r"mainly|simply|truly|definitely|now|then)\s+)+"
)
# Examples after a head ("strategy games like Civilization and Total War") are not list items.
_EXAMPLES = _rx(r"\s*,?\s+(?:like|such\s+as|including|especially|particularly|e\.g\.)\s+.*$")
# A list separator, kept so a list can be told from an afterthought ("coffee, honestly").
_LIST_SEP = _rx(r"(\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+)")
_CONJUNCTION = _rx(r"\b(?:and|or)\b|&")
_RELATIVE_LIST = re.compile(r",?\s+(?:and|or|&)\s")

# Rules.
_R_PREFIX = _rx(
    r"^\s*(?:and\s+|so\s+|also\s+|please\s+|remember(?:\s*:\s*|\s+that\s+)|rule\s*:\s*)?"
    r"(?P<kw>if|when|whenever|every\s+time|each\s+time|any\s*time|before|after|once)\s+"
    r"(?P<cond>.+?)(?:\s*,\s*(?:then\s+)?|\s*:\s+(?:then\s+)?|\s+then\s+)(?P<act>.+)$"
)
_R_POSTFIX = _rx(
    rf"^\s*(?P<act>(?:always|never|please|remember\s+to|make\s+sure\s+(?:to|you)|don't|"
    rf"do\s+not|{'|'.join(IMPERATIVES)})\b.+?)(?<!\beven)\s+(?P<kw>if|when|whenever|every\s+time|before|"
    r"after)\s+(?P<cond>.+)$"
)
# A postfix "before/after X" makes a rule only after a standing instruction.
_R_ADVICE = _rx(r"^\s*(?:always|never|remember\s+to|make\s+sure)\b")
_R_ARROW = re.compile(r"\s*(?:->|→|=>)\s*")
_R_PAST = _rx(
    r"\b(?:was|were|had|did|went|got|came|used\s+to|ago|yesterday|last|left|arrived|felt|met|"
    r"saw|took|made|gave|told|said|found|thought|knew|began|became|won|lost|ran|ate|wrote|"
    r"bought|brought)\b|\b(?:I|we|he|she|they|you)\s+\w+ed\b"
)
# An action must be something to do: an instruction, or a habit in the present tense.
_R_ACTION = _rx(
    rf"^(?:(?:please|just|first|always|never|don't|do\s+not|make\s+sure|remember|try|avoid|stop|"
    rf"keep|skip|use|ask|tell|wait|go|get|put|turn|set|add|eat|rest|sit|breathe|wash|wear|look|"
    rf"let|find|start|see|consult|contact|notify|lock|close|open|charge|switch|save|run|"
    rf"{'|'.join(IMPERATIVES)})\b|you\s+(?:should|need\s+to|must|have\s+to)\b|"
    r"I\s+(?:always\s+|usually\s+|often\s+|just\s+|then\s+)*(?!was\b|got\b|had\b|did\b|"
    r"can\b|could\b|will\b|would\b|might\b|\w+ed\b)\w+)"
)
_R_NOT_ACTION = _rx(
    r"^(?:just\s+|please\s+)?let\s+me\s+know\b|^(?:I\s+)?(?:try|look)\s+(?:it|this|that)\s+out\b"
)
_R_CHITCHAT = _rx(
    r"^(?:you\s+(?:ever\s+)?(?:want|need|like|wanna|have\s+time|don't\s+mind|get\s+a\s+chance)|"
    r"that's\s+ok|possible|anything|not|only|so)\b"
)
_ACTION_SPLIT = _rx(r"\s*(?:,\s*then\s+|,?\s+and\s+then\s+|;\s*|\s+then\s+)")
_CONDITION_SPLIT = _rx(r"\s*,?\s+(?:and|or)\s+(?=(?:I|I'm|it|it's|you|we|he|she|they|there|my)\b)")
# The else-branch after a separator: ", otherwise B", "; else B", ", or else B", "; if not, B".
_R_ELSE = _rx(
    r"(?:\s*[,;]\s*|\s+[-–—]\s+)(?:and\s+|but\s+|or\s+)?"
    r"(?:(?:otherwise|else)\b\s*[,:]?|if\s+not\s*[,:])\s*"
)
# Where a sentence holds several rules: "If X, A; if Y, B" (not "; if not, B", an else).
_R_CLAUSES = _rx(r"\s*;\s*(?:and\s+|but\s+)?(?=(?:if|when|whenever)\s+(?!not\b))")
# A comma list of steps ("take off your shoes, wash your hands") when every item is an action.
_STEP_LIST = _rx(r"\s*,\s*(?:and\s+)?")
MAX_RULE_TAGS = 3

# Tasks.
_T_REMIND = _rx(
    r"^\s*(?:(?:hey|hi|ok|okay|also|and|so|oh)\b[^,]{0,20},?\s*)?(?:please\s+)?"
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:remind\s+me|set\s+(?:a|an)\s+(?:reminder|alarm)|reminder)\s*(?::\s*|"
    r"(?:\s+(?:at|on|by|in)\s+[^,]+?\s+)?\s*(?:to|that|about|for)\s+)(?P<what>.+)$"
)
_T_REQUEST = _rx(r"^\s*(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?remind\b")
_T_NEED = _rx(
    rf"{_I}(?:\s+(?:really|still|also|definitely|just))?(?:\s+(?:need\s+to|have\s+to|"
    r"have\s+got\s+to|gotta|must|(?P<should>should))|'ve\s+got\s+to)\s+(?P<what>.+)$"
)
_T_FORGET = _rx(
    r"(?:\b(?:don't|do\s+not)\s+(?:let\s+me\s+)?forget\s+to|^\s*(?:please\s+)?"
    r"(?:remember|make\s+sure)\s+to)\s+(?P<what>.+)$"
)
_T_TODO = _rx(r"^\s*(?:to-?do|task)\s*:?\s+(?P<what>.+)$")
_T_LOG = _rx(
    r"^\s*(?:log\s*:\s*)?(?P<what>(?:[\w-]+\s+)?(?:alarm|reminder|timer|appointment|meeting|"
    r"event|alert))\s+(?:set|scheduled|booked|created|added)\s+(?:for|at|on)\b"
)
_T_IMPERATIVE = _rx(rf"^\s*(?:please\s+)?(?P<what>(?:{'|'.join(IMPERATIVES)})\b.+)$")
_T_APPOINTMENT = _rx(
    r"\b(?:I\s+have|I've\s+got|there's|my)\s+(?:an?\s+)?(?P<what>(?:[\w'-]+\s+){0,3}?"
    r"(?:appointment|meeting|interview|exam|flight|deadline|check-?up|surgery))\b"
)
_T_SCHEDULE_CUE = _rx(
    r"\b(?:every|daily|nightly|before|after|with)\s+(?:\w+\s+)?(?:breakfast|lunch|dinner|"
    r"meals?|bed|bedtime|morning|evening|night|day)\b"
)
# Where a to-do's title ends: a comma before another clause, or a dash.
_TITLE_END = _rx(r"\s*,\s*(?:and\s+)?(?:since|because|so|but|which|it|it's|I)\b|\s+[-–—]\s+")
_TITLE_TAIL = _rx(r"(?:\s+(?:at|on|by|in|for|please|tomorrow|today))+\s*$")

# Completions.
_C_VERB = _rx(
    rf"(?:{_I}|^\s*)(?:\s+(?:already|just|finally|also))*\s*"
    rf"(?P<verb>{'|'.join(sorted(COMPLETION_VERBS, key=len, reverse=True))})\s+(?P<what>.+)$"
)
_C_DONE_WITH = _rx(r"\b(?:done|finished)\s+with\s+(?P<what>.+)$")
_C_DONE_SUFFIX = _rx(
    r"^\s*(?P<what>(?:the\s+|my\s+)?[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,3}?)\s+(?:is\s+|are\s+)?"
    r"(?:done|completed|finished)\s*$"
)
_CLAUSE_END = _rx(r"\s*,?\s+(?:but|because|so|since|while|which|when)\b|\s+[-–—]\s+")
# Words after which "I" starts a new clause ("and I took…", "yesterday I took…").
CLAUSE_OPENERS = frozenset(
    "and so but then also just yesterday today tonight finally already recently anyway btw "
    "well morning night evening afternoon week weekend ago earlier lol haha oh yes yeah ok "
    "okay hey guess though because cause 'cause since think know honestly "
    "really actually definitely totally now still monday tuesday wednesday thursday friday "
    "saturday sunday mon tue wed thu fri sat sun".split()
)
# "Took a bit of work", "took a while", "took care": idioms, not a completed "take".
TAKE_IDIOMS = frozenset(
    "bit while ages forever time place part care trial look chance first step turns "
    "advantage note breath deep".split()
)
_NOT_DONE = frozenset("well nicely good great job all let when what you your".split())
_PAST_VERB = _rx(r"^(?:\w+ed|went|had|got|came|saw|felt|was|were|made|ate|ran|spent)\b")

# Entities.
_NAME = re.compile(
    r"(?<![\w'])(?:(?P<title>" + "|".join(PERSON_TITLES) + r")\.?\s+)?"
    r"(?P<name>[A-Z][\w'-]*(?:(?:\s+(?:of|the|de|da|van|von|del|la|le|&))*\s+"
    r"(?!I\b|I')[A-Z][\w'-]*)*)"
)
_PLACE_CUE = _rx(
    r"\b(?:in|at|from|to|near|visit|visited|visiting|around|across|through|into)\s+(?:the\s+)?$"
)
_PERSON_AFTER = _rx(r"^(?:\s+and\s+I\b|\s+(?:said|says|told|asked|and\s+me)\b|'s\s)")
# "That's great, Calvin!": a single name between a comma and the end of the sentence.
_VOCATIVE_AFTER = re.compile(r"\s*(?:[!?.]|$)")
_GREETING_BEFORE = _rx(rf"\b(?:{'|'.join(GREETINGS)})(?:\s+you)?[\s,]*$")
_RELATIVE_BEFORE = _rx(rf"\bmy\s+(?:{'|'.join(RELATIONSHIP_WORDS)}|best\s+friend)\s*,?\s*$")


# ---------------------------------------------------------------------------------------------
# Names and ids.


_ACRONYM = re.compile(r"\b(?:\w\.){2,}")  # "U.S.", "a.m."


def canonical_name(name: str) -> str:
    """Fold a surface name to its matching key: case, spacing, dots, possessive, articles,
    aliases and a simple plural ("Dogs" → "dog", "NYC" → "new york city")."""
    text = name.replace("\u2019", "'").lower()
    text = _ACRONYM.sub(lambda m: m.group().replace(".", ""), text).replace(".", " ")
    text = re.sub(r"'s\b|'(?=\s|$)", "", text)
    words = re.sub(r"[^\w'&+-]+", " ", text).split()
    while len(words) > 1 and words[0] in ("the", "a", "an", "my", "our", "your"):
        words = words[1:]
    joined = " ".join(words)
    if joined in ALIASES:
        return ALIASES[joined]
    if words:
        words[-1] = _singular(words[-1])
    joined = " ".join(words)
    return ALIASES.get(joined, joined)


def _singular(word: str) -> str:
    if len(word) <= 3 or word in INVARIANT_WORDS or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies") and word[:-1] not in IE_SINGULARS:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zes")):
        return word[:-2]
    return word[:-1] if word.endswith("s") else word


def entity_id(name: str, type: EntityType) -> str:
    """A stable short id: the same canonical name and type always give the same id."""
    digest = hashlib.sha1(f"{EntityType(type).value}:{canonical_name(name)}".encode())
    return "ent_" + digest.hexdigest()[:16]


def related_drug_terms(tokens: set[str]) -> set[str]:
    """The drug classes and class members related to ``tokens`` (lower-case words): a class
    brings its members, a member its classes ("painkiller" → ibuprofen, nsaid, …)."""
    related: set[str] = set()
    for token in tokens:
        name = DRUG_CLASS_NAMES.get(token, token)
        if name in DRUG_CLASSES:
            related |= DRUG_CLASSES[name] | {name}
        related |= {c for c, members in DRUG_CLASSES.items() if token in members}
    return related - tokens


def is_health_related(text: str) -> bool:
    """Whether ``text`` mentions a drug, medication, condition or a health/safety term."""
    words = [w.lower() for w in _WORD.findall(text)]
    return (
        any(w in _HEALTH_TOKENS or _is_drug(w) for w in words)
        or _HEALTH_PHRASE.search(text) is not None
    )


def _is_drug(word: str) -> bool:
    """A listed drug, or a word with a drug-name stem ending ("lisinopril", "atorvastatin")."""
    word = word.lower()
    return word in DRUGS or (len(word) >= 7 and word.endswith(DRUG_SUFFIXES))


_HEALTH_TOKENS = HEALTH_WORDS | MED_WORDS | (CONDITIONS - AMBIGUOUS_CONDITIONS)
_PLACE_KEYS = frozenset(canonical_name(p) for p in PLACES)


# ---------------------------------------------------------------------------------------------
# Entry point.


@dataclass(frozen=True)
class _Sentence:
    start: int
    text: str  # without the closing punctuation
    question: bool = False

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def extract(text: str, now: datetime) -> Extraction:
    """Run every extractor over ``text``; relative times resolve against ``now``."""
    text = text.replace("\u2019", "'")
    times = find_times(text, now)
    sentences = _sentences(text)
    facts: list[_Located] = []
    rules: list[RuleCandidate] = []
    tasks: list[TaskCandidate] = []
    completions: list[Completion] = []
    for sentence in sentences:
        if sentence.question:
            tasks.extend(_requested_reminder(sentence, times, now))
            continue
        local = [t for t in times if sentence.start <= t.start < sentence.end]
        facts.extend(_facts(sentence, local))
        rules.extend(_rules(sentence))
        tasks.extend(_tasks(sentence, local, now))
        completions.extend(_completions(sentence, local, now))
    entities = _entities(text, times, facts, {s.start for s in sentences})
    return Extraction(times, entities, [f for f, _ in facts], rules, tasks, completions)


def _sentences(text: str) -> list[_Sentence]:
    """Split at . ! ? and line breaks, but not after "Dr." or "a.m."; keep the offsets."""
    out: list[_Sentence] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.group() == "." and _ABBREVIATION.search(text, max(0, m.start() - 5), m.start()):
            continue
        _add_sentence(out, text, start, m.start(), "?" in m.group())
        start = m.end()
    _add_sentence(out, text, start, len(text), False)
    return out


def _add_sentence(out: list[_Sentence], text: str, start: int, end: int, question: bool) -> None:
    chunk = text[start:end]
    stripped = chunk.lstrip()
    if stripped.strip():
        out.append(_Sentence(start + len(chunk) - len(stripped), stripped.rstrip(), question))


# ---------------------------------------------------------------------------------------------
# Facts.


_Located = tuple[FactCandidate, int]
_FactHandler = Callable[[re.Match[str], "_Sentence", list[TimeMention]], list[_Located]]


def _facts(sentence: _Sentence, times: list[TimeMention]) -> list[_Located]:
    """First-person facts of one sentence, each with the text offset of its object."""
    s = sentence.text
    if not _FIRST_PERSON.search(s):
        return []
    lower = s.lower()
    out: list[_Located] = []
    taken: list[tuple[int, int]] = []
    for pattern, handler, triggers in _FACT_RULES:
        if not any(t in lower for t in triggers):
            continue
        for m in pattern.finditer(s):
            if (
                _CONDITIONAL.search(s, 0, m.start())
                or _overlaps(taken, m.start(), m.end())
                or (m.group()[:1] in "Ii" and not _opens_clause(s, m.start()))
            ):
                continue
            found = handler(m, sentence, times)
            if found:
                taken.append((m.start(), m.end()))
                out.extend(found)
    return out


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(start < e and s < end for s, e in spans)


def _object_text(m: re.Match[str], sentence: _Sentence, times: list[TimeMention]) -> str:
    """The ``obj`` group with time expressions, leading determiners and filler removed."""
    return _LEADING_DET.sub("", _raw_object(m, sentence, times)).strip(" ,'-")


def _raw_object(m: re.Match[str], sentence: _Sentence, times: list[TimeMention]) -> str:
    """The ``obj`` group up to a dash, without time expressions, filler or leading adverbs; its
    determiner is kept ("the colour", "this quote")."""
    obj = _DASH_TAIL.sub("", _cut_times(m["obj"], sentence.start + m.start("obj"), times))
    obj = _TRAILING_FILLER.sub("", _FACT_FILLER.sub("", _TRAILING_FILLER.sub("", obj)))
    return _LEADING_ADVERBS.sub("", obj.strip(" ,'-")).strip(" ,'-")


def _cut_times(segment: str, at: int, times: list[TimeMention]) -> str:
    """``segment`` (found at text offset ``at``) without the time expressions inside it."""
    for t in sorted(times, key=lambda t: -t.start):
        lo, hi = t.start - at, t.end - at
        if lo >= 0 and hi <= len(segment):
            segment = segment[:lo] + segment[hi:]
    return " ".join(segment.split())


def _usable(obj: str, max_words: int = 6) -> bool:
    """A short noun-like phrase that stands on its own: not a pronoun or the start of another
    clause, holding no word that refers to the context ("having them around") and no verb of a
    clause ("skill is awesome"), not cut off after an adjective ("creating a safe")."""
    words = obj.lower().split()
    if not 0 < len(words) <= max_words or words[0] in NON_OBJECTS:
        return False
    if len(words) == 1 and words[0] in LIGHT_GERUNDS:
        return False
    if REFERRING_WORDS.intersection(words) or CLAUSE_MARKERS.intersection(words):
        return False
    if any(w == "that" and _demonstrative(words, i) for i, w in enumerate(words)):
        return False
    return not (
        words[-1] in DANGLING_ADJECTIVES and (len(words) < 2 or words[-2] not in COPULA_GERUNDS)
    )


def _demonstrative(words: list[str], i: int) -> bool:
    """Whether "that" at ``words[i]`` points ("escaping to that world", "sharing that") rather
    than starting a relative clause ("stories that matter")."""
    return (
        i == len(words) - 1 or i == 0 or words[i - 1] in _PREPOSITIONS or _gerund_word(words[i - 1])
    )


def _gerund_word(word: str) -> bool:
    word = word.lower()
    return len(word) > 4 and word.endswith("ing") and word not in NOT_GERUNDS


def _is_gerund(item: str) -> bool:
    """ "hiking", "not being stuck": an item led by an -ing verb."""
    words = item.split()
    if words and words[0].lower() == "not":
        words = words[1:]
    return bool(words) and _gerund_word(words[0])


def _gerund(verb: str) -> str:
    """The -ing form of a base verb: read → reading, hike → hiking, get → getting."""
    v = verb.lower()
    if v.endswith("ie"):
        return v[:-2] + "ying"
    if v.endswith("e") and not v.endswith(("ee", "ye", "oe")) and v != "be":
        return v[:-1] + "ing"
    if re.fullmatch(r"[^aeiou]*[aeiou][bdgmnprt]", v):
        return v + v[-1] + "ing"
    return v + "ing"


def _items(obj: str) -> list[str]:
    """The items of a list object, [] when the list cannot be read reliably.

    Examples after "like/such as" are dropped; parts joined by commas alone are an afterthought,
    not a list ("coffee, honestly" → coffee); after a gerund phrase with a complement, a part
    that is not a gerund continues that complement ("improving education and infrastructure");
    "to read" becomes "reading" (all items must then be infinitives); genre words share the head
    of the last item ("fantasy and sci-fi movies" → fantasy movies, sci-fi movies).
    """
    examples = _EXAMPLES.search(obj)
    if examples and REFERRING_WORDS.intersection(examples.group().lower().split()):
        return []  # "places like this"
    parts = _LIST_SEP.split(obj[: examples.start()] if examples else obj)
    items = [_LEADING_ADVERBS.sub("", i) for i in parts[0::2]]
    seps = parts[1::2]
    if seps and not any(_CONJUNCTION.search(s) for s in seps):
        items, seps = items[:1], []
    infinitive = items[0].lower().startswith("to ")
    out = [items[0]]
    for sep, item in zip(seps, items[1:], strict=True):
        if infinitive and not item.lower().startswith("to "):
            return []
        if _continues(out, item):
            out[-1] += sep + item
        else:
            out.append(item)
    if infinitive:
        out = [_infinitive_to_gerund(i) for i in out]
    out = [_LEADING_DET.sub("", i).strip(" ,'-") for i in out]
    head = out[-1].split()[-1] if out[-1] else ""
    if len(out) > 1 and len(out[-1].split()) == 2 and head.lower() in GENRE_HEADS:
        out = [_with_head(i, head) for i in out[:-1]] + out[-1:]
    return out


def _max_words(item: str) -> int:
    """Gerund phrases carry their complements; a merged "X and Y" item two more words."""
    return 10 if _is_gerund(item) else 8 if _CONJUNCTION.search(item) else 6


def _continues(out: list[str], item: str) -> bool:
    """Whether a list part continues the previous item's complement: after a gerund phrase, a
    part that is not a gerund ("improving education and infrastructure"); after a prepositional
    phrase, a bare word ("books about personal development and mindset")."""
    previous = out[-1].lower().split()
    if _is_gerund(out[0]) and not _is_gerund(item) and len(previous) > 1:
        return True
    return (
        len(item.split()) == 1
        and not _is_gerund(item)
        and any(w in _PREPOSITIONS - {"like"} for w in previous[1:])
    )


def _with_head(item: str, head: str) -> str:
    """ "fantasy" + "movies" → "fantasy movies"; a plural or a gerund is a thing of its own."""
    if len(item.split()) != 1 or item.lower().endswith("s") or _is_gerund(item):
        return item
    return f"{item} {head}"


def _infinitive_to_gerund(item: str) -> str:
    words = item.split()[1:]  # drop "to"
    return " ".join([_gerund(words[0]), *words[1:]]) if words else ""


def _aspect(item: str) -> bool:
    """Whether an item names an aspect of a thing ("colour", "the way it…") by its first or
    last word."""
    words = item.lower().split()
    return any(
        w in ASPECT_NOUNS or (w.endswith("s") and w[:-1] in ASPECT_NOUNS)
        for w in (words[0], words[-1])
    )


def _fact(
    m: re.Match[str],
    sentence: _Sentence,
    relation: str,
    obj: str,
    kind: EntityType,
    confidence: float,
    *,
    negated: bool = False,
    qualifier: str = "",
) -> _Located:
    """A fact located where ``obj`` occurs in ``m`` (else at ``m``); long objects lose
    confidence."""
    found = sentence.text.find(obj, m.start(), m.end())
    start = sentence.start + (found if found >= 0 else m.start())
    confidence = round(confidence - (0.1 if len(obj.split()) > 4 else 0.0), 2)
    candidate = FactCandidate(relation, obj, kind, negated, sentence.text, confidence, qualifier)
    return candidate, start


def _list_facts(
    m: re.Match[str],
    sentence: _Sentence,
    times: list[TimeMention],
    relation: str,
    kind: EntityType,
    confidence: float,
    negated: bool = False,
) -> list[_Located]:
    """One fact per item of a list object ("ibuprofen, aspirin and penicillin"); none when the
    object points at the context ("this quote", "their work", "the colour and texture") or any
    item is not a self-contained phrase."""
    raw = _raw_object(m, sentence, times)
    first = raw.lower().split()[:1]
    if not first or first[0] in DEICTIC_DETERMINERS:
        return []
    items = _items(raw)
    if items and all(_is_gerund(i) for i in items):
        # parallel gerund phrases split reliably: drop only the items that do not stand alone
        items = [i for i in items if _usable(i, 10)]
    if not items or not all(_usable(i, _max_words(i)) for i in items):
        return []
    if first[0] == "the" and any(_aspect(i) for i in items):
        return []
    return [_fact(m, sentence, relation, i, kind, confidence, negated=negated) for i in items]


def _negated(m: re.Match[str]) -> bool:
    groups = m.groupdict()
    return bool(groups.get("neg") or groups.get("not"))


def _h_allergy(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    return _list_facts(m, s, t, "allergic_to", EntityType.OBJECT, 0.9, _negated(m))


def _h_condition(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    return _list_facts(m, s, t, "has_condition", EntityType.OTHER, 0.9)


def _h_injury(m: re.Match[str], s: _Sentence, _t: list[TimeMention]) -> list[_Located]:
    """ "I hurt my knee" → has_condition "knee injury"."""
    injury = f"{m['part'].lower()} injury"
    return [_fact(m, s, "has_condition", injury, EntityType.OTHER, 0.7)]


def _h_have(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    """ "I have X": a condition, a relative or a pet/possession; anything else is not a fact."""
    obj = _object_text(m, s, t)
    if not _usable(obj):
        return []
    negated = _negated(m)
    named = _NAMED.match(obj)
    if named:
        kind = _LEADING_DET.sub("", named["kind"]).lower()
        relation = "relationship" if kind.split()[-1] in RELATIONSHIP_WORDS else "owns"
        return [_relation(m, s, relation, named["name"], kind)]
    items = [_LEADING_DET.sub("", i).strip() for i in _LIST_SPLIT.split(obj)]
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
        h in CONDITIONS or _CONDITION_PHRASE.search(i) for h, i in zip(heads, items, strict=True)
    ):
        return "has_condition", EntityType.OTHER, 0.85
    if all(h in RELATIONSHIP_WORDS for h in heads):
        return "relationship", EntityType.PERSON, 0.75
    if all(h in PETS or h in POSSESSIONS for h in heads):
        return "owns", EntityType.OBJECT, 0.75
    return None


def _relation(m: re.Match[str], s: _Sentence, relation: str, name: str, qualifier: str) -> _Located:
    """A named relative or pet: relationship → PERSON, owns → OBJECT."""
    kind = EntityType.PERSON if relation == "relationship" else EntityType.OBJECT
    return _fact(m, s, relation, name, kind, 0.8, qualifier=qualifier)


def _h_place(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    """ "I live in / moved to X": only a capitalised or known place (not "a new apartment")."""
    obj = _object_text(m, s, t)
    if not _usable(obj, 5) or not (obj[0].isupper() or canonical_name(obj) in _PLACE_KEYS):
        return []
    return [_fact(m, s, "lives_in", obj, EntityType.PLACE, 0.9, negated=_negated(m))]


def _h_work_as(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    """ "I work as a nurse (at St Mary's)": works_as, plus works_at for a named employer."""
    obj, negated = _object_text(m, s, t), _negated(m)
    split = _EMPLOYER.match(obj)
    job, employer = (split["job"], split["org"]) if split else (obj, "")
    if not _usable(job, 5):
        return []
    facts = [_fact(m, s, "works_as", job, EntityType.OTHER, 0.9, negated=negated)]
    if employer and _usable(employer, 5):
        org = _LEADING_DET.sub("", employer)
        facts.append(_fact(m, s, "works_at", org, EntityType.ORGANISATION, 0.85, negated=negated))
    return facts


def _h_work_at(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    obj = _object_text(m, s, t)
    if not _usable(obj, 5):
        return []
    return [_fact(m, s, "works_at", obj, EntityType.ORGANISATION, 0.85, negated=_negated(m))]


def _h_skill(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    first = _object_text(m, s, t).lower().split()[:1]
    if "speak" in m.group().lower() and not (first and first[0] in LANGUAGES):
        return []
    return _list_facts(m, s, t, "has_skill", EntityType.OTHER, 0.75)


def _h_own(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    return _list_facts(m, s, t, "owns", EntityType.OBJECT, 0.85)


def _h_medication(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    """ "I take X every morning": only when X names a drug or a kind of medication."""
    obj = _MED_TAIL.sub("", _object_text(m, s, t))
    words = [w.lower() for w in _WORD.findall(obj)]
    if not any(w in MED_WORDS or _is_drug(w) for w in words) or not _usable(obj):
        return []
    items = [_LEADING_DET.sub("", i).strip() for i in _LIST_SPLIT.split(obj)]
    return [
        _fact(m, s, "takes_medication", i, EntityType.OBJECT, 0.85, negated=_negated(m))
        for i in items
        if i
    ]


def _h_like(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    verb = " ".join((m["verb"] or m["past"] or "").lower().split())
    negative = verb in NEGATIVE_VERBS or bool(m["not"])
    relation = "dislikes" if negative != bool(m["neg"]) else "likes"
    return _list_facts(m, s, t, relation, EntityType.OBJECT, 0.75)


def _h_favourite(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    obj = _object_text(m, s, t)
    if not _usable(obj, 5):
        return []
    kind = " ".join((m["kind"] or "").lower().split())
    return [_fact(m, s, "prefers", obj, EntityType.OBJECT, 0.85, qualifier=kind)]


def _h_prefer(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    obj = re.split(r"\s+(?:to|over|rather\s+than|instead\s+of)\s+", _object_text(m, s, t))[0]
    if not _usable(obj, 5):
        return []
    return [_fact(m, s, "prefers", obj, EntityType.OBJECT, 0.8)]


def _h_my_relative(m: re.Match[str], s: _Sentence, _t: list[TimeMention]) -> list[_Located]:
    kind, name = m["kind"].lower(), m["name"]
    if name.split()[0] in CAPITAL_STOPWORDS:
        return []
    if m.re is _F_MY_RELATIVE and "," in m.group() and _RELATIVE_LIST.match(s.text, m.end()):
        return []  # "my sister, Anna and I": a list of people, not a name in apposition
    return [_relation(m, s, "owns" if kind in PETS else "relationship", name, kind)]


def _h_identity(m: re.Match[str], s: _Sentence, t: list[TimeMention]) -> list[_Located]:
    """ "I'm a nurse" (works_as), "I'm a vegetarian", "I'm vegan" (is)."""
    obj = _object_text(m, s, t)
    words = obj.lower().split()
    if not words or not _usable(obj, 4):
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


# ---------------------------------------------------------------------------------------------
# Rules.


def _rules(sentence: _Sentence) -> list[RuleCandidate]:
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
    cond, act = m["cond"], m["act"]
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
    actions = _steps(act)
    if not _meaningful(conditions) or not actions or not _is_action(actions[0]):
        return None
    branch = _steps(otherwise) if keep_else else []
    if branch and (not _is_action(branch[0]) or _R_PAST.search(otherwise)):
        branch = []
    return _rule(conditions, actions, branch, s)


def _split_else(text: str) -> tuple[str, str]:
    """``text`` before its else-marker and the else-branch after it ("" if there is none)."""
    m = _R_ELSE.search(text)
    if m is None:
        return text, ""
    return text[: m.start()], text[m.end() :].strip(" ,")


def _steps(text: str) -> list[str]:
    """Actions in order: split at "then" and ";", and at commas when every item is an action."""
    steps: list[str] = []
    for part in _ACTION_SPLIT.split(text):
        part = part.strip(" ,")
        if not part:
            continue
        items = [i.strip(" ,") for i in _STEP_LIST.split(part) if i.strip(" ,")]
        steps += items if len(items) > 1 and all(_is_action(i) for i in items) else [part]
    return steps


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
    title = _shorten(f"{conditions[0]} → {actions[0]}")
    return RuleCandidate(title, conditions, actions, text, otherwise, _tags(conditions, text))


def _tags(conditions: list[str], text: str) -> list[str]:
    """Tags: 'health' for a health-related rule, then the drugs and conditions it names
    (canonical names; its conditions' first, then the rest in text order); at most
    MAX_RULE_TAGS."""
    tags = ["health"] if is_health_related(text) else []
    for word in _WORD.findall(" ".join([*conditions, text])):
        if _is_drug(word) or word.lower() in CONDITIONS - AMBIGUOUS_CONDITIONS:
            tags.append(canonical_name(word))
    return list(dict.fromkeys(tags))[:MAX_RULE_TAGS]


def _shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ---------------------------------------------------------------------------------------------
# Tasks.


def _tasks(sentence: _Sentence, times: list[TimeMention], now: datetime) -> list[TaskCandidate]:
    """To-dos, reminders and scheduled constraints of one sentence (at most one)."""
    s = sentence.text
    upcoming = any(t.value.date() >= now.date() for t in times)
    for pattern in (_T_REMIND, _T_FORGET, _T_TODO, _T_NEED):
        m = pattern.search(s)
        if m is None or (pattern is _T_NEED and not _is_need_task(s, m, upcoming)):
            continue
        return _task(sentence, m.start("what"), m.end("what"), times, now)
    m = _T_LOG.match(s)
    if m and times:
        return _task(sentence, m.start("what"), m.end("what"), times, now, due_anywhere=True)
    m = _T_IMPERATIVE.match(s)
    if m and (upcoming or _T_SCHEDULE_CUE.search(s) or (not times and is_health_related(s))):
        return _task(sentence, m.start("what"), m.end("what"), times, now)
    m = _T_APPOINTMENT.search(s)
    if m and upcoming:
        return _task(sentence, m.start("what"), m.end("what"), times, now, due_anywhere=True)
    return []


def _requested_reminder(
    sentence: _Sentence, times: list[TimeMention], now: datetime
) -> list[TaskCandidate]:
    """ "Can you remind me to call mom at 5?" asks for a reminder although it is a question."""
    m = _T_REMIND.search(sentence.text) if _T_REQUEST.match(sentence.text) else None
    local = [t for t in times if sentence.start <= t.start < sentence.end]
    return _task(sentence, m.start("what"), m.end("what"), local, now) if m else []


def _is_need_task(s: str, m: re.Match[str], upcoming: bool) -> bool:
    """ "I need to call mom" is a to-do; "I have to say…", "I should have…" are not, and "I
    should…" is one only with a time to do it by."""
    first = re.match(r"[\w']*", m["what"].lower())[0]  # type: ignore[index]  # [\w']* always matches
    if (m["should"] and not upcoming) or not _opens_clause(s, m.start()):
        return False
    return first not in NOT_TASKS and not _CONDITIONAL.search(s, 0, m.start())


def _task(
    sentence: _Sentence,
    start: int,
    end: int,
    times: list[TimeMention],
    now: datetime,
    *,
    due_anywhere: bool = False,
) -> list[TaskCandidate]:
    """A task titled by ``sentence.text[start:end]`` minus its time expressions."""
    lo, hi = sentence.start + start, sentence.start + end
    inside = [t for t in times if lo <= t.start and t.end <= hi]
    title = _TITLE_END.split(_cut_times(sentence.text[start:end], lo, inside))[0]
    title = _TITLE_TAIL.sub("", title).strip(" ,;:-")
    if all(w in FUNCTION_WORDS for w in title.lower().split()):
        return []
    due_from = times if due_anywhere else inside or times
    due = _due(due_from[0], now) if due_from else None
    return [TaskCandidate(_shorten(title, 120), due, sentence.text)]


def _due(mention: TimeMention, now: datetime) -> datetime:
    """A bare clock time already past today means the next day ("alarm set for 7:00" at 22:00)."""
    value = mention.value
    if mention.granularity == "minute" and value < now and value.date() == now.date():
        return value + timedelta(days=1)
    return value


# ---------------------------------------------------------------------------------------------
# Completions.


def _completions(sentence: _Sentence, times: list[TimeMention], now: datetime) -> list[Completion]:
    """Actions reported as done; skipped when the sentence is about more than a day ago."""
    s = sentence.text
    if times and times[0].value.date() < now.date() - timedelta(days=1):
        return []
    ts = _completion_ts(times, now)
    out: list[Completion] = []
    for m in _C_VERB.finditer(s):
        if _CONDITIONAL.search(s, 0, m.start()) or not _opens_clause(s, m.start()):
            continue
        what = _strip_times(sentence, m.start("what"), m.end("what"), times)
        out.extend(Completion(a, ts, s) for a in _actions(COMPLETION_VERBS[_verb(m)], what))
    if not out:
        done = _C_DONE_WITH.search(s) or _C_DONE_SUFFIX.match(s)
        if done and not _CONDITIONAL.search(s, 0, done.start()):
            what = _strip_times(sentence, done.start("what"), done.end("what"), times)
            if not _NOT_DONE.intersection(what.lower().split()):
                out.extend(Completion(a, ts, s) for a in _actions("finish", what))
    return out


def _opens_clause(s: str, at: int) -> bool:
    """Whether the "I" at ``at`` starts a clause; in "a photo I took" it does not."""
    before = s[:at].rstrip()
    if not before or before[-1] in ",;:-–—(!":
        return True
    return before.split()[-1].lower() in CLAUSE_OPENERS


def _completion_ts(times: list[TimeMention], now: datetime) -> datetime:
    """When it was done: the first time mentioned that is not in the future, else ``now``. A
    bare "today" (midnight) says less than ``now`` does, so it gives ``now``."""
    past = next((t for t in times if t.value <= now), None)
    if past is None or (
        past.value.date() == now.date() and past.value.hour == 0 == past.value.minute
    ):
        return now
    return past.value


def _verb(m: re.Match[str]) -> str:
    return " ".join(m["verb"].lower().split())


def _strip_times(sentence: _Sentence, start: int, end: int, times: list[TimeMention]) -> str:
    text = _cut_times(sentence.text[start:end], sentence.start + start, times)
    return _TITLE_TAIL.sub("", _TRAILING_FILLER.sub("", text)).strip(" ,;:-")


def _actions(base: str, what: str) -> list[str]:
    """Split "aspirin and my blood-pressure pill" into one action per object. A part led by
    another completion verb starts a new action; the list ends at the first part that is not a
    short object (another clause, a past verb, a pronoun, a preposition)."""
    actions: list[str] = []
    clause = _CLAUSE_END.split(what)[0]
    for part in _LIST_SPLIT.split(clause):
        verb = next((v for v in COMPLETION_VERBS if part.lower().startswith(v + " ")), None)
        if verb:
            base, part = COMPLETION_VERBS[verb], part[len(verb) :].strip()
        obj = _LEADING_DET.sub("", _TRAILING_FILLER.sub("", part)).strip()
        words = obj.lower().split()
        if (
            not words
            or len(words) > 8
            or words[0] in NON_OBJECTS
            or part.split()[0].lower() in NON_OBJECTS
            or (base == "take" and words[0] in TAKE_IDIOMS)
            or (actions and not verb and CLAUSE_WORDS.intersection(words))
            or _PAST_VERB.match(obj)
        ):
            break
        actions.append(f"{base} {obj}")
    return actions


# ---------------------------------------------------------------------------------------------
# Entities.


def _entities(
    text: str, times: list[TimeMention], facts: list[_Located], starts: set[int]
) -> list[EntityMention]:
    """Typed mentions: fact objects first, then drugs, capitalised names and times; a later
    source never re-types a span an earlier one claimed."""
    found: list[tuple[EntityMention, int]] = [
        (EntityMention(f.object, f.object_type, "object", start), start + len(f.object))
        for f, start in facts
    ]
    found += [
        (EntityMention(m.group(), EntityType.OBJECT, "mention", m.start()), m.end())
        for m in _WORD.finditer(text)
        if _is_drug(m.group())
    ]
    found += _names(text, starts)
    found += [
        (EntityMention(_time_name(t), EntityType.TIME, "mention", t.start), t.end) for t in times
    ]
    kept: list[EntityMention] = []
    spans: list[tuple[int, int]] = []
    for mention, end in found:
        if not _overlaps(spans, mention.start, end):
            spans.append((mention.start, end))
            kept.append(mention)
    return sorted(kept, key=lambda e: e.start)


def _time_name(t: TimeMention) -> str:
    """A time entity is named by its resolved value, so mentions of one day link up."""
    fmt = {"minute": "%Y-%m-%dT%H:%M", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}
    return t.value.strftime(fmt[t.granularity])


def _names(text: str, starts: set[int]) -> list[tuple[EntityMention, int]]:
    """Capitalised word sequences, typed by gazetteers and context cues; ``starts`` are the
    sentence start offsets."""
    candidates = [_name_span(m) for m in _NAME.finditer(text)]
    spans = [c for c in candidates if c is not None]
    mid_sentence = {text[s:e] for s, e, _ in spans if s not in starts}
    out: list[tuple[EntityMention, int]] = []
    for start, end, title in spans:
        name = text[start:end]
        if start in starts and not title and not _clearly_a_name(name, text, end, mid_sentence):
            continue
        kind = _entity_type(name, text, start, end, bool(title))
        out.append((EntityMention(name, kind, _role(text, start, end, starts), start), end))
    return out


def _name_span(m: re.Match[str]) -> tuple[int, int, str | None] | None:
    """Trim stopwords off the front and a possessive off the end of a capitalised run."""
    start, words = m.start("name"), m["name"].split(" ")
    while words and words[0].strip() in CAPITAL_STOPWORDS:
        start += len(words[0]) + 1
        words = words[1:]
    while words and words[-1] in CAPITAL_STOPWORDS:
        words = words[:-1]
    if not words:
        return None
    name = " ".join(words)
    name = re.sub(r"'s?$", "", name)
    if len(name) < 2 or name.isdigit():
        return None
    title = m["title"] if start == m.start("name") else None
    return (m.start() if title else start), start + len(name), title


def _clearly_a_name(name: str, text: str, end: int, mid_sentence: set[str]) -> bool:
    """A capitalised run at a sentence start counts only with evidence that it is a name."""
    first = name.split()[0].lower()
    return (
        first in FIRST_NAMES
        or canonical_name(name) in _PLACE_KEYS
        or canonical_name(name) in ORGANISATIONS
        or name in mid_sentence
        or bool(_PERSON_AFTER.match(text, end))
        or (len(name.split()) > 1 and name.split()[-1].lower() in ORG_SUFFIXES | PLACE_SUFFIXES)
    )


def _entity_type(name: str, text: str, start: int, end: int, titled: bool) -> EntityType:
    key, words = canonical_name(name), name.lower().split()
    before = text[max(0, start - 40) : start]
    if titled:
        return EntityType.PERSON
    if (
        key in ORGANISATIONS
        or words[-1] in ORG_SUFFIXES
        or (words[0] in ORG_SUFFIXES and "of" in words)
    ):
        return EntityType.ORGANISATION
    if key in _PLACE_KEYS or (len(words) > 1 and words[-1] in PLACE_SUFFIXES):
        return EntityType.PLACE
    if (
        words[0] in FIRST_NAMES
        or key in ("mother", "father", "grandmother", "grandfather")
        or _RELATIVE_BEFORE.search(before)
        or _GREETING_BEFORE.search(before)
        or _PERSON_AFTER.match(text, end)
        or (len(words) == 1 and before.endswith(", ") and _VOCATIVE_AFTER.match(text, end))
    ):
        return EntityType.PERSON
    if _PLACE_CUE.search(before):
        return EntityType.PLACE
    if _is_drug(name):
        return EntityType.OBJECT
    return EntityType.OTHER


def _role(text: str, start: int, end: int, starts: set[int]) -> MentionRole:
    """Subject when it opens a clause and a lower-case word follows; object after a verb."""
    clause = re.split(r"[,;:.!?]", text[max(0, start - 60) : start])[-1].strip().lower()
    follows = re.match(r"\s+[a-z]", text[end : end + 3])
    opener = not clause or clause.split()[-1] in CLAUSE_OPENERS  # "Yesterday Anna called"
    if (start in starts or opener) and follows:
        return "subject"
    previous = clause.split()[-2:] if clause else []
    if previous and (previous[-1] in OBJECT_VERBS or previous[-1].endswith("ed")):
        return "object"
    if len(previous) == 2 and previous[-1] == "the" and previous[0] in OBJECT_VERBS:
        return "object"
    return "mention"
