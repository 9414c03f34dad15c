"""The self-enhancing router: gate, calibration, rounds, and the labelling loop in-process.

The labeller is tests/labeller.py's fake OpenAI-compatible oracle server, reached through the
real ``openai`` backend over HTTP; everything else (encoder, head, journal, graph, vectors,
training) is real. The same loop through a real ``memoryd serve`` is tests/test_router_e2e.py.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from memoryd.cli import main
from memoryd.config import RouterConfig
from memoryd.errors import ConflictError
from memoryd.ingest import NewTurn
from memoryd.llm import OpenAICompatLLM
from memoryd.models import LABELS, Role
from memoryd.router import Router, RouterHead, retry_at
from memoryd.router.calibrate import fit_temperature
from memoryd.router.enhance import read_pool
from memoryd.router.router import decide, deferral_threshold
from memoryd.router.trainer import ROUND_MARGIN, Pool, SeedSet, in_pool_holdout, train_round
from memoryd.service import MemoryService
from memoryd.store.journal import Journal
from memoryd.store.sqlite import Database
from support.config import MODEL_DIR, make_config
from support.labeller import OracleLabeller, serve_oracle
from support.replies import facts_json, turn_json

REMINDER = "Remind me to call the plumber about the kitchen sink tomorrow at 9."


@pytest.fixture(scope="module")
def seed() -> SeedSet:
    return SeedSet.load(MODEL_DIR)


def gold_lines(seed: SeedSet, count: int) -> list[tuple[str, list[str]]]:
    """Held-out seed lines (templates the shipped head never saw) with their gold labels."""
    rows = np.where(seed.holdout)[0][::4][:count]
    return [
        (seed.texts[i], [label.value for label, on in zip(LABELS, seed.y[i], strict=True) if on])
        for i in rows
    ]


# -- gate and calibration ----------------------------------------------------------------------


def test_deferral_threshold_decays_to_its_floor() -> None:
    assert deferral_threshold(0, 0.9, 0.05, 0.5) == pytest.approx(0.9)
    assert deferral_threshold(5, 0.9, 0.05, 0.5) == pytest.approx(0.9 * math.exp(-0.25))
    assert deferral_threshold(100, 0.9, 0.05, 0.5) == 0.5
    settings = RouterConfig.defaults(max_attempts=3, retry_backoff=2.0)
    assert [retry_at(settings, n, 100.0) for n in (1, 2, 3)] == [102.0, 104.0, None]


def test_fit_temperature_recovers_the_temperature_that_made_the_labels() -> None:
    rng = np.random.default_rng(7)
    logits = rng.normal(0.0, 4.0, (20000, 5))
    y = (rng.random(logits.shape) < 1 / (1 + np.exp(-logits / 2.0))).astype(np.float32)
    assert fit_temperature(logits, y) == pytest.approx(2.0, rel=0.08)


def test_temperature_changes_confidence_not_decisions(router: Router, seed: SeedSet) -> None:
    x, texts = seed.x[:200], seed.texts[:200]
    sharp = router.head.with_temperature(0.3)
    assert np.array_equal(decide(router.head, x, texts), decide(sharp, x, texts))
    loose = Router(router.head.with_temperature(3.0)).route(x[0], texts[0]).confidence
    assert Router(sharp).route(x[0], texts[0]).confidence > loose


def test_head_bytes_keep_the_temperature_and_old_files_load(tmp_path: Path) -> None:
    head = RouterHead.load(MODEL_DIR / "router_head.npz")
    assert head.temperature != 1.0  # the shipped head is calibrated
    again = RouterHead.from_bytes(head.to_bytes())
    assert again.temperature == head.temperature
    x = np.ones(head.input_dim)
    np.testing.assert_array_equal(again.predict_proba(x), head.predict_proba(x))
    old = tmp_path / "old.npz"  # a head written before heads had a temperature
    arrays = {"format": np.array(1), "labels": np.array([str(label) for label in LABELS])}
    arrays |= {f"w{i}": w for i, (w, _) in enumerate(head.layers)}
    arrays |= {f"b{i}": b for i, (_, b) in enumerate(head.layers)}
    np.savez(old, **arrays)
    assert RouterHead.load(old).temperature == 1.0


def test_pool_holdout_is_stable_and_about_a_fifth() -> None:
    keys = [f"t_{i}" for i in range(5000)]
    share = sum(map(in_pool_holdout, keys)) / len(keys)
    assert 0.18 < share < 0.22
    assert [in_pool_holdout(k) for k in keys[:50]] == [in_pool_holdout(k) for k in keys[:50]]


# -- training rounds ---------------------------------------------------------------------------


def _pool(seed: SeedSet, lines: list[tuple[str, list[str]]], shift: bool) -> Pool:
    index = {t: i for i, t in enumerate(seed.texts)}
    rows = [index[t] for t, _ in lines]
    y = seed.y[rows]
    return Pool(
        seed.x[rows],
        np.roll(y, 1, axis=1) if shift else y,
        tuple(t for t, _ in lines),
        np.array([in_pool_holdout(t) for t, _ in lines]),
    )


def test_a_round_on_gold_labels_is_accepted_and_one_on_wrong_labels_rejected(
    router: Router, seed: SeedSet
) -> None:
    lines = gold_lines(seed, 20)
    good = train_round(seed, _pool(seed, lines, shift=False), router.head)
    assert good.accepted
    assert good.f1_after["macro"] >= good.f1_before["macro"] - ROUND_MARGIN
    assert good.sizes["pool_train"] + good.sizes["pool_val"] == 20
    assert 0.05 <= good.head.temperature <= 20
    bad = train_round(seed, _pool(seed, lines, shift=True), router.head)
    assert not bad.accepted
    assert bad.f1_after["macro"] < bad.f1_before["macro"]


# -- the loop in the service -------------------------------------------------------------------


@pytest.fixture
def oracle(seed: SeedSet) -> OracleLabeller:
    answers = dict(gold_lines(seed, 20))
    answers[REMINDER] = ["episodic"]  # the classifier says working: the LLM overrules it
    return OracleLabeller(answers)


@pytest.fixture
def llm_url(oracle: OracleLabeller) -> Iterator[str]:
    with serve_oracle(oracle) as url:
        yield url


def make_service(tmp_path: Path, encoder, router: Router, url: str | None, **overrides):
    """A service whose LLM is the oracle at ``url``; ``overrides`` name settings with "__"
    for "." (``router__retrain_every=20``)."""
    settings = {
        "router.tau0": 1.0,  # defer every turn: the tests choose what the labeller says
        "router.retry_backoff": 0.0,
        "router.max_attempts": 2,
    }
    settings |= {k.replace("__", "."): v for k, v in overrides.items()}
    config = make_config(tmp_path / "data", **settings)
    llm = None
    if url is not None:
        llm = OpenAICompatLLM(url, model="oracle", max_tokens=64, timeout=config.llm.timeout)
    return MemoryService(config, encoder, router, llm=llm, owns_encoder=False)


def turn(text: str, session: str = "s1") -> NewTurn:
    return NewTurn(session_id=session, role=Role.USER, text=text)


def test_a_deferred_turn_is_labelled_rerouted_and_pooled(
    tmp_path: Path, encoder, router: Router, llm_url: str
) -> None:
    service = make_service(tmp_path, encoder, router, llm_url)
    try:
        [reply] = service.ingest("ann", [turn(REMINDER)])
        assert reply.routed_by == "deferred" and reply.low_confidence
        assert list(reply.labels) == ["working"]
        before = service.counts("ann")
        assert before["vectors_working"] == 1 and before["graph_Task"] == 1

        assert service.label_deferred() == {"labelled": 1, "retried": 0, "failed": 0, "rounds": 0}
        got = turn_json(service.get_turn("ann", reply.turn_id))
        assert got["labels"] == ["episodic"] and got["routed_by"] == "llm"
        # a reminder asked for with its time is evidence of working memory whatever the label
        assert {m["type"] for m in got["memories"]} == {"episodic", "working"}
        after = service.counts("ann")
        assert after["vectors_working"] == 1 and after["graph_Task"] == 1  # the task stays
        assert after["vectors_episodic"] == 1 and after["graph_Episode"] == 1
        status = service.router_status("ann")
        assert status["pool"]["size"] == 1
        assert status["queue"] == {"pending": 0, "labelled": 1, "failed": 0}
        assert status["decisions"][0]["llm_share"] == 1.0

        rebuilt = service.rebuild("ann")  # the relabel is in the journal: replay reproduces it
        assert rebuilt["graph_Task"] == 1 and rebuilt["vectors_episodic"] == 1
        exported = list(service.export_user("ann"))
        service.import_user("bob", exported)
        assert turn_json(service.get_turn("bob", reply.turn_id))["labels"] == ["episodic"]
        assert service.counts("bob")["graph_Task"] == 1
    finally:
        service.close()


def test_a_round_reads_the_pool_as_routing_vectors(
    tmp_path: Path, encoder, router: Router, llm_url: str
) -> None:
    """The journal keeps the retrieval embedding; a round must train on what the head reads."""
    service = make_service(tmp_path, encoder, router, llm_url)
    try:
        service.ingest("ann", [turn(REMINDER)])
        service.label_deferred()
        with service.users.lease("ann") as ws:
            pool = read_pool(ws.router_state, ws.journal, 384, encoder.routing_vector)
        assert pool.texts == (REMINDER,)
        assert np.array_equal(pool.x[0], encoder.routing_vector(REMINDER))
        assert not np.array_equal(pool.x[0], encoder.embed(REMINDER))
    finally:
        service.close()


def test_a_relabelled_turn_is_consolidated_like_a_new_one(
    tmp_path: Path, encoder, router: Router
) -> None:
    # the classifier: episodic only (semantic 0.47)
    moved = "Packed the last boxes and drove all night, I live in Berlin now."
    allergy = "I'm allergic to ibuprofen"
    labeller = OracleLabeller(
        {"I live in Oslo": ["semantic"], moved: ["episodic", "semantic"], allergy: ["semantic"]}
    )
    with serve_oracle(labeller) as url:
        service = make_service(tmp_path, encoder, router, url)
        try:
            _, berlin, allergic = service.ingest(
                "ann", [turn("I live in Oslo"), turn(moved), turn(allergy)]
            )
            assert "semantic" not in berlin.labels
            assert service.label_deferred()["labelled"] == 3
            facts = facts_json(service.list_facts("ann", history=True))
            found = {f["record"]["object"]["name"]: f for f in facts}
            assert (found["Oslo"]["current"], found["Berlin"]["current"]) == (False, True)
            assert found["Oslo"]["record"]["superseded_by"] == found["Berlin"]["id"]
            # a re-routed turn does not consolidate against its own records
            assert found["ibuprofen"]["record"]["sources"] == [allergic.turn_id]
            before = service.list_facts("ann", history=True)
            service.rebuild("ann")
            assert service.list_facts("ann", history=True) == before
        finally:
            service.close()


def test_without_an_llm_low_confidence_turns_are_flagged_not_queued(
    tmp_path: Path, encoder, router: Router
) -> None:
    service = make_service(tmp_path, encoder, router, None)
    try:
        [reply] = service.ingest("ann", [turn(REMINDER)])
        assert reply.routed_by == "classifier" and reply.low_confidence
        status = service.router_status("ann")
        assert status["deferral"] is False
        assert status["queue"]["pending"] == 0
        assert status["decisions"] == [
            {"round": 0, "decisions": 1, "deferred": 0, "low_confidence": 1, "llm_share": 0.0}
        ]
        assert service.label_deferred()["labelled"] == 0
    finally:
        service.close()


@pytest.mark.parametrize("mode", ["garbage", "slow", "down"])
def test_a_failing_labeller_is_retried_then_given_up(
    tmp_path: Path, encoder, router: Router, oracle: OracleLabeller, llm_url: str, mode: str
) -> None:
    oracle.mode, oracle.delay = mode, 1.0
    service = make_service(tmp_path, encoder, router, llm_url, llm__timeout=0.3)
    try:
        [reply] = service.ingest("ann", [turn(REMINDER)])
        assert service.label_deferred()["retried"] == 1
        assert service.router_status("ann")["queue"]["pending"] == 1
        assert service.label_deferred()["failed"] == 1
        status = service.router_status("ann")
        assert status["queue"] == {"pending": 0, "labelled": 0, "failed": 1}
        assert status["pool"]["size"] == 0
        got = turn_json(service.get_turn("ann", reply.turn_id))
        assert got["labels"] == ["working"]  # the classifier's label stands
        assert service.counts("ann")["graph_Task"] == 1
        assert service.label_deferred()["failed"] == 0  # nothing is tried again
        assert len(oracle.calls) == 2
    finally:
        service.close()


def test_training_round_swaps_the_head_and_rollback_restores_it(
    tmp_path: Path, encoder, router: Router, seed: SeedSet, llm_url: str
) -> None:
    lines = gold_lines(seed, 20)
    service = make_service(tmp_path, encoder, router, llm_url, router__retrain_every=20)
    try:
        service.ingest("ann", [turn(text) for text, _ in lines[:10]])
        assert service.label_deferred()["rounds"] == 0  # 10 of 20 labels
        service.ingest("ann", [turn(text) for text, _ in lines[10:]])
        counts = service.label_deferred()
        assert counts["labelled"] == 10 and counts["rounds"] == 1
        status = service.router_status("ann")
        assert status["round"] == 1
        assert status["tau"] == pytest.approx(math.exp(-0.05), abs=1e-4)
        assert status["head"] == {
            "round": 1,
            "source": "trained",
            "temperature": status["head"]["temperature"],
        }
        last = status["last_validation"]
        assert last["accepted"]
        assert last["f1_after"]["macro"] >= last["f1_before"]["macro"] - ROUND_MARGIN
        assert last["pool"] == 20 and last["llm_share"] == 1.0
        assert status["pool"]["new"] == 0

        service.close()  # a restart routes with the journaled head
        service = make_service(tmp_path, encoder, router, llm_url, router__retrain_every=20)
        assert service.router_status("ann")["head"]["round"] == 1
        assert service.rollback_router("ann") == {"from_round": 1, "to_round": 0}
        status = service.router_status("ann")
        assert status["head"]["source"] == "shipped" and status["round"] == 1
        assert status["head"]["temperature"] == round(router.head.temperature, 4)
        assert [r["kind"] for r in status["rounds"]] == ["train", "rollback"]
        with pytest.raises(ConflictError):
            service.rollback_router("ann")
        service.close()
        service = make_service(tmp_path, encoder, router, llm_url, router__retrain_every=20)
        assert service.router_status("ann")["head"]["round"] == 0
    finally:
        service.close()


def test_an_old_journal_gains_the_relabel_column(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute(
            "CREATE TABLE turns (turn_id TEXT PRIMARY KEY, seq INTEGER NOT NULL,"
            " session_id TEXT NOT NULL, ts TEXT NOT NULL, embedding BLOB NOT NULL,"
            " reply TEXT NOT NULL)"
        )
    Journal(db := Database(path))
    db.close()
    with sqlite3.connect(path) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(turns)")}
    assert "relabel_seq" in columns


def test_cli_router_commands(tmp_path: Path, llm_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {
        "BACKEND": "openai",
        "URL": llm_url,
        "MODEL": "oracle",
    }.items():
        monkeypatch.setenv(f"MEMORYD_LLM_{key}", value)
    monkeypatch.setenv("MEMORYD_ROUTER_TAU0", "1.0")
    base = ["--data-dir", str(tmp_path / "data"), "--model-dir", str(MODEL_DIR)]
    lines = tmp_path / "turns.jsonl"
    lines.write_text(json.dumps({"session_id": "s1", "role": "user", "text": REMINDER}) + "\n")

    def run(*args: str) -> dict:
        result = CliRunner().invoke(main, [*args, *base], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.output) if result.output.startswith("{") else {}

    run("ingest", str(lines), "--user", "ann")
    assert run("router", "status", "--user", "ann")["queue"]["pending"] == 1
    assert run("router", "label", "--user", "ann")["labelled"] == 1
    status = run("router", "status", "--user", "ann")
    assert status["pool"]["size"] == 1 and status["queue"]["labelled"] == 1
    trained = run("router", "train", "--user", "ann")
    assert trained["round"] == 1 and "f1_after" in trained
    assert run("router", "status", "--user", "ann")["round"] == 1
