"""The fact judge: a value the user's memory holds, named again in a later turn — does that
turn say it is over?

    "our broadband is with Spectranet"               → broadband: Spectranet
    "we got rid of Spectranet in the end, …"         → the judge hears "Spectranet": over (0.97)
    "Spectranet engineer is coming on monday …"      → not over (0.06)

The reader reads what a turn states; where it reads nothing of a stored value the turn names
(the name as a subject, "Lachlan and I split up"; no fact read at all), the judge decides
whether that value still holds. It is a
small two-layer network over what the reader's own head makes of the named span (its span
vector, kind and negation outputs) and the stored fact's attribute, trained at build time on the
fact corpus (``scripts/train_fact_judge.py``): over when a change pair lists the first trace's
value as stale, or a single line annotates the value as ``end``; never for a name said in
passing. Its threshold is the recipe's, chosen on held-out writer passes.

    judge = FactJudge.load(Path("models"), reader.head)
    facts, heard = reader.hear(text, states, offsets)   # the head's states, candidate spans
    judge.over(heard, span, "broadband")                → 0.97
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.encoder import MANIFEST_FILE, sha256_file
from memoryd.errors import ModelMissingError
from memoryd.reader.head import ReaderHead, sigmoid, softmax
from memoryd.reader.spans import Span, word_span

__all__ = [
    "JUDGE_FILE",
    "FactJudge",
    "Heard",
    "Layers",
    "candidate_spans",
    "judge_features",
    "value_features",
]

JUDGE_FILE = "fact_judge.npz"
JUDGE_FORMAT = 2
MANIFEST_SECTION = "fact_judge"
READER_SECTION = "fact_reader"
MAX_WORDS = 3
"""The longest name, in words, a turn is heard for."""


@dataclass(frozen=True)
class Heard:
    """One turn as the reader's head saw it: its contextual piece states and the spans of up
    to :data:`MAX_WORDS` words that may name a stored value."""

    text: str
    states: np.ndarray
    candidates: tuple[Span, ...]


def judge_features(
    head: ReaderHead, states: np.ndarray, span: Span, attribute: str | None
) -> np.ndarray:
    """The judge's input for ``span`` of a text with head states ``states``, naming a stored
    value of ``attribute``: the head's span vector, its kind probabilities and negation, and
    the attribute one-hot (``other`` for one the head does not know; None: the head's own
    reading of the span, for a name no fact holds)."""
    z = head.span_vector(states, span)
    kind = softmax(z @ head.w["kind_w"] + head.w["kind_b"])
    negated = sigmoid(z @ head.w["neg_w"] + head.w["neg_b"])
    attributes = head.attributes
    onehot = np.zeros(len(attributes), dtype=np.float32)
    if attribute is None:
        onehot[int(np.argmax(z @ head.w["attr_w"] + head.w["attr_b"]))] = 1.0
    else:
        onehot[attributes.index(attribute) if attribute in attributes else -1] = 1.0
    return np.concatenate([z, kind, negated, onehot]).astype(np.float32)


def value_features(
    head: ReaderHead,
    text: str,
    states: np.ndarray,
    offsets: list[tuple[int, int]],
    where: tuple[int, int],
    attribute: str | None,
) -> np.ndarray | None:
    """The judge's input for the characters ``where`` of ``text`` (the encoder's ``states``
    and piece ``offsets``), naming a value of ``attribute``; None when no piece covers them (a
    text cut at the encoder's length)."""
    start, end = where
    pieces = [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]
    if not pieces:
        return None
    span = Span(start, end, pieces[0], pieces[-1], text[start:end])
    return judge_features(head, head.contextual(text, states, offsets)[0], span, attribute)


def candidate_spans(text: str, offsets: list[tuple[int, int]], starts: list[bool]) -> list[Span]:
    """Every run of one to :data:`MAX_WORDS` words of ``text`` with no punctuation word in it."""
    words: list[tuple[int, int]] = []  # first and last piece of each word
    for i, start in enumerate(starts):
        if start:
            words.append((i, i))
        elif words and offsets[i][1] > offsets[i][0]:
            words[-1] = (words[-1][0], i)
    spans = []
    for i in range(len(words)):
        for j in range(i, min(i + MAX_WORDS, len(words))):
            if not _wordlike(text, offsets, *words[j]):
                break
            span = word_span(text, offsets, words[i][0], words[j][1])
            if span.text:
                spans.append(span)
    return spans


def _wordlike(text: str, offsets: list[tuple[int, int]], first: int, last: int) -> bool:
    return any(ch.isalnum() for ch in text[offsets[first][0] : offsets[last][1]])


@dataclass(frozen=True)
class Layers:
    """``p = sigmoid(relu(x w1 + b1) w2 + b2)`` over judge features ``x``."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: float

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """The probability of *over* of each row of judge features ``x``."""
        hidden = np.maximum(x @ self.w1 + self.b1, 0.0)
        return sigmoid(hidden @ self.w2 + np.float32(self.b2))


class FactJudge:
    """The trained ``layers`` and the recipe's ``meta`` (its threshold), over ``head``'s
    states."""

    def __init__(self, head: ReaderHead, layers: Layers, meta: dict[str, Any]):
        self.head = head
        self.layers = layers
        self.meta = meta
        self.threshold = float(meta["threshold"])

    @classmethod
    def load(cls, model_dir: Path, head: ReaderHead, verify: bool = True) -> FactJudge:
        """The judge built into ``model_dir`` for the reader head ``head``; ``verify`` checks
        its sha256, and that it was trained over the reader head the manifest names."""
        path = Path(model_dir) / JUDGE_FILE
        if not path.is_file():
            raise ModelMissingError(str(path), "fact judge")
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("format") != JUDGE_FORMAT:
                raise ModelMissingError(str(path), f"fact judge of format {JUDGE_FORMAT}")
            w1, b1, w2 = (np.asarray(data[k], dtype=np.float32) for k in ("w1", "b1", "w2"))
            layers = Layers(w1, b1, w2, float(data["b2"]))
        if verify:
            _verify(path, meta, Path(model_dir) / MANIFEST_FILE)
        if len(w1) != head.w["span_b"].shape[0] + 6 + len(head.attributes):
            raise ModelMissingError(str(path), "a fact judge trained over this reader head")
        return cls(head, layers, meta)

    def save(self, path: Path) -> None:
        layers = self.layers
        np.savez(
            path,
            meta=np.array(json.dumps(self.meta)),
            w1=layers.w1,
            b1=layers.b1,
            w2=layers.w2,
            b2=np.array(layers.b2, dtype=np.float32),
        )

    def over(self, heard: Heard, span: Span, attribute: str) -> float:
        """The probability that ``heard`` says the value of ``attribute`` that ``span`` names
        no longer holds."""
        x = judge_features(self.head, heard.states, span, attribute)
        return float(self.probabilities(x[None])[0])

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """The probability of *over* of each row of judge features ``x``."""
        return self.layers.probabilities(x)


def _verify(path: Path, meta: dict[str, Any], manifest: Path) -> None:
    sections = json.loads(manifest.read_text()) if manifest.is_file() else {}
    expected = (sections.get(MANIFEST_SECTION) or {}).get("file", {}).get("sha256")
    if expected is None or sha256_file(path) != expected:
        raise ModelMissingError(str(path), f"fact judge recorded in {manifest.name}")
    reader = (sections.get(READER_SECTION) or {}).get("file", {}).get("sha256")
    if reader is None or meta.get("reader_sha256") != reader:
        raise ModelMissingError(str(path), "a fact judge trained over the built reader head")
