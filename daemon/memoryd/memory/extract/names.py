"""Names and ids: the gazetteers (first names, places, organisations, relatives, pets,
possessions) and the canonical form that makes "NYC" and "New York" one entity."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from memoryd.models import EntityType

__all__ = [
    "ALIASES",
    "CAPITAL_STOPWORDS",
    "FIRST_NAMES",
    "IE_SINGULARS",
    "INVARIANT_WORDS",
    "ORGANISATIONS",
    "ORG_SUFFIXES",
    "PERSON_TITLES",
    "PETS",
    "PLACES",
    "PLACE_KEYS",
    "PLACE_SUFFIXES",
    "POSSESSIONS",
    "RELATIONSHIP_WORDS",
    "canonical_name",
    "entity_id",
]


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
    return entity_ids(name, (type,))[0]


def entity_ids(name: str, types: Sequence[EntityType]) -> list[str]:
    """:func:`entity_id` of ``name`` as each of ``types`` (its canonical name folded once)."""
    key = canonical_name(name)
    digests = (hashlib.sha1(f"{EntityType(t).value}:{key}".encode()) for t in types)
    return ["ent_" + d.hexdigest()[:16] for d in digests]


PLACE_KEYS = frozenset(canonical_name(p) for p in PLACES)
