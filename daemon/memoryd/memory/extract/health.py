"""The health vocabulary: drugs and drug classes, medication words, conditions, body parts,
and the test for a health-related text."""

from __future__ import annotations

import re

from memoryd.memory.extract.sentences import rx

__all__ = [
    "AMBIGUOUS_CONDITIONS",
    "BODY_PARTS",
    "CONDITIONS",
    "CONDITION_PHRASE",
    "DRUGS",
    "DRUG_CLASSES",
    "DRUG_CLASS_NAMES",
    "DRUG_SUFFIXES",
    "HEALTH_PHRASE",
    "HEALTH_WORDS",
    "MED_WORDS",
    "WORD",
    "is_drug",
    "is_health_related",
    "related_drug_terms",
]


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
    "pain hypothyroidism hyperthyroidism anemia anaemia cold condition crohn crohns colitis "
    "ibs endometriosis lupus fibromyalgia coeliac celiac gout glaucoma sciatica tinnitus "
    "vertigo pcos copd".split()
)


# Condition words too common in other senses to mark a text as health-related ("a cold drink").
AMBIGUOUS_CONDITIONS = frozenset({"cold", "condition", "disorder"})


BODY_PARTS = (
    "knee ankle back wrist shoulder arm leg hip neck elbow foot hand finger toe hamstring acl "
    "ribs rib head"
).split()


# Health and safety words for is_health_related (with DRUGS, MED_WORDS and CONDITIONS).
HEALTH_WORDS = frozenset(
    "allergic allergy allergies bpm bleeding bleed pain painful painkiller painkillers hurt "
    "hurts hurting ache aches aching sore injury injured doctor hospital "
    "emergency symptom symptoms surgery pregnant dizzy overdose risk safety danger dangerous "
    "warning prescription pharmacy clinic diagnosed".split()
)


WORD = re.compile(r"[A-Za-z][A-Za-z-]*")


CONDITION_PHRASE = rx(
    r"\b(?:high|low)\s+(?:blood\s+pressure|cholesterol|blood\s+sugar)\b|\bsleep\s+apnea\b|"
    r"\b\w+(?:itis|osis|emia|algia|pathy)\b"
)


HEALTH_PHRASE = rx(r"blood[\s-](?:pressure|sugar)|heart\s+rate")


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
    words = [w.lower() for w in WORD.findall(text)]
    return (
        any(w in _HEALTH_TOKENS or is_drug(w) for w in words)
        or HEALTH_PHRASE.search(text) is not None
    )


def is_drug(word: str) -> bool:
    """A listed drug, or a word with a drug-name stem ending ("lisinopril", "atorvastatin")."""
    word = word.lower()
    return word in DRUGS or (len(word) >= 7 and word.endswith(DRUG_SUFFIXES))


_HEALTH_TOKENS = HEALTH_WORDS | MED_WORDS | (CONDITIONS - AMBIGUOUS_CONDITIONS)
