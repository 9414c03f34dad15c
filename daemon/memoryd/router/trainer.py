"""Training rounds of the self-enhancement loop (HGP §3.1).

A round trains a new head on the seed set's training split plus the training part of the user's
label pool, validates it against the current head on the same held-out data (the seed's held-out
lines plus the held-out slice of the pool), and accepts it unless macro-F1 drops by more than
the noise of retraining (``ROUND_MARGIN``).
The accepted head is calibrated (temperature scaling on the validation data) before it is used.

    seed = SeedSet.load(model_dir)
    result = train_round(seed, pool, current_head)
    if result.accepted:
        use(result.head)

Everything here is a pure function of its inputs (seeded initialisation, full-batch training),
so a round can be re-run and give the same head.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.errors import ModelMissingError
from memoryd.router.calibrate import fit_temperature
from memoryd.router.features import features
from memoryd.router.head import RouterHead, f1_scores
from memoryd.router.router import DEFAULT_THRESHOLD, decide
from memoryd.routing_corpus import share

__all__ = [
    "POOL_HOLDOUT_SHARE",
    "ROUND_MARGIN",
    "SEED_FILE",
    "Pool",
    "RoundResult",
    "SeedSet",
    "in_pool_holdout",
    "train_round",
]

SEED_FILE = "router_seed.npz"
POOL_HOLDOUT_SHARE = 0.2
"""Share of pool labels kept out of training to validate the next heads."""


def in_pool_holdout(key: str, fraction: float = POOL_HOLDOUT_SHARE) -> bool:
    """Whether the pool example ``key`` (a turn id) belongs to the held-out slice.

    Decided by a hash (the corpus split's, :func:`memoryd.routing_corpus.share`), so the slice
    is stable across rounds and restarts."""
    return share(key) < fraction


@dataclass(frozen=True)
class SeedSet:
    """The embedded seed set of round S0 and the recipe its head was trained with.

    ``holdout`` marks the held-out lines; heads are trained on the rest. ``cues``: heads read
    the cue features next to the embedding (:mod:`memoryd.router.features`).
    """

    x: np.ndarray
    y: np.ndarray
    texts: tuple[str, ...]
    holdout: np.ndarray
    hidden: int
    weight_decay: float
    cues: bool = True

    @classmethod
    def load(cls, model_dir: Path) -> SeedSet:
        path = Path(model_dir) / SEED_FILE
        if not path.is_file():
            raise ModelMissingError(str(path), "embedded router seed set")
        with np.load(path, allow_pickle=False) as data:
            return cls(
                x=data["x"].astype(np.float32),
                y=data["y"].astype(np.float32),
                texts=tuple(str(t) for t in data["texts"]),
                holdout=data["holdout"].astype(bool),
                hidden=int(data["hidden"]),
                weight_decay=float(data["weight_decay"]),
                cues=bool(data["cues"]) if "cues" in data.files else False,
            )

    def save(self, path: Path) -> None:
        with Path(path).open("wb") as fh:
            np.savez(
                fh,
                x=self.x,
                y=self.y,
                texts=np.array(self.texts),
                holdout=self.holdout,
                hidden=np.array(self.hidden),
                weight_decay=np.array(self.weight_decay),
                cues=np.array(self.cues),
            )


@dataclass(frozen=True)
class Pool:
    """A user's labelled examples: embeddings, 0/1 targets, texts and held-out flags."""

    x: np.ndarray
    y: np.ndarray
    texts: tuple[str, ...]
    holdout: np.ndarray

    @classmethod
    def empty(cls, dim: int) -> Pool:
        return cls(
            np.zeros((0, dim), np.float32), np.zeros((0, 5), np.float32), (), np.zeros(0, bool)
        )

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class RoundResult:
    """The outcome of one training round."""

    head: RouterHead
    accepted: bool
    f1_before: dict[str, float]
    f1_after: dict[str, float]
    sizes: dict[str, int]
    macro_by_part: dict[str, dict[str, float]]
    """Macro-F1 before/after on the seed's held-out lines and on the pool's held-out
    slice separately: a pool can lift its own part while the shipped held-out lines drift down."""

    def report(self) -> dict[str, Any]:
        """JSON-ready summary (what the journal records)."""
        return {
            "accepted": self.accepted,
            "sizes": self.sizes,
            "f1_before": {k: round(v, 4) for k, v in self.f1_before.items()},
            "f1_after": {k: round(v, 4) for k, v in self.f1_after.items()},
            "macro_by_part": {
                part: {k: round(v, 4) for k, v in scores.items()}
                for part, scores in self.macro_by_part.items()
            },
            "temperature": round(self.head.temperature, 4),
        }


def _pick(texts: tuple[str, ...], mask: np.ndarray) -> list[str]:
    return [t for t, keep in zip(texts, mask, strict=True) if keep]


ROUND_MARGIN = 0.005
"""How far below the current head a candidate's validation macro-F1 may be and still be
accepted: about three standard deviations of macro-F1 between heads trained on the same lines
with different seeds (0.0015 on the shipped corpus's held-out lines; docs/decisions.md,
"Router round acceptance margin")."""


def train_round(
    seed: SeedSet,
    pool: Pool,
    current: RouterHead,
    threshold: float = DEFAULT_THRESHOLD,
) -> RoundResult:
    """Train, validate and calibrate a candidate head; see the module docstring.

    The candidate is accepted when its validation macro-F1 is no more than ``ROUND_MARGIN``
    below the current head's on the same validation set: within the noise of retraining, more
    data with the same score is worth keeping.
    """
    train_seed, train_pool = ~seed.holdout, ~pool.holdout
    x_train = np.concatenate([seed.x[train_seed], pool.x[train_pool]])
    y_train = np.concatenate([seed.y[train_seed], pool.y[train_pool]])
    x_val = np.concatenate([seed.x[seed.holdout], pool.x[pool.holdout]])
    y_val = np.concatenate([seed.y[seed.holdout], pool.y[pool.holdout]])
    texts_train = _pick(seed.texts, train_seed) + _pick(pool.texts, train_pool)
    texts_val = _pick(seed.texts, seed.holdout) + _pick(pool.texts, pool.holdout)

    if seed.cues:
        x_train, x_val_in = features(x_train, texts_train), features(x_val, texts_val)
    else:
        x_val_in = x_val
    candidate = RouterHead.train(
        x_train, y_train, hidden=seed.hidden, weight_decay=seed.weight_decay
    )
    logits = candidate.logits(x_val_in)
    candidate = candidate.with_temperature(fit_temperature(logits, y_val))
    current_labels = decide(current, x_val, texts_val, threshold)
    candidate_labels = decide(candidate, x_val, texts_val, threshold)
    before, after = f1_scores(y_val, current_labels), f1_scores(y_val, candidate_labels)
    seed_part = np.arange(len(y_val)) < int(seed.holdout.sum())
    by_part = {
        name: {
            "before": f1_scores(y_val[part], current_labels[part])["macro"],
            "after": f1_scores(y_val[part], candidate_labels[part])["macro"],
        }
        for name, part in (("seed_val", seed_part), ("pool_val", ~seed_part))
        if part.any()
    }
    sizes = {
        "seed_train": int(train_seed.sum()),
        "pool_train": int(train_pool.sum()),
        "seed_val": int(seed.holdout.sum()),
        "pool_val": int(pool.holdout.sum()),
    }
    accepted = after["macro"] >= before["macro"] - ROUND_MARGIN
    return RoundResult(candidate, accepted, before, after, sizes, by_part)
