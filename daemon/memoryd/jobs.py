"""Background jobs, off the hot path, on an APScheduler thread pool.

- ``label_deferred`` (every ``router.drain_interval`` s, only with an LLM): labels the turns the
  router deferred, re-routes them, and runs a user's training round when one is due.
- ``abstract`` (every ``memory.abstract_interval`` s, only with an LLM): runs the abstraction
  operators (facts and rules from new episodes) for the open users.
- ``expire_tasks`` (every ``memory.maintenance_interval`` s): expires the open users' pending
  tasks that are ``memory.expire_after`` seconds past due.
- ``reshuffle`` (every ``tiers.reshuffle_interval`` s): re-scores the open users' active
  records and re-places them in tiers 1-3.
- ``importance`` (every ``tiers.importance_interval`` s, only with an LLM): replaces the
  heuristic importance of a batch of each open user's records with the LLM's.
- ``save_vectors`` (every minute): persists the vector indexes that changed, checkpoints the
  graphs written since the last run (the engine holds memory for its WAL until then) and
  hands the heap's free memory back to the kernel.

Each job runs one instance at a time (a run still going when the next is due is skipped, not
queued), and a failing run is logged with its traceback and tried again at the next interval.

    jobs = Jobs(service, config)
    jobs.start()
    ...
    jobs.shutdown()   # waits for a running job to finish
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from memoryd.config import Config
from memoryd.service import MemoryService

log = logging.getLogger(__name__)

SAVE_INTERVAL_S = 60.0


class Jobs:
    """The daemon's scheduler. ``start`` after recovery began; ``shutdown`` before closing."""

    def __init__(self, service: MemoryService, config: Config) -> None:
        self.service = service
        self.scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(2)},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None},
            timezone="UTC",
        )
        if service.llm is not None:
            self._every(config.router.drain_interval, "label_deferred", self._label_deferred)
            self._every(config.memory.abstract_interval, "abstract", self._abstract)
            self._every(
                config.tiers.importance_interval, "importance", service.score_importance_open
            )
        self._every(config.tiers.reshuffle_interval, "reshuffle", service.reshuffle_open)
        self._every(config.memory.maintenance_interval, "expire_tasks", service.expire_tasks)
        self._every(SAVE_INTERVAL_S, "save_vectors", service.save_all)

    def _every(self, seconds: float, name: str, fn: Callable[[], Any]) -> None:
        self.scheduler.add_job(_logged(name, fn), "interval", seconds=seconds, id=name, name=name)

    def _label_deferred(self) -> None:
        counts = self.service.label_deferred()
        if any(counts.values()):
            log.info(
                "labelling job: %d labelled, %d to retry, %d given up, %d training rounds",
                counts["labelled"],
                counts["retried"],
                counts["failed"],
                counts["rounds"],
            )

    def _abstract(self) -> None:
        counts = self.service.abstract_pending()
        if any(counts.values()):
            log.info(
                "abstraction job: %d fact batch(es), %d rule batch(es)",
                counts.get("sem_batches", 0),
                counts.get("proc_batches", 0),
            )

    def start(self) -> None:
        self.scheduler.start()
        log.info("background jobs started: %s", ", ".join(j.id for j in self.scheduler.get_jobs()))

    def shutdown(self) -> None:
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)


def _logged(name: str, fn: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception:
            log.exception("background job %s failed; it runs again at its next interval", name)

    return run
