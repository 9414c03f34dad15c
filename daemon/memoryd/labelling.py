"""The labelling job: which users have turns waiting for the LLM labeller, and one run over them.

A user enters the set when an ingest defers a turn (or recovery finds queued ones) and leaves it
when nothing of theirs is pending, or when the user is deleted: the set never holds a user with
no queued work. One run labels a batch of each user's due turns and runs the training round a
user's new labels make due (:class:`memoryd.workspace.routing.UserRouter`); one user's broken
store does not stall the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from memoryd.errors import MemorydError
from memoryd.registry import Registry
from memoryd.workspace import LABEL_OUTCOMES

__all__ = ["Labelling"]

log = logging.getLogger(__name__)


class Labelling:
    """The users with deferred turns, and the job that labels them. ``exists`` tells whether a
    user still has data; ``timeout`` bounds one LLM call (``llm.timeout``)."""

    def __init__(self, users: Registry, exists: Callable[[str], bool], timeout: float) -> None:
        self.users = users
        self.exists = exists
        self.timeout = timeout
        self._pending: set[str] = set()
        self._lock = threading.Lock()

    def add(self, user_id: str) -> None:
        with self._lock:
            self._pending.add(user_id)

    def discard(self, user_id: str) -> None:
        with self._lock:
            self._pending.discard(user_id)

    def pending(self) -> list[str]:
        with self._lock:
            return sorted(self._pending)

    def run(self) -> dict[str, int]:
        """Label the due turns of every pending user; the totals of :data:`LABEL_OUTCOMES`."""
        totals: Counter[str] = Counter()
        for user_id in self.pending():
            if not self.exists(user_id):
                self.discard(user_id)
                continue
            try:
                with self.users.lease(user_id) as ws:
                    totals.update(ws.router.label_due(time.time(), self.timeout))
                    done = not ws.has_deferred
            except MemorydError:  # one user's broken store must not stall the others
                log.exception("user %s: labelling deferred turns failed", user_id)
                continue
            if done:
                self.discard(user_id)
        return {key: totals[key] for key in LABEL_OUTCOMES}
