"""The web app factory: routes, error handlers, middleware and lifespan in one explicit call.

app = create_app(config)                 # lifespan opens and closes the service
app = create_app(config, service=svc)    # the caller owns svc (tests, CLI)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from functools import partial

import anyio.to_thread
from fastapi import Depends, FastAPI, Security
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from memoryd import __version__
from memoryd.api import (
    BEARER_SCHEME,
    STREAMED_BODIES,
    BearerAuth,
    BodyLimitMiddleware,
    Metrics,
    MetricsMiddleware,
    SecurityHeadersMiddleware,
    Token,
    bearer_problem,
    install_error_handlers,
    load_or_create_token,
    ops_router,
    v1_router,
)
from memoryd.config import Config
from memoryd.jobs import Jobs
from memoryd.service import MemoryService
from memoryd.ui import ui_routes

log = logging.getLogger(__name__)

WORKER_THREADS = 8  # blocking calls (stores, encoder) run on at most this many threads


class StoreSizeCollector(Collector):
    """Store sizes of the open users, read at scrape time."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "memoryd_store_items", "Items per store of open users", labels=["user", "item"]
        )
        service: MemoryService | None = getattr(self.app.state, "service", None)
        if service is not None:
            for user, counts in service.open_counts().items():
                for item, value in counts.items():
                    gauge.add_metric([user, item], value)
        yield gauge


class RouterCollector(Collector):
    """The self-enhancing router of each open user, read at scrape time."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def collect(self) -> Iterator[GaugeMetricFamily]:
        names = {
            "round": "Completed training rounds (t)",
            "tau": "Deferral threshold tau_t",
            "pool": "Labels in the training pool",
            "queue_pending": "Deferred turns waiting for the LLM",
            "queue_failed": "Deferred turns the LLM gave up on",
            "llm_share": "Share of this round's routing decisions sent to the LLM",
            "macro_f1": "Validation macro-F1 of the last training round's candidate",
        }
        gauges = {
            key: GaugeMetricFamily(f"memoryd_router_{key}", help_, labels=["user"])
            for key, help_ in names.items()
        }
        service: MemoryService | None = getattr(self.app.state, "service", None)
        statuses = service.router_statuses() if service is not None else {}
        for user, status in statuses.items():
            decisions = {d["round"]: d["llm_share"] for d in status["decisions"]}
            last = status["last_validation"] or {}
            values = {
                "round": status["round"],
                "tau": status["tau"],
                "pool": status["pool"]["size"],
                "queue_pending": status["queue"]["pending"],
                "queue_failed": status["queue"]["failed"],
                "llm_share": decisions.get(status["round"], 0.0),
                "macro_f1": last.get("f1_after", {}).get("macro", float("nan")),
            }
            for key, value in values.items():
                gauges[key].add_metric([user], value)
        yield from gauges.values()


async def _recover(app: FastAPI) -> None:
    """Replay every user's journal into its projections, then report ready."""
    try:
        await run_in_threadpool(app.state.service.recover)
    finally:
        app.state.recovered = True


def create_app(
    config: Config, service: MemoryService | None = None, token: Token | None = None
) -> FastAPI:
    """Build the ASGI app around a service (built in the lifespan when not given).

    ``token`` defaults to the configured one or ``<data_dir>/token``; with ``auth.enabled =
    false`` no token is asked for.
    """
    if not config.auth.enabled:
        token = None
    elif token is None:
        token = load_or_create_token(config.data_dir, config.auth.token)
    owns_service = service is None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # anyio's default of 40 threads buys nothing on 2-4 cores and costs memory per thread
        # (an SQLite connection each, malloc arenas).
        anyio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
        if owns_service:
            app.state.service = await run_in_threadpool(MemoryService.from_config, config)
            log.info("memoryd %s ready; data in %s", __version__, config.data_dir)
        app.state.recovered = False
        recovery = asyncio.create_task(_recover(app))
        jobs = Jobs(app.state.service, config)
        jobs.start()
        try:
            async with _mcp_running(app, config):
                yield
        finally:
            recovery.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await recovery
            await run_in_threadpool(jobs.shutdown)
            if owns_service:
                await run_in_threadpool(app.state.service.close)
                log.info("memoryd stopped")

    app = FastAPI(
        title="memoryd",
        version=__version__,
        description="On-device memory for personal LLM agents.",
        lifespan=lifespan,
        # FastAPI's doc pages load their scripts from a CDN: nothing here may (the schema is
        # /openapi.json; the inspector at /ui/ is the page for people).
        docs_url=None,
        redoc_url=None,
    )
    app.state.metrics = Metrics()
    if service is not None:
        app.state.service = service
    app.state.metrics.registry.register(StoreSizeCollector(app))
    app.state.metrics.registry.register(RouterCollector(app))
    install_error_handlers(app)
    app.include_router(ops_router())
    guards = [Depends(BearerAuth(token)), Security(BEARER_SCHEME)] if token is not None else []
    app.include_router(v1_router(), dependencies=guards)
    app.add_middleware(
        BodyLimitMiddleware, limit=config.limits.max_body_bytes, streamed=STREAMED_BODIES
    )
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(SecurityHeadersMiddleware)
    if config.mcp.enabled:
        _mount_mcp(app, config, token)
    app.router.routes.extend(ui_routes())
    return app


def _mount_mcp(app: FastAPI, config: Config, token: Token | None) -> None:
    """MCP at /mcp/ and /mcp/users/<user>/, behind the same token as /v1.

    The MCP SDK is imported here, only when MCP is on: it costs the daemon ~37 MB of RSS
    (docs/decisions.md, "MCP in the daemon")."""
    from memoryd.mcp import McpEndpoint, McpMetrics

    app.state.mcp = None
    app.state.mcp_metrics = McpMetrics(app.state.metrics.registry)
    check = partial(bearer_problem, token) if token is not None else None
    endpoint = McpEndpoint(lambda: app.state.mcp, check, config.mcp.default_user)
    app.router.routes.append(Route("/mcp{rest:path}", endpoint, include_in_schema=False))


@contextlib.asynccontextmanager
async def _mcp_running(app: FastAPI, config: Config) -> AsyncIterator[None]:
    """The MCP server, for as long as the app serves (a session manager runs once: each
    lifespan builds its own)."""
    if not config.mcp.enabled:
        yield
        return
    from memoryd.mcp import McpSurface

    surface = McpSurface(app.state.service, config, app.state.mcp_metrics)
    async with surface.running():
        app.state.mcp = surface
        try:
            yield
        finally:
            app.state.mcp = None
