"""Verbs of a clause: their lemma ("studied" → study), whether a word after "have" is a
participle, and the relation a verb states ("live" → ``lives_in``, "collect" → ``collects``)."""

from __future__ import annotations

import re

__all__ = ["PAST_FORMS", "VERB_RELATIONS", "lemma_of", "participle", "verb_relation"]


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
    "join": "member_of",
}  # fmt: skip


_IRREGULAR = {
    "has": "have", "had": "have", "went": "go", "goes": "go", "took": "take", "ate": "eat",
    "drank": "drink", "drove": "drive", "wore": "wear", "ran": "run", "swam": "swim",
    "rode": "ride", "spoke": "speak", "taught": "teach", "kept": "keep", "grew": "grow",
    "got": "get", "paid": "pay", "thought": "think", "studies": "study", "studied": "study",
    "lived": "live", "worked": "work", "loved": "love", "liked": "like", "used": "use",
    "played": "play", "was": "be", "were": "be", "am": "be", "is": "be", "are": "be", "been": "be",
}  # fmt: skip


PAST_FORMS = frozenset(
    "had went took ate drank drove wore ran swam rode spoke taught kept grew got paid was were "
    "did made saw met bought sold left felt found lost gave drew learnt said knew thought told "
    "heard began brought built caught chose fell forgot held meant sent spent stood understood "
    "won wrote became came sat slept threw woke flew broke hung led lent shot shut sang "
    "stuck struck swore tore wound".split()
)


_PARTICIPLES = frozenset(
    "been done gone seen known got gotten taken given eaten driven ridden written begun "
    "run come become swum drunk sung hung shut put set cut hit let quit read spent".split()
)
_BEFORE_PARTICIPLE = frozenset(
    "always never just already also still finally recently really officially only not".split()
)
"""Words between "have" and its participle ("I've not been"), never its object."""


def lemma_of(verb: str) -> str:
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


def participle(verb: str) -> bool:
    """Whether a word after "have" can be its past participle ("I've switched", "we have
    been") or lead to one ("I've not been"), not its object ("I have crohn's", "we've
    Netflix")."""
    v = verb.lower()
    return (
        v.endswith(("ed", "en", "wn"))
        or v in PAST_FORMS
        or v in _PARTICIPLES
        or v in _BEFORE_PARTICIPLE
    )


def verb_relation(lemma: str) -> str:
    if lemma in VERB_RELATIONS:
        return VERB_RELATIONS[lemma]
    if re.search(r"[^aeiou]y$", lemma):
        return lemma[:-1] + "ies"  # carry → carries
    return lemma + ("es" if lemma.endswith(("s", "sh", "ch", "x", "o")) else "s")
