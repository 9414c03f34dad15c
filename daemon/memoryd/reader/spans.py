"""Spans of a text on the encoder's word pieces: tags to character spans and back.

The reader tags words in three independent BIO layers (:data:`LAYERS`): ``value`` (a fact's
value), ``subject`` (someone or something other than the speaker that a fact is about) and
``old`` (a value the text says is replaced). A word's tag is its first piece's (the pieces that
continue a word, "##zo" of "Monzo", are not tagged); a span is a run of words, begun by a B tag
and continued by I tags::

    pieces of "moved to Monzo." → [moved][to][mon][##zo][.]; value tags O O B - O → "Monzo"
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "IGNORE",
    "LAYERS",
    "SHAPE_FEATURES",
    "TAGS",
    "Span",
    "decode",
    "find_spans",
    "normalise",
    "piece_shapes",
    "piece_tags",
    "word_span",
    "word_starts",
]

LAYERS = ("value", "subject", "old")
TAGS = ("O", "B", "I")
"""Per layer, the tag ids 0, 1, 2."""
IGNORE = -100
"""The training target of a piece that continues a word (and of special pieces)."""
SHAPE_FEATURES = 5
"""What the uncased encoder cannot see of a piece's word: a capital, all capitals, a digit, the
first word of a sentence, a special piece."""

_EDGE = re.compile(r"^[\s,;:!?()\"“”'’.-]+|[\s,;:!?()\"“”'’-]+$|(?<=\w)\.$")
_LEADING = re.compile(r"^(?:the|a|an|my|our|his|her|their|your)\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Span:
    """Characters ``[start, end)`` of the text, over pieces ``[first, last]``."""

    start: int
    end: int
    first: int
    last: int
    text: str


def normalise(text: str) -> str:
    """A span's comparable form: lower case, no edge punctuation or leading article."""
    text = _EDGE.sub("", text.strip().replace("’", "'"))
    return _LEADING.sub("", text).lower().strip()


def word_starts(text: str, offsets: Sequence[tuple[int, int]]) -> list[bool]:
    """Whether each piece begins a word: not a special piece, and not glued to the piece
    before it letter to letter ("mon" + "##zo"); punctuation is a word of its own."""
    starts = []
    for i, (a, b) in enumerate(offsets):
        if b <= a:
            starts.append(False)
            continue
        prev_end = offsets[i - 1][1] if i > 0 and offsets[i - 1][1] > offsets[i - 1][0] else -1
        glued = prev_end == a and text[a].isalnum() and text[a - 1].isalnum()
        starts.append(not glued)
    return starts


def piece_shapes(
    text: str, offsets: Sequence[tuple[int, int]], starts: Sequence[bool] | None = None
) -> np.ndarray:
    """``(pieces, SHAPE_FEATURES)`` 0/1 features of each piece's word (its first piece's word
    for a piece that continues one); ``starts`` is :func:`word_starts` of the pieces, when the
    caller has it."""
    out = np.zeros((len(offsets), SHAPE_FEATURES), dtype=np.float32)
    starts = word_starts(text, offsets) if starts is None else starts
    word_start, first = 0, 0.0
    for i, ((a, b), start) in enumerate(zip(offsets, starts, strict=True)):
        if b <= a:
            out[i, 4] = 1.0
            continue
        if start:
            word_start = a
            before = text[:word_start].rstrip()
            first = float(not before or before[-1] in ".!?")
        end = b
        while end < len(text) and text[end].isalnum():
            end += 1
        word = text[word_start:end]
        out[i, 0] = float(word[:1].isupper())
        out[i, 1] = float(len(word) > 1 and word.isupper())
        out[i, 2] = float(any(c.isdigit() for c in word))
        out[i, 3] = first
    return out


def decode(
    text: str,
    tags: np.ndarray,
    offsets: Sequence[tuple[int, int]],
    starts: Sequence[bool] | None = None,
) -> list[Span]:
    """The spans of one layer's tag ids: each word takes its first piece's tag, a span runs
    over the words from a B (or a stray I) through the I's after it (``starts`` as for
    :func:`piece_shapes`)."""
    starts = word_starts(text, offsets) if starts is None else starts
    words: list[tuple[int, int, int]] = []  # tag, first piece, last piece
    for i, start in enumerate(starts):
        if start:
            words.append((int(tags[i]), i, i))
        elif words and offsets[i][1] > offsets[i][0]:
            tag, first, _ = words[-1]
            words[-1] = (tag, first, i)
    spans: list[Span] = []
    current: tuple[int, int] | None = None
    for tag, first, last in [*words, (0, -1, -1)]:
        if current is not None and tag != 2:
            spans.append(word_span(text, offsets, *current))
            current = None
        if tag == 1 or (tag == 2 and current is None):
            current = (first, last)
        elif tag == 2 and current is not None:
            current = (current[0], last)
    return [s for s in spans if s.text]


def word_span(text: str, offsets: Sequence[tuple[int, int]], first: int, last: int) -> Span:
    raw = text[offsets[first][0] : offsets[last][1]]
    trimmed = _EDGE.sub("", raw)
    shift = raw.find(trimmed) if trimmed else 0
    start = offsets[first][0] + shift
    return Span(start, start + len(trimmed), first, last, trimmed)


def find_spans(text: str, needle: str) -> list[tuple[int, int]]:
    """Where ``needle`` occurs in ``text`` as whole words (else anywhere), as char ranges."""
    found = [
        (m.start(), m.end()) for m in re.finditer(rf"(?<![\w]){re.escape(needle)}(?![\w])", text)
    ]
    if found:
        return found
    return [(m.start(), m.end()) for m in re.finditer(re.escape(needle), text)]


def piece_tags(
    text: str, offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
) -> np.ndarray:
    """BIO tag ids of the word-initial pieces for character ``spans`` (the training targets
    of one layer); the other pieces are :data:`IGNORE`."""
    starts = word_starts(text, offsets)
    tags = np.where(np.array(starts, dtype=bool), 0, IGNORE).astype(np.int64)
    for start, end in spans:
        inside = [i for i, (a, b) in enumerate(offsets) if starts[i] and a < end and b > start]
        for n, i in enumerate(inside):
            tags[i] = 1 if n == 0 else 2
    return tags
