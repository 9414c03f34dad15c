"""Export and import over REST: GET .../export streams the versioned JSONL `memoryd export`
writes, POST .../import restores it into an empty user, all or nothing; through the real app
(TestClient) for the errors, and a real server for the round trip of a lived-in user."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from memoryd.api.auth import Secret
from memoryd.app import create_app
from support.config import MODEL_DIR, make_config
from support.server import ServerProcess
from test_api import AUTH, TOKEN, TURNS, error_of, ingest

NDJSON = {"Content-Type": "application/x-ndjson"}


@pytest.fixture
def client(tmp_path, service_factory) -> Iterator[TestClient]:
    config = make_config(tmp_path / "data", **{"limits.max_import_bytes": 64 * 1024})
    app = create_app(config, service=service_factory(config), token=Secret(TOKEN))
    with TestClient(app) as c:
        yield c


def export_lines(client: TestClient | httpx.Client, user: str, headers: dict = AUTH) -> list[str]:
    r = client.get(f"/v1/users/{user}/export", headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    return r.text.splitlines()


def post_import(client: TestClient, user: str, body: str | bytes) -> httpx.Response:
    return client.post(f"/v1/users/{user}/import", content=body, headers=AUTH | NDJSON)


def test_an_export_imports_into_an_empty_user(client: TestClient) -> None:
    ingest(client, "alice")
    lines = export_lines(client, "alice")
    header = json.loads(lines[0])
    assert header["format"] == "memoryd.export" and header["user_id"] == "alice"
    r = post_import(client, "bob", "\n".join(lines) + "\n")
    assert r.status_code == 201, r.text
    reply = r.json()
    assert reply["user_id"] == "bob" and reply["records"] == len(lines) - 1
    alice = client.get("/v1/users/alice", headers=AUTH).json()["counts"]
    assert reply["counts"] == alice
    # what bob's export holds is alice's, but for the header's user and time
    assert export_lines(client, "bob")[1:] == lines[1:]


def test_import_refuses_a_user_with_data(client: TestClient) -> None:
    ingest(client, "alice")
    body = "\n".join(export_lines(client, "alice"))
    r = post_import(client, "alice", body)
    assert r.status_code == 409 and "already has data" in error_of(r)["message"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("", "not a memoryd export"),
        ('{"format": "other"}\n', "not a memoryd export"),
        ("HEADER\n", "line 1: not JSON"),
        ("[1, 2]\n", "line 1: not a JSON object"),
        (b"\xff\xfe\n", "not UTF-8"),
    ],
)
def test_a_malformed_export_is_refused_and_writes_nothing(
    client: TestClient, body: str | bytes, says: str
) -> None:
    r = post_import(client, "bob", body)
    assert r.status_code == 422 and says in error_of(r)["message"], r.text
    assert client.get("/v1/users/bob", headers=AUTH).status_code == 404


def test_a_bad_record_part_way_leaves_no_user(client: TestClient) -> None:
    ingest(client, "alice")
    lines = export_lines(client, "alice")
    broken = [*lines[:2], json.dumps({"kind": "turn", "payload": {}}), *lines[2:]]
    r = post_import(client, "bob", "\n".join(broken))
    assert r.status_code == 422 and "record 2 after the header" in error_of(r)["message"]
    assert client.get("/v1/users/bob", headers=AUTH).status_code == 404
    assert post_import(client, "bob", "\n".join(lines)).status_code == 201


def test_an_import_over_its_limit_is_413(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the route counts what it reads
        for _ in range(20):
            yield b" " * 4096

    r = client.post("/v1/users/bob/import", content=chunks(), headers=AUTH | NDJSON)
    assert r.status_code == 413 and error_of(r)["type"] == "PayloadTooLargeError"
    assert client.get("/v1/users/bob", headers=AUTH).status_code == 404


def test_export_needs_a_user_and_the_token(client: TestClient) -> None:
    r = client.get("/v1/users/nobody/export", headers=AUTH)
    assert r.status_code == 404 and error_of(r)["type"] == "UserNotFoundError"
    ingest(client, "alice")
    assert client.get("/v1/users/alice/export").status_code == 401
    assert client.post("/v1/users/bob/import", content=TURNS["turns"][0]["text"]).status_code == 401


@pytest.mark.slow
def test_a_lived_in_user_round_trips_through_a_real_server(tmp_path: Path) -> None:
    """Turns, an edited memory, a superseded fact, a finished task and recall counts survive
    export → import over HTTP, and the copy answers as the original does."""
    server = ServerProcess(tmp_path / "data", MODEL_DIR)
    try:
        with server.client() as c:
            said = [
                "I work as a nurse at St Mary's.",
                "Remind me to renew my passport by Friday.",
                "Actually I switched jobs, I work as a paramedic now.",
                "We hiked up Snowdon last weekend with Priya.",
            ]
            turns = [{"session_id": "s1", "role": "user", "text": t} for t in said]
            assert c.post("/v1/users/ann/turns", json={"turns": turns}).status_code == 201
            (task,) = c.get("/v1/users/ann/tasks").json()["tasks"]
            patch = {"status": "done", "note": "renewed"}
            assert c.patch(f"/v1/users/ann/tasks/{task['id']}", json=patch).status_code == 200
            for q in ["where did I hike?", "what is my job?"]:
                assert c.post("/v1/users/ann/query", json={"query": q}).status_code == 200
            lines = export_lines(c, "ann", headers={})
            r = c.post("/v1/users/ann2/import", content="\n".join(lines), headers=NDJSON)
            assert r.status_code == 201, r.text
            for part in ["", "/facts?history=true", "/tasks"]:
                a = c.get(f"/v1/users/ann{part}").json()
                b = c.get(f"/v1/users/ann2{part}").json()
                a.pop("user_id", None), b.pop("user_id", None)
                assert a == b, part
            query = {"query": "what is my job?", "recall": False}
            a = c.post("/v1/users/ann/query", json=query).json()
            b = c.post("/v1/users/ann2/query", json=query).json()
            assert a["context"] == b["context"] and a["turn_ids"] == b["turn_ids"]
            assert export_lines(c, "ann2", headers={})[1:] == lines[1:]
    finally:
        server.stop()
