"""One user's self-enhancing router: the head the user routes with, the LLM labels of their
deferred turns, and their training rounds (the loop itself: :mod:`memoryd.router.enhance`).

The head is loaded from the journal file on first use and replaced when a round is accepted or
rolled back; rounds of one user run one at a time (the labelling job and an explicit request may
both ask for one). A labelled turn is re-routed through the ingest pipeline
(:func:`memoryd.ingest.relabelled`) and journaled with its pool row in one transaction.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryd.errors import LLMError, TurnNotFoundError
from memoryd.ingest import relabelled
from memoryd.router import RouteDecision, SelfEnhancingRouter, UserHead, in_pool_holdout, retry_at
from memoryd.store import RoundRecord, Routing

if TYPE_CHECKING:
    from memoryd.workspace import Workspace

__all__ = ["LABEL_BATCH", "LABEL_OUTCOMES", "UserRouter"]

log = logging.getLogger(__name__)

LABEL_BATCH = 16  # deferred turns labelled per user per run of the labelling job
LABEL_OUTCOMES = ("labelled", "retried", "failed", "rounds")  # what labelling reports


class UserRouter:
    """The router of ``ws`` on the shared ``loop``. Call from any thread."""

    def __init__(self, ws: Workspace, loop: SelfEnhancingRouter) -> None:
        self.ws = ws
        self.loop = loop
        self._head: UserHead | None = None
        self._lock = threading.Lock()  # guards _head
        self._rounds = threading.Lock()  # one training round or rollback at a time

    @property
    def head(self) -> UserHead:
        with self._lock:
            if self._head is None:
                self._head = self.loop.load_head(self.ws.router_state)
            return self._head

    def route(self, vector: np.ndarray, text: str) -> tuple[RouteDecision, Routing]:
        return self.loop.route(self.head, vector, text)

    def status(self) -> dict[str, Any]:
        return self.loop.status(self.head, self.ws.router_state)

    # -- labelling ---------------------------------------------------------------------------

    def label_due(self, now: float, timeout: float | None) -> Counter[str]:
        """Label the user's due deferred turns (one batch), then run a training round if one
        is due. Returns the outcomes (:data:`LABEL_OUTCOMES`)."""
        counts: Counter[str] = Counter()
        for due in self.ws.router_state.due_labels(now, LABEL_BATCH):
            counts[self._label_one(due.turn_id, due.attempts, now, timeout)] += 1
        if self.train_if_due() is not None:
            counts["rounds"] += 1
        return counts

    def label_all(self, timeout: float | None) -> Counter[str]:
        """Label every queued turn now, waiting out retry backoffs."""
        totals: Counter[str] = Counter()
        while (due := self.ws.router_state.next_due()) is not None:
            time.sleep(max(0.0, due - time.time()))
            totals.update(self.label_due(time.time(), timeout))
        return totals

    def _label_one(self, turn_id: str, attempts: int, now: float, timeout: float | None) -> str:
        """Label one queued turn; returns "labelled", "retried" or "failed"."""
        ws = self.ws
        found = ws.journal.turn(turn_id)
        if found is None:
            raise TurnNotFoundError(ws.user_id, turn_id)
        turn = found[0]
        try:
            labels = self.loop.label(turn.text, timeout=timeout)
        except LLMError as exc:
            attempts += 1
            again = retry_at(self.loop.settings, attempts, now)
            error = str(exc)
            ws.writer.call(lambda: ws.router_state.label_failed(turn_id, attempts, error, again))
            log.warning(
                "user %s: labelling turn %s failed (attempt %d%s): %s",
                ws.user_id,
                turn_id,
                attempts,
                "" if again else ", giving up",
                exc,
            )
            return "retried" if again else "failed"

        facts, _ = ws.shared.read_stored(turn)

        def write() -> None:
            relabel = relabelled(
                turn,
                labels,
                facts,
                ws.journal,
                ws.entities,
                ws.shared.reader.slots,
                source=getattr(self.loop.llm, "name", "llm"),
                holdout=in_pool_holdout(turn.turn_id),
                after_round=self.head.completed,
            )
            ws.writes.relabel(relabel)

        ws.writer.call(write)
        return "labelled"

    # -- rounds ------------------------------------------------------------------------------

    def train_if_due(self) -> RoundRecord | None:
        """A training round when ``router.retrain_every`` labels arrived since the last."""
        if not self.loop.round_due(self.head, self.ws.router_state):
            return None
        return self.train()

    def train(self) -> RoundRecord:
        """Run a training round now, whatever the pool size; the new head is used only if
        validation accepts it."""
        with self._rounds:
            ws = self.ws
            record, head = self.loop.train(self.head, ws.router_state, ws.journal, ws.writer.call)
            self._set(head)
        log.info(
            "user %s: training round %d %s (macro-F1 %.3f -> %.3f, pool %d)",
            ws.user_id,
            record.round,
            "accepted" if record.accepted else "rejected",
            record.report["f1_before"]["macro"],
            record.report["f1_after"]["macro"],
            record.report["pool"],
        )
        return record

    def rollback(self) -> dict[str, Any]:
        """Route with the head of the accepted round before the current head's again."""
        with self._rounds:
            report, head = self.loop.rollback(self.head, self.ws.router_state, self.ws.writer.call)
            self._set(head)
        log.info(
            "user %s: router rolled back from round %d to %d",
            self.ws.user_id,
            report["from_round"],
            report["to_round"],
        )
        return report

    def _set(self, head: UserHead) -> None:
        with self._lock:
            self._head = head
