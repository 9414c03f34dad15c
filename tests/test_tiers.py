"""HMO tiers: scores, placement, promotion of recalled archive records, the persona and its drift
gate, the tiered search and its trace, and a kill during a reshuffle. Real journal, graph,
vectors and encoder throughout."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memoryd.config import TierConfig
from memoryd.ingest import NewTurn
from memoryd.models import Entity, EntityType, Fact, MemoryType, Role, SearchMode, Tier
from memoryd.persona import FactWeights, drift, fact_sentence
from memoryd.retrieve import QueryParams, fusion
from memoryd.retrieve.sufficiency import Evidence, ScoreSufficiency, Stage, idf, word_share
from memoryd.service import MemoryService
from memoryd.store.headers import HeaderStore, PersonaSlot, RunKind
from memoryd.store.journal import Journal
from memoryd.store.records import MemoryChange, NewMemory
from memoryd.store.sqlite import Database
from memoryd.tiers import current_persona, plan, recall_gain, refresh_persona, score
from memoryd.workspace import MemoryPatch
from support.config import make_config
from support.replies import memory_json

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
TOPICS = [  # events: nothing lasting for the fact reader to read
    "clearing leaves off the patio",
    "repairing the old bicycle chain",
    "sorting through a box of old photos",
    "tidying the cupboard under the stairs",
    "planning a hiking trip to the fjords",
    "washing the windows at the back",
    "ironing a pile of shirts",
    "fixing the squeaky kitchen door",
]


def session_turns(session: int, per_session: int = 4) -> list[NewTurn]:
    """Distinct, unremarkable turns: one topic per session, a day apart."""
    topic = TOPICS[session % len(TOPICS)]
    return [
        NewTurn(
            session_id=f"s{session:02d}",
            role=Role.USER,
            text=f"Today I spent the morning {topic}, part {i} of session {session}.",
            ts=T0 + timedelta(days=session, minutes=i),
            turn_id=f"s{session:02d}-{i}",
        )
        for i in range(per_session)
    ]


SMALL = {
    "tiers.recent_sessions": 1,
    "tiers.cache_size": 3,
    "tiers.buffer_size": 4,
}


@pytest.fixture
def small(tmp_path, service_factory) -> MemoryService:
    return service_factory(make_config(tmp_path / "data", **SMALL))


def fill(service: MemoryService, user: str = "ann", sessions: int = 6) -> datetime:
    for s in range(sessions):
        service.ingest(user, session_turns(s))
    return T0 + timedelta(days=sessions + 1)


def open_stores(path: Path) -> tuple[Journal, HeaderStore]:
    db = Database(path)
    return Journal(db), HeaderStore(db)


def change(journal: Journal, headers: HeaderStore, change: MemoryChange) -> None:
    """Journal ``change`` with the header rows of what it creates, as the workspace does."""
    with journal.db.transaction():
        headers.add(journal.change_memories(change).added)


def tiers_of(service: MemoryService, user: str) -> dict[str, int]:
    return service.tiers_status(user)["sizes"]


def flush(service: MemoryService, user: str) -> None:
    """Wait for the user's writer to run what queries queued (recall counts, promotions)."""
    with service.users.lease(user) as ws:
        ws.writer.call(lambda: None)


# -- score and placement -------------------------------------------------------------------


def test_score_follows_the_formula() -> None:
    config = TierConfig.defaults(alpha=0.1, beta=1.0, decay=0.05)
    assert recall_gain(0) == pytest.approx(math.log(2))
    # (0.1*8 + 1*0.5) * ln 2 * exp(-0.05 * 10 / ln 2) for a record 10 days old, never recalled
    expected = 1.3 * math.log(2) * math.exp(-0.5 / math.log(2))
    assert score(8.0, 0.5, 0, 10 * 86400, config) == pytest.approx(expected)
    # recalls raise the score and slow its decay
    assert score(8.0, 0.5, 3, 10 * 86400, config) > score(8.0, 0.5, 0, 10 * 86400, config)
    old = score(5, 0.0, 4, 100 * 86400, config) / score(5, 0.0, 4, 0, config)
    young = score(5, 0.0, 0, 100 * 86400, config) / score(5, 0.0, 0, 0, config)
    assert old > young
    assert score(5, 0.0, 0, -50.0, config) == score(5, 0.0, 0, 0.0, config)


def test_reshuffle_pins_recent_sessions_and_ranks_the_rest(small: MemoryService) -> None:
    now = fill(small)
    assert tiers_of(small, "ann") == {"tier1": 24, "tier2": 0, "tier3": 0}  # new: pinned
    done = small.reshuffle("ann", now=now)
    assert done["scored"] == 24 and done["demoted"] == 24 - 4 - 3
    sizes = tiers_of(small, "ann")
    assert sizes == {"tier1": 4 + 3, "tier2": 4, "tier3": 24 - 11}
    status = small.tiers_status("ann")
    assert status["last_reshuffle"]["scored"] == 24
    reasons = {m["reason"].split(":")[0] for m in status["moves"]}
    assert reasons == {"reshuffle"}
    with small.users.lease("ann") as ws:
        pinned = ws.headers.rows(tiers=[Tier.CACHE])
    assert {r.session_id for r in pinned if r.pinned} == {"s05"}
    # a second reshuffle at the same time moves nothing
    assert small.reshuffle("ann", now=now)["demoted"] == 0


def test_plan_orders_by_score_then_newest(tmp_path: Path) -> None:
    journal, headers = open_stores(tmp_path / "j.sqlite")
    for i in range(4):
        fact = _fact(i)
        new = NewMemory(fact, "s", T0 + timedelta(days=i), np.ones(4, dtype=np.float32) / 2)
        change(journal, headers, MemoryChange("test", f"f{i}", created=[new]))
    rows = headers.rows()
    sims = {r.num: 0.0 for r in rows}
    placements, moves = plan(
        rows, sims, set(), TierConfig.defaults(cache_size=1, buffer_size=1), T0
    )
    by_num = {p.num: p.tier for p in placements}
    newest_first = sorted(by_num, reverse=True)
    # same importance, newer is less decayed: the newest leads
    assert [by_num[n] for n in newest_first] == [
        Tier.CACHE,
        Tier.BUFFER,
        Tier.ARCHIVE,
        Tier.ARCHIVE,
    ]
    assert len(moves) == 3  # all started in tier 1
    journal.db.close()


# -- recall and promotion ------------------------------------------------------------------


def test_a_recalled_archive_record_is_promoted(small: MemoryService) -> None:
    now = fill(small)
    small.reshuffle("ann", now=now)
    with small.users.lease("ann") as ws:
        archived = ws.headers.rows(tiers=[Tier.ARCHIVE])
        target = min(archived, key=lambda r: r.num)
        memory = ws.journal.memories_by_num([target.num])[target.num].memory
    result = small.query("ann", QueryParams(memory.text, k=1, now=now, search=SearchMode.ALL))
    assert result.items[0].num == target.num
    flush(small, "ann")
    record = memory_json(small.get_memory("ann", memory.id).memory)["record"]["header"]
    assert record["recall_count"] == 1 and record["tier"] < 3
    moves = small.tiers_status("ann")["moves"]
    promoted = [m for m in moves if m["id"] == memory.id]
    assert (
        promoted
        and promoted[0]["from"] == 3
        and "recalled from the archive" in (promoted[0]["reason"])
    )
    sizes = tiers_of(small, "ann")
    assert sizes["tier1"] == 7 and sizes["tier2"] == 4  # a displaced record made room


def test_recall_false_changes_no_header(small: MemoryService) -> None:
    now = fill(small, sessions=2)
    result = small.query("ann", QueryParams("bicycle chain", k=2, now=now, recall=False))
    flush(small, "ann")
    header = memory_json(small.get_memory("ann", result.items[0].memory.id).memory)["record"][
        "header"
    ]
    assert header["recall_count"] == 0 and header["last_access"] is None


# -- the tiered search ----------------------------------------------------------------------


def test_tiered_search_traces_its_stages(small: MemoryService) -> None:
    now = fill(small)
    small.reshuffle("ann", now=now)
    everything = small.query("ann", QueryParams("cupboard stairs", now=now, search=SearchMode.ALL))
    assert everything.search["stages"][0]["pool"] == everything.candidates == 24
    only1 = small.query("ann", QueryParams("cupboard stairs", now=now, search=SearchMode.TIER1))
    assert only1.candidates == 7 and only1.search["stopped_at"] == 1
    tiered = small.query("ann", QueryParams("bicycle chain", k=3, now=now, recall=False))
    stages = tiered.search["stages"]
    assert tiered.search["mode"] == "tiered"
    assert [s["tier"] for s in stages] == [1, 2, 3]
    # the bicycle session (the second of six) is archived: tiers 1 and 2 hold none of its
    # words, so they are skipped unsearched and only the archive is searched
    assert [s.get("value") for s in stages[:2]] == [0.0, 0.0]
    assert all(s["skipped"].startswith("word share 0.000 < 0.8") for s in stages[:2])
    assert tiered.search["stopped_at"] == 3 and tiered.candidates == 24
    assert "bicycle" in tiered.items[0].memory.text


def test_before_any_reshuffle_tier_one_is_everything_and_searched_once(small) -> None:
    now = fill(small)  # every record is new, so in tier 1
    tiered = small.query("ann", QueryParams("bicycle chain", k=3, now=now, recall=False))
    assert tiered.search["stages"] == [
        {"tier": 1, "pool": 24, "hits": 3, "stop": "the pool holds every record"}
    ]
    everything = small.query(
        "ann", QueryParams("bicycle chain", k=3, now=now, recall=False, search=SearchMode.ALL)
    )
    assert [i.num for i in tiered.items] == [i.num for i in everything.items]


def test_a_large_pool_is_searched_through_the_filtered_index(
    tmp_path, service_factory, monkeypatch
) -> None:
    sizes = {"tiers.recent_sessions": 2, "tiers.cache_size": 2, "tiers.buffer_size": 2}
    svc = service_factory(make_config(tmp_path / "d", **sizes))
    now = fill(svc, sessions=8)
    svc.reshuffle("ann", now=now)
    # the bicycle session (the second of eight) is archived: tier 1 holds none of it
    params = QueryParams("bicycle chain", k=2, now=now, recall=False, search=SearchMode.TIER1)
    exact = svc.query("ann", params)
    monkeypatch.setattr(fusion, "EXACT_POOL", 0)  # every pool of a fair share: filtered HNSW
    monkeypatch.setattr(fusion, "EXACT_SHARE", 0.0)
    filtered = svc.query("ann", params)
    everything = svc.query("ann", QueryParams("bicycle", now=now, search=SearchMode.ALL))
    assert filtered.candidates == exact.candidates < everything.candidates
    assert [i.num for i in filtered.items] == [i.num for i in exact.items]
    assert filtered.items and not any("bicycle" in i.memory.text for i in filtered.items)
    assert "bicycle" in everything.items[0].memory.text


def test_a_sufficient_tier_one_stops_the_search(tmp_path, service_factory) -> None:
    sizes = {"tiers.recent_sessions": 1, "tiers.cache_size": 20, "tiers.buffer_size": 4}
    svc = service_factory(make_config(tmp_path / "d", **sizes))
    now = fill(svc, sessions=12)  # tier 1: sessions 6-11, tier 2: session 5, tier 3: 0-4
    svc.reshuffle("ann", now=now)
    # every record with these words (session 7) is in tier 1
    result = svc.query("ann", QueryParams("squeaky kitchen door", k=2, now=now))
    first = result.search["stages"][0]
    assert result.search["stopped_at"] == 1 and first["sufficient"] is True
    assert first["value"] == pytest.approx(1.0) and "score sufficiency" in first["stop"]
    assert result.candidates == 24
    # half of the photo records (session 10) are in tier 1, half (session 2) archived
    split = svc.query("ann", QueryParams("box photos", k=2, now=now, recall=False))
    skipped = [s for s in split.search["stages"] if "skipped" in s]
    assert [s["tier"] for s in skipped] == [1, 2]
    assert all(s["skipped"].startswith("word share 0.500 < 0.8") for s in skipped)
    assert split.search["stopped_at"] == 3
    # a top-3 needs a pool of 30: tier 1's 24 records are not searched alone
    deep = svc.query("ann", QueryParams("squeaky kitchen door", k=3, now=now, recall=False))
    assert deep.search["stages"][0]["skipped"] == "pool of 24 < 30 records"


def test_word_share_weighs_rare_words_more() -> None:
    # 100 records; "said" in 50 (half in the pool), "tortoise" in 2 (both in the pool)
    words = {"said": (50, 25), "tortoise": (2, 2)}
    w_said, w_tortoise = idf(100, 50), idf(100, 2)
    expected = (w_said * 0.5 + w_tortoise * 1.0) / (w_said + w_tortoise)
    assert word_share(words, 100) == pytest.approx(expected) and expected > 0.75
    assert word_share({"zeppelin": (0, 0)}, 100) is None
    hits = [Evidence("x", "- x", f"t{i}", 0.1) for i in range(3)]
    judge = ScoreSufficiency(0.8)
    assert judge(Stage("q", 3, hits, {"a": (4, 4)}, 100, 40)).sufficient
    assert not judge(Stage("q", 3, hits, {"a": (4, 3)}, 100, 40)).sufficient  # 0.75
    assert judge(Stage("q", 3, hits, {"a": (4, 4)}, 100, 29)).why == "pool of 29 < 30 records"
    assert judge(Stage("q", 3, hits, {"a": (4, 4)}, 20, 20)).sufficient  # the pool is all
    short = judge(Stage("q", 4, hits, {"a": (4, 4)}, 100, 40))
    assert not short.sufficient and short.why == "top-k not full (3 of 4 turns)"
    assert "no record holds" in judge(Stage("q", 3, hits, {"a": (0, 0)}, 100, 40)).why


# -- persona and drift gate -----------------------------------------------------------------


def _fact(i: int, confidence: float = 1.0) -> Fact:
    thing = Entity(f"e{i}", f"thing {i}", EntityType.OBJECT)
    return Fact(f"f{i}", f"t{i}", "likes", thing, f"I like thing {i}", confidence=confidence)


def unit(vec: list[float]) -> np.ndarray:
    v = np.asarray(vec, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_persona_is_the_confidence_weighted_mean() -> None:
    facts = FactWeights({"f1": (1, 1.0, unit([1, 0])), "f2": (2, 3.0, unit([0, 1]))})
    assert facts.top(5) == [2, 1]
    persona = facts.persona([_fact(2), _fact(1)])
    assert persona.vector is not None
    assert persona.vector == pytest.approx(unit([1, 3]), abs=1e-6)
    assert persona.profile == f"{fact_sentence(_fact(2))}; {fact_sentence(_fact(1))}"
    assert persona.facts == 2 and FactWeights({}).persona([]).vector is None
    assert drift(None, None) == 0.0 and drift(unit([1, 0]), None) == pytest.approx(1.0)


def test_kept_fact_weights_match_a_fresh_read_after_changes() -> None:
    rng = np.random.default_rng(7)
    current = {
        f"f{i}": (i, float(rng.uniform(0.1, 1)), unit(list(rng.normal(size=8)))) for i in range(50)
    }
    kept = FactWeights(current)
    for step in range(200):
        name = f"f{rng.integers(0, 70)}"
        if name in current and step % 3 == 0:
            del current[name]  # superseded or deleted
        else:
            num = int(name[1:])
            vector = None if step % 11 == 0 else unit(list(rng.normal(size=8)))
            current[name] = (num, float(rng.uniform(-0.2, 1)), vector)  # new, patched or re-rated
        kept.update([name, "never-a-fact"], current)
    fresh = FactWeights(current)
    assert kept.top(10) == fresh.top(10) and len(kept) == len(fresh)
    assert kept.persona([]).facts == fresh.persona([]).facts
    assert kept.persona([]).vector == pytest.approx(fresh.persona([]).vector, abs=1e-6)
    kept.update(list(current), {})
    assert kept.persona([]).vector is None and kept.top(3) == []


def test_the_kept_persona_follows_every_kind_of_fact_change(service: MemoryService) -> None:
    """After supersession, a patch, an undo and a delete, the persona the writer keeps is the
    one a fresh read of every fact gives."""

    def say(i: int, text: str) -> None:
        service.ingest("bo", [NewTurn("s1", Role.USER, text, T0 + timedelta(minutes=i))])

    def assert_fresh() -> None:
        with service.users.lease("bo") as ws:
            ws.writer.call(lambda: None)
            kept = ws.headers.persona(PersonaSlot.CURRENT)
            fresh = current_persona(ws.journal)
        assert kept is not None and fresh.vector is not None
        assert kept.vector == pytest.approx(fresh.vector, abs=1e-6)
        assert (kept.profile, kept.facts) == (fresh.profile, fresh.facts)

    say(0, "I live in Oslo and I work as a nurse.")
    say(1, "I am allergic to penicillin.")
    assert_fresh()
    say(2, "I've moved to Berlin.")
    assert_fresh()
    facts = [s.memory for s in service.list_facts("bo", history=True)]
    assert all(isinstance(f, Fact) for f in facts)

    def fact(relation: str, superseded: bool = False) -> Fact:
        return next(
            f
            for f in facts
            if isinstance(f, Fact)
            and f.relation == relation
            and (f.superseded_by is not None) == superseded
        )

    service.undo_supersession("bo", fact("home_city", superseded=True).id)
    assert_fresh()
    service.patch_memory("bo", fact("job_title").id, MemoryPatch(text="I work as a paramedic."))
    assert_fresh()
    service.delete_memory("bo", fact("allergy").id)
    assert_fresh()


@pytest.fixture
def stores(tmp_path: Path):
    journal, headers = open_stores(tmp_path / "j.sqlite")
    yield journal, headers
    journal.db.close()


def add_fact(journal: Journal, headers: HeaderStore, i: int, vec: np.ndarray) -> None:
    new = NewMemory(_fact(i), "s", T0, vec)
    change(journal, headers, MemoryChange("test", f"f{i}", created=[new]))


def test_drift_gate_fires_only_past_tau(stores) -> None:
    journal, headers = stores
    config = TierConfig.defaults(drift_threshold=0.10)
    add_fact(journal, headers, 1, unit([1, 0, 0]))
    first = refresh_persona(journal, headers, config, T0)
    assert first["fired"] and first["drift"] == pytest.approx(1.0)  # from no persona at all
    anchored = headers.persona(PersonaSlot.ANCHOR)
    # one more fact that turns P by less than tau: P moves, the anchor and the sims stay
    add_fact(journal, headers, 2, unit([1, 0.09, 0]))
    small = refresh_persona(journal, headers, config, T0)
    assert 0 < small["drift"] < 0.10 and not small["fired"]
    assert headers.persona(PersonaSlot.ANCHOR).vector == pytest.approx(anchored.vector)
    sims_before = {r.num: r.persona_sim for r in headers.rows()}
    assert sims_before[2] is None  # the new record waits for the next scoring
    # a fact far off: the accumulated drift passes tau, sims are recomputed, anchor moves
    add_fact(journal, headers, 3, unit([0, 0, 1]))
    big = refresh_persona(journal, headers, config, T0)
    assert big["drift"] >= 0.10 and big["fired"] and big["rescored"] == 3
    current = headers.persona(PersonaSlot.CURRENT).vector
    assert headers.persona(PersonaSlot.ANCHOR).vector == pytest.approx(current)
    sims = {r.num: r.persona_sim for r in headers.rows()}
    assert sims[3] == pytest.approx(float(np.dot(unit([0, 0, 1]), current)), abs=1e-5)
    assert len(headers.runs(RunKind.DRIFT, 10)) == 2


def test_facts_from_turns_build_the_persona(service: MemoryService) -> None:
    service.ingest(
        "bo",
        [NewTurn("s1", Role.USER, "I live in Oslo and I work as a nurse.", ts=T0)],
    )
    persona = service.tiers_status("bo")["persona"]
    assert persona["facts"] >= 1 and "Oslo" in persona["profile"]
    assert persona["drift"] == 0.0 and persona["anchored_at"] is not None


# -- durability -----------------------------------------------------------------------------

KILL_IN_RESHUFFLE = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from support.config import make_config
from memoryd.service import MemoryService
from memoryd.store.headers import HeaderStore
import test_tiers

def die(conn, moves):
    # the placement UPDATEs ran inside the open transaction; die before it commits
    os.kill(os.getpid(), signal.SIGKILL)

svc = MemoryService.from_config(make_config(Path({data!r}), **test_tiers.SMALL))
now = test_tiers.fill(svc)
print("filled", flush=True)
HeaderStore._record_moves = staticmethod(die)
svc.reshuffle("ann", now=now)
print("survived", flush=True)
"""


def test_a_kill_during_a_reshuffle_leaves_a_consistent_state(tmp_path, service_factory) -> None:
    data = tmp_path / "data"
    tests = str(Path(__file__).parent)
    code = KILL_IN_RESHUFFLE.format(tests=tests, data=str(data))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tests, *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert "filled" in proc.stdout and "survived" not in proc.stdout
    svc = service_factory(make_config(data, **SMALL))
    # the interrupted reshuffle left nothing: every record as ingested, no move recorded
    assert tiers_of(svc, "ann") == {"tier1": 24, "tier2": 0, "tier3": 0}
    assert svc.tiers_status("ann")["moves"] == []
    assert svc.counts("ann")["memories_episodic"] == 24
    # and the next reshuffle completes
    svc.reshuffle("ann", now=T0 + timedelta(days=7))
    assert tiers_of(svc, "ann") == {"tier1": 7, "tier2": 4, "tier3": 13}


def test_headers_follow_memories_and_travel_in_exports(small: MemoryService) -> None:
    now = fill(small, sessions=2)
    result = small.query("ann", QueryParams("photos", k=1, now=now, search=SearchMode.ALL))
    flush(small, "ann")
    memory_id = result.items[0].memory.id
    records = list(small.export_user("ann"))
    assert records[-1]["kind"] == "headers"
    assert [h["id"] for h in records[-1]["headers"]] == [memory_id]
    small.import_user("ann2", records)
    header = memory_json(small.get_memory("ann2", memory_id).memory)["record"]["header"]
    assert header["recall_count"] == 1 and header["last_access"] is not None
    small.delete_memory("ann", memory_id)
    with small.users.lease("ann") as ws:
        assert len(ws.headers.rows()) == 7
        assert ws.journal.live_count([MemoryType.EPISODIC]) == 7


def test_memories_stored_before_headers_get_one_on_open(tmp_path: Path) -> None:
    journal, headers = open_stores(tmp_path / "j.sqlite")
    add_fact(journal, headers, 1, unit([1, 0, 0]))
    with journal.db.transaction() as conn:
        conn.execute("DELETE FROM headers")  # a journal from before the headers existed
    assert headers.rows() == []
    journal.db.close()
    _, reopened = open_stores(tmp_path / "j.sqlite")
    (row,) = reopened.rows()
    assert row.tier is Tier.CACHE and row.importance == _fact(1).header.importance
    reopened.db.close()


def test_a_filtered_query_searches_every_tier(small: MemoryService) -> None:
    now = fill(small)
    small.reshuffle("ann", now=now)
    params = QueryParams("bicycle", now=now, session_id="s01", recall=False)
    result = small.query("ann", params)
    assert [s["tier"] for s in result.search["stages"]] == [3]
    assert result.search["stages"][0]["stop"] == "a filtered query searches every tier"
    assert {i.session_id for i in result.items if i.hit} == {"s01"}


def test_the_reshuffle_job_skips_quiet_users(small: MemoryService) -> None:
    fill(small, sessions=3)
    assert small.reshuffle_open() == 1
    assert small.reshuffle_open() == 0  # nothing changed
    small.query("ann", QueryParams("bicycle", k=1))  # a recall counts as a change
    flush(small, "ann")
    assert small.reshuffle_open() == 1
    small.ingest("ann", session_turns(7))
    assert small.reshuffle_open() == 1 and small.reshuffle_open() == 0
    runs = small.tiers_status("ann")["last_reshuffle"]
    assert runs["scored"] > 0
