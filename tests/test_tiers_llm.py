"""The LLM parts of the tiers on a real llama.cpp model (Gemma 3 270M, a base model: the tests
check the plumbing and the schema-constrained answers, not their wisdom): the sufficiency
judge, the importance job, and what happens when the LLM fails."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from memoryd.errors import ConfigError
from memoryd.ingest import NewTurn
from memoryd.llm import LlamaCppLLM
from memoryd.llm.prompts import importance_schema, sufficiency_schema
from memoryd.models import ImportanceSource, Role
from memoryd.retrieve import QueryParams
from memoryd.retrieve.sufficiency import Evidence, LLMSufficiency, Stage
from memoryd.service import MemoryService
from memoryd.workspace import MemoryPatch
from support.config import make_config
from support.llm_fixtures import RecordingLLM, gemma_gguf
from support.replies import memory_json

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
TEXTS = [
    "I am allergic to penicillin, it gave me a rash.",
    "haha ok thanks",
    "Every Monday I swim 2 km before work.",
]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RecordingLLM]:
    path = gemma_gguf(tmp_path_factory.mktemp("gguf"))
    llm = RecordingLLM(
        LlamaCppLLM(path, threads=1, context=2048, max_tokens=256, idle_release=600.0)
    )
    yield llm
    llm.close()
    path.unlink()


def stage(query: str, k: int) -> Stage:
    hits = [Evidence(t, f"[2024-03-01 09:0{i}] {t}", f"t{i}", 0.5) for i, t in enumerate(TEXTS)]
    return Stage(query, k, hits, {}, len(TEXTS), len(TEXTS))


def test_llm_judge_answers_with_a_trigger_token(gemma: RecordingLLM) -> None:
    judge = LLMSufficiency(gemma, timeout=300)
    verdict = judge(stage("Which antibiotic am I allergic to?", 3))
    answer = gemma.answers[-1]
    assert list(Draft202012Validator(sufficiency_schema()).iter_errors(answer)) == []
    assert verdict.sufficient == (answer["verdict"] == "sufficient")
    assert verdict.why == f"LLM says {answer['verdict']}"
    calls = len(gemma.answers)
    short = judge(stage("Which antibiotic?", 5))  # three turns for a top-5: no LLM call
    assert not short.sufficient and "not full" in short.why and len(gemma.answers) == calls


def test_a_failing_llm_judge_searches_on(tmp_path: Path) -> None:
    missing = LlamaCppLLM(
        tmp_path / "no-such-model.gguf", threads=1, context=512, max_tokens=16, idle_release=60.0
    )
    verdict = LLMSufficiency(missing)(stage("Which antibiotic am I allergic to?", 3))
    assert not verdict.sufficient and "LLMUnavailableError" in verdict.why


@pytest.fixture
def llm_service(tmp_path, encoder, router, gemma) -> Iterator[MemoryService]:
    sizes = {
        "tiers.sufficiency": "llm",
        "tiers.recent_sessions": 1,
        "tiers.cache_size": 1,
        "tiers.buffer_size": 2,
    }
    svc = MemoryService(make_config(tmp_path / "data", **sizes), encoder, router, llm=gemma)
    yield svc
    svc.close()


def test_importance_job_stores_the_llm_scores(llm_service: MemoryService, gemma) -> None:
    turns = [NewTurn("s1", Role.USER, text, ts=T0, turn_id=f"t{i}") for i, text in enumerate(TEXTS)]
    replies = llm_service.ingest("ann", turns)
    kept = replies[0].memories[0].id
    llm_service.patch_memory("ann", kept, MemoryPatch(importance=9.5))
    scored = llm_service.score_importance("ann")
    answer = gemma.answers[-1]
    count = len(answer["scores"])
    assert list(Draft202012Validator(importance_schema(count)).iter_errors(answer)) == []
    assert scored >= 1
    ids = [m.id for r in replies for m in r.memories]
    headers = [
        memory_json(llm_service.get_memory("ann", memory_id).memory)["record"]["header"]
        for memory_id in ids
    ]
    by_llm = [h for h in headers if h["importance_by"] == ImportanceSource.LLM.value]
    assert len(by_llm) == scored and all(1 <= h["importance"] <= 10 for h in by_llm)
    # the client's importance wins over the LLM's
    assert (
        memory_json(llm_service.get_memory("ann", kept).memory)["record"]["header"]["importance"]
        == 9.5
    )
    assert llm_service.score_importance("ann") == 0  # nothing left to score


def test_the_llm_judges_the_tiered_search(llm_service: MemoryService) -> None:
    svc = llm_service
    older = [
        "We repainted the garden shed green.",
        "The train to Leeds was late again.",
        "My sister visited us in Porto last spring.",
        "I finished reading a long novel about whales.",
        "The neighbours got a new puppy called Biscuit.",
        "We booked a cabin by the lake for August.",
    ]
    svc.ingest(
        "bo",
        [NewTurn(f"s0{i % 2}", Role.USER, t, ts=T0, turn_id=f"o{i}") for i, t in enumerate(older)],
    )
    later = T0 + timedelta(days=30)
    svc.ingest(
        "bo",
        [NewTurn("s1", Role.USER, t, ts=later, turn_id=f"t{i}") for i, t in enumerate(TEXTS)],
    )
    # tier 1 holds the recent session and one record, tier 2 two more: stages for the judge
    svc.reshuffle("bo", now=later + timedelta(days=1))
    query = QueryParams("what am I allergic to?", k=2, recall=False)
    result = svc.query("bo", query)
    judged = [s for s in result.search["stages"] if "sufficient" in s]
    assert judged and all(s["why"].startswith("LLM says ") for s in judged)
    expected = judged[-1]["tier"] if judged[-1]["sufficient"] else 3
    assert result.search["stopped_at"] == expected


def test_llm_sufficiency_needs_an_llm(tmp_path, encoder, router) -> None:
    config = make_config(tmp_path / "data", **{"tiers.sufficiency": "llm"})
    with pytest.raises(ConfigError, match="needs an LLM"):
        MemoryService(config, encoder, router)
