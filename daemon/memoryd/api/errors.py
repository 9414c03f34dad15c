"""The one place where memoryd's exceptions become HTTP responses.

Every error reply has one shape: ``{"error": {"type": ..., "message": ..., "details"?: [...]}}``.
Statuses are looked up along the exception's MRO, so a new subclass needs no new code.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from memoryd.errors import (
    ClosedError,
    ConfigError,
    ConflictError,
    DataDirBusyError,
    DiskFullError,
    InvalidInputError,
    InvalidUserIdError,
    LLMError,
    LLMTimeoutError,
    LLMUnavailableError,
    MemorydError,
    ModelMissingError,
    NotFoundError,
    PayloadTooLargeError,
    StoreError,
)

log = logging.getLogger(__name__)

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")

STATUS: dict[type[Exception], int] = {
    InvalidUserIdError: 400,
    PayloadTooLargeError: 413,
    InvalidInputError: 422,
    NotFoundError: 404,
    ConflictError: 409,
    DiskFullError: 507,
    ModelMissingError: 503,
    DataDirBusyError: 503,
    StoreError: 503,
    ClosedError: 503,
    LLMUnavailableError: 503,
    LLMTimeoutError: 504,
    LLMError: 502,
    ConfigError: 500,
    MemorydError: 500,
}


def status_for(exc: Exception) -> int:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return 500


def error_body(kind: str, message: str, details: list[Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": kind, "message": message}
    if details:
        error["details"] = details
    return {"error": error}


def error_response(status: int, kind: str, message: str, **kw: Any) -> JSONResponse:
    return JSONResponse(error_body(kind, message, kw.pop("details", None)), status, **kw)


async def _memoryd_error(request: Request, exc: Exception) -> JSONResponse:
    status = status_for(exc)
    if isinstance(exc, DiskFullError):  # the machine's state, not a fault: no traceback
        log.warning("%s %s refused: %s", request.method, request.url.path, exc)
    elif status >= 500:
        log.error("%s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
    return error_response(status, type(exc).__name__, str(exc))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    if any(d["type"] == "json_invalid" for d in details):
        return error_response(
            400, "MalformedJSON", "request body is not valid JSON", details=details
        )
    first = details[0] if details else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(p) for p in first["loc"] if p != "body") or "request"
    return error_response(422, "ValidationError", f"{where}: {first['msg']}", details=details)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed_methods(request)}
    return error_response(exc.status_code, "HTTPError", str(exc.detail), headers=headers)


def _allowed_methods(request: Request) -> str:
    """Every method some route serves at this path (Starlette's 405 names only the first
    route's), found by asking the routes to match the request under each method."""
    return ", ".join(
        method
        for method in METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    )


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s crashed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "InternalError", "internal error (see the daemon log)")


def install(app: FastAPI) -> None:
    app.add_exception_handler(MemorydError, _memoryd_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
