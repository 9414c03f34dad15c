"""Temperature scaling: one scalar ``T`` so that ``sigmoid(z / T)`` is an honest probability.

The router defers a turn to the LLM when its confidence ``s(x)`` is below ``τ_t``; that only
means something if the head's probabilities are calibrated. A weight-decayed logistic head is
under-confident (probabilities crowd towards 0.5), so without calibration almost every turn
would be deferred. ``T`` is fitted on held-out data by minimising the binary cross-entropy over
all labels; dividing every logit by one positive number never moves a probability across 0.5,
so the labels chosen at threshold 0.5 — and the F1 — do not change.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_temperature"]

_GRID = np.exp(np.linspace(np.log(0.05), np.log(20.0), 121))


def _nll(logits: np.ndarray, y: np.ndarray, temperature: float) -> float:
    z = logits / temperature
    # log(1 + e^z) - y z, computed stably
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """The ``T`` in [0.05, 20] that minimises the mean binary cross-entropy of ``sigmoid(z/T)``.

    A log-spaced grid search followed by a finer grid around the best point: the objective is
    one-dimensional and cheap, and a grid cannot diverge.

    Args:
        logits: ``(n, k)`` uncalibrated logits.
        y: ``(n, k)`` targets in {0, 1}.
    """
    z = np.asarray(logits, dtype=np.float64)
    t = np.asarray(y, dtype=np.float64)
    if z.size == 0:
        return 1.0
    best = min(_GRID, key=lambda temp: _nll(z, t, temp))
    fine = np.exp(np.linspace(np.log(best) - 0.06, np.log(best) + 0.06, 25))
    return float(min(fine, key=lambda temp: _nll(z, t, temp)))
