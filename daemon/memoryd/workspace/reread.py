"""Reading a user's facts again: the upgrade path for a store written by older fact readers
(the regex extractors before the learned reader, or an older reader's head).

:meth:`FactReread.run` reads every journaled user and log turn with the current reader, in
journal order, folds the facts among themselves as ingest would have (a later value replacing
an earlier one in its slot), and journals the result as **one** change (reason
:data:`REREAD`): the facts the reader made before (origin ``extractor``) that are current are
closed (``superseded_by`` ``reread:<n>``, the reread's number), the new facts are created (ids
ending ``_r<n>``). Facts an LLM derived or a client made are left alone. The change is one
journal transaction, so a kill in the middle leaves the old facts current; the old facts stay
in the history, and :meth:`FactReread.undo` reverses the last reread in one change (the facts
it closed current again, the facts it made closed). The journal's cursors count the rereads
made and undone.

The turns are encoded and read off the writer (the long part: one encoder pass per turn); on
the writer, turns journaled meanwhile are read too, then the fold and the commit run, so no
turn is missed and ingest waits only for the commit. A second reread of the same user while
one runs is a :class:`ConflictError`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memoryd.errors import ConflictError
from memoryd.ingest import build, fold
from memoryd.memory import Named, StagedView
from memoryd.models import Fact, Memory, Origin, Role, Turn
from memoryd.store import MemoryChange, NewMemory

if TYPE_CHECKING:
    from memoryd.workspace import Workspace

__all__ = ["REREAD", "REREAD_UNDO", "FactReread", "RereadReport"]

log = logging.getLogger(__name__)

REREAD = "reread"
"""The reason of a reread's journal entry, and the ``superseded_by`` of the facts it closed."""
REREAD_UNDO = "reread_undo"
PAGE = 500
Read = tuple[Turn, list[Memory], Named | None]
"""A turn read again: its facts as built, and the stored values it may name."""


@dataclass(frozen=True)
class RereadReport:
    """What a reread (or its undo) did: the turns read, the facts it closed and made."""

    user_id: str
    turns: int
    closed: int
    created: int
    current: int
    undo: bool = False


class FactReread:
    """The reread command of ``ws`` (see the module docstring). Call from any thread."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self._running = threading.Lock()

    def run(self, now: datetime) -> RereadReport:
        if not self._running.acquire(blocking=False):
            raise ConflictError(f"a reread of {self.ws.user_id}'s facts is already running")
        try:
            read, last = self._read_after(0)
            return self.ws.writer.call(lambda: self._commit(read, last, now))
        finally:
            self._running.release()

    def _read_after(self, seq: int) -> tuple[list[Read], int]:
        """Each turn journaled after ``seq`` with the facts built from it and the stored values
        it may name, and the last seq."""
        shared, journal = self.ws.shared, self.ws.journal
        out: list[Read] = []
        while page := journal.turns(None, PAGE, after_seq=seq):
            seq = page[-1][0]
            for _, turn in page:
                if turn.role is not Role.ASSISTANT:
                    facts, named = shared.read_stored(turn)
                    built = build(turn, facts, shared.reader.slots)
                    out.append((turn, [m for m in built if isinstance(m, Fact)], named))
        return out, seq

    def _commit(self, read: list[Read], last: int, now: datetime) -> RereadReport:
        more, _ = self._read_after(last)  # journaled while the first part was read
        generation = self.ws.journal.cursor(REREAD) + 1
        view = StagedView()
        slots = self.ws.shared.reader.slots
        created: dict[str, tuple[Memory, Turn]] = {}
        for turn, facts, named in [*read, *more]:
            ids = [_reread_id(m, generation) for m in facts]
            folded = fold(turn, ids, view, self.ws.entities, slots, named)
            view.stage([*folded.memories, *folded.updates])
            for m in folded.memories:
                created[m.id] = (m, turn)
            for m in folded.updates:
                created[m.id] = (m, created[m.id][1])
        mark = f"{REREAD}:{generation}"
        old: list[Memory] = [
            dataclasses.replace(s.memory, valid_to=now, superseded_by=mark)
            for s in self.ws.journal.facts()
            if isinstance(s.memory, Fact) and s.memory.origin is Origin.EXTRACTOR
        ]
        new = [NewMemory(m, t.session_id, t.ts) for m, t in created.values()]
        cursor = (REREAD, generation)
        change = MemoryChange(REREAD, self.ws.user_id, created=new, updates=old, cursor=cursor)
        self.ws.writes.change(change)
        current = sum(1 for m, _ in created.values() if getattr(m, "valid_to", 0) is None)
        report = RereadReport(self.ws.user_id, len(read) + len(more), len(old), len(new), current)
        log.info(
            "user %s: facts reread %d from %d turns: %d closed, %d made, %d current",
            report.user_id,
            generation,
            report.turns,
            report.closed,
            report.created,
            report.current,
        )
        return report

    def undo(self, now: datetime) -> RereadReport:
        """Reverse the last reread: the facts it closed current again, those it made (and
        that are still current) closed. ConflictError when no reread is on record."""

        def write() -> RereadReport:
            journal = self.ws.journal
            generation = journal.cursor(REREAD)
            if generation == 0 or journal.cursor(REREAD_UNDO) >= generation:
                raise ConflictError(f"no reread of {self.ws.user_id}'s facts to undo")
            mark, made = f"{REREAD}:{generation}", f"_r{generation}"
            facts = [s.memory for s in journal.facts(history=True) if isinstance(s.memory, Fact)]
            reopen = [
                dataclasses.replace(f, valid_to=None, superseded_by=None)
                for f in facts
                if f.superseded_by == mark
            ]
            close = [
                dataclasses.replace(f, valid_to=now, superseded_by=REREAD_UNDO)
                for f in facts
                if f.id.endswith(made) and f.valid_to is None
            ]
            updates: list[Memory] = [*reopen, *close]
            cursor = (REREAD_UNDO, generation)
            self.ws.writes.change(
                MemoryChange(REREAD_UNDO, self.ws.user_id, updates=updates, cursor=cursor)
            )
            log.info(
                "user %s: facts reread %d undone: %d current again, %d closed",
                self.ws.user_id,
                generation,
                len(reopen),
                len(close),
            )
            return RereadReport(self.ws.user_id, 0, len(close), 0, len(reopen), undo=True)

        return self.ws.writer.call(write)


def _reread_id(memory: Memory, generation: int) -> Memory:
    """A reread fact's id differs from every earlier reading's (which stay in the history)."""
    return dataclasses.replace(memory, id=f"{memory.id}_r{generation}")
