"""The API keeps its OpenAPI contract: each fix of what the schema fuzzer (scripts/fuzz.py) found
has its regression test here, and the document states what the routes check."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from memoryd.api.auth import Secret
from memoryd.app import create_app
from memoryd.schemas import TurnIn
from memoryd.service import MemoryService

TOKEN = "contract-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
TURN = {"session_id": "s1", "role": "user", "text": "I'm allergic to penicillin."}


@pytest.fixture
def client(config, service: MemoryService) -> Iterator[TestClient]:
    with TestClient(create_app(config, service=service, token=Secret(TOKEN))) as c:
        yield c


def counts(client: TestClient, user: str = "alice") -> dict:
    r = client.get(f"/v1/users/{user}", headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()["counts"]


def error(r, status: int) -> dict:
    assert r.status_code == status, r.text
    return r.json()["error"]


@pytest.mark.parametrize("route", ["turns", "memories"])
def test_a_cursor_past_sqlites_integers_is_422(client: TestClient, route: str) -> None:
    client.post("/v1/users/alice/turns", json={"turns": [TURN]}, headers=AUTH)
    for cursor in (2**64 - 1, 2**63):
        r = client.get(f"/v1/users/alice/{route}", params={"cursor": cursor}, headers=AUTH)
        assert "cursor" in error(r, 422)["message"]
    r = client.get(f"/v1/users/alice/{route}", params={"cursor": 2**63 - 1}, headers=AUTH)
    assert r.status_code == 200 and r.json()["next_cursor"] is None


def test_a_deleted_tasks_id_is_not_reused(client: TestClient) -> None:
    body = {"title": "renew the passport", "task_id": "passport"}
    assert client.post("/v1/users/alice/tasks", json=body, headers=AUTH).status_code == 201
    assert client.post("/v1/users/alice/tasks", json=body, headers=AUTH).status_code == 201
    r = client.delete("/v1/users/alice/memories/passport", headers=AUTH)
    assert r.status_code == 200
    before = counts(client)
    r = client.post("/v1/users/alice/tasks", json=body, headers=AUTH)
    message = error(r, 409)["message"]
    assert "passport" in message and "deleted" in message
    assert counts(client) == before


def test_kind_mismatches_are_conflicts(client: TestClient) -> None:
    """Feedback on a fact, undo of a task, moving a fact as a task: the request is well formed,
    the stored record is the wrong kind (409, as schema-valid input must not be a 422)."""
    task = client.post("/v1/users/alice/tasks", json={"title": "water the plants"}, headers=AUTH)
    client.post("/v1/users/alice/turns", json={"turns": [TURN]}, headers=AUTH)
    fact = client.get("/v1/users/alice/facts", headers=AUTH).json()["facts"][0]["id"]
    task_id = task.json()["id"]
    r = client.post(
        f"/v1/users/alice/memories/{fact}/feedback", json={"value": "positive"}, headers=AUTH
    )
    assert "feedback applies" in error(r, 409)["message"]
    r = client.post(f"/v1/users/alice/facts/{task_id}/undo", headers=AUTH)
    assert "not a fact" in error(r, 409)["message"]
    r = client.patch(f"/v1/users/alice/tasks/{fact}", json={"status": "done"}, headers=AUTH)
    assert "not a task" in error(r, 409)["message"]


@pytest.mark.parametrize("user", ["abc%0A", "abc%0D%0A", "%0Aabc"])
def test_a_user_id_with_a_newline_is_400(client: TestClient, user: str) -> None:
    r = client.post(f"/v1/users/{user}/turns", json={"turns": [TURN]}, headers=AUTH)
    assert error(r, 400)["type"] == "InvalidUserIdError"
    assert not any(client.app.state.service.users_dir.iterdir())


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/users/alice", "GET, DELETE"),
        ("/v1/users/alice/turns", "GET, POST"),
        ("/v1/users/alice/tasks", "GET, POST"),
        ("/v1/users/alice/memories/m1", "GET, PATCH, DELETE"),
        ("/healthz", "GET"),
    ],
)
def test_405_names_every_method_of_the_path(client: TestClient, path: str, allowed: str) -> None:
    r = client.request("PUT", path, headers=AUTH)
    assert r.status_code == 405 and r.headers["allow"] == allowed


@pytest.mark.parametrize(
    ("route", "body", "field"),
    [
        ("turns", {"turns": [{**TURN, "ts": 0}]}, "ts"),
        ("turns", {"turns": [{**TURN, "ts": "1700000000"}]}, "ts"),
        ("turns", {"turns": [{**TURN, "text": " \u00a0\n"}]}, "text"),
        ("turns", {"turns": [{**TURN, "text": "\x1c\x1f"}]}, "text"),
        ("turns", {"turns": [{**TURN, "text": "\x85"}]}, "text"),  # space to Python, not ECMA
        ("turns", {"turns": [{**TURN, "text": "\ufeff "}]}, "text"),  # space to ECMA only
        ("tasks", {"title": "call the bank", "due": 1700000000}, "due"),
        ("tasks", {"title": "\t"}, "title"),
        ("query", {"query": "penicillin", "since": 0}, "since"),
        ("query", {"query": "  "}, "query"),
        ("query", {"query": "trip", "before": "Lisbon", "after": "Porto"}, "before or after"),
    ],
)
def test_schema_invalid_bodies_are_422_naming_the_field(
    client: TestClient, route: str, body: dict, field: str
) -> None:
    r = client.post(f"/v1/users/alice/{route}", json=body, headers=AUTH)
    assert field in error(r, 422)["message"]
    assert client.get("/v1/users/alice", headers=AUTH).status_code == 404


def test_a_memory_patch_needs_a_value(client: TestClient) -> None:
    client.post("/v1/users/alice/turns", json={"turns": [TURN]}, headers=AUTH)
    memory = client.get("/v1/users/alice/memories", headers=AUTH).json()["memories"][0]["id"]
    path = f"/v1/users/alice/memories/{memory}"
    for body in ({}, {"text": None}, {"importance": None, "text": "x"}, {"text": " "}):
        assert client.patch(path, json=body, headers=AUTH).status_code == 422, body
    r = client.patch(path, json={"importance": 7}, headers=AUTH)
    assert r.status_code == 200 and r.json()["record"]["header"]["importance"] == 7


def test_openapi_states_errors_auth_and_rules(client: TestClient) -> None:
    """Every /v1 operation documents its error replies (one schema), the bearer scheme, and the
    user id's pattern; the body rules the routes check are in the schemas."""
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    error_ref = "#/components/schemas/ErrorReply"
    for path, operations in spec["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, op in operations.items():
            assert op["security"] == [{"HTTPBearer": []}], (method, path)
            for status in ("400", "401", "404", "422", "503"):
                schema = op["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": error_ref}, (method, path, status)
            if "requestBody" in op:
                assert "413" in op["responses"], (method, path)
            if "{user_id}" in path:
                user = next(p for p in op["parameters"] if p["name"] == "user_id")
                assert user["schema"]["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
    schemas = spec["components"]["schemas"]
    assert schemas["MemoryPatchIn"]["minProperties"] == 1
    assert schemas["QueryRequest"]["not"]["required"] == ["before", "after"]
    assert "pattern" in schemas["TurnIn"]["properties"]["text"]
    # no operation without auth but the ops probes
    open_paths = {
        p for p, ops in spec["paths"].items() for op in ops.values() if "security" not in op
    }
    assert open_paths == {"/healthz", "/readyz", "/metrics"}


def test_an_export_holding_a_turn_twice_is_422_and_writes_nothing(client: TestClient) -> None:
    client.post("/v1/users/alice/turns", json={"turns": [TURN]}, headers=AUTH)
    lines = client.get("/v1/users/alice/export", headers=AUTH).text.splitlines(keepends=True)
    turn = next(line for line in lines if '"kind": "turn"' in line)
    body = "".join([*lines[:2], turn, *lines[2:]]).encode()
    r = client.post("/v1/users/bob/import", content=body, headers=AUTH)
    assert "repeats or contradicts" in error(r, 422)["message"]
    assert client.get("/v1/users/bob", headers=AUTH).status_code == 404


def test_the_save_job_and_metrics_skip_a_user_evicted_meanwhile(service: MemoryService) -> None:
    """save_all and the /metrics readers list the open users, then read each: one closed in
    between is left out (it saved its vectors on close), not a failed job or a 500."""
    service.ingest("alice", [TurnIn(**TURN).to_new_turn()])
    listed = service.users.open_workspaces()
    with service.users.closed("alice"):
        pass
    service.users.open_workspaces = lambda: listed  # type: ignore[method-assign]
    service.save_all()
    assert service.open_counts() == {}
    assert service.router_statuses() == {}
