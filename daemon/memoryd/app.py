"""The web app factory: routes, error handlers, middleware and lifespan in one explicit call.

app = create_app(config)                 # lifespan opens and closes the service
app = create_app(config, service=svc)    # the caller owns svc (tests, CLI)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator

import anyio.to_thread
from fastapi import Depends, FastAPI
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool

from memoryd import __version__
from memoryd.api import errors
from memoryd.api.auth import BearerAuth, Secret, load_or_create_token
from memoryd.api.middleware import BodyLimitMiddleware, Metrics, MetricsMiddleware
from memoryd.api.routes import ops_router, v1_router
from memoryd.config import Config
from memoryd.service import MemoryService

log = logging.getLogger(__name__)

SAVE_INTERVAL_S = 60.0
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


async def _save_periodically(service: MemoryService) -> None:
    while True:
        await asyncio.sleep(SAVE_INTERVAL_S)
        try:
            await run_in_threadpool(service.save_all)
        except Exception:
            log.exception("periodic vector save failed")


async def _recover(app: FastAPI) -> None:
    """Replay every user's journal into its projections, then report ready."""
    try:
        await run_in_threadpool(app.state.service.recover)
    finally:
        app.state.recovered = True


def create_app(
    config: Config, service: MemoryService | None = None, token: Secret | None = None
) -> FastAPI:
    """Build the ASGI app around a service (built in the lifespan when not given).

    ``token`` defaults to the configured one or ``<data_dir>/token``; with ``auth.enabled =
    false`` no token is asked for.
    """
    if config.auth_enabled and token is None:
        token = load_or_create_token(config.data_dir, config.auth_token)
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
        saver = asyncio.create_task(_save_periodically(app.state.service))
        try:
            yield
        finally:
            for task in (saver, recovery):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if owns_service:
                await run_in_threadpool(app.state.service.close)
                log.info("memoryd stopped")

    app = FastAPI(
        title="memoryd",
        version=__version__,
        description="On-device memory for personal LLM agents.",
        lifespan=lifespan,
    )
    app.state.metrics = Metrics()
    if service is not None:
        app.state.service = service
    app.state.metrics.registry.register(StoreSizeCollector(app))
    errors.install(app)
    app.include_router(ops_router())
    app.include_router(
        v1_router(), dependencies=[Depends(BearerAuth(token if config.auth_enabled else None))]
    )
    app.add_middleware(BodyLimitMiddleware, limit=config.limits_max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    return app
