"""MCP in the daemon: the SDK's own client over streamable HTTP against a real `memoryd serve`.

Every default tool is called with valid arguments (its result equals the REST route's) and with
invalid ones (an ``isError`` result with the daemon's error JSON); the token, the Host check
and the user in the path are enforced before the SDK sees a request; two users' connections
never see each other's memories; the handshake-era protocol works as the current one does.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fastapi.testclient import TestClient
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Implementation

from memoryd.api.auth import Secret
from memoryd.app import create_app
from memoryd.mcp.tools import DEFAULT_TOOLS, SPECS
from support.config import MODEL_DIR, make_config
from support.server import ServerProcess
from test_api import AUTH, TOKEN

ACCEPT = {"Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("mcp") / "data", MODEL_DIR)
    try:
        yield proc
    finally:
        proc.stop()


@asynccontextmanager
async def connect(
    server: ServerProcess, path: str = "/mcp/", name: str = "pytest", **kw: Any
) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers=server.headers, timeout=60) as http:
        transport = streamable_http_client(server.url + path, http_client=http)
        info = Implementation(name=name, version="1")
        async with Client(transport, client_info=info, **kw) as client:
            yield client


def structured(result: CallToolResult, user: str) -> dict[str, Any]:
    """The tool's structured reply without the user it echoes (checked here)."""
    assert not result.is_error, result.content
    data = dict(result.structured_content or {})
    assert data.pop("user_id") == user
    return data


def error_of(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    return json.loads(text)["error"]


def rest(server: ServerProcess) -> httpx.Client:
    return server.client()


def test_the_default_tools_are_listed_with_hints_and_output_schemas(server) -> None:
    async def scenario() -> list[Any]:
        async with connect(server) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in asyncio.run(scenario())}
    assert tuple(tools) == DEFAULT_TOOLS and len(tools) == 10
    for name, tool in tools.items():
        assert tool.title == SPECS[name].title and tool.description
        assert tool.output_schema is not None and "user_id" in tool.output_schema["properties"]
        assert tool.annotations is not None and tool.annotations.open_world_hint is False
        assert "user" not in (tool.input_schema.get("properties") or {}), name
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    assert tools["remember"].annotations.idempotent_hint is False


def test_each_default_tool_answers_what_its_rest_route_answers(server) -> None:
    user = "alice"
    base = f"/v1/users/{user}"

    async def scenario() -> None:
        async with connect(server, f"/mcp/users/{user}/") as mcp:

            async def call(name: str, **args: Any) -> dict[str, Any]:
                return structured(await mcp.call_tool(name, args), user)

            first = await call("remember", text="I live in Lisbon.", session_id="s1")
            turn = http.get(f"{base}/turns/{first['turn_id']}").json()
            assert [m["id"] for m in turn["memories"]] == [m["id"] for m in first["memories"]]
            assert turn["labels"] == first["labels"] and "semantic" in first["labels"]
            second = await call("remember", text="I moved to Porto.", session_id="s2")
            assert [e["effect"] for e in second["effects"]] == ["superseded"]
            old = second["effects"][0]["id"]

            batch = [
                {
                    "session_id": "s3",
                    "role": "user",
                    "text": "I went hiking on Mount Tam with Joe.",
                },
                {"session_id": "s3", "role": "assistant", "text": "Sounds like a great day!"},
            ]
            ingested = await call("ingest_turns", turns=batch)
            listed = http.get(f"{base}/turns", params={"session_id": "s3"}).json()["turns"]
            assert [t["turn_id"] for t in ingested["turns"]] == [t["turn_id"] for t in listed]

            facts = await call("list_facts", history=True)
            assert facts == http.get(f"{base}/facts", params={"history": "true"}).json()
            assert {f["id"]: f["current"] for f in facts["facts"]}[old] is False

            undone = await call("undo_fact", fact_id=old)
            assert undone["id"] == old and undone["was_superseded_by"]
            stored = http.get(f"{base}/memories/{old}").json()["record"]
            assert stored["valid_to"] is None and undone["record"]["valid_to"] is None

            task = await call("add_task", title="Renew the passport", task_id="passport")
            assert task == http.get(f"{base}/memories/passport").json()
            moved = await call(
                "update_task", task_id="passport", status="done", note="at the office"
            )
            assert moved["record"]["states"][-1]["status"] == "done"
            tasks = await call("list_tasks")
            assert tasks == http.get(f"{base}/tasks").json()

            query = {"query": "what did I do on Mount Tam?", "k": 5}
            recalled = await call("recall", **query)
            replied = http.post(f"{base}/query", json=query).json()
            assert recalled["context"] == replied["context"] and recalled["context"]
            assert {k: [i["id"] for i in v] for k, v in recalled["sections"].items()} == {
                k: [i["id"] for i in v] for k, v in replied["sections"].items()
            }

            status = await call("memory_status")
            counts = http.get(base).json()["counts"]
            assert status["counts"]["turns"] == counts["turns"] == 4
            assert status["counts"]["semantic"] == counts["memories_semantic"]
            assert sum(status["tiers"].values()) > 0

            episode = recalled["sections"]["episodic"][0]["id"]
            result = await mcp.call_tool("forget", {"memory_id": episode})
            assert "Mount Tam" in result.content[0].text  # type: ignore[union-attr]
            assert structured(result, user)["id"] == episode
            assert http.get(f"{base}/memories/{episode}").status_code == 404

    with rest(server) as http:
        asyncio.run(scenario())


INVALID: list[tuple[str, dict[str, Any], str | None]] = [
    # (tool, arguments, the daemon's error type; None: the SDK refuses them before the tool)
    ("remember", {"text": ""}, "ValidationError"),
    ("remember", {"text": "hi", "role": "robot"}, None),
    ("ingest_turns", {"turns": []}, None),
    ("ingest_turns", {"turns": [{"role": "user", "text": "no session"}]}, None),
    ("recall", {"query": ""}, "ValidationError"),
    ("recall", {"query": "x", "k": 0}, None),
    ("recall", {"query": "x", "when": "the day after never"}, "InvalidInputError"),
    ("list_facts", {"subject": ""}, None),
    ("undo_fact", {"fact_id": "fact_missing"}, "MemoryNotFoundError"),
    ("list_tasks", {"status": ["someday"]}, None),
    ("add_task", {"title": ""}, "ValidationError"),
    ("update_task", {"task_id": "nope", "status": "done"}, "MemoryNotFoundError"),
    ("update_task", {"task_id": "nope", "status": "finished"}, None),
    ("forget", {"memory_id": "missing"}, "MemoryNotFoundError"),
]


def test_invalid_arguments_are_tool_errors_with_the_daemons_error_json(server) -> None:
    async def scenario() -> list[CallToolResult]:
        async with connect(server, "/mcp/users/bad_args/") as client:
            await client.call_tool("remember", {"text": "I live in Oslo."})
            return [await client.call_tool(name, args) for name, args, _ in INVALID]

    for (name, args, kind), result in zip(INVALID, asyncio.run(scenario()), strict=True):
        assert result.is_error, (name, args)
        if kind is not None:
            error = error_of(result)
            assert error["type"] == kind and error["message"], (name, args, error)
    with rest(server) as http:
        assert http.get("/v1/users/bad_args").json()["counts"]["turns"] == 1  # nothing written


def test_the_token_the_host_and_the_path_are_checked_first(server) -> None:
    post = {"json": INITIALIZE, "headers": ACCEPT}
    with httpx.Client(base_url=server.url) as http:
        missing = http.post("/mcp/", **post)
        wrong = http.post("/mcp/", json=INITIALIZE, headers=ACCEPT | {"Authorization": "Bearer x"})
    assert missing.status_code == wrong.status_code == 401
    assert missing.headers["www-authenticate"] == "Bearer"
    assert wrong.json()["error"]["message"] == "invalid bearer token"
    with rest(server) as http:
        foreign = http.post("/mcp/", **post | {"headers": ACCEPT | {"Host": "evil.example"}})
        assert foreign.status_code == 421
        bad_user = http.post("/mcp/users/no%20spaces/", **post)
        assert bad_user.status_code == 400
        assert bad_user.json()["error"]["type"] == "InvalidUserIdError"
        assert http.post("/mcp/elsewhere", **post).status_code == 404
        assert http.post("/mcp", **post).status_code == 200  # no trailing slash needed


def test_the_handshake_era_protocol_works_too(server) -> None:
    async def scenario() -> tuple[str, CallToolResult]:
        async with connect(server, "/mcp/users/legacy/", mode="legacy") as client:
            await client.call_tool("remember", {"text": "I am allergic to peanuts."})
            return client.protocol_version, await client.call_tool("list_facts", {})

    version, facts = asyncio.run(scenario())
    assert version == "2025-11-25"
    assert "peanuts" in facts.content[0].text  # type: ignore[union-attr]
    assert structured(facts, "legacy")["facts"]


def test_two_users_connected_at_once_never_see_each_others_memories(server) -> None:
    said = {"ulla": "I play the cello in an orchestra.", "vera": "I race sailboats on weekends."}

    async def session(user: str) -> tuple[str, str]:
        async with connect(server, f"/mcp/users/{user}/") as client:
            await client.call_tool("remember", {"text": said[user]})
            recalled = await client.call_tool("recall", {"query": "what are my hobbies?"})
            facts = await client.call_tool("list_facts", {})
            structured(recalled, user)
            return recalled.content[0].text, facts.content[0].text  # type: ignore[union-attr]

    async def both() -> list[tuple[str, str]]:
        return list(await asyncio.gather(session("ulla"), session("vera")))

    (ulla_recall, ulla_facts), (vera_recall, vera_facts) = asyncio.run(both())
    assert "cello" in ulla_recall + ulla_facts and "sail" in vera_recall + vera_facts
    assert "sail" not in ulla_recall + ulla_facts and "cello" not in vera_recall + vera_facts


def test_a_session_stays_with_the_user_it_was_opened_for(server) -> None:
    with rest(server) as http:
        opened = http.post("/mcp/users/owner/", json=INITIALIZE, headers=ACCEPT)
        assert opened.status_code == 200
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        moved = http.post("/mcp/users/intruder/", json=listing, headers=ACCEPT | session)
        assert moved.status_code == 404
        assert "another user" in moved.json()["error"]["message"]


def test_a_turn_without_a_session_joins_the_clients_session_of_the_day(server) -> None:
    async def scenario() -> dict[str, Any]:
        async with connect(server, "/mcp/users/named/", name="Test Agent") as client:
            result = await client.call_tool("remember", {"text": "I work at the harbour office."})
            return structured(result, "named")

    turn_id = asyncio.run(scenario())["turn_id"]
    with rest(server) as http:
        turn = http.get(f"/v1/users/named/turns/{turn_id}").json()
    assert turn["session_id"] == f"Test-Agent-{datetime.now(UTC).date().isoformat()}"


def test_metrics_count_tool_calls_by_tool_and_outcome(server) -> None:
    async def scenario() -> None:
        async with connect(server, "/mcp/users/metered/") as client:
            await client.call_tool("memory_status", {})
            await client.call_tool("forget", {"memory_id": "missing"})

    asyncio.run(scenario())
    with rest(server) as http:
        text = http.get("/metrics").text
    assert 'memoryd_mcp_tool_seconds_count{outcome="ok",tool="memory_status"}' in text
    assert 'memoryd_mcp_tool_seconds_count{outcome="error",tool="forget"}' in text


def test_resources_and_the_prompt(server) -> None:
    async def scenario() -> tuple[list[str], str, str, str]:
        async with connect(server, "/mcp/users/reader/") as client:
            await client.call_tool("remember", {"text": "I prefer tea over coffee."})
            await client.call_tool("add_task", {"title": "Call the dentist"})
            uris = [str(r.uri) for r in (await client.list_resources()).resources]
            start = (await client.read_resource("memoryd://session-start")).contents[0].text
            tiers = (await client.read_resource("memoryd://tiers")).contents[0].text
            prompt = await client.get_prompt("memory_guide")
            return uris, start, tiers, prompt.messages[0].content.text  # type: ignore[union-attr]

    uris, start, tiers, guide = asyncio.run(scenario())
    assert uris == ["memoryd://session-start", "memoryd://facts", "memoryd://tiers"]
    assert "# Memory of reader" in start and "Call the dentist" in start
    assert json.loads(tiers)["user_id"] == "reader"
    assert "recall" in guide and "remember" in guide


# -- settings, in-process --------------------------------------------------------------------


def test_mcp_can_be_turned_off(tmp_path, service_factory) -> None:
    config = make_config(tmp_path / "data", **{"mcp.enabled": False})
    app = create_app(config, service=service_factory(config), token=Secret(TOKEN))
    with TestClient(app) as client:
        assert client.post("/mcp/", json=INITIALIZE, headers=AUTH | ACCEPT).status_code == 404


def test_a_daemon_without_mcp_does_not_load_the_sdk(tmp_path) -> None:
    """The SDK costs ~37 MB of RSS: `memoryd serve` with mcp.enabled = false never imports it."""
    code = (
        "import sys; from memoryd.cli import main; from memoryd.app import create_app; "
        "from support.config import make_config; from pathlib import Path; "
        f"create_app(make_config(Path({str(tmp_path)!r}), **{{'mcp.enabled': False}})); "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_all_tools_and_allowed_hosts(tmp_path, service_factory) -> None:
    config = make_config(
        tmp_path / "data", **{"mcp.tools": "all", "mcp.allowed_hosts": "testserver"}
    )
    app = create_app(config, service=service_factory(config), token=Secret(TOKEN))
    with TestClient(app) as client:
        opened = client.post("/mcp/", json=INITIALIZE, headers=AUTH | ACCEPT)
        assert opened.status_code == 200, opened.text  # "testserver" is an allowed host
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        reply = client.post("/mcp/", json=listing, headers=AUTH | ACCEPT | session)
    names = [t["name"] for t in _sse_result(reply.text)["tools"]]
    assert names == list(SPECS) and len(names) == 19


def _sse_result(body: str) -> dict[str, Any]:
    """The JSON-RPC result of a single-event SSE reply."""
    data = next(line for line in body.splitlines() if line.startswith("data: "))
    return json.loads(data.removeprefix("data: "))["result"]


def test_forget_user_needs_confirmation(tmp_path) -> None:
    proc = ServerProcess(tmp_path / "data", MODEL_DIR, env={"MEMORYD_MCP_TOOLS": "all"})
    try:

        async def scenario() -> tuple[CallToolResult, CallToolResult]:
            async with connect(proc, "/mcp/users/leaving/") as client:
                await client.call_tool("remember", {"text": "I live in Bergen."})
                refused = await client.call_tool("forget_user", {})
                return refused, await client.call_tool("forget_user", {"confirm": True})

        refused, done = asyncio.run(scenario())
        assert "confirm=true" in error_of(refused)["message"]
        assert structured(done, "leaving")["removed"]["turns"] == 1
        with proc.client() as http:
            assert http.get("/v1/users/leaving").status_code == 404
    finally:
        proc.stop()
