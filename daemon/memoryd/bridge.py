"""`memoryd mcp`: a stdio MCP server for clients that only launch processes (Claude Desktop).

It opens no store: every request is forwarded to the running daemon's MCP endpoint
(``<url>/mcp/users/<user>/``) with the daemon's token, and its answer is passed back unchanged,
so the tools, resources and prompts are the daemon's own and several bridges (or a bridge and
the daemon's other clients) never fight over a data directory. The connection to the daemon is
opened on the first request, with the name of the client that launched the bridge (the daemon
derives default session ids from it), and opened again after the daemon restarts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import anyio.abc
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    CallToolRequestParams,
    CallToolResult,
    GetPromptRequestParams,
    GetPromptResult,
    Implementation,
    ListPromptsResult,
    ListResourcesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    TextContent,
)

from memoryd import __version__
from memoryd.errors import DaemonUnavailableError

__all__ = ["read_resource", "serve_stdio"]

log = logging.getLogger(__name__)

T = TypeVar("T")
TIMEOUT_S = 120.0  # a training round or a large batch can take this long


def endpoint(url: str, user_id: str) -> str:
    return f"{url.rstrip('/')}/mcp/users/{user_id}/"


class Upstream:
    """The MCP connection to the daemon, held by a task of ``tasks`` (anyio closes a client in
    the task that opened it); :meth:`get` opens it when there is none."""

    def __init__(self, url: str, headers: dict[str, str], tasks: anyio.abc.TaskGroup) -> None:
        self.url, self.headers, self.tasks = url, headers, tasks
        self.client: Client | None = None
        self._lock = anyio.Lock()
        self._done = anyio.Event()

    async def get(self, client_info: Implementation | None) -> Client:
        async with self._lock:
            if self.client is None:
                self._done = anyio.Event()
                self.client = await self.tasks.start(self._hold, client_info)
            return self.client

    def drop(self) -> None:
        """Close the connection (the daemon went away); the next request opens another."""
        self.client = None
        self._done.set()

    async def _hold(
        self,
        client_info: Implementation | None,
        *,
        task_status: anyio.abc.TaskStatus[Client] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        done, started = self._done, False
        try:
            async with (
                httpx2.AsyncClient(headers=self.headers, timeout=TIMEOUT_S) as http,
                Client(
                    streamable_http_client(self.url, http_client=http),
                    client_info=client_info,
                    read_timeout_seconds=TIMEOUT_S,
                ) as client,
            ):
                task_status.started(client)
                started = True
                await done.wait()
        except Exception as exc:
            if not started:
                raise
            log.warning("the connection to %s closed: %s", self.url, exc)
            if self._done is done:  # no newer connection: the next request opens one
                self.client = None


class Bridge:
    """The stdio server's handlers: each forwards to the daemon."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream

    async def _forward(
        self, ctx: ServerRequestContext[Any], call: Callable[[Client], Awaitable[T]]
    ) -> T:
        params = ctx.session.client_params
        try:
            client = await self.upstream.get(params.client_info if params else None)
            return await call(client)
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:  # the daemon's own answer (unknown tool, ...)
                raise
            self.upstream.drop()
            raise DaemonUnavailableError(self.upstream.url, exc.message) from exc
        except Exception as exc:
            self.upstream.drop()
            raise DaemonUnavailableError(self.upstream.url, type(exc).__name__) from exc

    async def _request(
        self, ctx: ServerRequestContext[Any], call: Callable[[Client], Awaitable[T]]
    ) -> T:
        """:meth:`_forward` for requests other than tool calls: a JSON-RPC error when the
        daemon is gone."""
        try:
            return await self._forward(ctx, call)
        except DaemonUnavailableError as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from exc

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return await self._request(ctx, lambda c: c.list_tools())

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        try:
            result = await self._forward(
                ctx, lambda c: c.call_tool(params.name, params.arguments or {})
            )
        except DaemonUnavailableError as exc:
            body = {"error": {"type": type(exc).__name__, "message": str(exc)}}
            return CallToolResult(content=[TextContent(text=json.dumps(body))], is_error=True)
        assert isinstance(result, CallToolResult)
        return result

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return await self._request(ctx, lambda c: c.list_resources())

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        return await self._request(ctx, lambda c: c.read_resource(params.uri))

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListPromptsResult:
        return await self._request(ctx, lambda c: c.list_prompts())

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: GetPromptRequestParams
    ) -> GetPromptResult:
        return await self._request(ctx, lambda c: c.get_prompt(params.name, params.arguments))


async def serve_stdio(url: str, headers: dict[str, str], user_id: str) -> None:
    """Serve MCP on stdin/stdout for ``user_id``, forwarding to the daemon at ``url``."""
    async with anyio.create_task_group() as tasks:
        upstream = Upstream(endpoint(url, user_id), headers, tasks)
        bridge = Bridge(upstream)

        @asynccontextmanager
        async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
            try:
                yield {}
            finally:
                upstream.drop()

        server: Server[Any] = Server(
            "memoryd",
            version=__version__,
            instructions=f"memoryd, the memory of user {user_id} (forwarded to {url})",
            lifespan=lifespan,
            on_list_tools=bridge.list_tools,
            on_call_tool=bridge.call_tool,
            on_list_resources=bridge.list_resources,
            on_read_resource=bridge.read_resource,
            on_list_prompts=bridge.list_prompts,
            on_get_prompt=bridge.get_prompt,
        )
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tasks.cancel_scope.cancel()


async def read_resource(url: str, headers: dict[str, str], user_id: str, uri: str) -> str:
    """The text of one of the daemon's MCP resources for ``user_id`` (``memoryd context``)."""
    info = Implementation(name="memoryd-cli", version=__version__)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT_S) as http,
        Client(
            streamable_http_client(endpoint(url, user_id), http_client=http), client_info=info
        ) as client,
    ):
        result = await client.read_resource(uri)
    return "\n".join(getattr(part, "text", "") for part in result.contents)
