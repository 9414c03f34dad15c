"""The HTTP layer: routes, bearer-token auth, body limit, security headers and metrics
middleware, and the one table mapping memoryd's errors to statuses. Only the app factory
(:mod:`memoryd.app`) uses it."""

from memoryd.api.auth import (
    BEARER_SCHEME,
    BearerAuth,
    Token,
    bearer_problem,
    load_or_create_token,
)
from memoryd.api.errors import install as install_error_handlers
from memoryd.api.middleware import (
    BodyLimitMiddleware,
    Metrics,
    MetricsMiddleware,
    SecurityHeadersMiddleware,
)
from memoryd.api.routes import STREAMED_BODIES, ops_router, v1_router

__all__ = [
    "BEARER_SCHEME",
    "STREAMED_BODIES",
    "BearerAuth",
    "BodyLimitMiddleware",
    "Metrics",
    "MetricsMiddleware",
    "SecurityHeadersMiddleware",
    "Token",
    "bearer_problem",
    "install_error_handlers",
    "load_or_create_token",
    "ops_router",
    "v1_router",
]
