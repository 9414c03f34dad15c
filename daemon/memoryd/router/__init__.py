"""Self-enhancement router (HGP §3.1): classifier head, routing decisions, training rounds and
the per-user loop that defers unsure turns to an LLM and learns from its labels."""

from memoryd.router.enhance import SelfEnhancingRouter, UserHead, retry_at
from memoryd.router.head import RouterHead, f1_scores
from memoryd.router.router import (
    RouteDecision,
    Router,
    decide,
    deferral_threshold,
    label_matrix,
)
from memoryd.router.trainer import Pool, SeedSet, in_pool_holdout, train_round

__all__ = [
    "Pool",
    "RouteDecision",
    "Router",
    "RouterHead",
    "SeedSet",
    "SelfEnhancingRouter",
    "UserHead",
    "decide",
    "deferral_threshold",
    "f1_scores",
    "in_pool_holdout",
    "label_matrix",
    "retry_at",
    "train_round",
]
