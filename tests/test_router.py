"""Router head (training, persistence) and routing rules; the last tests use the built head."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from memoryd.encoder import Encoder
from memoryd.errors import ModelMissingError
from memoryd.models import LABELS, Label, RoutedBy
from memoryd.router import RouteDecision, Router, RouterHead
from memoryd.router.head import f1_scores
from memoryd.router.router import choose_labels, confidence

REPO = Path(__file__).resolve().parents[1]
MODEL_DIR = Path(os.environ.get("MEMORYD_MODEL_DIR", REPO / "models"))
E, S, P, W, F = LABELS


def fixed_head(probabilities: list[float]) -> RouterHead:
    """A real logistic head that outputs ``probabilities`` for every input."""
    p = np.asarray(probabilities, dtype=np.float64)
    return RouterHead([(np.zeros((384, len(LABELS))), np.log(p / (1 - p)))])


def separable_set(n_per_label: int = 12) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors near one orthogonal direction per label, plus two-label mixtures."""
    rng = np.random.default_rng(7)
    rows, targets = [], []
    combos = [(i,) for i in range(5)] + [(0, 1), (2, 3), (0, 3)]
    for combo in combos:
        for _ in range(n_per_label):
            vec = np.zeros(384)
            vec[list(combo)] = 1.0
            vec += rng.normal(0, 0.05, 384)
            rows.append(vec / np.linalg.norm(vec))
            targets.append([float(i in combo) for i in range(5)])
    return np.array(rows), np.array(targets)


# --- head ------------------------------------------------------------------------------------


@pytest.mark.parametrize("hidden", [0, 16])
def test_head_save_load_roundtrip(tmp_path: Path, hidden: int) -> None:
    x, y = separable_set()
    head = RouterHead.train(x, y, hidden=hidden, epochs=50)
    head.save(tmp_path / "head.npz")
    loaded = RouterHead.load(tmp_path / "head.npz")
    assert loaded.hidden == hidden
    assert np.array_equal(loaded.predict_proba(x), head.predict_proba(x))


def test_head_predicts_one_probability_per_label() -> None:
    x, y = separable_set()
    head = RouterHead.train(x, y, hidden=0, epochs=20)
    assert head.predict_proba(x[0]).shape == (5,)
    assert head.predict_proba(x).shape == (len(x), 5)
    assert np.all((head.predict_proba(x) > 0) & (head.predict_proba(x) < 1))


@pytest.mark.parametrize("hidden", [0, 16])
def test_training_on_a_separable_set_reaches_f1_one(hidden: int) -> None:
    x, y = separable_set()
    head = RouterHead.train(x, y, hidden=hidden, epochs=300)
    scores = f1_scores(y, head.predict_proba(x) >= 0.5)
    assert scores["macro"] == scores["micro"] == 1.0


def test_training_is_deterministic() -> None:
    x, y = separable_set()
    a, b = (RouterHead.train(x, y, hidden=8, epochs=30, seed=3) for _ in range(2))
    assert all(
        np.array_equal(wa, wb) and np.array_equal(ba, bb)
        for (wa, ba), (wb, bb) in zip(a.layers, b.layers, strict=True)
    )


def test_training_needs_both_classes_per_label() -> None:
    x, y = separable_set()
    y[:, 4] = 0
    with pytest.raises(ValueError, match="positive and negative"):
        RouterHead.train(x, y)


def test_loading_a_missing_head_raises_model_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelMissingError, match="router head"):
        RouterHead.load(tmp_path / "absent.npz")


def test_loading_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "head.npz"
    fixed_head([0.5] * 5).save(path)
    data = dict(np.load(path))
    data["format"] = np.array(99)
    np.savez(path, **data)
    with pytest.raises(ValueError, match="format"):
        RouterHead.load(path)


def test_f1_scores() -> None:
    truth = np.array([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 0, 0, 1]])
    guess = np.array([[1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 0, 0, 1, 0]])
    scores = f1_scores(truth, guess)
    assert scores["episodic"] == 1.0
    assert scores["semantic"] == 0.0
    assert scores["procedural"] == 1.0  # nothing to find, nothing wrongly found
    assert scores["micro"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 2))
    assert scores["macro"] == pytest.approx((1 + 0 + 1 + 0 + 0) / 5)


# --- routing rules ---------------------------------------------------------------------------


def scores_of(*probabilities: float) -> dict[Label, float]:
    return dict(zip(LABELS, probabilities, strict=True))


def test_every_label_over_the_threshold_is_chosen() -> None:
    assert choose_labels(scores_of(0.8, 0.6, 0.1, 0.2, 0.1), 0.5) == (E, S)


def test_no_label_over_the_threshold_falls_back_to_the_argmax() -> None:
    assert choose_labels(scores_of(0.2, 0.3, 0.45, 0.1, 0.4), 0.5) == (P,)


def test_fragmented_stronger_than_the_content_labels_wins_alone() -> None:
    assert choose_labels(scores_of(0.6, 0.1, 0.1, 0.55, 0.9), 0.5) == (F,)


def test_content_labels_stronger_than_fragmented_drop_it() -> None:
    assert choose_labels(scores_of(0.7, 0.1, 0.1, 0.95, 0.8), 0.5) == (E, W)


def test_a_tie_keeps_the_content() -> None:
    assert choose_labels(scores_of(0.1, 0.7, 0.1, 0.1, 0.7), 0.5) == (S,)


def test_confidence_is_the_least_certain_label() -> None:
    assert confidence(np.array([0.9, 0.2, 0.6, 0.05, 0.1])) == pytest.approx(0.6)
    assert confidence(np.array([0.99, 0.01, 0.02, 0.03, 0.01])) == pytest.approx(0.97)


def test_route_returns_a_frozen_classifier_decision() -> None:
    router = Router(fixed_head([0.9, 0.2, 0.6, 0.05, 0.1]))
    decision = router.route(np.zeros(384, dtype=np.float32), "we went out, and now I must go")
    assert decision.labels == (E, P)
    assert decision.confidence == pytest.approx(0.6)
    assert decision.scores[E] == pytest.approx(0.9)
    assert decision.routed_by is RoutedBy.CLASSIFIER
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.confidence = 1.0  # type: ignore[misc]


def test_route_honours_the_threshold() -> None:
    head = fixed_head([0.7, 0.2, 0.1, 0.1, 0.1])
    vec = np.zeros(384, dtype=np.float32)
    assert Router(head, threshold=0.5).route(vec, "x").labels == (E,)
    assert Router(head, threshold=0.15).route(vec, "x").labels == (E, S)


def test_a_turn_with_content_words_is_never_fragmented() -> None:
    router = Router(fixed_head([0.3, 0.45, 0.1, 0.2, 0.9]))
    vec = np.zeros(384, dtype=np.float32)
    assert router.route(vec, "thanks so much, haha!").labels == (F,)
    long = "Thanks Mel! I painted this after I visited the community center downtown last weekend."
    assert router.route(vec, long).labels == (S,)  # the most probable content label
    assert Router(fixed_head([0.6, 0.55, 0.1, 0.2, 0.9])).route(vec, long).labels == (E, S)


def test_blank_text_is_fragmented() -> None:
    decision = Router(fixed_head([0.9, 0.2, 0.6, 0.05, 0.1])).route(np.zeros(384), "  \n")
    assert decision == RouteDecision((F,), 1.0, decision.scores, RoutedBy.CLASSIFIER)


@pytest.mark.parametrize("threshold", [0.0, 1.0, -0.1])
def test_threshold_must_lie_strictly_between_zero_and_one(threshold: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        Router(fixed_head([0.5] * 5), threshold=threshold)


# --- the built head (models/router_head.npz) on the real encoder -----------------------------


@pytest.fixture(scope="module")
def built_router() -> Router:
    return Router(RouterHead.load(MODEL_DIR / "router_head.npz"))


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("I'm allergic to penicillin", S),
        ("remind me to call the dentist tomorrow at 9", W),
        ("if it rains, take the bus instead of biking", P),
        ("We went to the beach with the kids last Saturday", E),
    ],
)
def test_built_head_finds_the_memory_type(
    encoder: Encoder, built_router: Router, text: str, label: Label
) -> None:
    decision = built_router.route(encoder.routing_vector(text), text)
    assert label in decision.labels
    assert F not in decision.labels


def test_built_head_marks_a_contentless_turn_fragmented(
    encoder: Encoder, built_router: Router
) -> None:
    assert built_router.route(encoder.routing_vector("ok thanks"), "ok thanks").labels == (F,)
