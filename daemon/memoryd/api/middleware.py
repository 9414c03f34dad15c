"""ASGI middleware: request body limit (413), security headers and per-route latency metrics."""

from __future__ import annotations

import json
import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memoryd.api.errors import error_body


async def _send_413(send: Send, limit: int) -> None:
    body = json.dumps(error_body("PayloadTooLarge", f"request body is over {limit} bytes")).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """Reject bodies over ``limit`` bytes (413): at once by Content-Length; a chunked body is
    read up to the limit first (the app's own body parser would turn an error into a 400).
    Paths ending in one of ``streamed`` pass untouched: their route reads the body as a stream
    and sets its own limit."""

    def __init__(self, app: ASGIApp, limit: int, streamed: tuple[str, ...] = ()) -> None:
        self.app, self.limit, self.streamed = app, limit, streamed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].endswith(self.streamed):
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                await _send_413(send, self.limit)
                return
        if any(name == b"content-length" for name, _ in scope.get("headers", [])):
            await self.app(scope, receive, send)  # the server holds the body to its length
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            if len(body) > self.limit:
                await _send_413(send, self.limit)
                return
            more = message.get("more_body", False)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        await self.app(scope, replay, send)


# Every reply may be loaded by a browser (the inspector at /ui/ is one page of this origin): only
# this origin's scripts, styles and images, no inline script or style, no framing, and Trusted
# Types with no policy, so the page cannot hand a string to an HTML sink (innerHTML throws).
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class SecurityHeadersMiddleware:
    """Add :data:`SECURITY_HEADERS` to every HTTP reply that does not set them itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Metrics:
    """The daemon's Prometheus metrics, on a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "memoryd_request_seconds",
            "Request latency by route",
            ["method", "route", "status"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
        )
        self.ingested = Counter(
            "memoryd_turns_ingested",
            "Turns journaled (duplicates excluded)",
            registry=self.registry,
        )
        self.queries = Counter("memoryd_queries", "Queries answered", registry=self.registry)


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = {"code": 500}

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        start = time.perf_counter()
        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", "unmatched")
            self.metrics.latency.labels(scope["method"], path, str(status["code"])).observe(
                time.perf_counter() - start
            )
