"""The router's classifier head: a small multi-label network over the encoder's embedding.

Input is the 384-d unit vector from :class:`memoryd.encoder.Encoder`; output is one sigmoid
probability per label, in ``LABELS`` order. The head is pure numpy so that training a new one
on the label pool (HGP's self-enhancement loop) needs nothing beyond the runtime dependencies.

    head = RouterHead.train(X, Y, hidden=32)   # X: (n, 384) float32, Y: (n, 5) in {0, 1}
    head.save(Path("models/router_head.npz"))
    probs = RouterHead.load(Path("models/router_head.npz")).predict_proba(vec)   # (5,)

A head has zero or more ReLU hidden layers; ``hidden=0`` is logistic regression. Its
``temperature`` divides the logits before the sigmoid (temperature scaling, fitted on held-out
data by :func:`memoryd.router.calibrate.fit_temperature`): it changes how sure the head says it
is, never which side of 0.5 a probability falls on.
"""

from __future__ import annotations

import io
import logging
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.errors import ModelMissingError
from memoryd.models import LABELS, Label

__all__ = ["HEAD_FORMAT", "RouterHead", "f1_scores"]

logger = logging.getLogger(__name__)

HEAD_FORMAT = 1
"""Version of the npz layout written by :meth:`RouterHead.save`."""


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


class RouterHead:
    """Multi-label classifier: ``sigmoid(W_k · relu(… relu(W_1 · x + b_1) …) + b_k)``.

    Args:
        layers: ``(weight, bias)`` pairs, weight of shape ``(fan_in, fan_out)``; the last layer
            has one output per label. Weights are stored as float32.
        temperature: positive divisor of the logits (1.0: uncalibrated).
    """

    def __init__(
        self, layers: list[tuple[np.ndarray, np.ndarray]], temperature: float = 1.0
    ) -> None:
        if not layers or layers[-1][0].shape[1] != len(LABELS):
            raise ValueError(f"the last layer must have {len(LABELS)} outputs, one per label")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in layers]
        self.temperature = float(temperature)

    def with_temperature(self, temperature: float) -> RouterHead:
        """The same weights with another temperature."""
        return RouterHead(self.layers, temperature)

    @property
    def input_dim(self) -> int:
        return int(self.layers[0][0].shape[0])

    @property
    def hidden(self) -> int:
        """Width of the first hidden layer; 0 for logistic regression."""
        return self.layers[0][0].shape[1] if len(self.layers) > 1 else 0

    def logits(self, x: np.ndarray) -> np.ndarray:
        """Uncalibrated logits in ``LABELS`` order: ``(5,)`` for one vector, ``(n, 5)`` for n."""
        h = np.asarray(x, dtype=np.float32)
        for w, b in self.layers[:-1]:
            h = np.maximum(h @ w + b, 0.0)
        w, b = self.layers[-1]
        return h @ w + b

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Calibrated label probabilities, shaped like :meth:`logits`."""
        return _sigmoid(self.logits(x) / self.temperature)

    def to_bytes(self) -> bytes:
        """The head as ``.npz`` bytes: weights, temperature, label order and format version."""
        arrays: dict[str, np.ndarray] = {}
        for i, (w, b) in enumerate(self.layers):
            arrays[f"w{i}"], arrays[f"b{i}"] = w, b
        buffer = io.BytesIO()
        contents: dict[str, Any] = {
            "format": np.array(HEAD_FORMAT),
            "labels": np.array([str(label) for label in LABELS]),
            "temperature": np.array(self.temperature),
            **arrays,
        }
        np.savez(buffer, **contents)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, blob: bytes, origin: str = "head") -> RouterHead:
        """Read bytes written by :meth:`to_bytes`; ``origin`` names them in errors.

        Raises:
            ValueError: another format version or another label order.
        """
        with np.load(io.BytesIO(blob), allow_pickle=False) as data:
            if int(data["format"]) != HEAD_FORMAT:
                raise ValueError(f"{origin}: head format {int(data['format'])} != {HEAD_FORMAT}")
            labels = tuple(Label(str(v)) for v in data["labels"])
            if labels != LABELS:
                raise ValueError(f"{origin}: label order {labels} != {LABELS}")
            count = sum(1 for key in data.files if key.startswith("w"))
            layers = [(data[f"w{i}"], data[f"b{i}"]) for i in range(count)]
            temperature = float(data["temperature"]) if "temperature" in data.files else 1.0
        return cls(layers, temperature)

    def save(self, path: Path) -> None:
        """Write :meth:`to_bytes` to ``path`` (an ``.npz`` file)."""
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: Path) -> RouterHead:
        """Read a head written by :meth:`save`.

        Raises:
            ModelMissingError: no file at ``path``.
            ValueError: the file has another format version or another label order.
        """
        path = Path(path)
        if not path.is_file():
            raise ModelMissingError(str(path), "router head")
        head = cls.from_bytes(path.read_bytes(), str(path))
        logger.info(
            "router head loaded from %s (hidden=%d, temperature=%.3f)",
            path,
            head.hidden,
            head.temperature,
        )
        return head

    @classmethod
    def train(
        cls,
        x: np.ndarray,
        y: np.ndarray,
        *,
        hidden: int = 32,
        epochs: int = 1000,
        learning_rate: float = 0.01,
        weight_decay: float = 1e-4,
        seed: int = 0,
    ) -> RouterHead:
        """Fit a head with full-batch Adam on a class-balanced binary cross-entropy.

        Class balance: within each label, the positive and the negative examples each carry
        half of that label's loss, so a rare label (fragmented turns) weighs as much as a
        frequent one and p = 0.5 stays a sensible threshold. Full batches and a seeded
        initialisation make the result a function of the inputs alone.

        Args:
            x: embeddings, ``(n, d)``.
            y: targets in {0, 1}, ``(n, 5)`` in ``LABELS`` order; every label needs at least
                one positive and one negative example.
            hidden: width of the single hidden layer; 0 trains logistic regression.
            epochs: optimisation steps (one per epoch: the batch is the whole set).
            learning_rate: Adam step size.
            weight_decay: L2 penalty on the weights (not the biases).
            seed: seeds the weight initialisation.
        """
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        positives = y.sum(axis=0)
        if np.any(positives == 0) or np.any(positives == len(y)):
            raise ValueError("every label needs positive and negative training examples")
        weights = np.where(y > 0, 0.5 / positives, 0.5 / (len(y) - positives)) / len(LABELS)
        params = _init_params(x.shape[1], hidden, np.random.default_rng(seed))
        adam = _Adam(params, learning_rate)
        for _ in range(epochs):
            grads = _gradients(params, x, y, weights)
            for i in range(0, len(params), 2):
                grads[i] = grads[i] + weight_decay * params[i]
            adam.step(params, grads)
        return cls([(params[i], params[i + 1]) for i in range(0, len(params), 2)])


def _init_params(fan_in: int, hidden: int, rng: np.random.Generator) -> list[np.ndarray]:
    """He-initialised weights and zero biases, as a flat [w0, b0, w1, b1, ...] list."""
    sizes = [fan_in, hidden, len(LABELS)] if hidden else [fan_in, len(LABELS)]
    params: list[np.ndarray] = []
    for n_in, n_out in pairwise(sizes):
        params += [rng.normal(0.0, np.sqrt(2.0 / n_in), (n_in, n_out)), np.zeros(n_out)]
    return params


def _gradients(
    params: list[np.ndarray], x: np.ndarray, y: np.ndarray, weights: np.ndarray
) -> list[np.ndarray]:
    """Gradients of the weighted binary cross-entropy by backpropagation."""
    activations = [x]
    for i in range(0, len(params) - 2, 2):
        activations.append(np.maximum(activations[-1] @ params[i] + params[i + 1], 0.0))
    delta = weights * (_sigmoid(activations[-1] @ params[-2] + params[-1]) - y)
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    for i in range(len(params) - 2, -1, -2):
        grads[i], grads[i + 1] = activations[i // 2].T @ delta, delta.sum(axis=0)
        if i:
            delta = (delta @ params[i].T) * (activations[i // 2] > 0)
    return grads


class _Adam:
    def __init__(self, params: list[np.ndarray], learning_rate: float) -> None:
        self.learning_rate = learning_rate
        self.beta1, self.beta2, self.eps = 0.9, 0.999, 1e-8
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, params: list[np.ndarray], grads: list[np.ndarray]) -> None:
        self.t += 1
        correction1, correction2 = 1 - self.beta1**self.t, 1 - self.beta2**self.t
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * g * g
            p -= self.learning_rate * (m / correction1) / (np.sqrt(v / correction2) + self.eps)


def f1_scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Per-label F1 (keyed by label value), plus ``micro`` and ``macro`` F1.

    Both arguments are ``(n, 5)`` arrays in {0, 1}, columns in ``LABELS`` order. A label with
    no true and no predicted positives scores 1.0 (nothing to find, nothing wrongly found).
    """
    t, p = np.asarray(y_true, dtype=bool), np.asarray(y_pred, dtype=bool)
    tp, fp, fn = (t & p).sum(axis=0), (~t & p).sum(axis=0), (t & ~p).sum(axis=0)
    denominator = 2 * tp + fp + fn
    per_label = np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 1.0)
    scores = {str(label): float(f) for label, f in zip(LABELS, per_label, strict=True)}
    total = 2 * tp.sum() + fp.sum() + fn.sum()
    scores["micro"] = float(2 * tp.sum() / total) if total else 1.0
    scores["macro"] = float(per_label.mean())
    return scores
