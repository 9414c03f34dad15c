"""The self-enhancement loop of HGP §3.1, per user: gate, LLM labelling, training rounds.

    loop = SelfEnhancingRouter(seed_head, LoopSettings.from_config(config), model_dir, llm)
    decision, routing = loop.route(user_id, journal, vec, text)   # on ingest
    labels = loop.label(text)                                     # background job, may raise
    loop.train_if_due(user_id, journal, write)                    # background job

- **Gate.** A turn whose calibrated confidence ``s(x)`` is below ``τ_t`` (``t`` = the user's
  completed training rounds, accepted or not) is *low confidence*. With an LLM it is *deferred*:
  stored now under the classifier's labels and queued in the journal for labelling. Without
  one it is only flagged.
- **Labelling.** The LLM answers a JSON-schema-constrained prompt with labels only. The caller
  re-routes the turn under them (its memories move to the new types) and the label joins the
  user's pool, both in one journal transaction.
- **Rounds.** Every ``retrain_every`` new pool labels a round trains a candidate on the seed's
  training split plus the pool's, validates it against the current head (seed held-out + pool
  held-out) and journals the result; an accepted head is used from then on, the previous one
  stays in the journal for :meth:`SelfEnhancingRouter.rollback`.

Heads are per user; a user who has completed no accepted round routes with the shipped head.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memoryd.config import Config
from memoryd.errors import ConflictError
from memoryd.llm import LLM
from memoryd.llm.prompts import LABEL_SCHEMA, label_prompt, parse_labels
from memoryd.memory.models import Label, RoutedBy
from memoryd.router.head import RouterHead
from memoryd.router.router import RouteDecision, Router, deferral_threshold, label_matrix
from memoryd.router.trainer import Pool, SeedSet, train_round
from memoryd.store.journal import Journal, RoundKind, RoundRecord, Routing

__all__ = ["LoopSettings", "SelfEnhancingRouter", "UserHead"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Write = Callable[[Callable[[], T]], T]
"""Runs a journal write on the user's writer thread (``Workspace.writer.call``)."""

RECENT_ROUNDS = 10


@dataclass(frozen=True)
class LoopSettings:
    """The loop's settings (``router.*`` in the config)."""

    threshold: float = 0.5
    tau0: float = 0.90
    beta: float = 0.05
    tau_min: float = 0.50
    retrain_every: int = 200
    max_attempts: int = 3
    retry_backoff: float = 5.0

    @classmethod
    def from_config(cls, config: Config) -> LoopSettings:
        return cls(
            threshold=config.router_threshold,
            tau0=config.router_tau0,
            beta=config.router_beta,
            tau_min=config.router_tau_min,
            retrain_every=config.router_retrain_every,
            max_attempts=config.router_max_attempts,
            retry_backoff=config.router_retry_backoff,
        )

    def tau(self, rounds: int) -> float:
        return deferral_threshold(rounds, self.tau0, self.beta, self.tau_min)

    def retry_at(self, attempts: int, now: float) -> float | None:
        """When to try again after ``attempts`` failed attempts; None: give up."""
        if attempts >= self.max_attempts:
            return None
        return now + self.retry_backoff * 2 ** (attempts - 1)


@dataclass(frozen=True)
class UserHead:
    """The head a user routes with: ``round`` is the training round that produced it (0: the
    shipped head) and ``completed`` the number of training rounds run (``t`` of ``τ_t``)."""

    head: RouterHead
    round: int
    completed: int


class SelfEnhancingRouter:
    """Per-user routing heads and the loop that improves them. Thread-safe.

    Args:
        seed_head: the shipped round-0 head.
        settings: gate, retry and retraining settings.
        model_dir: where ``router_seed.npz`` is (read on the first training round).
        llm: the labeller; None turns deferral off.
    """

    def __init__(
        self,
        seed_head: RouterHead,
        settings: LoopSettings,
        model_dir: Path,
        llm: LLM | None = None,
    ) -> None:
        self.seed_head = seed_head
        self.settings = settings
        self.model_dir = model_dir
        self.llm = llm
        self._heads: dict[str, UserHead] = {}
        self._lock = threading.Lock()
        self._training: dict[str, threading.Lock] = {}
        self._seed: SeedSet | None = None

    # -- heads -------------------------------------------------------------------------------

    def user_head(self, user_id: str, journal: Journal) -> UserHead:
        with self._lock:
            cached = self._heads.get(user_id)
        if cached is not None:
            return cached
        records = journal.rounds()
        completed = sum(1 for r in records if r.kind is RoundKind.TRAIN)
        state = UserHead(self.seed_head, 0, completed)
        current = [r for r in records if r.accepted]
        if current:
            origin = _origin(current[-1])
            blob = journal.head(current[-1].round)
            if blob is not None:
                state = UserHead(RouterHead.from_bytes(blob, f"round {origin}"), origin, completed)
        with self._lock:
            return self._heads.setdefault(user_id, state)

    def forget(self, user_id: str) -> None:
        """Drop the cached head (the user was deleted)."""
        with self._lock:
            self._heads.pop(user_id, None)

    def _set(self, user_id: str, state: UserHead) -> None:
        with self._lock:
            self._heads[user_id] = state

    # -- hot path ----------------------------------------------------------------------------

    def route(
        self, user_id: str, journal: Journal, vec: np.ndarray, text: str
    ) -> tuple[RouteDecision, Routing]:
        """Route one turn with the user's head and apply the gate."""
        state = self.user_head(user_id, journal)
        decision = Router(state.head, self.settings.threshold).route(vec, text)
        low = decision.confidence < self.settings.tau(state.completed)
        deferred = low and self.llm is not None
        if deferred:
            decision = RouteDecision(
                decision.labels, decision.confidence, decision.scores, RoutedBy.DEFERRED
            )
        return decision, Routing(state.completed, low, deferred)

    # -- background --------------------------------------------------------------------------

    def label(self, text: str, timeout: float | None = None) -> tuple[Label, ...]:
        """Ask the LLM for the labels of ``text``; raises :class:`memoryd.errors.LLMError`."""
        if self.llm is None:
            raise ConflictError("no LLM is configured (llm.backend = none)")
        answer = self.llm.generate_json(label_prompt(text), LABEL_SCHEMA, timeout=timeout)
        return tuple(Label(name) for name in parse_labels(answer))

    def seed(self) -> SeedSet:
        if self._seed is None:
            self._seed = SeedSet.load(self.model_dir)
        return self._seed

    def train_if_due(self, user_id: str, journal: Journal, write: Write) -> RoundRecord | None:
        """Run a training round when ``retrain_every`` labels arrived since the last one."""
        state = self.user_head(user_id, journal)
        _, new = journal.pool_counts(state.completed)
        if new < self.settings.retrain_every:
            return None
        return self.train(user_id, journal, write)

    def train(self, user_id: str, journal: Journal, write: Write) -> RoundRecord:
        """One training round now (see the module docstring); journaled, accepted or not.

        Rounds of one user run one at a time (the labelling job and an explicit request may
        both ask for one)."""
        with self._round_lock(user_id):
            return self._train(user_id, journal, write)

    def _round_lock(self, user_id: str) -> threading.Lock:
        with self._lock:
            return self._training.setdefault(user_id, threading.Lock())

    def _train(self, user_id: str, journal: Journal, write: Write) -> RoundRecord:
        state = self.user_head(user_id, journal)
        pool = _pool(journal, self.seed().x.shape[1])
        result = train_round(self.seed(), pool, state.head, self.settings.threshold)
        decisions = journal.decisions().get(state.completed, (0, 0, 0))
        report = {
            **result.report(),
            "pool": len(pool),
            "tau": round(self.settings.tau(state.completed), 4),
            "tau_next": round(self.settings.tau(state.completed + 1), 4),
            "decisions": decisions[0],
            "llm_share": round(decisions[1] / decisions[0], 4) if decisions[0] else 0.0,
            "previous_head_round": state.round,
        }
        blob = result.head.to_bytes() if result.accepted else None
        number = write(lambda: journal.record_round(RoundKind.TRAIN, result.accepted, report, blob))
        head, head_round = (result.head, number) if result.accepted else (state.head, state.round)
        self._set(user_id, UserHead(head, head_round, state.completed + 1))
        log.info(
            "user %s: training round %d %s (macro-F1 %.3f -> %.3f, pool %d)",
            user_id,
            number,
            "accepted" if result.accepted else "rejected",
            result.f1_before["macro"],
            result.f1_after["macro"],
            len(pool),
        )
        return journal.rounds()[-1]

    def rollback(self, user_id: str, journal: Journal, write: Write) -> dict[str, Any]:
        """Route with the head of the accepted training round before the current head's
        round again (the shipped head when there is none); journaled as a round of its own."""
        with self._round_lock(user_id):
            return self._rollback(user_id, journal, write)

    def _rollback(self, user_id: str, journal: Journal, write: Write) -> dict[str, Any]:
        state = self.user_head(user_id, journal)
        if state.round == 0:
            raise ConflictError("the user already routes with the shipped head")
        earlier = [
            r.round
            for r in journal.rounds()
            if r.kind is RoundKind.TRAIN and r.accepted and r.round < state.round
        ]
        target = earlier[-1] if earlier else 0
        blob = journal.head(target) if target else self.seed_head.to_bytes()
        assert blob is not None  # an accepted round always stores its head
        report = {"from_round": state.round, "to_round": target}
        write(lambda: journal.record_round(RoundKind.ROLLBACK, True, report, blob))
        head = RouterHead.from_bytes(blob, f"round {target}")
        self._set(user_id, UserHead(head, target, state.completed))
        log.info("user %s: router rolled back from round %d to %d", user_id, state.round, target)
        return report

    # -- reporting ---------------------------------------------------------------------------

    def status(self, user_id: str, journal: Journal) -> dict[str, Any]:
        """What ``GET /v1/users/{user_id}/router`` shows."""
        state = self.user_head(user_id, journal)
        size, new = journal.pool_counts(state.completed)
        rounds = journal.rounds()
        trained = [r for r in rounds if r.kind is RoundKind.TRAIN]
        return {
            "llm": getattr(self.llm, "name", None),
            "deferral": self.llm is not None,
            "round": state.completed,
            "tau": round(self.settings.tau(state.completed), 4),
            "head": {
                "round": state.round,
                "source": "shipped" if state.round == 0 else "trained",
                "temperature": round(state.head.temperature, 4),
            },
            "pool": {"size": size, "new": new, "retrain_every": self.settings.retrain_every},
            "queue": journal.queue_counts(),
            "decisions": [
                {
                    "round": round_,
                    "decisions": total,
                    "deferred": deferred,
                    "low_confidence": low,
                    "llm_share": round(deferred / total, 4) if total else 0.0,
                }
                for round_, (total, deferred, low) in sorted(journal.decisions().items())
            ],
            "last_validation": trained[-1].report if trained else None,
            "rounds": [
                {
                    "round": r.round,
                    "kind": r.kind.value,
                    "accepted": r.accepted,
                    "created_at": r.created_at,
                    "macro_f1_before": r.report.get("f1_before", {}).get("macro"),
                    "macro_f1_after": r.report.get("f1_after", {}).get("macro"),
                }
                for r in rounds[-RECENT_ROUNDS:]
            ],
        }


def _origin(record: RoundRecord) -> int:
    """The training round whose head an accepted round record carries."""
    if record.kind is RoundKind.ROLLBACK:
        return int(record.report["to_round"])
    return record.round


def _pool(journal: Journal, dim: int) -> Pool:
    """The user's pool as arrays, in the order the labels arrived."""
    rows = journal.pool()
    if not rows:
        return Pool.empty(dim)
    ids = [turn_id for turn_id, _, _ in rows]
    vectors = journal.turn_embeddings(ids)
    texts = journal.turn_texts(ids)
    return Pool(
        x=np.stack([vectors[i] for i in ids]).astype(np.float32),
        y=label_matrix([[Label(v) for v in labels] for _, labels, _ in rows]),
        texts=tuple(texts[i] for i in ids),
        holdout=np.array([holdout for _, _, holdout in rows], dtype=bool),
    )
