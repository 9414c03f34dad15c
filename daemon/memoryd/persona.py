"""The user persona P and the drift between two personas.

P is the confidence-weighted mean of the vectors of the user's current facts, scaled to unit
length, so ``Sim(m, P)`` is a cosine like every other similarity here. Beside it, a readable
profile: the facts as short sentences, most confident first ("lives in Oslo; allergic to
ibuprofen; likes hiking"). A user with no facts has no persona (``vector`` None): every
similarity is 0 and the first fact moves P by exactly 1.0, a drift past any sensible gate.

The drift between P and the anchor the similarities were last computed against is the L2
distance of the two unit vectors (0 = same direction, √2 = orthogonal, 2 = opposite); a missing
vector counts as the zero vector. With unit vectors ``‖P − P_anchor‖₂ = √(2 − 2·cos)``, so the
default gate τ = 0.10 fires once P has turned by about 5.7° (cos 0.995).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memoryd.models import Fact

MAX_PROFILE_FACTS = 40


@dataclass(frozen=True)
class Persona:
    vector: np.ndarray | None
    profile: str
    facts: int


def fact_sentence(fact: Fact) -> str:
    """A fact as profile words: "lives in Oslo", "not allergic to penicillin", "prefers (food)
    sushi"."""
    relation = fact.relation.replace("_", " ").replace(":", " (") + (
        ")" if ":" in fact.relation else ""
    )
    negation = "not " if fact.negated else ""
    return f"{negation}{relation} {fact.object.name}"


def build_persona(weighted: Sequence[tuple[float, np.ndarray]], top: Sequence[Fact]) -> Persona:
    """P from the (confidence, vector) of every current fact; the profile from ``top``, the
    most confident facts, most confident first (see the module docstring)."""
    kept = [(w, v) for w, v in weighted if w > 0]
    if not kept:
        return Persona(None, "", 0)
    weights = np.array([w for w, _ in kept], dtype=np.float64)
    mean = weights @ np.stack([np.asarray(v, dtype=np.float64) for _, v in kept])
    norm = float(np.linalg.norm(mean))
    vector = (mean / norm).astype(np.float32) if norm > 0 else None
    profile = "; ".join(dict.fromkeys(fact_sentence(f) for f in top[:MAX_PROFILE_FACTS]))
    return Persona(vector, profile, len(kept))


def drift(current: np.ndarray | None, anchor: np.ndarray | None) -> float:
    """‖current − anchor‖₂, a missing vector being the zero vector."""
    if current is None:
        return 0.0 if anchor is None else float(np.linalg.norm(anchor))
    if anchor is None:
        return float(np.linalg.norm(current))
    return float(np.linalg.norm(np.asarray(current) - np.asarray(anchor)))


def similarities(vectors: dict[int, np.ndarray], persona: np.ndarray | None) -> dict[int, float]:
    """``Sim(m, P)`` for each memory vector (0.0 for all without a persona)."""
    if persona is None:
        return dict.fromkeys(vectors, 0.0)
    return {num: float(np.dot(vec, persona)) for num, vec in vectors.items()}
