"""The MCP server of one running daemon: tools, resources and prompts over the façade, the
streamable-HTTP session manager, and the metrics of its tool calls.

Built in the app's lifespan once the service is open (a session manager runs once), served by
:class:`~memoryd.mcp.endpoint.McpEndpoint`. The endpoint puts the user the request's path names
in the ``x-memoryd-user`` header; :class:`BindCaller`, the server's outermost middleware, reads
it into :data:`~memoryd.mcp.tools.caller` for every message, so no tool, resource or prompt
takes a user.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from prometheus_client import CollectorRegistry, Histogram

from memoryd import __version__
from memoryd.config import Config
from memoryd.mcp.replies import one_memory
from memoryd.mcp.tools import SPECS, Caller, MemoryTools, caller
from memoryd.models import McpTools, TaskStatus
from memoryd.schemas import MemoryReply, TierStatusReply
from memoryd.service import MemoryService

__all__ = ["USER_HEADER", "McpMetrics", "McpSurface"]

T = TypeVar("T")
USER_HEADER = "x-memoryd-user"
LOOPBACK_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*")
MAX_SESSIONS = 256  # open MCP sessions per daemon (a personal device has a few clients)
RECENT_DAYS = 7  # "recently finished" tasks in the session-start context

# (uri, name: the method that reads it, title, description, MIME type)
RESOURCES = (
    (
        "memoryd://session-start",
        "session_start",
        "Session start",
        "Open tasks, tasks finished this week and the user's profile",
        "text/markdown",
    ),
    ("memoryd://facts", "facts", "Facts", "The user's current facts", "text/markdown"),
    (
        "memoryd://tiers",
        "tiers",
        "Tiers",
        "Tier sizes, the persona and its drift, recent moves (JSON)",
        "application/json",
    ),
)

INSTRUCTIONS = """\
memoryd is this user's long-term memory, on their device. Call `recall` before answering
anything that depends on what the user said before (preferences, facts about them, plans,
past events); call `remember` with each user message worth keeping and with commitments you
make. Facts that change are superseded, not duplicated; `list_facts` shows their history and
`undo_fact` reverts a wrong replacement. Tasks have states: `add_task`, `update_task`,
`list_tasks`. `forget` removes one memory. The user is fixed by the connection."""

GUIDE = """\
How to use memoryd, the user's memory:

- At the start of a conversation, read the `session_start` resource (open tasks, recently
  finished ones, the user's profile) or call `recall` with the topic.
- Before answering anything that depends on the past, call `recall` with a short query in the
  user's words; use `when` ("last week") or `people` to narrow it. Read its context block.
- After each user message that states a fact, a preference, a plan, a rule ("when X, do Y")
  or something that happened, call `remember` with the message as said. Skip greetings and
  chit-chat: memoryd drops noise, but each call costs time.
- When the user says something changed, just `remember` it: memoryd supersedes the old fact.
  If it replaced the wrong one, `undo_fact`.
- When a task is done or dropped, `update_task`. When the user asks you to forget something,
  find it with `recall` and `forget` its id.
"""


class McpMetrics:
    """Tool calls per tool and outcome (ok, error, invalid), with their durations."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.seconds = Histogram(
            "memoryd_mcp_tool_seconds",
            "MCP tool calls by tool and outcome, and their durations",
            ["tool", "outcome"],
            registry=registry,
        )

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        self.seconds.labels(tool if tool in SPECS else "unknown", outcome).observe(seconds)


def _is_error(result: HandlerResult) -> bool:
    if isinstance(result, dict):
        return bool(result.get("isError"))
    return bool(getattr(result, "is_error", False))


class BindCaller:
    """Server middleware: the caller of every message, and the metrics of tool calls."""

    def __init__(self, metrics: McpMetrics) -> None:
        self.metrics = metrics

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        headers: Mapping[str, str] = getattr(ctx.request, "headers", None) or {}
        user = headers.get(USER_HEADER)
        if user is None:  # only the endpoint reaches this server, and it always sets one
            raise MCPError(INVALID_REQUEST, "no user")
        params = ctx.session.client_params
        token = caller.set(Caller(user, params.client_info.name if params else None))
        try:
            if ctx.method != "tools/call":
                return await call_next(ctx)
            return await self._timed(ctx, call_next)
        finally:
            caller.reset(token)

    async def _timed(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        name = str((ctx.params or {}).get("name", ""))
        start = time.perf_counter()
        outcome = "invalid"
        try:
            result = await call_next(ctx)
            outcome = "error" if _is_error(result) else "ok"
            return result
        finally:
            self.metrics.observe(name, outcome, time.perf_counter() - start)


class McpSurface:
    """The daemon's MCP server over ``service``; :meth:`running` for as long as it serves."""

    def __init__(self, service: MemoryService, config: Config, metrics: McpMetrics) -> None:
        self.service = service
        self.server: MCPServer[Any] = MCPServer(
            "memoryd",
            title="memoryd",
            version=__version__,
            instructions=INSTRUCTIONS,
            middleware=[BindCaller(metrics)],
            subscriptions=False,
        )
        tools = MemoryTools(service)
        for name, spec, fn in tools.tools(config.mcp.tools is McpTools.ALL):
            self.server.add_tool(fn, name=name, title=spec.title, annotations=spec.annotations)
        self._add_resources()
        self.server.prompt(name="memory_guide", title="When to remember and recall")(self.guide)
        self.server.streamable_http_app(
            streamable_http_path="/",
            transport_security=_security(config),
            max_request_body_size=config.limits.max_body_bytes,
            max_sessions=MAX_SESSIONS,
            host=config.host,
        )
        self.sessions: StreamableHTTPSessionManager = self.server.session_manager

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.sessions.run():
            yield

    async def handle(self, scope: Any, receive: Any, send: Any) -> None:
        await self.sessions.handle_request(scope, receive, send)

    def _add_resources(self) -> None:
        for uri, name, title, description, mime_type in RESOURCES:
            self.server.resource(
                uri, name=name, title=title, description=description, mime_type=mime_type
            )(getattr(self, name))

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(fn, *args)

    async def session_start(self) -> str:
        """What an agent should know when a conversation starts."""
        return await self._call(self._session_start, caller.get().user_id)

    def _session_start(self, user_id: str) -> str:
        lines = [f"# Memory of {user_id}"]
        if not self.service.user_exists(user_id):
            return "\n".join([*lines, "", "Nothing is stored yet."])
        open_tasks = self.service.list_tasks(user_id, (TaskStatus.PENDING,))
        done = self.service.list_tasks(user_id, (TaskStatus.DONE,))
        since = datetime.now(UTC) - timedelta(days=RECENT_DAYS)
        recent = [s for s in done if _finished_at(s.memory) >= since]
        profile = self.service.tiers_status(user_id, 0)["persona"]["profile"]
        for title, tasks in (("Open tasks", open_tasks), ("Finished this week", recent)):
            lines += ["", f"## {title}"]
            lines += [f"- {one_memory(MemoryReply.of(s.memory))}" for s in tasks] or ["- none"]
        lines += ["", "## Profile", profile or "(not formed yet)"]
        return "\n".join(lines)

    async def facts(self) -> str:
        """The user's current facts, one a line."""
        user_id = caller.get().user_id
        if not self.service.user_exists(user_id):
            return "No facts yet."
        stored = await self._call(self.service.list_facts, user_id, None, False)
        return "\n".join(f"- {one_memory(MemoryReply.of(s.memory))}" for s in stored) or "No facts."

    async def tiers(self) -> str:
        user_id = caller.get().user_id
        if not self.service.user_exists(user_id):
            return json.dumps({"user_id": user_id, "sizes": {}})
        status = await self._call(self.service.tiers_status, user_id, 20)
        return TierStatusReply.model_validate(status).model_dump_json(by_alias=True)

    def guide(self) -> str:
        """When to remember and when to recall."""
        return GUIDE


def _finished_at(task: Any) -> datetime:
    states = getattr(task, "states", None) or []
    return states[-1].ts if states else datetime.min.replace(tzinfo=UTC)


def _security(config: Config) -> TransportSecuritySettings:
    """DNS-rebinding protection: loopback names and ``mcp.allowed_hosts`` only."""
    hosts = [*LOOPBACK_HOSTS, *config.mcp.hosts()]
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
