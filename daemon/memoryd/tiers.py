"""Hierarchical memory orchestration: scores, tier placement, promotion and the drift gate.

Every memory's header (:mod:`memoryd.store.headers`) gives it a score

    S_m = (α·I_m + β·Sim(m, P)) · g(C_m) · exp(−λ·Δt / g(C_m)),   g(C) = ln(2 + C)

with ``I_m`` its importance in [1, 10], ``Sim(m, P)`` its cosine to the persona, ``C_m`` how often
a query recalled it and Δt the time since it was last recalled (else since it was recorded) in
``time_unit`` seconds (a day by default). ``g`` is ``ln(2 + C)``, not the HMO paper's
``ln(1 + C)``: that is 0 for a record never recalled, which would score every new record 0 and
divide by zero in the decay. Recalls raise a score and slow its decay.

Defaults: α = 0.1, β = 1. The founding design had α = β = 1, but ``I_m`` spans 1-10 while a
cosine spans about 0-1 here, so the persona could move a score by a tenth of what importance
does and would never change a placement; α = 0.1 gives both terms the same range
(``docs/decisions.md``, "Importance weight alpha at one tenth").

Placement (:func:`reshuffle`, the background job): tier 1 holds every record of the last
``recent_sessions`` sessions (pinned) and the ``cache_size`` best scored others; tier 2 the next
``buffer_size``; tier 3 the rest (the archive, which is also everything). A reshuffle scores the
active tiers (1 and 2) and the archived records of recent sessions; other archived records keep
the score they left with and are scored again lazily, when a query recalls them
(:func:`record_recall`), and promoted if their score beats the lowest ranked active record.
New records enter tier 1, pinned: they belong to the latest session.

The persona is rebuilt whenever facts change (:func:`refresh_persona`). The drift gate then
compares it with the anchor the similarities were computed against; only when
``‖P − P_anchor‖₂ ≥ drift_threshold`` are the active tiers' similarities recomputed (and the
archive's marked stale, recomputed when next scored) and the anchor moved to P.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from memoryd.config import TierConfig
from memoryd.models import Fact, Tier
from memoryd.persona import MAX_PROFILE_FACTS, FactWeights, Persona, drift, similarities
from memoryd.store import HeaderRow, HeaderStore, Journal, Move, PersonaSlot, Placement, RunKind

log = logging.getLogger(__name__)


def recall_gain(recalls: int) -> float:
    """g(C) = ln(2 + C): ln 2 for a record never recalled, growing slowly with recalls."""
    return math.log(2.0 + recalls)


def score(
    importance: float,
    persona_sim: float,
    recalls: int,
    age_seconds: float,
    config: TierConfig,
) -> float:
    """S_m for one header; ``age_seconds`` is Δt (negative ages count as 0)."""
    gain = recall_gain(recalls)
    age = max(0.0, age_seconds) / config.time_unit
    return (
        (config.alpha * importance + config.beta * persona_sim)
        * gain
        * math.exp(-config.decay * age / gain)
    )


def header_score(row: HeaderRow, persona_sim: float, now: datetime, config: TierConfig) -> float:
    last = row.last_access or row.ts
    return score(
        row.importance, persona_sim, row.recall_count, (now - last).total_seconds(), config
    )


def plan(
    rows: Sequence[HeaderRow],
    sims: dict[int, float],
    recent: set[str],
    config: TierConfig,
    now: datetime,
    reason: str = "reshuffle",
) -> tuple[list[Placement], list[Move]]:
    """Tiers for ``rows``: pinned to 1 when in a ``recent`` session, else by score rank.

    ``sims`` holds the persona similarity of every row (computed or stored). Ties go to the
    newer record. Returns a placement for every row and a move for each that changes tier.
    """
    scored = [(header_score(r, sims[r.num], now, config), r) for r in rows]
    pinned = [(s, r) for s, r in scored if r.session_id in recent]
    ranked = sorted(
        ((s, r) for s, r in scored if r.session_id not in recent),
        key=lambda sr: (-sr[0], -sr[1].num),
    )
    placements: list[Placement] = []
    moves: list[Move] = []
    for s, r in pinned:
        placements.append(Placement(r.num, Tier.CACHE, s, True, sims[r.num]))
    for rank, (s, r) in enumerate(ranked):
        if rank < config.cache_size:
            tier = Tier.CACHE
        elif rank < config.cache_size + config.buffer_size:
            tier = Tier.BUFFER
        else:
            tier = Tier.ARCHIVE
        placements.append(Placement(r.num, tier, s, False, sims[r.num]))
    for p, r in zip(placements, [r for _, r in pinned] + [r for _, r in ranked], strict=True):
        if p.tier != r.tier:
            why = "recent session" if p.pinned else f"{reason}: rank by score {p.score:.4f}"
            moves.append(Move(r.num, r.tier, p.tier, p.score, why, now))
    return placements, moves


def _sims(journal: Journal, headers: HeaderStore, rows: Sequence[HeaderRow]) -> dict[int, float]:
    """Stored similarities, and fresh ones (against the anchor persona) where none is stored."""
    sims = {r.num: r.persona_sim for r in rows if r.persona_sim is not None}
    missing = [r.num for r in rows if r.persona_sim is None]
    if missing:
        anchor = headers.persona(PersonaSlot.ANCHOR)
        vectors = journal.memory_embeddings(missing)
        fresh = similarities(vectors, anchor.vector if anchor else None)
        sims.update({num: fresh.get(num, 0.0) for num in missing})
    return {num: float(s) for num, s in sims.items() if s is not None}


def reshuffle(
    journal: Journal, headers: HeaderStore, config: TierConfig, now: datetime | None = None
) -> dict[str, Any]:
    """Recompute the placement of the active tiers and the recent sessions (one transaction).

    Returns what it did: records scored, moves by direction, tier sizes, seconds taken."""
    now = now or datetime.now(UTC)
    started = time.perf_counter()
    recent = set(headers.recent_sessions(config.recent_sessions))
    rows = headers.rows(tiers=[Tier.CACHE, Tier.BUFFER])
    rows += headers.rows(tiers=[Tier.ARCHIVE], sessions=sorted(recent))
    placements, moves = plan(rows, _sims(journal, headers, rows), recent, config, now)
    headers.place(placements, moves, now)
    detail = {
        "scored": len(placements),
        "promoted": sum(m.to_tier < m.from_tier for m in moves),
        "demoted": sum(m.to_tier > m.from_tier for m in moves),
        "sizes": tier_sizes(headers),
        "seconds": round(time.perf_counter() - started, 4),
    }
    headers.record_run(RunKind.RESHUFFLE, detail, now)
    return detail


def record_recall(
    journal: Journal,
    headers: HeaderStore,
    nums: Sequence[int],
    config: TierConfig,
    now: datetime | None = None,
) -> list[Move]:
    """Queries recalled ``nums`` (a num once per query that recalled it): count the recalls,
    then score each archived one and promote it when it beats the lowest ranked active record
    (displacing that one a tier down)."""
    now = now or datetime.now(UTC)
    if not nums:
        return []
    headers.record_recalls(nums, now)
    archived = headers.rows(tiers=[Tier.ARCHIVE], nums=sorted(set(nums)))
    if not archived:
        return []
    sims = _sims(journal, headers, archived)
    moves: list[Move] = []
    for row in sorted(archived, key=lambda r: r.num):
        placements: list[Placement] = []
        s = header_score(row, sims[row.num], now, config)
        promoted = _promote(headers, row, s, config, now, placements)
        if not promoted:
            placements.append(Placement(row.num, Tier.ARCHIVE, s, False, sims[row.num]))
        headers.place(placements, promoted, now)
        moves += promoted
    if moves:
        headers.record_run(
            RunKind.PROMOTION,
            {"recalled": len(nums), "archived": len(archived), "moves": len(moves)},
            now,
        )
    return moves


def _promote(
    headers: HeaderStore,
    row: HeaderRow,
    s: float,
    config: TierConfig,
    now: datetime,
    placements: list[Placement],
) -> list[Move]:
    """Place an archived record by its fresh score ``s``: into tier 1 when it beats tier 1's
    lowest ranked record, else into tier 2 when it beats tier 2's (or tier 2 has room); the
    record it displaces from a full tier drops one tier. Returns the moves (none: it stays)."""
    target = None
    for tier, capacity in ((Tier.CACHE, config.cache_size), (Tier.BUFFER, config.buffer_size)):
        count, lowest = headers.ranked(tier)
        if count < capacity or (lowest is not None and s > lowest[0]):
            target = (tier, count >= capacity, lowest)
            break
    if target is None:
        return []
    tier, full, lowest = target
    why = f"recalled from the archive, score {s:.4f}"
    why += f" beats the lowest in tier {int(tier)} ({lowest[0]:.4f})" if full and lowest else ""
    placements.append(Placement(row.num, tier, s, False, None))
    moves = [Move(row.num, Tier.ARCHIVE, tier, s, why, now)]
    if full and lowest is not None:
        down = Tier(int(tier) + 1)
        placements.append(Placement(lowest[1], down, lowest[0], False, None))
        reason = f"displaced by {row.num} (promoted)"
        moves.append(Move(lowest[1], tier, down, lowest[0], reason, now))
        if down is Tier.BUFFER:
            moves += _overflow(headers, config, now, placements)
    return moves


def _overflow(
    headers: HeaderStore, config: TierConfig, now: datetime, placements: list[Placement]
) -> list[Move]:
    """A record pushed into a full tier 2 pushes tier 2's lowest ranked record to the archive."""
    count, lowest = headers.ranked(Tier.BUFFER)
    if count + 1 <= config.buffer_size or lowest is None:
        return []
    placements.append(Placement(lowest[1], Tier.ARCHIVE, lowest[0], False, None))
    reason = "displaced from a full tier 2 (promotion)"
    return [Move(lowest[1], Tier.BUFFER, Tier.ARCHIVE, lowest[0], reason, now)]


def refresh_persona(
    journal: Journal,
    headers: HeaderStore,
    config: TierConfig,
    now: datetime | None = None,
    facts: FactWeights | None = None,
) -> dict[str, Any]:
    """Rebuild P from the current facts, then run the drift gate (see the module docstring).

    ``facts``: the current facts kept up to date by the caller (else read from the journal).
    Returns the persona's size, the drift from the anchor, and whether the gate fired."""
    now = now or datetime.now(UTC)
    persona = current_persona(journal, facts)
    headers.save_persona(PersonaSlot.CURRENT, persona.vector, persona.profile, persona.facts, now)
    anchor = headers.persona(PersonaSlot.ANCHOR)
    distance = drift(persona.vector, anchor.vector if anchor else None)
    fired = distance >= config.drift_threshold
    out: dict[str, Any] = {"facts": persona.facts, "drift": round(distance, 4), "fired": fired}
    if fired:
        active = headers.rows(tiers=[Tier.CACHE, Tier.BUFFER])
        vectors = journal.memory_embeddings([r.num for r in active])
        headers.set_persona_sims(similarities(vectors, persona.vector))
        headers.forget_persona_sims(Tier.ARCHIVE)
        headers.save_persona(
            PersonaSlot.ANCHOR, persona.vector, persona.profile, persona.facts, now
        )
        out["rescored"] = len(vectors)
        headers.record_run(RunKind.DRIFT, out, now)
        log.info(
            "persona drift %.3f >= %.2f: %d active similarities recomputed",
            distance,
            config.drift_threshold,
            len(vectors),
        )
    return out


def current_persona(journal: Journal, facts: FactWeights | None = None) -> Persona:
    """P from the user's current facts and their stored vectors (``facts``, else all read)."""
    facts = facts if facts is not None else FactWeights(journal.fact_weights())
    nums = facts.top(MAX_PROFILE_FACTS)
    stored = journal.memories_by_num(nums)
    top = [f for f in (stored[n].memory for n in nums if n in stored) if isinstance(f, Fact)]
    return facts.persona(top)


def tier_sizes(headers: HeaderStore) -> dict[str, int]:
    return {f"tier{int(t)}": n for t, n in headers.sizes().items()}


def status(headers: HeaderStore, config: TierConfig, moves: int = 20) -> dict[str, Any]:
    """What ``GET /v1/users/{id}/tiers`` shows: sizes, the persona, recent moves and runs."""
    current = headers.persona(PersonaSlot.CURRENT)
    anchor = headers.persona(PersonaSlot.ANCHOR)
    distance = drift(current.vector if current else None, anchor.vector if anchor else None)
    return {
        "sizes": tier_sizes(headers),
        "capacity": {
            "recent_sessions": config.recent_sessions,
            "tier1_by_score": config.cache_size,
            "tier2": config.buffer_size,
        },
        "persona": {
            "facts": current.facts if current else 0,
            "profile": current.profile if current else "",
            "drift": round(distance, 4),
            "drift_threshold": config.drift_threshold,
            "anchored_at": anchor.updated_at.isoformat() if anchor else None,
        },
        "moves": [
            {
                "id": memory_id,
                "from": int(m.from_tier),
                "to": int(m.to_tier),
                "score": None if m.score is None else round(m.score, 6),
                "reason": m.reason,
                "at": m.at.isoformat(),
            }
            for m, memory_id in headers.moves(moves)
        ],
        "last_reshuffle": next(iter(headers.runs(RunKind.RESHUFFLE, 1)), None),
        "last_drift": next(iter(headers.runs(RunKind.DRIFT, 1)), None),
    }
