"""Bearer-token auth for /v1 routes (and /mcp); the token itself is :mod:`memoryd.tokens`."""

from __future__ import annotations

from fastapi import HTTPException, Request
from fastapi.security import HTTPBearer

from memoryd.tokens import Secret, TokenFile, load_or_create_token

__all__ = [
    "BEARER_SCHEME",
    "BearerAuth",
    "Secret",
    "Token",
    "bearer_problem",
    "load_or_create_token",
]

Token = Secret | TokenFile  # a configured token, or the token file (re-read when rotated)

# Declares the token in /openapi.json (BearerAuth does the checking).
BEARER_SCHEME = HTTPBearer(
    auto_error=False, description="The token in <data-dir>/token, or the auth.token setting"
)


def bearer_problem(token: Token, authorization: str) -> str | None:
    """Why an ``Authorization`` header does not carry ``token`` (None when it does)."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value:
        return "missing bearer token"
    if not token.matches(value.strip()):
        return "invalid bearer token"
    return None


class BearerAuth:
    """FastAPI dependency: 401 unless ``Authorization: Bearer <token>`` matches."""

    def __init__(self, token: Token) -> None:
        self.token = token

    async def __call__(self, request: Request) -> None:
        problem = bearer_problem(self.token, request.headers.get("authorization", ""))
        if problem is not None:
            raise HTTPException(401, problem, headers={"WWW-Authenticate": "Bearer"})
