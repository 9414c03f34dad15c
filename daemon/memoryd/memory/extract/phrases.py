"""What a fact's object is: the noun phrase after the verb, cut at times, dashes and filler, a
list split into items, and the tests that keep pronouns, clauses and aspects out."""

from __future__ import annotations

import re

from memoryd.memory.extract.sentences import (
    LEADING_DET,
    NON_OBJECTS,
    TRAILING_FILLER,
    Sentence,
    cut_times,
    rx,
)
from memoryd.memory.timeparse import TimeMention

__all__ = [
    "ASPECT_NOUNS",
    "CLAUSE_MARKERS",
    "COPULA_GERUNDS",
    "DANGLING_ADJECTIVES",
    "DEICTIC_DETERMINERS",
    "GENRE_HEADS",
    "LEADING_ADVERBS",
    "LIGHT_GERUNDS",
    "NOT_GERUNDS",
    "REFERRING_WORDS",
    "is_aspect",
    "is_gerund",
    "list_items",
    "max_words",
    "object_text",
    "raw_object",
    "usable",
]


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


# Words ending in "-ing" that are not gerunds.
NOT_GERUNDS = frozenset(
    "thing things nothing something anything everything king ring rings spring string wing "
    "wings evening morning ceiling clothing wedding sibling siblings bring sing "
    "sting swing".split()
)


_PREPOSITIONS = frozenset("to with about for in on of at from into by like over".split())


# Fact objects: a dash ends one ("pottery - the creativity…"); adverbs and durations around it
# are not part of it ("bowling itself", "also cheese pizza", "vegetarian for ten years").
_DASH_TAIL = re.compile(r"\s+[-–—]+\s+.*$|\s*[–—].*$")


_FACT_FILLER = rx(
    r"(?:\s+(?:sometimes|often|itself|themselves|honestly|personally|to\s+be\s+honest|"
    r"in\s+general|the\s+most|most\s+of\s+all|big\s+time|a\s+ton|really|actually|anyway|"
    r"especially|for\s+(?:\w+\s+){0,2}(?:years?|months?|weeks?|decades?|ages|while|time)))+$"
)


LEADING_ADVERBS = rx(
    r"^(?:(?:also|really|just|even|still|both|especially|totally|absolutely|actually|mostly|"
    r"mainly|simply|truly|definitely|now|then)\s+)+"
)


# Examples after a head ("strategy games like Civilization and Total War") are not list items.
_EXAMPLES = rx(r"\s*,?\s+(?:like|such\s+as|including|especially|particularly|e\.g\.)\s+.*$")


# A list separator, kept so a list can be told from an afterthought ("coffee, honestly").
_LIST_SEP = rx(r"(\s*,\s*(?:and\s+|or\s+)?|\s+(?:and|or|&)\s+)")


_CONJUNCTION = rx(r"\b(?:and|or)\b|&")


def object_text(m: re.Match[str], sentence: Sentence, times: list[TimeMention]) -> str:
    """The ``obj`` group with time expressions, leading determiners and filler removed."""
    return LEADING_DET.sub("", raw_object(m, sentence, times)).strip(" ,'-")


def raw_object(m: re.Match[str], sentence: Sentence, times: list[TimeMention]) -> str:
    """The ``obj`` group up to a dash, without time expressions, filler or leading adverbs; its
    determiner is kept ("the colour", "this quote")."""
    obj = _DASH_TAIL.sub("", cut_times(m["obj"], sentence.start + m.start("obj"), times))
    obj = TRAILING_FILLER.sub("", _FACT_FILLER.sub("", TRAILING_FILLER.sub("", obj)))
    return LEADING_ADVERBS.sub("", obj.strip(" ,'-")).strip(" ,'-")


def usable(obj: str, max_words: int = 6) -> bool:
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


def is_gerund(item: str) -> bool:
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


def list_items(obj: str) -> list[str]:
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
    items = [LEADING_ADVERBS.sub("", i) for i in parts[0::2]]
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
    out = [LEADING_DET.sub("", i).strip(" ,'-") for i in out]
    head = out[-1].split()[-1] if out[-1] else ""
    if len(out) > 1 and len(out[-1].split()) == 2 and head.lower() in GENRE_HEADS:
        out = [_with_head(i, head) for i in out[:-1]] + out[-1:]
    return out


def max_words(item: str) -> int:
    """Gerund phrases carry their complements; a merged "X and Y" item two more words."""
    return 10 if is_gerund(item) else 8 if _CONJUNCTION.search(item) else 6


def _continues(out: list[str], item: str) -> bool:
    """Whether a list part continues the previous item's complement: after a gerund phrase, a
    part that is not a gerund ("improving education and infrastructure"); after a prepositional
    phrase, a bare word ("books about personal development and mindset")."""
    previous = out[-1].lower().split()
    if is_gerund(out[0]) and not is_gerund(item) and len(previous) > 1:
        return True
    return (
        len(item.split()) == 1
        and not is_gerund(item)
        and any(w in _PREPOSITIONS - {"like"} for w in previous[1:])
    )


def _with_head(item: str, head: str) -> str:
    """ "fantasy" + "movies" → "fantasy movies"; a plural or a gerund is a thing of its own."""
    if len(item.split()) != 1 or item.lower().endswith("s") or is_gerund(item):
        return item
    return f"{item} {head}"


def _infinitive_to_gerund(item: str) -> str:
    words = item.split()[1:]  # drop "to"
    return " ".join([_gerund(words[0]), *words[1:]]) if words else ""


def is_aspect(item: str) -> bool:
    """Whether an item names an aspect of a thing ("colour", "the way it…") by its first or
    last word."""
    words = item.lower().split()
    return any(
        w in ASPECT_NOUNS or (w.endswith("s") and w[:-1] in ASPECT_NOUNS)
        for w in (words[0], words[-1])
    )
