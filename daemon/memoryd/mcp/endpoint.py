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

from memoryd.errors import InvalidUserIdError
from memoryd.mcp.surface import MAX_SESSIONS, USER_HEADER, McpSurface
from memoryd.models import USER_ID

__all__ = ["McpEndpoint"]

PATH = re.compile(r"/mcp(?:/users/(?P<user>[^/]*))?/?$")
SESSION_HEADER = "mcp-session-id"


def _error(status: int, kind: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status, headers=headers)


class McpEndpoint:
    """ASGI app for ``/mcp`` and below. ``surface()`` is the running server (None until the
    daemon is ready); ``auth_problem(authorization header)`` says why a request may not pass
    (None: it may; no function: no auth)."""

    def __init__(
        self,
        surface: Callable[[], McpSurface | None],
        auth_problem: Callable[[str], str | None] | None,
        default_user: str,
    ) -> None:
        self.surface = surface
        self.auth_problem = auth_problem
        self.default_user = default_user
        self.owners: OrderedDict[str, str] = OrderedDict()  # session id -> user

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        admitted = self._admit(scope["path"], headers)
        surface = self.surface()
        if isinstance(admitted, JSONResponse):
            refusal = admitted
        elif surface is None:
            refusal = _error(503, "Starting", "memoryd is starting; retry in a moment")
        else:
            bound = self._bound(scope, admitted)
            await surface.handle(bound, receive, self._recording(send, admitted))
            return
        await refusal(scope, receive, send)

    def _admit(self, path: str, headers: Headers) -> str | JSONResponse:
        """The user of an allowed request, or the reply that refuses it."""
        problem = self.auth_problem(headers.get("authorization", "")) if self.auth_problem else None
        if problem is not None:
            return _error(401, "HTTPError", problem, **{"WWW-Authenticate": "Bearer"})
        match = PATH.search(path)
        if match is None:
            return _error(404, "HTTPError", "MCP is served at /mcp/ and /mcp/users/<user>/")
        user: str = match["user"] if match["user"] is not None else self.default_user
        if not USER_ID.fullmatch(user):
            return _error(400, "InvalidUserIdError", str(InvalidUserIdError(user)))
        return self._foreign_session(headers, user) or user

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
