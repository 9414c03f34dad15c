"""`memoryd mcp`, the stdio bridge: driven by the MCP SDK's stdio client as a subprocess, it
forwards to a real daemon (the same tools and answers as the daemon's own endpoint) and says
clearly when no daemon answers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Implementation

from support.config import MODEL_DIR
from support.server import ServerProcess
from test_mcp import connect, error_of, structured


def bridge(url: str, data_dir: Path, user: str, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "memoryd", "mcp", "--user", user, "--url", url, "--data-dir", str(data_dir)],
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
    )


def run_bridge(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_bridge_cmd("mcp", *args, **env)


def run_bridge_cmd(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


@pytest.fixture
def server(tmp_path: Path) -> ServerProcess:
    return ServerProcess(tmp_path / "data", MODEL_DIR)


def test_the_bridge_forwards_to_the_daemon(server: ServerProcess) -> None:
    params = bridge(server.url, server.data_dir, "dora")

    async def through_bridge() -> tuple[list[str], CallToolResult, CallToolResult, str]:
        info = Implementation(name="Claude Desktop", version="1")
        async with Client(params, client_info=info) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            stored = await client.call_tool("remember", {"text": "I live in Trondheim."})
            facts = await client.call_tool("list_facts", {})
            start = (await client.read_resource("memoryd://session-start")).contents[0].text
            return names, stored, facts, start  # type: ignore[return-value]

    async def direct() -> tuple[list[str], CallToolResult]:
        async with connect(server, "/mcp/users/dora/") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await client.call_tool("list_facts", {})

    try:
        names, stored, facts, start = asyncio.run(through_bridge())
        direct_names, direct_facts = asyncio.run(direct())
        with server.client() as http:
            turn_id = structured(stored, "dora")["turn_id"]
            turn = http.get(f"/v1/users/dora/turns/{turn_id}").json()
    finally:
        server.stop()
    assert names == direct_names and len(names) == 10
    assert structured(facts, "dora") == structured(direct_facts, "dora")
    assert "Trondheim" in facts.content[0].text  # type: ignore[union-attr]
    assert "# Memory of dora" in start
    assert turn["session_id"].startswith("Claude-Desktop-")  # the launching client's name


def test_context_prints_the_session_start_resource(server: ServerProcess) -> None:
    try:
        with server.client() as http:
            http.post("/v1/users/fay/tasks", json={"title": "Water the plants"})
        done = run_bridge_cmd(
            "context", "--user", "fay", "--url", server.url, "--data-dir", str(server.data_dir)
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# Memory of fay") and "Water the plants" in done.stdout


def test_a_stopped_daemon_is_a_tool_error_not_a_crash(server: ServerProcess) -> None:
    params = bridge(server.url, server.data_dir, "eve")

    async def scenario() -> tuple[CallToolResult, CallToolResult, str]:
        async with Client(params) as client:
            before = await client.call_tool("memory_status", {})
            server.stop()
            after = await client.call_tool("memory_status", {})
            with pytest.raises(MCPError) as listing:
                await client.list_resources()
            return before, after, listing.value.message

    before, after, listing = asyncio.run(scenario())
    assert not before.is_error
    assert listing.startswith(f"no memoryd daemon answers at {server.url}")
    error = error_of(after)
    assert error["type"] == "DaemonUnavailableError"
    assert f"no memoryd daemon answers at {server.url}" in error["message"]


def test_without_a_daemon_the_bridge_says_so_and_exits(tmp_path: Path) -> None:
    done = run_bridge("--user", "x", "--url", "http://127.0.0.1:9", "--data-dir", str(tmp_path))
    assert done.returncode == 1
    assert "no memoryd daemon answers at http://127.0.0.1:9" in done.stderr
    assert "memoryd serve" in done.stderr and done.stdout == ""


def test_a_wrong_token_or_user_is_refused_before_serving(server: ServerProcess) -> None:
    try:
        wrong = run_bridge(
            "--user",
            "x",
            "--url",
            server.url,
            "--data-dir",
            str(server.data_dir),
            MEMORYD_TOKEN="not-the-token",
        )
        bad_user = run_bridge("--user", "no spaces", "--url", server.url)
    finally:
        server.stop()
    assert wrong.returncode == 1 and "refused the token" in wrong.stderr
    assert bad_user.returncode == 1 and "is not allowed" in bad_user.stderr
