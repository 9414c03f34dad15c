"""The fact reader's head: pure numpy over the token states of one encoder pass.

Trained at build time (``scripts/train_fact_reader.py``, torch) and stored as ``.npz``; this
module runs the same network as that script's torch module, layer for layer::

    X (pieces, D [+ 5])     the encoder's token states (and each piece's word shape: capital,
                            all capitals, digit, sentence start, special; meta "shapes")
    H = gelu(X W_in + b)    per piece
    C = gelu(conv3(H))      each piece with its neighbours
    C = gelu(C + att(C))    with the attention layer (weights att_q/k/v/o): the whole text
    tags = C W_tag + b      3 BIO layers (value, subject, old) → spans
    per value span v:  z_v = gelu([mean C[v], C[v.first], C[v.last], mean C, C[v.first-1],
                                   C[v.last+1]] W_span + b)
        attribute = softmax(z_v W_attr), kind = softmax(z_v W_kind), negated = σ(z_v W_neg)
    per (v, candidate subject s):  u_s = [mean C[s], C[s.first], C[s.last]] W_subj + b
        (the speaker: a learned u_user), score = σ(MLP([z_v, u_s, z_v ⊙ u_s, where(s, v)]))

A value takes every subject scoring over one half, or the best one when none does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.errors import ModelMissingError
from memoryd.reader.spans import LAYERS, Span, decode, piece_shapes, word_starts

__all__ = [
    "HEAD_FORMAT",
    "KINDS",
    "READ_KINDS",
    "ReaderHead",
    "Reading",
    "SpanFacts",
    "sigmoid",
    "softmax",
]

HEAD_FORMAT = 1
KINDS = ("state", "change", "add", "end", "none")
READ_KINDS = frozenset(KINDS) - {"none"}
"""Kinds that state something about now (``none`` changes nothing)."""
GAP_BUCKETS = (1, 3, 6, 12)
"""Pieces between a subject and its value: 0-1, 2-3, 4-6, 7-12, more."""
PAIR_FEATURES = 8


def gelu(x: np.ndarray) -> np.ndarray:
    """The tanh approximation (torch's ``approximate="tanh"``), as the training script uses.
    ``x * x * x``, not ``x**3``: numpy's float32 power took 0.35 ms on a 22 x 256 array."""
    out: np.ndarray = 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * (x * x * x))))
    return out


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
    return out


def sigmoid(z: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * z))
    return out


def pair_features(value: Span | None, subject: Span | None) -> np.ndarray:
    """Where a candidate subject lies from a value: before, after, how far; or the speaker."""
    f = np.zeros(PAIR_FEATURES, dtype=np.float32)
    if subject is None or value is None:
        f[7] = 1.0
        return f
    if subject.last < value.first:
        f[0], gap = 1.0, value.first - subject.last - 1
    elif subject.first > value.last:
        f[1], gap = 1.0, subject.first - value.last - 1
    else:
        gap = 0
    f[2 + sum(gap > b for b in GAP_BUCKETS)] = 1.0
    return f


@dataclass(frozen=True)
class SpanFacts:
    """What the head says of one value span."""

    value: Span
    attribute: np.ndarray  # probabilities over ReaderHead.attributes
    kind: np.ndarray  # probabilities over KINDS
    negated: float
    subjects: list[tuple[Span | None, float]]  # candidate (None: the speaker) and its score


@dataclass(frozen=True)
class Reading:
    """The head's reading of one text: the spans of each layer, each value's facts, and the
    contextual piece states (C) and word starts they were read from."""

    spans: dict[str, list[Span]]
    facts: list[SpanFacts]
    states: np.ndarray
    starts: list[bool]


class ReaderHead:
    """The numpy head; ``weights`` as the training script saves them."""

    def __init__(self, weights: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        self.w = {k: np.asarray(v, dtype=np.float32) for k, v in weights.items()}
        self.meta = meta
        self.attributes: tuple[str, ...] = tuple(meta["attributes"])
        self.input: str = str(meta["input"])
        self.shapes = bool(meta.get("shapes", False))
        """Whether the head reads the pieces' word shapes after the encoder's states."""
        self._conv = np.ascontiguousarray(np.concatenate(list(self.w["conv_w"]), axis=1))
        """The three taps of the convolution side by side: one product for all three."""

    @classmethod
    def load(cls, path: Path) -> ReaderHead:
        if not Path(path).is_file():
            raise ModelMissingError(str(path), "fact reader head")
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("format") != HEAD_FORMAT:
                raise ModelMissingError(str(path), f"fact reader head of format {HEAD_FORMAT}")
            weights = {k: data[k] for k in data.files if k != "meta"}
        return cls(weights, meta)

    def save(self, path: Path) -> None:
        arrays: dict[str, np.ndarray] = {"meta": np.array(json.dumps(self.meta)), **self.w}
        np.savez(path, **arrays)  # type: ignore[arg-type]

    def states(self, x: np.ndarray) -> np.ndarray:
        """C: the contextual piece states, ``(pieces, hidden)``; ``x`` is the encoder's states
        with the pieces' shapes (:func:`memoryd.reader.spans.piece_shapes`) after them."""
        w = self.w
        h = gelu(x @ w["in_w"] + w["in_b"])
        width = h.shape[1]
        taps = h @ self._conv  # each piece through the taps for before, itself and after
        conv = taps[:, width : 2 * width] + w["conv_b"]
        conv[1:] += taps[:-1, :width]  # the piece before
        conv[:-1] += taps[1:, 2 * width :]  # the piece after
        c = gelu(conv)
        if "att_q" not in w:
            return c
        q, k, v = c @ w["att_q"], c @ w["att_k"], c @ w["att_v"]
        weights = softmax(q @ k.T / np.float32(np.sqrt(q.shape[1])))
        return gelu(c + (weights @ v) @ w["att_o"])

    def tags(self, c: np.ndarray) -> np.ndarray:
        """Tag ids, ``(layers, pieces)``."""
        logits = (c @ self.w["tag_w"] + self.w["tag_b"]).reshape(len(c), len(LAYERS), 3)
        out: np.ndarray = logits.argmax(axis=-1).T
        return out

    def span_vector(self, c: np.ndarray, span: Span) -> np.ndarray:
        zero = np.zeros(c.shape[1], dtype=np.float32)
        before = c[span.first - 1] if span.first > 0 else zero
        after = c[span.last + 1] if span.last + 1 < len(c) else zero
        parts = [c[span.first : span.last + 1].mean(axis=0), c[span.first], c[span.last]]
        features = np.concatenate([*parts, c.mean(axis=0), before, after])
        return gelu(features @ self.w["span_w"] + self.w["span_b"])

    def subject_vector(self, c: np.ndarray, span: Span | None) -> np.ndarray:
        if span is None:
            return self.w["user_vec"]
        parts = [c[span.first : span.last + 1].mean(axis=0), c[span.first], c[span.last]]
        return np.concatenate(parts) @ self.w["subj_w"] + self.w["subj_b"]

    def pair_score(self, z: np.ndarray, u: np.ndarray, where: np.ndarray) -> float:
        w = self.w
        h = gelu(np.concatenate([z, u, z * u, where]) @ w["pair_w1"] + w["pair_b1"])
        return float(sigmoid(h @ w["pair_w2"] + w["pair_b2"])[0])

    def contextual(
        self, text: str, x: np.ndarray, offsets: list[tuple[int, int]]
    ) -> tuple[np.ndarray, list[bool]]:
        """C of ``text`` from its token states ``x`` (with the pieces' word shapes when the
        head reads them), and the pieces' word starts."""
        starts = word_starts(text, offsets)
        if self.shapes:
            x = np.concatenate([x, piece_shapes(text, offsets, starts)], axis=1)
        return self.states(x), starts

    def read(self, text: str, x: np.ndarray, offsets: list[tuple[int, int]]) -> Reading:
        """Read ``text`` from its token states ``x`` ``(pieces, D)`` and piece offsets."""
        c, starts = self.contextual(text, x, offsets)
        tags = self.tags(c)
        spans = {name: decode(text, tags[i], offsets, starts) for i, name in enumerate(LAYERS)}
        facts = []
        for value in spans["value"]:
            z = self.span_vector(c, value)
            candidates: list[Span | None] = [None, *spans["subject"]]
            scored = [
                (s, self.pair_score(z, self.subject_vector(c, s), pair_features(value, s)))
                for s in candidates
            ]
            facts.append(
                SpanFacts(
                    value=value,
                    attribute=softmax(z @ self.w["attr_w"] + self.w["attr_b"]),
                    kind=softmax(z @ self.w["kind_w"] + self.w["kind_b"]),
                    negated=float(sigmoid(z @ self.w["neg_w"] + self.w["neg_b"])[0]),
                    subjects=scored,
                )
            )
        return Reading(spans, facts, c, starts)
