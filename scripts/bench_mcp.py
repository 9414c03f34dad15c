"""`make bench` (its MCP part): a tool call over MCP against the same call over REST, and the
daemon's RSS with MCP enabled and disabled, measured in one run on real `memoryd serve` processes.

A daemon is filled with ``--turns`` turns (batch ingest over REST); then, alternating one call by
one call so both see the same store and machine state, p50/p95 of
  recall (MCP, the SDK's streamable-HTTP client, one session)  vs  POST .../query
  remember (MCP)                                               vs  POST .../turns (one turn)
  list_facts (MCP)                                             vs  GET .../facts
and their ratios (MCP p50 / REST p50), with each tool's mean time inside the daemon (its
``memoryd_mcp_tool_seconds``): the rest of an MCP call is the protocol, SSE framing and the SDK
client, which checks each structured reply against the tool's output schema. A second daemon
with ``mcp.enabled = false`` gets the same fill and the same REST calls; the RSS of both is
printed after those calls, read at the same moment: what the MCP server costs a daemon.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import QUERIES, REPO, fill_http, payload, pct, print_rows, turns
from support.server import ServerProcess

USER = "bench"
TOOLS = ("recall", "remember", "list_facts")


def rest_calls(client: httpx.Client, n: int, offset: int) -> dict[str, Callable[[int], object]]:
    single = turns(n, offset=offset)
    return {
        "recall": lambda i: client.post(
            f"/v1/users/{USER}/query", json={"query": QUERIES[i % len(QUERIES)]}
        ).raise_for_status(),
        "remember": lambda i: client.post(
            f"/v1/users/{USER}/turns", json=payload([single[i]])
        ).raise_for_status(),
        "list_facts": lambda i: client.get(f"/v1/users/{USER}/facts").raise_for_status(),
    }


def mcp_calls(client: Client, n: int) -> dict[str, Callable[[int], Awaitable[Any]]]:
    single = turns(n, offset=50_000_000)
    return {
        "recall": lambda i: client.call_tool("recall", {"query": QUERIES[i % len(QUERIES)]}),
        "remember": lambda i: client.call_tool(
            "remember", {"text": single[i].text, "session_id": single[i].session_id}
        ),
        "list_facts": lambda i: client.call_tool("list_facts", {}),
    }


async def paired(server: ServerProcess, rest: httpx.Client, n: int) -> dict[str, list[float]]:
    """ms per call, REST and MCP alternating."""
    times: dict[str, list[float]] = {}
    url = f"{server.url}/mcp/users/{USER}/"
    async with (
        httpx2.AsyncClient(headers=server.headers, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        over_rest, over_mcp = rest_calls(rest, n, 41_000_000), mcp_calls(client, n)
        for name in over_rest:
            for i in range(n):
                t = time.perf_counter()
                over_rest[name](i)
                times.setdefault(f"{name}, REST", []).append((time.perf_counter() - t) * 1e3)
                t = time.perf_counter()
                result = await over_mcp[name](i)
                times.setdefault(f"{name}, MCP", []).append((time.perf_counter() - t) * 1e3)
                assert not result.is_error, result.content
    return times


def filled(directory: Path, n: int, **env: str) -> tuple[ServerProcess, httpx.Client]:
    server = ServerProcess(directory, REPO / "models", env=env)
    client = server.client(timeout=120)
    fill_http(client, 0, n)
    return server, client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=1000, help="Turns in the user first.")
    parser.add_argument("--samples", type=int, default=200, help="Timed calls per figure.")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-mcp-") as tmp:
        print(f"filling two daemons to {args.turns} turns …", file=sys.stderr)
        on, on_client = filled(Path(tmp) / "on", args.turns)
        off, off_client = filled(Path(tmp) / "off", args.turns, MEMORYD_MCP_ENABLED="false")
        try:
            for client in (off_client, on_client):
                for call in rest_calls(client, args.samples, 40_000_000).values():
                    for i in range(args.samples):
                        call(i)
            rss = {"off": off.rss_mb(), "on": on.rss_mb()}
            times = asyncio.run(paired(on, on_client, args.samples))
            daemon = daemon_means(on_client.get("/metrics").text)
        finally:
            for client, server in ((on_client, on), (off_client, off)):
                client.close()
                server.stop()
    print(f"\n## MCP against REST, {args.turns} turns ({args.samples} samples per figure, ms)")
    print_rows(rows(times, daemon, rss))


def daemon_means(metrics: str) -> dict[str, float]:
    """ms per successful call of each tool inside the daemon (memoryd_mcp_tool_seconds)."""

    def total(kind: str, tool: str) -> float:
        pattern = rf'memoryd_mcp_tool_seconds_{kind}{{outcome="ok",tool="{tool}"}} (\S+)'
        match = re.search(pattern, metrics)
        assert match is not None, pattern
        return float(match.group(1))

    return {tool: total("sum", tool) / total("count", tool) * 1e3 for tool in TOOLS}


def rows(
    times: dict[str, list[float]], daemon: dict[str, float], rss: dict[str, float]
) -> Iterator[tuple[str, float, float, str]]:
    nan = float("nan")
    for name, values in times.items():
        yield (name, *pct(values), "")
    for tool in TOOLS:
        note = "the tool in the daemon, mean (the rest is protocol and client)"
        yield (f"{tool}, MCP, inside the daemon", daemon[tool], nan, note)
    for tool in TOOLS:
        ratio = pct(times[f"{tool}, MCP"])[0] / pct(times[f"{tool}, REST"])[0]
        yield (f"ratio {tool} MCP/REST", ratio, nan, "")
    yield ("daemon RSS MB, MCP disabled", rss["off"], nan, "after the REST calls")
    yield ("daemon RSS MB, MCP enabled", rss["on"], nan, "after the REST calls")
    yield ("ratio RSS enabled/disabled", rss["on"] / rss["off"], nan, "")


if __name__ == "__main__":
    main()
