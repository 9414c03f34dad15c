"""Bearer-token auth for /v1 routes. The token lives in ``<data_dir>/token`` (mode 0600)."""

from __future__ import annotations

import hmac
import logging
import os
import secrets
from pathlib import Path

from fastapi import HTTPException, Request

log = logging.getLogger(__name__)

TOKEN_FILE = "token"


class Secret:
    """A string whose repr hides it."""

    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return self._value

    def matches(self, candidate: str) -> bool:
        return hmac.compare_digest(self._value.encode(), candidate.encode())


def load_or_create_token(data_dir: Path, configured: str = "") -> Secret:
    """The configured token, else the one in ``<data_dir>/token``, else a new one written there."""
    if configured:
        return Secret(configured)
    path = data_dir / TOKEN_FILE
    if path.exists():
        return Secret(path.read_text().strip())
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    log.info("generated an API token in %s", path)
    return Secret(token)


def bearer_problem(token: Secret, authorization: str) -> str | None:
    """Why an ``Authorization`` header does not carry ``token`` (None when it does)."""
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value:
        return "missing bearer token"
    if not token.matches(value.strip()):
        return "invalid bearer token"
    return None


class BearerAuth:
    """FastAPI dependency: 401 unless ``Authorization: Bearer <token>`` matches."""

    def __init__(self, token: Secret | None) -> None:
        self.token = token

    async def __call__(self, request: Request) -> None:
        if self.token is None:
            return
        problem = bearer_problem(self.token, request.headers.get("authorization", ""))
        if problem is not None:
            raise HTTPException(401, problem, headers={"WWW-Authenticate": "Bearer"})
