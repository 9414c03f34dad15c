"""Routing decisions: from the head's label probabilities to the labels a turn is stored under.

    router = Router(RouterHead.load(path), threshold=0.5)
    decision = router.route(encoder.routing_vector(text), text)
    decision.labels, decision.confidence        # (Label.WORKING,), 0.93

The head reads the embedding with the text's cue features (:mod:`memoryd.router.features`).

Rules, in order:

1. A blank text is fragmented (confidence 1): there is nothing to classify.
2. Every label whose probability is at least ``threshold`` is chosen (multi-label).
3. If none is, the most probable label is chosen alone.
4. ``fragmented`` excludes the others. When it is chosen together with content labels, the side
   with the higher probability wins: fragmented alone if its probability is strictly higher
   than every chosen content label's, otherwise the content labels without fragmented. A tie
   keeps the content, because fragmented turns are left out of retrieval and a wrongly dropped
   turn costs more than a noisy one kept.
5. For the same reason a turn with more than ``MAX_FRAGMENT_WORDS`` content words (stopwords
   left out) is never fragmented: the most probable content label stands instead. On LoCoMo the
   embedding-only head called 41 % of real chat turns noise ("Thanks, Mel! I painted this after
   I visited an LGBTQ center …"), 163 of them evidence for a question; noise is short. The
   bound was 4 for the templated seed; on the routing corpus it is 8, chosen by cross-domain
   cross-validation (4, 8 or none: 0.743, 0.765, 0.763 out-of-fold macro-F1), because the
   corpus calls long generic questions and general-knowledge answers noise too.

The confidence ``s(x)`` is the certainty of the whole multi-label decision: the minimum over all
five labels of ``max(p, 1 - p)``, with the head's calibrated (temperature-scaled) probabilities.
One label near 0.5 makes the decision uncertain however sure the others are; the service defers
turns with ``s(x) < τ_t`` to the LLM (HGP §3.1), where ``τ_t = max(τ_min, τ_0 · e^{−β t})``
falls as the user's head goes through training rounds (:func:`deferral_threshold`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memoryd.models import LABELS, Label, RoutedBy
from memoryd.router.features import features
from memoryd.router.head import RouterHead
from memoryd.text import content_tokens

__all__ = [
    "DEFAULT_THRESHOLD",
    "MAX_FRAGMENT_WORDS",
    "RouteDecision",
    "Router",
    "choose_labels",
    "confidence",
    "decide",
    "deferral_threshold",
    "keep_content",
    "label_matrix",
]

DEFAULT_THRESHOLD = 0.5
"""The label probability at which a label is chosen. The corpus's held-out lines score a little
higher at 0.7 (``scripts/train_router.py`` prints the sweep), but a missed label loses a typed
record while an extra one costs little, and the typed tuning scenarios lose at 0.7
(docs/decisions.md, "Router label threshold")."""
MAX_FRAGMENT_WORDS = 8


@dataclass(frozen=True)
class RouteDecision:
    """What the router says about one turn. ``labels`` follow ``LABELS`` order."""

    labels: tuple[Label, ...]
    confidence: float
    scores: dict[Label, float]
    routed_by: RoutedBy


def choose_labels(scores: dict[Label, float], threshold: float) -> tuple[Label, ...]:
    """Apply rules 2-4 of the module docstring to per-label probabilities."""
    chosen = [label for label in LABELS if scores[label] >= threshold]
    if not chosen:
        return (max(LABELS, key=lambda label: scores[label]),)
    content = [label for label in chosen if label is not Label.FRAGMENTED]
    if len(content) == len(chosen) or not content:
        return tuple(chosen)
    if scores[Label.FRAGMENTED] > max(scores[label] for label in content):
        return (Label.FRAGMENTED,)
    return tuple(content)


def keep_content(scores: dict[Label, float], threshold: float) -> tuple[Label, ...]:
    """Rule 5: the content labels at or above ``threshold``, else the most probable one."""
    content = [label for label in LABELS if label is not Label.FRAGMENTED]
    chosen = [label for label in content if scores[label] >= threshold]
    return tuple(chosen) or (max(content, key=lambda label: scores[label]),)


def confidence(probabilities: np.ndarray) -> float:
    """``s(x) = min over labels of max(p, 1 - p)``, in [0.5, 1]."""
    p = np.asarray(probabilities, dtype=np.float64)
    return float(np.min(np.maximum(p, 1.0 - p)))


def deferral_threshold(rounds: int, tau0: float, beta: float, tau_min: float) -> float:
    """``τ_t = max(τ_min, τ_0 · e^{−β t})`` after ``rounds`` completed training rounds."""
    return max(tau_min, tau0 * math.exp(-beta * rounds))


def label_matrix(rows: Sequence[Sequence[Label]]) -> np.ndarray:
    """Label sets as an ``(n, 5)`` 0/1 float32 matrix, columns in ``LABELS`` order."""
    return np.array([[label in row for label in LABELS] for row in rows], dtype=np.float32)


class Router:
    """Routes a turn's embedding to labels with the classifier head.

    Args:
        head: the trained head; read-only here, so one router may serve many threads.
        threshold: probability at or above which a label is chosen, in (0, 1).
    """

    def __init__(self, head: RouterHead, threshold: float = DEFAULT_THRESHOLD) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        self.head = head
        self.threshold = threshold

    def route(self, vec: np.ndarray, text: str) -> RouteDecision:
        """Decide the labels of the turn whose text is ``text`` and routing vector ``vec``
        (``Encoder.routing_vector``)."""
        probabilities = self.head.predict_proba(features(vec, text, self.head.input_dim))
        scores = {label: float(p) for label, p in zip(LABELS, probabilities, strict=True)}
        if not text.strip():
            return RouteDecision((Label.FRAGMENTED,), 1.0, scores, RoutedBy.CLASSIFIER)
        labels = choose_labels(scores, self.threshold)
        if labels == (Label.FRAGMENTED,) and len(content_tokens(text)) > MAX_FRAGMENT_WORDS:
            labels = keep_content(scores, self.threshold)
        return RouteDecision(
            labels=labels,
            confidence=confidence(probabilities),
            scores=scores,
            routed_by=RoutedBy.CLASSIFIER,
        )


def decide(
    head: RouterHead, x: np.ndarray, texts: Sequence[str], threshold: float = DEFAULT_THRESHOLD
) -> np.ndarray:
    """The router's label decisions for many turns, as an ``(n, 5)`` 0/1 matrix."""
    router = Router(head, threshold)
    return label_matrix([router.route(v, t).labels for v, t in zip(x, texts, strict=True)])
