"""Stored values a turn names again, and the judge's say on whether the turn ends them.

The reader reads what a turn states. A turn may also name a value the user's memory holds
without the reader reading a fact of it ("Lachlan and I split up in March", "I ditched LastPass
after the breach"): :func:`named_in` lists, on the encoder worker, every run of up to three
words of the turn as the entity ids a fact's value would have; on the writer,
:meth:`Named.endings` finds the current facts whose value is one of them, and for each the
reader did not read in this turn, asks the judge (:mod:`memoryd.reader.judge`) whether the turn
says it is over. Each it says is over at or above its threshold becomes an ending of that fact,
stored closed like the reader's endings, which consolidation folds like any other::

    stored:  partner: Lachlan
    turn:    "righto, Lachlan and I split up in March, he's gone back to Toowoomba"
    → Fact(user, partner, Lachlan, kind="end", parse=JUDGE) closes it (the judge: 0.61)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from memoryd.memory.build import memory_id, sentence_of
from memoryd.memory.consolidate import MemoryView
from memoryd.memory.extract import entity_ids
from memoryd.models import Fact, Parse, Turn
from memoryd.reader import FactJudge, Heard, Slots, Span, same_thing
from memoryd.text import content_tokens

__all__ = ["Named", "named_in"]


@dataclass(frozen=True)
class Named:
    """The ids a stored value named in the turn would have (each with the first span naming
    it), the judge, and how to hear the turn (its head states, kept from the read, or read
    again when a reread keeps no states for thousands of turns)."""

    spans: dict[str, Span]
    judge: FactJudge
    hear: Callable[[], Heard]

    def endings(self, turn: Turn, view: MemoryView, said: Sequence[Fact]) -> list[Fact]:
        """Endings of the current facts this turn names and the judge hears as over; ``said``
        are the facts read from the turn and the stored ones it changed: a value the reader
        read, in any attribute, stands as it read it (on LoCoMo, judging values the reader had
        read in another attribute ended 41 facts, most of them wrongly: docs/decisions.md)."""
        out: list[Fact] = []
        heard: Heard | None = None
        for old in view.current_facts_named(list(self.spans)):
            if old.negated or turn.turn_id in (old.sources or [old.turn_id]):
                continue
            if any(f.id == old.id or same_thing(f.object.name, old.object.name) for f in said):
                continue
            heard = heard or self.hear()
            p = self.judge.over(heard, self.spans[old.object.id], old.relation)
            if p >= self.judge.threshold:
                out.append(_ending(turn, old, self.spans[old.object.id], p))
        return out


def named_in(heard: Heard, judge: FactJudge, slots: Slots) -> Named:
    """Every id a fact's value named by a run of the turn's words would have (runs that begin
    and end with a content word: "Dev", "Water Corp", "Bank of Ireland", not "and I"); the
    turn is heard as ``heard``."""
    spans: dict[str, Span] = {}
    kinds = slots.value_types()
    for span in heard.candidates:
        words = span.text.split()
        if _content(words[0]) and _content(words[-1]):
            for key in entity_ids(span.text, kinds):
                spans.setdefault(key, span)
    return Named(spans, judge, lambda: heard)


def _content(word: str) -> bool:
    return bool(content_tokens(word))


def _ending(turn: Turn, old: Fact, span: Span, p: float) -> Fact:
    """The ending of ``old`` the judge heard in ``turn`` (its id names both: a reread, whose
    facts have ids of their own, makes endings of its own)."""
    return Fact(
        id=memory_id("fact", turn.turn_id, "judged", old.id),
        turn_id=turn.turn_id,
        relation=old.relation,
        object=old.object,
        text=sentence_of(turn.text, span.start, span.end),
        subject=old.subject,
        confidence=round(p, 3),
        valid_from=turn.ts,
        valid_to=turn.ts,
        sources=[turn.turn_id],
        parse=Parse.JUDGE,
        kind="end",
        label=old.label,
    )
