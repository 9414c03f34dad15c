"""LongMemEval retrieval metrics: hand-computed arithmetic, the fixture's corpus ids and skips,
a real run over tests/data/longmemeval_mini.json, the CLI and the synthetic generator."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime
from math import log2
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from memoryd.cli import main
from memoryd.eval.longmemeval import (
    dcg,
    load_longmemeval,
    ndcg_any,
    parse_lme_date,
    recall_all,
    recall_any,
    run_longmemeval,
    score_question,
    session_metrics,
    session_window,
    turn_metrics,
    user_id_for,
)
from memoryd.models import MemoryType
from memoryd.retrieve import QueryResult
from memoryd.service import USER_ID, MemoryService
from support.config import MODEL_DIR, REPO, make_config

MINI = REPO / "tests" / "data" / "longmemeval_mini.json"
SCORED = ["lme_ssu_01", "lme_ms_02", "lme_tr_03"]


# -- metric arithmetic ---------------------------------------------------------------------


def test_recall_any_and_all() -> None:
    ranking = ["noans_s_1", "answer_a_2", "x_1", "answer_b_5"]
    relevant = {"answer_a_2", "answer_b_5"}
    assert (recall_any(ranking, relevant, 1), recall_all(ranking, relevant, 1)) == (0.0, 0.0)
    assert (recall_any(ranking, relevant, 3), recall_all(ranking, relevant, 3)) == (1.0, 0.0)
    assert (recall_any(ranking, relevant, 4), recall_all(ranking, relevant, 4)) == (1.0, 1.0)
    # nothing relevant: the official any() is 0 and all() is vacuously 1
    assert (recall_any(ranking, set(), 4), recall_all(ranking, set(), 4)) == (0.0, 1.0)


def test_dcg_counts_rank_two_like_rank_one() -> None:
    # rel_1 + sum_{i>=2} rel_i / log2(i): rank 2 divides by log2(2) = 1, rank 3 by log2(3)
    assert dcg([1, 1]) == 2.0
    assert dcg([0, 0, 1]) == pytest.approx(1 / log2(3))
    assert dcg([1, 0, 1, 1]) == pytest.approx(1 + 1 / log2(3) + 1 / log2(4))
    assert dcg([]) == 0.0


def test_ndcg_any() -> None:
    ranking = ["noans_1", "answer_2", "x", "answer_5"]
    relevant = {"answer_2", "answer_5"}
    # @3: gains [0, 1, 0] → DCG = 1/log2(2) = 1; ideal [1, 1] → 1 + 1/log2(2) = 2
    assert ndcg_any(ranking, relevant, 3) == pytest.approx(0.5)
    # @4: gains [0, 1, 0, 1] → 1 + 1/log2(4) = 1.5; ideal still 2 (two relevant items)
    assert ndcg_any(ranking, relevant, 4) == pytest.approx(0.75)
    assert ndcg_any(ranking, relevant, 1) == 0.0
    # the rel_1 special case: one relevant item at rank 2 scores as well as at rank 1
    assert ndcg_any(["x", "a"], {"a"}, 2) == 1.0
    assert ndcg_any(["x", "y", "a"], {"a"}, 3) == pytest.approx(1 / log2(3))
    assert ndcg_any(["x"], set(), 1) == 0.0


def test_ideal_dcg_is_truncated_at_k() -> None:
    # 3 relevant, k = 2: ideal = dcg([1, 1]) = 2, not 1 + 1 + 1/log2(3)
    assert ndcg_any(["a", "b", "x"], {"a", "b", "c"}, 2) == 1.0
    # @3: gains [1, 1, 0] = 2 over ideal 1 + 1 + 1/log2(3)
    assert ndcg_any(["a", "b", "x"], {"a", "b", "c"}, 3) == pytest.approx(2 / (2 + 1 / log2(3)))
    # the ideal may count more corpus items than distinct relevant ids (session level)
    assert ndcg_any(["s", "x"], {"s"}, 2, relevant_in_corpus=2) == pytest.approx(0.5)


def test_session_window_grows_until_k_sessions() -> None:
    sessions = ["s1", "s1", "s2", "s1", "s3"]
    assert session_window(sessions, 1) == 1
    assert session_window(sessions, 2) == 3
    assert session_window(sessions, 3) == 5
    assert session_window(sessions, 4) == 6  # never 4 sessions: past the end, as officially


def test_session_level_is_derived_from_the_turn_ranking() -> None:
    ranking = ["noans_a_1", "answer_a_3", "s_x_1", "answer_a_5", "answer_b_2"]
    relevant = {"answer_a_3", "answer_a_5", "answer_b_2"}
    # sessions: noans_a, answer_a, s_x, answer_a, answer_b; relevant sessions answer_a, answer_b
    assert session_metrics(ranking, relevant, 1) == {
        "recall_any": 0.0,
        "recall_all": 0.0,
        "ndcg_any": 0.0,
    }
    # @2: window of 2 turns (noans_a, answer_a); gains [0, 1] → 1; ideal: 3 relevant turns cut
    # at 2 → [1, 1] = 2
    assert session_metrics(ranking, relevant, 2) == {
        "recall_any": 1.0,
        "recall_all": 0.0,
        "ndcg_any": 0.5,
    }
    # @4: 4 turns cover only 3 sessions → window 5; gains [0, 1, 0, 1, 1] →
    # 1 + 1/log2(4) + 1/log2(5); ideal [1, 1, 1] = 2 + 1/log2(3)
    at4 = session_metrics(ranking, relevant, 4)
    assert (at4["recall_any"], at4["recall_all"]) == (1.0, 1.0)
    assert at4["ndcg_any"] == pytest.approx((1.5 + 1 / log2(5)) / (2 + 1 / log2(3)))
    # the same ranking at turn level @4 misses answer_b_2 (rank 5)
    turn4 = turn_metrics(ranking, relevant, 4)
    assert (turn4["recall_any"], turn4["recall_all"]) == (1.0, 0.0)
    assert turn4["ndcg_any"] == pytest.approx(1.5 / (2 + 1 / log2(3)))


def test_score_question_keys_as_the_official_log() -> None:
    scores = score_question(["answer_a_1"], {"answer_a_1"}, [1, 5])
    assert sorted(scores) == ["session", "turn"]
    assert sorted(scores["turn"]) == [
        "ndcg_any@1",
        "ndcg_any@5",
        "recall_all@1",
        "recall_all@5",
        "recall_any@1",
        "recall_any@5",
    ]
    assert set(scores["session"].values()) == {1.0}


# -- loading -------------------------------------------------------------------------------


def test_dates_and_user_ids() -> None:
    assert parse_lme_date("2023/05/20 (Sat) 02:21") == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    with pytest.raises(ValueError, match="2023-05-20"):
        parse_lme_date("2023-05-20 02:21")
    assert user_id_for("gpt4_2655b836") == "lme-gpt4_2655b836"
    odd = [user_id_for("a/b"), user_id_for("a.b"), user_id_for("q" * 100)]
    assert all(USER_ID.fullmatch(u) for u in odd) and len(set(odd)) == 3


def test_corpus_ids_noans_renaming_and_skips() -> None:
    by_id = {i.question_id: i for i in load_longmemeval(MINI)}
    assert list(by_id) == [*SCORED, "lme_ku_04_abs", "lme_ssa_05"]
    ssu = by_id["lme_ssu_01"]
    # user turns only, n counts assistant turns too; the answer session's user turn without
    # has_answer is renamed noans
    assert [t.turn_id for t in ssu.turns] == [
        "sharegpt_ssu01_1_1",
        "sharegpt_ssu01_1_3",
        "noans_ssu01_a_1",
        "answer_ssu01_a_3",
        "ultrachat_ssu01_2_1",
    ]
    assert ssu.relevant == {"answer_ssu01_a_3"}
    assert {t.role.value for t in ssu.turns} == {"user"}
    assert ssu.turns[3].session_id == "answer_ssu01_a"
    assert ssu.turns[3].ts == datetime(2023, 5, 20, 14, 5, 2, tzinfo=UTC)  # date + 2 s
    assert ssu.question_date == datetime(2023, 6, 2, 18, 40, tzinfo=UTC)
    # a user turn with no has_answer key in an answer session counts as false
    assert by_id["lme_ms_02"].relevant == {"answer_ms02_a_1", "answer_ms02_b_1"}
    assert "noans_ms02_a_3" in {t.turn_id for t in by_id["lme_ms_02"].turns}
    # has_answer only on the assistant turn: session and turns all noans, nothing relevant
    ssa = by_id["lme_ssa_05"]
    assert ssa.relevant == frozenset()
    assert [t.turn_id for t in ssa.turns][:2] == ["noans_ssa05_a_1", "noans_ssa05_a_3"]
    assert ssa.turns[0].session_id == "noans_ssa05_a"
    assert [i.skip_reason for i in by_id.values()] == [
        None,
        None,
        None,
        "abstention",
        "no user evidence",
    ]


# -- a real run ----------------------------------------------------------------------------


def test_run_over_the_fixture(service: MemoryService) -> None:
    seen: dict[str, QueryResult] = {}
    report = run_longmemeval(service, MINI, [1, 3, 10], on_query=seen.__setitem__)
    assert report.instances == 5 and report.skipped == {"abstention": 1, "no user evidence": 1}
    assert [q.question_id for q in report.questions] == SCORED == list(seen)
    assert report.question_types() == ["multi-session", "single-session-user", "temporal-reasoning"]
    text = report.format()
    for line in ["5 instances, 3 scored", "1 abstention, 1 no user evidence", "temporal-reasoning"]:
        assert line in text
    # every instance has at most 5 user turns, so k = 10 covers the corpus
    assert report.mean("turn", "recall_all", 10) == 1.0
    # two evidence turns cannot both be in the top 1
    assert report.mean("turn", "recall_all", 1, "multi-session") == 0.0
    assert report.to_dict()["by_type"]["multi-session"]["questions"] == 1
    assert not any(service.user_exists(user_id_for(q)) for q in SCORED)


@pytest.mark.parametrize("qtype", ["multi-session", "single-session-user", "temporal-reasoning"])
def test_the_answer_turn_ranks_first(service: MemoryService, qtype: str) -> None:
    # each answer turn shares its rare words with the question (tortoise, pottery workshop,
    # kayak paddle) and no other turn does
    report = run_longmemeval(service, MINI, [1])
    assert report.mean("turn", "recall_any", 1, qtype) == 1.0
    assert report.mean("session", "recall_any", 1, qtype) == 1.0


def test_options_reach_the_query_and_users_can_stay(service: MemoryService) -> None:
    seen: dict[str, QueryResult] = {}
    run_longmemeval(
        service,
        MINI,
        [3],
        limit=1,
        query_options={"session_id": "sharegpt_ssu01_1"},  # a session without the answer
        on_query=seen.__setitem__,
        keep_users=True,
    )
    result = seen["lme_ssu_01"]
    # Episodes come from the session asked for; facts, rules and open tasks hold across
    # sessions (retrieve.expand), so they may name turns of others.
    episodes = {t for item in result.section(MemoryType.EPISODIC) for t in item.turn_ids}
    assert episodes <= {"sharegpt_ssu01_1_1", "sharegpt_ssu01_1_3"} and episodes
    others = set(result.turn_ids()) - episodes
    assert all(i.type is not MemoryType.EPISODIC for i in result.items if set(i.turn_ids) & others)
    assert service.user_exists(user_id_for("lme_ssu_01"))


def test_blank_turns_are_left_out_and_long_ones_cut(tmp_path: Path, service_factory) -> None:
    session = [
        {"role": "user", "content": "  ", "has_answer": False},
        {"role": "user", "content": "I bought a kayak paddle " + "é" * 10, "has_answer": True},
    ]
    instance = {
        "question_id": "cut",
        "question_type": "single-session-user",
        "question": "kayak",
        "answer": "",
        "question_date": "2023/05/21 (Sun) 10:00",
        "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_session_ids": ["answer_x"],
        "haystack_sessions": [session],
        "answer_session_ids": ["answer_x"],
    }
    path = tmp_path / "cut.json"
    path.write_text(json.dumps([instance]))
    service = service_factory(make_config(tmp_path / "d", **{"limits.max_turn_bytes": 29}))
    report = run_longmemeval(service, path, [1], keep_users=True)
    assert len(report.questions) == 1
    records = service.export_user(user_id_for("cut"))
    turns = [(r["ref"], r["payload"]["turn"]["text"]) for r in records if r.get("kind") == "turn"]
    # 24 ASCII bytes + 2 × "é" = 28; a third "é" would end past byte 29
    assert turns == [("answer_x_2", "I bought a kayak paddle éé")]


def test_cli(tmp_path: Path) -> None:
    out = tmp_path / "lme.txt"
    args = ["eval", "longmemeval", str(MINI), "--data-dir", str(tmp_path / "data")]
    args += ["--model-dir", str(MODEL_DIR), "--k", "1,5", "--out", str(out), "--search", "all"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "3 scored" in result.output and "any@5" in result.output
    assert "single-session-user" in out.read_text()
    bad = CliRunner().invoke(main, ["eval", "longmemeval", str(MINI), "--k", "0,5"])
    assert bad.exit_code == 2 and ">= 1" in bad.output
    helptext = CliRunner().invoke(main, ["eval", "longmemeval", "--help"]).output
    for phrase in ["Only USER turns", "recall_all@k", "_abs", "single-session-assistant"]:
        assert phrase in helptext


# -- the synthetic generator ---------------------------------------------------------------


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_lme_synth", REPO / "scripts" / "make_lme_synth.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_synthetic_file_loads_with_needles(tmp_path: Path) -> None:
    gen = _generator()
    out = tmp_path / "synth.json"
    assert gen.main(["--instances", "5", "--sessions", "6", "--turns", "4", "--out", str(out)]) == 0
    assert gen.generate(5, 6, 4) == gen.generate(5, 6, 4) != gen.generate(5, 6, 4, seed=2)
    instances = load_longmemeval(out)
    assert [i.question_type for i in instances] == gen.QUESTION_TYPES
    for instance in instances:
        assert instance.skip_reason is None
        assert len(instance.turns) == 6 * 2  # 2 user turns in each 4-turn session
        sessions = {t.session_id for t in instance.turns if t.turn_id in instance.relevant}
        two = instance.question_type in ("multi-session", "knowledge-update")
        assert len(instance.relevant) == len(sessions) == (2 if two else 1)
        times = [t.ts for t in instance.turns]
        assert times == sorted(times) and times[-1] < instance.question_date
