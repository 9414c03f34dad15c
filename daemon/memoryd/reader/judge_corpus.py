"""The fact judge's examples, taken from the fact corpus's files (``models/fact_corpus``) the
same way for its training (``scripts/train_fact_judge.py``) and its eval (``memoryd eval
judge``):

- a change pair gives one example for each fact of its first trace that states something and
  whose value the second trace names again (in any case): *over* when the pair lists the value
  as stale;
- a single line gives one example for each annotated value: *over* when its kind is ``end``;
  and up to :data:`PASSING_PER_LINE` names said in passing (runs of one to three words that
  begin and end with a content word and overlap no annotated value, old value or subject):
  never over. Most names a
  turn says again end nothing ("Thanks, Caroline", "this studio"); the pairs alone, half of
  them endings, would teach the judge otherwise. A name in passing is judged with the
  attribute the reader's head gives it.

Each text goes through the encoder and the reader's head as the daemon reads a turn
(:func:`judge_inputs`), at the value's first whole-word occurrence.
"""

from __future__ import annotations

import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memoryd.encoder import Encoder
from memoryd.fact_corpus import Inventory, Pair, read_pairs, read_turns
from memoryd.reader.head import ReaderHead
from memoryd.reader.judge import value_features
from memoryd.text import content_tokens

__all__ = [
    "LINE",
    "PAIR",
    "PASSING",
    "PASSING_PER_LINE",
    "JudgeExample",
    "judge_examples",
    "judge_inputs",
]

PAIR, LINE, PASSING = "pair", "line", "passing"
"""Where an example comes from (see the module docstring)."""
PASSING_PER_LINE = 3
"""Names in passing drawn from each single line, in training and in the eval."""
_WORD = re.compile(r"[^\W_][\w'&+-]*")


@dataclass(frozen=True)
class JudgeExample:
    text: str
    value: str
    attribute: str | None  # None: the reader's head's reading of the span
    over: bool
    group: str  # the file's writer pass ("family" of family_pairs.jsonl)
    source: str  # PAIR, LINE or PASSING


def named_at(text: str, value: str) -> tuple[int, int] | None:
    """The characters of ``value``'s first whole-word occurrence in ``text``, in any case (the
    daemon hears names case-folded)."""
    found = re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE)
    return (found.start(), found.end()) if found else None


def judge_examples(
    files: list[Path], inventory: Inventory, passing: int = PASSING_PER_LINE
) -> list[JudgeExample]:
    """The examples of corpus files, with up to ``passing`` names in passing per single line
    (see the module docstring); CorpusError on a bad line."""
    out: list[JudgeExample] = []
    for path in files:
        group = path.name.split("_")[0]
        if path.name.endswith("_pairs.jsonl"):
            for pair in read_pairs(path, inventory):
                out += _named_again(pair, group)
            continue
        for turn in read_turns(path, inventory):
            for fact in turn.facts:
                over = fact.kind == "end"
                out.append(JudgeExample(turn.text, fact.value, fact.attribute, over, group, LINE))
            spans = [x for f in turn.facts for x in (f.value, f.old, f.subject) if x]
            names = _in_passing(turn.text, spans, passing, turn.id)
            out += [JudgeExample(turn.text, n, None, False, group, PASSING) for n in names]
    return out


def _named_again(pair: Pair, group: str) -> list[JudgeExample]:
    stale = {(s.lower(), v.lower()) for s, _, v in pair.stale}
    text = pair.second.text
    return [
        JudgeExample(
            text, f.value, f.attribute, (f.subject.lower(), f.value.lower()) in stale, group, PAIR
        )
        for f in pair.first.facts
        if f.kind != "none" and named_at(text, f.value) is not None
    ]


def _in_passing(text: str, values: list[str], most: int, seed: str) -> list[str]:
    """Up to ``most`` runs of one to three words of ``text`` that begin and end with a content
    word and overlap none of ``values``, drawn with the line's own seed."""
    taken = [where for v in values if (where := named_at(text, v))]
    words = [(m.start(), m.end()) for m in _WORD.finditer(text)]
    runs = []
    for i in range(len(words)):
        for j in range(i, min(i + 3, len(words))):
            start, end = words[i][0], words[j][1]
            if any(start < b and end > a for a, b in taken):
                continue
            if _content(text, words[i]) and _content(text, words[j]):
                runs.append(text[start:end])
    return random.Random(seed).sample(runs, min(most, len(runs)))


def _content(text: str, word: tuple[int, int]) -> bool:
    return bool(content_tokens(text[word[0] : word[1]]))


def judge_inputs(
    encoder: Encoder, head: ReaderHead, examples: list[JudgeExample]
) -> tuple[np.ndarray, list[JudgeExample]]:
    """The judge features of the examples whose value the encoder sees (a text cut at the
    encoder's length may lose it), each text read as the daemon reads it; and those examples."""
    rows, kept = [], []
    read: dict[str, tuple[np.ndarray, list[tuple[int, int]]]] = {}
    for item in tqdm(examples, desc="examples", unit="example", file=sys.stderr):
        if item.text not in read:
            read = {item.text: encoder.reading(item.text)}  # a text's examples come together
        states, offsets = read[item.text]
        where = named_at(item.text, item.value) or (0, 0)
        row = value_features(head, item.text, states, offsets, where, item.attribute)
        if row is not None:
            rows.append(row)
            kept.append(item)
    if not rows:
        return np.zeros((0, 0), dtype=np.float32), []
    return np.stack(rows), kept
