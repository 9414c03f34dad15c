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

import heapq
from collections.abc import Iterable, Sequence
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
    """A fact as profile words: "lives in: Oslo", "does not like: olives", "Tom — lives in:
    Leeds"."""
    return fact.statement if fact.subject == "user" else f"{fact.subject} — {fact.statement}"


FactWeight = tuple[int, float, np.ndarray | None]
"""A current fact's (journal num, confidence, vector): what P and the profile are made of."""


class FactWeights:
    """The current facts as memory id → :data:`FactWeight`, with the confidence-weighted sum
    of their vectors kept as facts change, so that a write that changes a few facts rebuilds P
    at the cost of those facts, not of reading every fact again."""

    def __init__(self, facts: dict[str, FactWeight]) -> None:
        self._facts: dict[str, FactWeight] = {}
        self._sum: np.ndarray | None = None
        self._kept = 0
        self.update(facts, facts)

    def __len__(self) -> int:
        return len(self._facts)

    def update(self, memory_ids: Iterable[str], current: dict[str, FactWeight]) -> None:
        """Take each of ``memory_ids`` as it is now: its weight in ``current``, or gone (not a
        current fact any more) when it is not there."""
        for memory_id in memory_ids:
            old = self._facts.pop(memory_id, None)
            if old is not None:
                self._add(old, -1.0)
            new = current.get(memory_id)
            if new is not None:
                self._facts[memory_id] = new
                self._add(new, 1.0)

    def _add(self, fact: FactWeight, sign: float) -> None:
        _, confidence, vector = fact
        if confidence <= 0 or vector is None:
            return  # left out of P (it still shows in the profile)
        weighted = sign * confidence * np.asarray(vector, dtype=np.float64)
        self._sum = weighted if self._sum is None else self._sum + weighted
        self._kept += 1 if sign > 0 else -1

    def top(self, limit: int) -> list[int]:
        """Nums of the ``limit`` most confident facts, most confident first, then by num."""
        best = heapq.nsmallest(limit, self._facts.values(), key=lambda f: (-f[1], f[0]))
        return [num for num, _, _ in best]

    def persona(self, top: Sequence[Fact]) -> Persona:
        """P from the kept sum; the profile from ``top``, the facts of :meth:`top` in order."""
        if self._kept == 0 or self._sum is None:
            return Persona(None, "", 0)
        norm = float(np.linalg.norm(self._sum))
        vector = (self._sum / norm).astype(np.float32) if norm > 0 else None
        profile = "; ".join(dict.fromkeys(fact_sentence(f) for f in top[:MAX_PROFILE_FACTS]))
        return Persona(vector, profile, self._kept)


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
