"""The ASGI endpoint at ``/mcp``: the bearer token, the user the path names, and a session that
stays with the user it was opened for.

    /mcp/                  the user ``mcp.default_user``
    /mcp/users/<user>/     that user

Nothing else reaches the MCP server: a request without the token is a 401, a bad user id a 400,
another path a 404, a session id opened on another user's path a 404 (the client starts a new
session), all with the daemon's error JSON. The user goes to the server in the
``x-memoryd-user`` header, replacing any the client sent.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from memoryd.mcp.surface import MAX_SESSIONS, USER_HEADER, McpSurface
from memoryd.models import USER_ID

__all__ = ["McpEndpoint"]

PATH = re.compile(r"/mcp(?:/users/(?P<user>[^/]*))?/?$")
SESSION_HEADER = "mcp-session-id"


def _error(status: int, kind: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status, headers=headers)


class McpEndpoint:
    """ASGI app for ``/mcp`` and below; ``surface()`` is the running server (None until the
    daemon is ready), ``check_token`` compares a bearer token (None: no auth)."""

    def __init__(
        self,
        surface: Callable[[], McpSurface | None],
        check_token: Callable[[str], bool] | None,
        default_user: str,
    ) -> None:
        self.surface = surface
        self.check_token = check_token
        self.default_user = default_user
        self.owners: OrderedDict[str, str] = OrderedDict()  # session id -> user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        user, refusal = self._admit(scope["path"], headers)
        surface = self.surface()
        if surface is None and refusal is None:
            refusal = _error(503, "Starting", "memoryd is starting; retry in a moment")
        if refusal is not None or surface is None or user is None:
            await (refusal or _error(500, "InternalError", "no user"))(scope, receive, send)
            return
        await surface.handle(self._bound(scope, user), receive, self._recording(send, user))

    def _admit(self, path: str, headers: Headers) -> tuple[str | None, JSONResponse | None]:
        """The user of an allowed request, or the reply that refuses it."""
        refusal = self._refusal(headers)
        if refusal is not None:
            return None, refusal
        user, refusal = self._user(path)
        if user is not None:
            refusal = self._foreign_session(headers, user)
        return user, refusal

    def _refusal(self, headers: Headers) -> JSONResponse | None:
        if self.check_token is None:
            return None
        scheme, _, value = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not value:
            return _error(
                401, "HTTPError", "missing bearer token", **{"WWW-Authenticate": "Bearer"}
            )
        if not self.check_token(value.strip()):
            return _error(
                401, "HTTPError", "invalid bearer token", **{"WWW-Authenticate": "Bearer"}
            )
        return None

    def _user(self, path: str) -> tuple[str | None, JSONResponse | None]:
        match = PATH.search(path)
        if match is None:
            return None, _error(404, "HTTPError", "MCP is served at /mcp/ and /mcp/users/<user>/")
        user = match["user"]
        if user is None:
            return self.default_user, None
        if not USER_ID.match(user):
            message = (
                f"user id {user[:80]!r} is not allowed: use 1-64 characters from A-Z a-z 0-9 _ -"
            )
            return None, _error(400, "InvalidUserIdError", message)
        return user, None

    def _foreign_session(self, headers: Headers, user: str) -> JSONResponse | None:
        session = headers.get(SESSION_HEADER)
        owner = self.owners.get(session) if session else None
        if owner is None or owner == user:
            return None
        return _error(404, "HTTPError", "this MCP session belongs to another user's endpoint")

    @staticmethod
    def _bound(scope: Scope, user: str) -> Scope:
        raw = [(k, v) for k, v in scope["headers"] if k.lower() != USER_HEADER.encode()]
        return {**scope, "headers": [*raw, (USER_HEADER.encode(), user.encode())]}

    def _recording(self, send: Send, user: str) -> Send:
        """``send``, noting the user of a session the server opens."""

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                session = Headers(raw=message.get("headers", [])).get(SESSION_HEADER)
                if session and session not in self.owners:
                    self.owners[session] = user
                    while len(self.owners) > 4 * MAX_SESSIONS:
                        self.owners.popitem(last=False)
            await send(message)

        return recording
