"""The HTTP surface through the real app (TestClient runs the lifespan): shapes, auth, errors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from memoryd.api.auth import Secret
from memoryd.app import create_app
from memoryd.service import MemoryService

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TURNS = {
    "turns": [
        {
            "session_id": "s1",
            "role": "user",
            "text": "I'm allergic to ibuprofen.",
            "ts": "2024-05-08T13:56:00Z",
        },
        {
            "session_id": "s1",
            "role": "user",
            "text": "Remind me to book the flight to Oslo.",
            "ts": "2024-05-08T13:57:00",
        },
        {
            "session_id": "s1",
            "role": "assistant",
            "text": "Noted, I'll remind you.",
            "turn_id": "a-1",
        },
    ]
}


@pytest.fixture
def client(config, service: MemoryService) -> Iterator[TestClient]:
    app = create_app(config, service=service, token=Secret(TOKEN))
    with TestClient(app) as c:
        yield c


def ingest(client: TestClient, user: str = "alice") -> dict:
    r = client.post(f"/v1/users/{user}/turns", json=TURNS, headers=AUTH)
    assert r.status_code == 201, r.text
    return r.json()


def error_of(r) -> dict:
    body = r.json()
    assert set(body) == {"error"}
    assert {"type", "message"} <= set(body["error"])
    return body["error"]


def wait_ready(client: TestClient) -> dict:
    for _ in range(200):
        r = client.get("/readyz")
        if r.status_code == 200:
            return r.json()
        assert r.json()["status"] == "recovering"
        time.sleep(0.05)
    raise AssertionError("never ready")


def test_health_and_readiness_need_no_token(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert wait_ready(client)["status"] == "ready"
    assert client.get("/openapi.json").status_code == 200


def test_ingest_and_query_roundtrip(client: TestClient) -> None:
    body = ingest(client)
    assert [t["duplicate"] for t in body["turns"]] == [False, False, False]
    assert body["turns"][2]["turn_id"] == "a-1"
    again = ingest(client)
    assert [t["duplicate"] for t in again["turns"]] == [True, True, True]
    r = client.post(
        "/v1/users/alice/query", json={"query": "what am I allergic to?", "k": 3}, headers=AUTH
    )
    assert r.status_code == 200
    result = r.json()
    assert set(result["sections"]) == {"episodic", "semantic", "procedural", "working"}
    assert "ibuprofen" in result["context"]
    assert result["trace"] and {"id", "type", "turn_ids", "score", "why"} <= set(result["trace"][0])
    assert result["turn_ids"]


def test_turn_and_memory_routes(client: TestClient) -> None:
    body = ingest(client)
    turn_id = body["turns"][0]["turn_id"]
    r = client.get(f"/v1/users/alice/turns/{turn_id}", headers=AUTH)
    assert r.status_code == 200 and r.json()["text"] == "I'm allergic to ibuprofen."
    assert r.json()["ts"] == "2024-05-08T13:56:00+00:00"
    listed = client.get(
        "/v1/users/alice/turns", params={"session_id": "s1", "limit": 2}, headers=AUTH
    ).json()
    assert len(listed["turns"]) == 2 and listed["next_cursor"]
    memories = client.get(
        "/v1/users/alice/memories", params={"type": "working"}, headers=AUTH
    ).json()["memories"]
    assert memories and all(m["type"] == "working" for m in memories)
    mid = memories[0]["id"]
    assert client.get(f"/v1/users/alice/memories/{mid}", headers=AUTH).json()["id"] == mid
    r = client.patch(f"/v1/users/alice/memories/{mid}", json={"importance": 8}, headers=AUTH)
    assert r.status_code == 200 and r.json()["record"]["header"]["importance"] == 8
    assert client.delete(f"/v1/users/alice/memories/{mid}", headers=AUTH).json()["deleted"]
    assert client.get(f"/v1/users/alice/memories/{mid}", headers=AUTH).status_code == 404


def test_delete_user_returns_counts(client: TestClient) -> None:
    ingest(client)
    r = client.delete("/v1/users/alice", headers=AUTH)
    assert r.status_code == 200
    assert r.json()["removed"]["turns"] == 3
    assert error_of(client.get("/v1/users/alice", headers=AUTH))["type"] == "UserNotFoundError"


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic dGVzdA=="}]
)
def test_v1_needs_the_token(client: TestClient, headers: dict) -> None:
    r = client.post("/v1/users/alice/turns", json=TURNS, headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    error_of(r)
    assert client.get("/v1/users/alice", headers=AUTH).status_code == 404  # nothing written


def test_malformed_json_is_400(client: TestClient) -> None:
    r = client.post(
        "/v1/users/alice/turns",
        content=b'{"turns": [',
        headers=AUTH | {"Content-Type": "application/json"},
    )
    assert r.status_code == 400
    assert error_of(r)["type"] == "MalformedJSON"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"turns": []}, "turns"),
        ({"turns": [{"session_id": "s", "role": "robot", "text": "x"}]}, "role"),
        ({"turns": [{"session_id": "s", "role": "user", "text": 5}]}, "text"),
        ({"turns": [{"session_id": "s", "role": "user", "text": ""}]}, "text"),
        ({"turns": [{"session_id": "s", "role": "user", "text": "x", "ts": "yesterday"}]}, "ts"),
        ({"turns": [{"session_id": "s", "role": "user", "text": "x", "colour": 1}]}, "colour"),
        ({"turns": [{"session_id": "s", "role": "user", "text": "x" * 40000}]}, "text"),
        ({"turns": [{"role": "user", "text": "x"}]}, "session_id"),
        ({"turns": [{"session_id": "s", "role": "user", "text": "x"}] * 257}, "turns"),
        ({"nope": 1}, "turns"),
    ],
)
def test_bad_turns_are_422_and_write_nothing(client: TestClient, body: dict, where: str) -> None:
    r = client.post("/v1/users/alice/turns", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    error = error_of(r)
    assert error["type"] == "ValidationError" and where in error["message"]
    assert client.get("/v1/users/alice", headers=AUTH).status_code == 404


def test_turn_text_limit_counts_bytes(client: TestClient) -> None:
    text = "é" * 17000  # 17,000 characters, 34,000 UTF-8 bytes
    r = client.post(
        "/v1/users/alice/turns",
        headers=AUTH,
        json={"turns": [{"session_id": "s", "role": "user", "text": text}]},
    )
    assert r.status_code == 422 and "bytes" in error_of(r)["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"query": ""},
        {"query": "x", "k": 0},
        {"query": "x", "k": 1000},
        {"query": "x", "types": ["gossip"]},
        {"query": "x", "since": "2024-02-01T00:00:00Z", "until": "2024-01-01T00:00:00Z"},
        {"query": "x", "search": "tier9"},
        {"query": "x", "recall": "sometimes"},
    ],
)
def test_bad_queries_are_422(client: TestClient, body: dict) -> None:
    r = client.post("/v1/users/alice/query", json=body, headers=AUTH)
    assert r.status_code == 422
    error_of(r)


def test_oversize_body_is_413(client: TestClient) -> None:
    big = json.dumps({"turns": [{"session_id": "s", "role": "user", "text": "x" * 30000}] * 300})
    assert len(big) > 8 * 1024 * 1024
    r = client.post(
        "/v1/users/alice/turns", content=big, headers=AUTH | {"Content-Type": "application/json"}
    )
    assert r.status_code == 413
    assert error_of(r)["type"] == "PayloadTooLarge"


def test_oversize_chunked_body_is_413(client: TestClient) -> None:
    def chunks():
        for _ in range(100):
            yield b"x" * (100 * 1024)

    r = client.post(
        "/v1/users/alice/turns",
        content=chunks(),
        headers=AUTH | {"Content-Type": "application/json"},
    )
    assert r.status_code == 413


def test_encoded_slash_in_user_id_matches_no_route(client: TestClient) -> None:
    r = client.post("/v1/users/..%2Fx/turns", json=TURNS, headers=AUTH)
    assert r.status_code == 404
    assert error_of(r)["message"] == "Not Found"
    assert not any(client.app.state.service.users_dir.iterdir())


@pytest.mark.parametrize("user", ["x" * 200, "a%20b", "%C3%BC", "a.b"])
def test_bad_user_ids_are_400(client: TestClient, user: str) -> None:
    r = client.post(f"/v1/users/{user}/turns", json=TURNS, headers=AUTH)
    assert r.status_code == 400, r.text
    assert error_of(r)["type"] == "InvalidUserIdError"


def test_unknown_ids_are_404(client: TestClient) -> None:
    ingest(client)
    for path in [
        "/v1/users/alice/turns/nope",
        "/v1/users/alice/memories/nope",
        "/v1/users/bob/turns/x",
        "/v1/users/bob",
    ]:
        r = client.get(path, headers=AUTH)
        assert r.status_code == 404, path
        error_of(r)
    r = client.patch("/v1/users/alice/memories/nope", json={"text": "x"}, headers=AUTH)
    assert r.status_code == 404
    r = client.patch("/v1/users/alice/memories/nope", json={}, headers=AUTH)
    assert r.status_code == 422


def test_metrics_report_routes_counts_and_sizes(client: TestClient) -> None:
    ingest(client)
    client.post("/v1/users/alice/query", json={"query": "allergy"}, headers=AUTH)
    text = client.get("/metrics").text
    assert 'memoryd_request_seconds_count{method="POST",route="/v1/users/{user_id}/turns"' in text
    assert "memoryd_turns_ingested_total 3.0" in text
    assert "memoryd_queries_total 1.0" in text
    assert 'memoryd_store_items{item="turns",user="alice"} 3.0' in text


def test_router_endpoints(client: TestClient) -> None:
    ingest(client)
    status = client.get("/v1/users/alice/router", headers=AUTH).json()
    assert status["round"] == 0 and status["tau"] == 0.9 and status["deferral"] is False
    assert status["head"]["source"] == "shipped" and status["decisions"][0]["decisions"] == 3
    r = client.post("/v1/users/alice/router/rounds", headers=AUTH)
    assert r.status_code == 201, r.text
    trained = r.json()
    assert trained["round"] == 1 and trained["sizes"]["pool_train"] == 0
    # no pool: the same recipe on the same seed split retrains the shipped head, a tie accepts
    assert trained["accepted"] and trained["f1_after"] == trained["f1_before"]
    r = client.post("/v1/users/alice/router/rollback", headers=AUTH)
    assert r.json() == {"from_round": 1, "to_round": 0}
    r = client.post("/v1/users/alice/router/rollback", headers=AUTH)
    assert r.status_code == 409 and "shipped head" in error_of(r)["message"]
    assert client.get("/v1/users/nobody/router", headers=AUTH).status_code == 404
    assert client.post("/v1/users/alice/router/rounds").status_code == 401


def test_tier_endpoints(client: TestClient) -> None:
    ingest(client)
    r = client.post("/v1/users/alice/query", json={"query": "ibuprofen", "k": 1}, headers=AUTH)
    search = r.json()["search"]
    assert search["mode"] == "tiered" and search["stages"][0]["tier"] == 1
    assert r.json()["candidates"] == search["stages"][0]["pool"]
    done = client.post("/v1/users/alice/tiers/reshuffle", headers=AUTH).json()
    assert done["scored"] == done["sizes"]["tier1"] >= 2
    status = client.get("/v1/users/alice/tiers?moves=5", headers=AUTH).json()
    assert status["sizes"]["tier1"] >= 2 and status["last_reshuffle"]["scored"] == done["scored"]
    assert status["persona"]["facts"] >= 1 and "ibuprofen" in status["persona"]["profile"]
    r = client.post(
        "/v1/users/alice/query", json={"query": "ibuprofen", "k": 1, "search": "all"}, headers=AUTH
    )
    assert r.json()["search"]["stages"] == [
        {
            "tier": 3,
            "pool": r.json()["candidates"],
            "hits": 1,
            "stop": "last stage (search: all)",
        }
    ]
    assert client.get("/v1/users/alice/tiers?moves=-1", headers=AUTH).status_code == 422
    assert client.get("/v1/users/bob/tiers", headers=AUTH).status_code == 404


def test_openapi_documents_every_reply(client: TestClient) -> None:
    """Every route declares its response model: the spec has a reply schema for each operation
    (JSON everywhere but the Prometheus text of /metrics and the JSON lines of an export)."""
    spec = client.get("/openapi.json").json()
    operations = [(p, m, op) for p, ops in spec["paths"].items() for m, op in ops.items()]
    assert len(operations) == 29
    for path, method, op in operations:
        status = next(code for code in op["responses"] if code.startswith("2"))
        content = op["responses"][status]["content"]
        if path == "/metrics":
            assert "text/plain" in content
            continue
        if path.endswith("/export"):
            assert "application/x-ndjson" in content
            continue
        schema = content["application/json"]["schema"]
        assert schema.get("$ref", "").startswith("#/components/schemas/"), (method, path)
