"""One user's memory tiers: recall counting, the persona, reshuffles and LLM importance.

The HMO arithmetic lives in :mod:`memoryd.tiers`; this holds the user's state around it:

- recalls a query made, counted later on the writer: retrievals noted while a count is pending
  join it, one transaction (one fsync) for all of them;
- whether a persona rebuild is due: a write that creates, changes or removes a fact asks for one,
  run next on the writer after that write's reply, once for any number of writes queued
  meanwhile (a crash before it leaves the old persona, which the next fact change replaces).
  The current facts' weights are kept between rebuilds (:class:`memoryd.persona.FactWeights`):
  a rebuild reads back only the facts the writes named, or every fact after a write that may
  have changed facts it cannot name (a relabelled turn) and on the first rebuild;
- what the last reshuffle of the background job saw (``reshuffled_at``), so that a quiet user
  costs a read, not a transaction and an fsync every interval.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memoryd.llm import (
    IMPORTANCE_BATCH,
    LLM,
    importance_prompt,
    importance_schema,
    parse_importance,
)
from memoryd.models import Header, ImportanceSource, Memory, MemoryType, memory_type
from memoryd.persona import FactWeights
from memoryd.tiers import record_recall, refresh_persona, reshuffle, status

if TYPE_CHECKING:
    from memoryd.workspace import Workspace

__all__ = ["UserTiers"]

log = logging.getLogger(__name__)

MAX_FACT_UPDATES = 2000  # more changed facts than this are read back as all the facts


class UserTiers:
    """The tiers of ``ws`` (see the module docstring). Call from any thread."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.config = ws.config.tiers
        self._recalls: list[tuple[list[int], datetime]] = []
        self._persona_due = False
        self._changed_facts: set[str] | None = set()  # None: any fact may have changed
        self._facts: FactWeights | None = None  # read and kept on the writer
        self._pending_lock = threading.Lock()  # guards _recalls, _persona_due, _changed_facts
        self.reshuffled_at: tuple[int, int, int] | None = None  # headers.activity() then

    # -- recalls and the persona (queued on the writer) --------------------------------------

    def note_recall(self, nums: list[int], at: datetime) -> None:
        """Count a retrieval of ``nums`` later, on the writer, without waiting for it."""
        with self._pending_lock:
            self._recalls.append((nums, at))
            if len(self._recalls) > 1:
                return
        self.ws.writer.submit(self._apply_recalls)

    def _apply_recalls(self) -> None:
        with self._pending_lock:
            pending, self._recalls = self._recalls, []
        if pending:
            nums = [n for batch, _ in pending for n in batch]
            at = max(when for _, when in pending)
            record_recall(self.ws.journal, self.ws.headers, nums, self.config, at)

    def facts_changed(self, memories: Sequence[Memory], always: bool = False) -> None:
        """A write touched ``memories``: rebuild the persona next if any is a fact (``always``:
        the write may have changed facts it does not name)."""
        facts = {m.id for m in memories if memory_type(m) is MemoryType.SEMANTIC}
        if not always and not facts:
            return
        with self._pending_lock:
            if always or self._changed_facts is None:
                self._changed_facts = None
            else:
                self._changed_facts |= facts
            if self._persona_due:
                return
            self._persona_due = True
        self.ws.writer.submit(self._refresh_persona)

    def _refresh_persona(self) -> None:
        with self._pending_lock:
            self._persona_due = False
            changed, self._changed_facts = self._changed_facts, set()
        journal = self.ws.journal
        if self._facts is None or changed is None or len(changed) > MAX_FACT_UPDATES:
            self._facts = FactWeights(journal.fact_weights())
        elif changed:
            self._facts.update(changed, journal.fact_weights(sorted(changed)))
        refresh_persona(journal, self.ws.headers, self.config, facts=self._facts)

    # -- placement ---------------------------------------------------------------------------

    def reshuffle(self, now: datetime | None = None) -> dict[str, Any]:
        """Re-score and re-place the user's active records now (on the writer)."""
        ws = self.ws
        return ws.writer.call(lambda: reshuffle(ws.journal, ws.headers, self.config, now))

    def reshuffle_if_active(self) -> bool:
        """Reshuffle unless nothing a placement depends on changed since the last time this
        ran (the background job); True when it reshuffled."""
        return self.ws.writer.call(self._reshuffle_if_active)

    def _reshuffle_if_active(self) -> bool:
        activity = self.ws.headers.activity()
        if activity == self.reshuffled_at:
            return False
        reshuffle(self.ws.journal, self.ws.headers, self.config)
        self.reshuffled_at = activity
        return True

    def status(self, moves: int = 20) -> dict[str, Any]:
        """Sizes, persona and drift, the last runs and the newest ``moves`` moves (read on the
        writer: after the persona updates queued before it)."""
        return self.ws.writer.call(lambda: status(self.ws.headers, self.config, moves))

    def put_live_headers(self, memories: dict[int, Memory]) -> None:
        """Put each memory's live header (the headers table) on its record, by num."""
        for row in self.ws.headers.rows(nums=list(memories)):
            memories[row.num].header = Header(
                importance=row.importance,
                persona_sim=row.persona_sim or 0.0,
                recall_count=row.recall_count,
                last_access=row.last_access,
                tier=int(row.tier),
                importance_by=row.importance_by.value,
            )

    # -- importance --------------------------------------------------------------------------

    def score_importance(self, llm: LLM, timeout: float, limit: int = IMPORTANCE_BATCH) -> int:
        """Ask the LLM for the importance of up to ``limit`` records still rated by the
        heuristic (active tiers and newest first); returns how many it scored."""
        ws = self.ws
        nums = ws.headers.unscored_importance(limit)
        stored = ws.journal.memories_by_num(nums)
        ordered = [n for n in nums if n in stored]
        if not ordered:
            return 0
        texts = [stored[n].memory.text for n in ordered]
        answer = llm.generate_json(
            importance_prompt(texts), importance_schema(len(texts)), timeout=timeout
        )
        try:
            scores = parse_importance(answer, len(texts))
        except ValueError as exc:
            log.warning("user %s: importance answer unusable: %s", ws.user_id, exc)
            return 0
        by_num = {ordered[i]: float(v) for i, v in scores.items()}
        return ws.writer.call(lambda: ws.headers.set_importance(by_num, ImportanceSource.LLM))
