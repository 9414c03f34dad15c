"""The active tiers mirrored in memory (memoryd.store.active_pool): what the tiered search's
screen and pool stages read from it must be what the journal holds, after every kind of change;
active tiers larger than the cap are not mirrored and the tiered search goes to everything."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import numpy as np
import pytest

import memoryd.store.active_pool as active_pool
from memoryd.models import MemoryType, SearchMode, Tier
from memoryd.retrieve import QueryParams
from memoryd.retrieve.search import OVERFLOW
from memoryd.service import MemoryService
from memoryd.workspace import MemoryPatch, Workspace
from support.config import make_config
from test_tiers import SMALL, fill, session_turns

EVERY = tuple(MemoryType)
WORDS = ["cello", "bicycle", "puppy", "morning"]


@pytest.fixture
def small(tmp_path, service_factory) -> MemoryService:
    return service_factory(make_config(tmp_path / "data", **SMALL))


def journal_counts(ws: Workspace, word: str) -> tuple[int, int]:
    """Records of tier 1 and of tiers 1-2 holding ``word``, read from the journal's index."""
    sql = (
        "SELECT COUNT(*) FROM memory_fts f CROSS JOIN headers h ON h.num = f.rowid"
        " WHERE memory_fts MATCH ? AND h.tier <= ?"
    )
    one, two = (int(ws.db.read(sql, (f'"{word}"', tier))[0][0]) for tier in (1, 2))
    return one, two


def assert_mirrors_journal(service: MemoryService, user: str = "ann") -> None:
    with service.users.lease(user) as ws:
        snap = ws.pool.snapshot(EVERY, WORDS)
        assert snap is not None
        assert snap.word_counts() == {w: journal_counts(ws, w) for w in WORDS}
        vector = service.encoder.embed("practising an instrument")
        for tier in (Tier.CACHE, Tier.BUFFER):
            pool = sorted(ws.headers.pool(tier, EVERY))
            assert sorted(snap.nums(tier)) == pool and snap.size(tier) == len(pool)
            stored = ws.journal.memory_embeddings(pool)
            want = {n: float(v @ vector) for n, v in stored.items()}
            got = snap.cosines(vector, tier)
            assert got.keys() == want.keys()
            assert np.allclose([got[n] for n in pool], [want[n] for n in pool], atol=1e-6)


def reshuffled(service: MemoryService, sessions: int = 6) -> datetime:
    now = fill(service, sessions=sessions)
    service.reshuffle("ann", now=now)
    return now


def test_the_mirror_is_the_journal_after_a_reshuffle(small: MemoryService) -> None:
    reshuffled(small)
    sizes = small.tiers_status("ann")["sizes"]
    assert 0 < sizes["tier1"] < sizes["tier1"] + sizes["tier2"] < 24
    assert_mirrors_journal(small)


def test_the_mirror_follows_ingest_edits_deletes_and_moves(small: MemoryService) -> None:
    now = reshuffled(small)
    assert_mirrors_journal(small)
    small.ingest("ann", session_turns(6))  # the cello session again: new records, tier 1
    assert_mirrors_journal(small)
    with small.users.lease("ann") as ws:
        newest = max(ws.headers.pool(Tier.CACHE, EVERY))
        memory_id = ws.journal.memories_by_num([newest])[newest].memory.id
    small.patch_memory("ann", memory_id, MemoryPatch(text="Fixed the bicycle chain instead."))
    assert_mirrors_journal(small)
    small.delete_memory("ann", memory_id)
    assert_mirrors_journal(small)
    small.reshuffle("ann", now=now)  # moves records between tiers
    assert_mirrors_journal(small)


def test_active_tiers_over_the_cap_are_searched_as_everything(
    small: MemoryService, monkeypatch
) -> None:
    now = reshuffled(small)
    sizes = small.tiers_status("ann")["sizes"]
    monkeypatch.setattr(active_pool, "POOL_CAP", sizes["tier1"] + sizes["tier2"] - 1)
    with small.users.lease("ann") as ws:
        assert ws.pool.snapshot(EVERY, WORDS) is None
    params = QueryParams("cello scales", k=3, now=now, recall=False)
    tiered = small.query("ann", params)
    stages = tiered.search["stages"]
    assert [s.get("skipped") for s in stages] == [OVERFLOW, OVERFLOW, None]
    assert tiered.search["stopped_at"] == 3 and tiered.candidates == 24
    everything = small.query("ann", dataclasses.replace(params, search=SearchMode.ALL))
    assert [i.num for i in tiered.items] == [i.num for i in everything.items]
    # a search asked of tier 1 alone still searches it, read from the headers
    only1 = small.query("ann", QueryParams("cello scales", now=now, search=SearchMode.TIER1))
    assert only1.candidates == sizes["tier1"] and only1.search["stopped_at"] == 1
