"""Fact reader eval: the facts the reader reads of annotated lines against their annotation.

Lines are the fact corpus's (``models/fact_corpus/LABELS.md``): a file of single lines, a file
of change pairs (both traces), or a directory of such files (the dev split,
``models/fact_corpus/dev``). Each text goes through the encoder and the reader as the daemon
reads a turn; :class:`memoryd.reader.ReaderScore` compares the facts about now (``none`` facts
are left out on both sides) at three levels (value, fact, full: with the kind), per attribute,
per kind and per domain. The corpus's training split measured this way shows the fit, not how
well the reader does on new text.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memoryd.encoder import Encoder
from memoryd.errors import InvalidInputError
from memoryd.fact_corpus import CorpusError, LabelledTurn, read_pairs, read_turns
from memoryd.reader import LEVELS, FactReader, ReaderScore

__all__ = ["ReaderReport", "load_labelled", "run_reader"]


def load_labelled(path: Path, reader: FactReader) -> list[LabelledTurn]:
    """The annotated lines of ``path`` (a file or a directory of ``*.jsonl``)."""
    path = Path(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    inventory = reader.slots.inventory
    turns: list[LabelledTurn] = []
    try:
        for file in files:
            if '"first"' in file.read_text(encoding="utf-8")[:400]:
                for pair in read_pairs(file, inventory):
                    for n, t in enumerate((pair.first, pair.second), 1):
                        turns.append(
                            LabelledTurn(f"{pair.id}/{n}", t.role, pair.domain, t.text, t.facts)
                        )
            else:
                turns.extend(read_turns(file, inventory))
    except CorpusError as exc:
        raise InvalidInputError(str(exc)) from exc
    if not turns:
        raise InvalidInputError(f"{path}: no annotated lines")
    return turns


@dataclass
class ReaderReport:
    path: Path
    lines: int
    overall: ReaderScore
    by_domain: dict[str, ReaderScore] = field(default_factory=dict)

    def format(self) -> str:
        p = [self.overall.prf(level) for level in LEVELS]
        out = [
            f"Fact reader eval: {self.path} ({self.lines} lines, {self.overall.gold} facts about "
            f"now, {self.overall.predicted} read)",
            "",
            f"{'level':8} {'precision':>9} {'recall':>7} {'F1':>6}",
            *(
                f"{lv:8} {a:9.3f} {b:7.3f} {c:6.3f}"
                for lv, (a, b, c) in zip(LEVELS, p, strict=True)
            ),
            "",
            f"{'domain':16} {'facts':>5} {'value F1':>8} {'fact F1':>8} {'full F1':>8}",
        ]
        for domain, score in sorted(self.by_domain.items()):
            cells = " ".join(f"{score.prf(lv)[2]:8.3f}" for lv in LEVELS)
            out.append(f"{domain[:16]:16} {score.gold:5d} {cells}")
        out += _groups("kind", self.overall.by_kind)
        out += _confusion(self.overall)
        out += _groups("attribute", self.overall.by_attribute)
        return "\n".join(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "lines": self.lines,
            "levels": {
                lv: dict(zip(("p", "r", "f1"), self.overall.prf(lv), strict=True)) for lv in LEVELS
            },
            "kinds": {k: dict(c) for k, c in self.overall.by_kind.items()},
            "kind_confusion": {f"{g}->{r}": n for (g, r), n in self.overall.kinds.items()},
            "attributes": {k: dict(c) for k, c in self.overall.by_attribute.items()},
        }


def _groups(name: str, groups: dict[str, Any]) -> list[str]:
    out = ["", f"{name:20} {'gold':>5} {'read':>5} {'precision':>9} {'recall':>7} {'F1':>6}"]
    for key, counts in sorted(groups.items(), key=lambda kv: -kv[1]["gold"]):
        p, r, f = ReaderScore.group_prf(counts)
        out.append(
            f"{key[:20]:20} {counts['gold']:5d} {counts['predicted']:5d} {p:9.3f} {r:7.3f} {f:6.3f}"
        )
    return out


def _confusion(score: ReaderScore) -> list[str]:
    """Gold kind (rows) against the kind read (columns), for facts whose subject, attribute
    and value were read right."""
    kinds = ("state", "change", "add", "end")
    out = [
        "",
        "kind read for the facts read right (rows: annotated)",
        " " * 8 + "".join(f"{k:>8}" for k in kinds),
    ]
    for gold in kinds:
        out.append(f"{gold:8}" + "".join(f"{score.kinds[(gold, got)]:8d}" for got in kinds))
    return out


def run_reader(encoder: Encoder, reader: FactReader, path: Path) -> ReaderReport:
    """Read every annotated line of ``path`` and score the facts (see the module docstring)."""
    turns = load_labelled(path, reader)
    report = ReaderReport(Path(path), len(turns), ReaderScore())
    for turn in tqdm(turns, desc="lines", unit="line", file=sys.stderr):
        states, offsets = encoder.reading(turn.text)
        got = reader.read(turn.text, states, offsets)
        report.overall.add(got, turn.facts)
        report.by_domain.setdefault(turn.domain, ReaderScore()).add(got, turn.facts)
    return report
