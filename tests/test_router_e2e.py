"""The self-enhancement loop end to end through a real ``memoryd serve`` process.

The background job labels deferred turns through the daemon's ``openai`` backend; the server
at the other end is tests/labeller.py's oracle (a named fake that answers gold labels, so that
the rounds' outcomes are predictable), except in the last test, where the daemon runs the real
GGUF model in-process with its ``llamacpp`` backend.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memoryd.models import LABELS
from memoryd.router.trainer import SeedSet
from support.config import MODEL_DIR
from support.labeller import OracleLabeller, serve_oracle
from support.llm_fixtures import gemma_gguf
from support.server import ServerProcess
from test_router_loop import REMINDER, gold_lines

pytestmark = pytest.mark.slow

WAIT_S = 240


@pytest.fixture(scope="module")
def lines() -> list[tuple[str, list[str]]]:
    return gold_lines(SeedSet.load(MODEL_DIR), 20)


@pytest.fixture
def oracle(lines: list[tuple[str, list[str]]]) -> OracleLabeller:
    return OracleLabeller({**dict(lines), REMINDER: ["episodic"]})


@pytest.fixture
def llm_url(oracle: OracleLabeller) -> Iterator[str]:
    with serve_oracle(oracle) as url:
        yield url


def loop_env(url: str, **settings: object) -> dict[str, str]:
    env = {
        "MEMORYD_LLM_BACKEND": "openai",
        "MEMORYD_LLM_URL": url,
        "MEMORYD_LLM_MODEL": "oracle",
        "MEMORYD_ROUTER_TAU0": "1.0",  # defer every turn
        "MEMORYD_ROUTER_DRAIN_INTERVAL": "0.2",
        "MEMORYD_ROUTER_RETRAIN_EVERY": "20",
    }
    env |= {f"MEMORYD_{k.upper()}": str(v) for k, v in settings.items()}
    return env


def ingest(client: httpx.Client, user: str, texts: list[str]) -> list[dict[str, Any]]:
    turns = [{"session_id": "s1", "role": "user", "text": t} for t in texts]
    r = client.post(f"/v1/users/{user}/turns", json={"turns": turns})
    assert r.status_code == 201, r.text
    return r.json()["turns"]


def wait_for(client: httpx.Client, user: str, done: Callable[[dict[str, Any]], bool]) -> dict:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        status = client.get(f"/v1/users/{user}/router").json()
        if done(status):
            return status
        time.sleep(0.2)
    raise AssertionError(f"router of {user} never got there: {status}")


def test_deferred_turns_are_labelled_rerouted_pooled_and_trained_on(
    tmp_path: Path, lines: list[tuple[str, list[str]]], oracle: OracleLabeller, llm_url: str
) -> None:
    server = ServerProcess(tmp_path / "d", MODEL_DIR, env=loop_env(llm_url))
    try:
        with server.client() as client:
            [reminder] = ingest(client, "bob", [REMINDER])
            assert reminder["routed_by"] == "deferred" and reminder["labels"] == ["working"]
            replies = ingest(client, "ann", [text for text, _ in lines])
            assert {r["routed_by"] for r in replies} == {"deferred"}

            status = wait_for(client, "ann", lambda s: s["round"] == 1)
            assert status["queue"] == {"pending": 0, "labelled": 20, "failed": 0}
            assert status["pool"]["size"] == 20
            last = status["last_validation"]
            assert last["accepted"], last
            assert status["head"]["round"] == 1 and status["head"]["source"] == "trained"
            for reply, (_, gold) in zip(replies, lines, strict=True):
                turn = client.get(f"/v1/users/ann/turns/{reply['turn_id']}").json()
                assert turn["routed_by"] == "llm" and turn["labels"] == gold

            wait_for(client, "bob", lambda s: s["queue"]["labelled"] == 1)
            turn = client.get(f"/v1/users/bob/turns/{reminder['turn_id']}").json()
            assert turn["labels"] == ["episodic"]
            # rebuilt under the new label: an episode now, and still the task, because a
            # reminder asked for with its time is evidence of working memory whatever the label
            assert {m["type"] for m in turn["memories"]} == {"episodic", "working"}
            tasks = client.get("/v1/users/bob/memories", params={"type": "working"}).json()
            assert len(tasks["memories"]) == 1

            oracle.mode = "shifted"  # now the labeller is wrong: the round must be rejected
            ingest(client, "cat", [text for text, _ in lines])
            status = wait_for(client, "cat", lambda s: s["round"] == 1)
            assert status["last_validation"]["accepted"] is False
            assert status["head"] == {
                "round": 0,
                "source": "shipped",
                "temperature": status["head"]["temperature"],
            }
            assert status["rounds"][0]["macro_f1_after"] < status["rounds"][0]["macro_f1_before"]

            metrics = client.get("/metrics").text
            assert 'memoryd_router_round{user="ann"} 1.0' in metrics
            assert 'memoryd_router_pool{user="cat"} 20.0' in metrics
    finally:
        server.stop()


def test_queued_turns_survive_a_kill(tmp_path: Path, llm_url: str) -> None:
    quiet = loop_env(llm_url, router_drain_interval=3600)  # the job never runs before the kill
    server = ServerProcess(tmp_path / "d", MODEL_DIR, env=quiet)
    with server.client() as client:
        replies = ingest(client, "ann", [REMINDER, "We adopted a cat named Miso last week."])
        status = client.get("/v1/users/ann/router").json()
        assert status["queue"]["pending"] == 2
    server.kill()

    server = ServerProcess(tmp_path / "d", MODEL_DIR, env=loop_env(llm_url))
    try:
        with server.client() as client:
            wait_for(client, "ann", lambda s: s["queue"]["labelled"] == 2)
            for reply in replies:
                turn = client.get(f"/v1/users/ann/turns/{reply['turn_id']}").json()
                assert turn["routed_by"] == "llm"
    finally:
        server.stop()


def test_a_labeller_that_times_out_is_retried_then_given_up(
    tmp_path: Path, oracle: OracleLabeller, llm_url: str
) -> None:
    oracle.mode, oracle.delay = "slow", 3.0
    env = loop_env(llm_url, llm_timeout=0.5, router_max_attempts=2, router_retry_backoff=0.2)
    server = ServerProcess(tmp_path / "d", MODEL_DIR, env=env)
    try:
        with server.client() as client:
            [reply] = ingest(client, "ann", [REMINDER])
            status = wait_for(client, "ann", lambda s: s["queue"]["failed"] == 1)
            assert status["pool"]["size"] == 0
            turn = client.get(f"/v1/users/ann/turns/{reply['turn_id']}").json()
            assert turn["labels"] == ["working"]  # the classifier's label stands
        assert len(oracle.calls) == 2
    finally:
        server.stop()
    assert any("giving up" in line for line in server.log)


def test_the_daemon_labels_with_a_real_gguf_model(tmp_path: Path) -> None:
    model = gemma_gguf(tmp_path)
    env = {
        "MEMORYD_LLM_BACKEND": "llamacpp",
        "MEMORYD_LLM_MODEL_PATH": str(model),
        "MEMORYD_ROUTER_TAU0": "1.0",
        "MEMORYD_ROUTER_DRAIN_INTERVAL": "0.2",
    }
    server = ServerProcess(tmp_path / "d", MODEL_DIR, env=env)
    try:
        with server.client() as client:
            texts = [REMINDER, "I'm allergic to ibuprofen.", "ok thanks"]
            replies = ingest(client, "ann", texts)
            status = wait_for(client, "ann", lambda s: s["queue"]["pending"] == 0)
            # A tiny base model labels badly but, schema-constrained, always validly.
            assert status["queue"]["labelled"] == 3, status
            for reply in replies:
                turn = client.get(f"/v1/users/ann/turns/{reply['turn_id']}").json()
                assert turn["routed_by"] == "llm"
                assert turn["labels"] and set(turn["labels"]) <= {str(x) for x in LABELS}
    finally:
        server.stop()
