"""The self-enhancement loop of HGP §3.1, per user: gate, LLM labelling, training rounds.

    loop = SelfEnhancingRouter(seed_head, config.router, model_dir, encoder.routing_vector, llm)
    head = loop.load_head(router_store)                           # once per user, kept by it
    decision, routing = loop.route(head, routing_vec, text)       # on ingest
    labels = loop.label(text)                                     # background job, may raise
    record, head = loop.train(head, stores, write)                # background job

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
The loop itself holds no per-user state: each user's :class:`UserHead` is kept by the user's
workspace (:mod:`memoryd.workspace.routing`), which passes it in and keeps what comes back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from memoryd.config import RouterConfig
from memoryd.errors import ConflictError
from memoryd.llm import LABEL_SCHEMA, LLM, label_prompt, parse_labels
from memoryd.models import Label, RoutedBy
from memoryd.router.head import RouterHead
from memoryd.router.router import RouteDecision, Router, deferral_threshold, label_matrix
from memoryd.router.trainer import Pool, SeedSet, train_round
from memoryd.store import Journal, RoundKind, RoundRecord, RouterStore, Routing

__all__ = ["SelfEnhancingRouter", "UserHead", "read_pool", "retry_at", "tau"]

T = TypeVar("T")


class Write(Protocol):
    """Runs a journal write on the user's writer thread (``SerialWriter.call``)."""

    def __call__(self, fn: Callable[[], T]) -> T: ...


RECENT_ROUNDS = 10


def tau(settings: RouterConfig, rounds: int) -> float:
    """τ_t after ``rounds`` completed training rounds."""
    return deferral_threshold(rounds, settings.tau0, settings.beta, settings.tau_min)


def retry_at(settings: RouterConfig, attempts: int, now: float) -> float | None:
    """When to try labelling again after ``attempts`` failed attempts; None: give up."""
    if attempts >= settings.max_attempts:
        return None
    return now + settings.retry_backoff * 2.0 ** (attempts - 1)


@dataclass(frozen=True)
class UserHead:
    """The head a user routes with: ``round`` is the training round that produced it (0: the
    shipped head) and ``completed`` the number of training rounds run (``t`` of ``τ_t``)."""

    head: RouterHead
    round: int
    completed: int


class SelfEnhancingRouter:
    """The loop's shared part: the shipped head, the settings, the seed set and the labeller.
    Thread-safe; every per-user value is passed in (see the module docstring).

    Args:
        seed_head: the shipped round-0 head.
        settings: gate, retry and retraining settings (``[router]``).
        model_dir: where ``router_seed.npz`` is (read on the first training round).
        routing_vector: a text's routing vector (``Encoder.routing_vector``); a round embeds
            the pool's texts with it, since the journal keeps only the retrieval embedding.
        llm: the labeller; None turns deferral off.
    """

    def __init__(
        self,
        seed_head: RouterHead,
        settings: RouterConfig,
        model_dir: Path,
        routing_vector: Callable[[str], np.ndarray],
        llm: LLM | None = None,
    ) -> None:
        self.seed_head = seed_head
        self.settings = settings
        self.model_dir = model_dir
        self.routing_vector = routing_vector
        self.llm = llm
        self._seed: SeedSet | None = None

    def load_head(self, store: RouterStore) -> UserHead:
        """The head a user routes with, as its journaled rounds leave it."""
        records = store.rounds()
        completed = sum(1 for r in records if r.kind is RoundKind.TRAIN)
        current = [r for r in records if r.accepted]
        if current:
            origin = _origin(current[-1])
            blob = store.head(current[-1].round)
            if blob is not None:
                return UserHead(RouterHead.from_bytes(blob, f"round {origin}"), origin, completed)
        return UserHead(self.seed_head, 0, completed)

    # -- hot path ----------------------------------------------------------------------------

    def route(self, head: UserHead, vec: np.ndarray, text: str) -> tuple[RouteDecision, Routing]:
        """Route one turn with the user's head and apply the gate."""
        decision = Router(head.head, self.settings.threshold).route(vec, text)
        low = decision.confidence < tau(self.settings, head.completed)
        deferred = low and self.llm is not None
        if deferred:
            decision = RouteDecision(
                decision.labels, decision.confidence, decision.scores, RoutedBy.DEFERRED
            )
        return decision, Routing(head.completed, low, deferred)

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

    def round_due(self, head: UserHead, store: RouterStore) -> bool:
        """Whether ``retrain_every`` labels arrived since the user's last round."""
        _, new = store.pool_counts(head.completed)
        return new >= self.settings.retrain_every

    def train(
        self, head: UserHead, store: RouterStore, journal: Journal, write: Write
    ) -> tuple[RoundRecord, UserHead]:
        """One training round now (see the module docstring); journaled, accepted or not.
        Returns the round and the head to route with from now on. The caller runs one round
        of a user at a time."""
        pool = read_pool(store, journal, self.seed().x.shape[1], self.routing_vector)
        result = train_round(self.seed(), pool, head.head, self.settings.threshold)
        decisions = store.decisions().get(head.completed, (0, 0, 0))
        report = {
            **result.report(),
            "pool": len(pool),
            "tau": round(tau(self.settings, head.completed), 4),
            "tau_next": round(tau(self.settings, head.completed + 1), 4),
            "decisions": decisions[0],
            "llm_share": round(decisions[1] / decisions[0], 4) if decisions[0] else 0.0,
            "previous_head_round": head.round,
        }
        blob = result.head.to_bytes() if result.accepted else None
        number = write(lambda: store.record_round(RoundKind.TRAIN, result.accepted, report, blob))
        kept, kept_round = (result.head, number) if result.accepted else (head.head, head.round)
        return store.rounds()[-1], UserHead(kept, kept_round, head.completed + 1)

    def rollback(
        self, head: UserHead, store: RouterStore, write: Write
    ) -> tuple[dict[str, Any], UserHead]:
        """Route with the head of the accepted training round before the current head's
        round again (the shipped head when there is none); journaled as a round of its own.
        Returns the report and the head to route with from now on."""
        if head.round == 0:
            raise ConflictError("the user already routes with the shipped head")
        earlier = [
            r.round
            for r in store.rounds()
            if r.kind is RoundKind.TRAIN and r.accepted and r.round < head.round
        ]
        target = earlier[-1] if earlier else 0
        blob = store.head(target) if target else self.seed_head.to_bytes()
        assert blob is not None  # an accepted round always stores its head
        report = {"from_round": head.round, "to_round": target}
        write(lambda: store.record_round(RoundKind.ROLLBACK, True, report, blob))
        return report, UserHead(
            RouterHead.from_bytes(blob, f"round {target}"), target, head.completed
        )

    # -- reporting ---------------------------------------------------------------------------

    def status(self, head: UserHead, store: RouterStore) -> dict[str, Any]:
        """What ``GET /v1/users/{user_id}/router`` shows."""
        size, new = store.pool_counts(head.completed)
        rounds = store.rounds()
        trained = [r for r in rounds if r.kind is RoundKind.TRAIN]
        return {
            "llm": getattr(self.llm, "name", None),
            "deferral": self.llm is not None,
            "round": head.completed,
            "tau": round(tau(self.settings, head.completed), 4),
            "head": {
                "round": head.round,
                "source": "shipped" if head.round == 0 else "trained",
                "temperature": round(head.head.temperature, 4),
            },
            "pool": {"size": size, "new": new, "retrain_every": self.settings.retrain_every},
            "queue": store.queue_counts(),
            "decisions": [
                {
                    "round": round_,
                    "decisions": total,
                    "deferred": deferred,
                    "low_confidence": low,
                    "llm_share": round(deferred / total, 4) if total else 0.0,
                }
                for round_, (total, deferred, low) in sorted(store.decisions().items())
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


def read_pool(
    store: RouterStore, journal: Journal, dim: int, embed: Callable[[str], np.ndarray]
) -> Pool:
    """The user's pool as arrays, in the order the labels arrived: each text embedded again
    with ``embed`` (the routing vector), since the journal keeps only the retrieval embedding."""
    rows = store.pool()
    if not rows:
        return Pool.empty(dim)
    ids = [turn_id for turn_id, _, _ in rows]
    texts = journal.turn_texts(ids)
    return Pool(
        x=np.stack([embed(texts[i]) for i in ids]).astype(np.float32),
        y=label_matrix([[Label(v) for v in labels] for _, labels, _ in rows]),
        texts=tuple(texts[i] for i in ids),
        holdout=np.array([holdout for _, _, holdout in rows], dtype=bool),
    )
