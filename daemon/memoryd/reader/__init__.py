"""The fact reader: the facts a turn states, read from the token states of the encoder pass
that embeds it (a small numpy head trained on the written corpus, ``models/fact_corpus``), and
its judge: whether a turn that names a stored value again says it is over.

    reader = FactReader.load(Path("models"))
    reader.read(text, states, offsets) → [ReadFact(subject=None, attribute="manager",
                                                  value="Marcus Lee", kind="change", ...)]
"""

from memoryd.reader.head import READ_KINDS
from memoryd.reader.judge import FactJudge, Heard
from memoryd.reader.judge_corpus import (
    LINE,
    PAIR,
    PASSING,
    JudgeExample,
    judge_examples,
    judge_inputs,
)
from memoryd.reader.reader import FactReader, ReadFact
from memoryd.reader.score import LEVELS, ReaderScore, same_thing
from memoryd.reader.slots import Slots, subject_name
from memoryd.reader.spans import Span, normalise

__all__ = [
    "LEVELS",
    "LINE",
    "PAIR",
    "PASSING",
    "READ_KINDS",
    "FactJudge",
    "FactReader",
    "Heard",
    "JudgeExample",
    "ReadFact",
    "ReaderScore",
    "Slots",
    "Span",
    "judge_examples",
    "judge_inputs",
    "normalise",
    "same_thing",
    "subject_name",
]
