"""A Python client of the running daemon: :class:`Client` (sync) and :class:`AsyncClient`
(async), both on httpx, over every ``/v1`` route, with the API's own models.

    with Client() as memory:                      # URL and token as the CLI finds them
        memory.ingest("alice", [TurnIn(session_id="s1", role="user", text="I live in Oslo.")])
        reply = memory.query("alice", "where do I live?")     # a QueryReply
        print(reply.context)

Requests are built with the API's request models (bad input fails here, as the daemon would
refuse it), replies are parsed into its reply models, and an error reply is raised as the
daemon's own exception type (``except UserNotFoundError`` works on a 404 for a user), made a
:class:`RemoteError` too, which carries the status. A daemon that does not answer raises
:class:`~memoryd.errors.DaemonUnavailableError`. Each route is described once
(:class:`Calls`); the two clients only send.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any, Generic, Literal, ParamSpec, Self, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from memoryd import errors
from memoryd.config import Config, default_config_path, load_config
from memoryd.errors import DaemonUnavailableError, MemorydError
from memoryd.models import MemoryType, TaskStatus
from memoryd.schemas import (
    DeletedMemory,
    FactList,
    FeedbackIn,
    HealthReply,
    ImportReply,
    IngestReply,
    IngestRequest,
    MemoryPageReply,
    MemoryPatchIn,
    MemoryReply,
    QueryReply,
    QueryRequest,
    ReadyReply,
    RereadReply,
    ReshuffleReply,
    RollbackReply,
    RoundReply,
    RouterStatusReply,
    TaskIn,
    TaskList,
    TaskPatchIn,
    TierStatusReply,
    TurnDetail,
    TurnIn,
    TurnPageReply,
    UndoneFactReply,
    UserCounts,
    UserList,
    UserRemoved,
)
from memoryd.tokens import read_token

__all__ = ["AsyncClient", "Calls", "Client", "RemoteError", "daemon_url", "token_for"]

T = TypeVar("T", bound=BaseModel)
P = ParamSpec("P")
TIMEOUT_S = 120.0  # a training round or a batch of 256 turns can take this long
CHUNK = 2**16
ANY_ADDRESS = ("0.0.0.0", "::", "")


def daemon_url(config: Config) -> str:
    """Where the configured daemon listens, as a client on this machine reaches it."""
    host = "127.0.0.1" if config.host in ANY_ADDRESS else config.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{config.port}"


def token_for(config: Config) -> str | None:
    """The token a client sends: ``MEMORYD_TOKEN``, ``auth.token``, or the data directory's
    ``token`` file (never created here); None when there is none."""
    if token := os.environ.get("MEMORYD_TOKEN"):
        return token
    if config.auth.token:
        return config.auth.token
    return read_token(config.data_dir)


# -- errors ----------------------------------------------------------------------------------


class RemoteError(MemorydError):
    """An error reply of the daemon: ``status``, ``type`` (the daemon's exception class),
    ``message`` and ``details``. Raised as a subclass of the daemon's own exception class too
    when memoryd has one of that name."""

    def __init__(
        self, status: int, kind: str, message: str, details: list[Any] | None = None
    ) -> None:
        self.status, self.type, self.message, self.details = status, kind, message, details or []
        # not super(): in a subclass made with a daemon error class, that class's __init__
        # (which takes its own arguments) is next in line
        Exception.__init__(self, message)


@cache
def _remote(kind: str) -> type[RemoteError]:
    """``RemoteError`` made a subclass of ``memoryd.errors.<kind>`` when there is one."""
    base = getattr(errors, kind, None)
    if not (isinstance(base, type) and issubclass(base, MemorydError)):
        return RemoteError
    return type(f"Remote{kind}", (RemoteError, base), {"__module__": __name__})


def error_of(reply: httpx.Response) -> RemoteError:
    try:
        body = reply.json()["error"]
        kind, message, details = body["type"], body["message"], body.get("details")
    except (ValueError, KeyError, TypeError):
        kind, message, details = "HTTPError", reply.text[:200] or reply.reason_phrase, None
    if reply.status_code == 401:
        message = (
            f"the daemon refused the token ({message}): send the one in its data directory's "
            "`token` file (--data-dir) or set MEMORYD_TOKEN"
        )
    return _remote(kind)(reply.status_code, kind, message, details)


# -- the routes ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and the model its reply parses into."""

    method: str
    path: str
    reply: type[T]
    params: dict[str, Any] = field(default_factory=dict)
    body: BaseModel | None = None
    content: bytes | Path | None = None
    ok: tuple[int, ...] = (200, 201)

    def parse(self, reply: httpx.Response) -> T:
        if reply.status_code not in self.ok:
            raise error_of(reply)
        return self.reply.model_validate(reply.json())


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe="") for p in parts)


def _user(user_id: str, *rest: str) -> str:
    return _path("v1", "users", user_id, *rest)


def _json_lines(records: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


class Calls:
    """Every route as a :class:`Call`: its method, path, body model and reply model."""

    @staticmethod
    def ingest(user_id: str, turns: Sequence[TurnIn | dict[str, Any]]) -> Call[IngestReply]:
        body = IngestRequest.model_validate({"turns": list(turns)})
        return Call("POST", _user(user_id, "turns"), IngestReply, body=body)

    @staticmethod
    def list_turns(
        user_id: str, session_id: str | None = None, limit: int = 100, cursor: int = 0
    ) -> Call[TurnPageReply]:
        params = {"session_id": session_id, "limit": limit, "cursor": cursor}
        return Call("GET", _user(user_id, "turns"), TurnPageReply, params=params)

    @staticmethod
    def get_turn(user_id: str, turn_id: str) -> Call[TurnDetail]:
        return Call("GET", _user(user_id, "turns", turn_id), TurnDetail)

    @staticmethod
    def query(user_id: str, query: str | QueryRequest, **filters: Any) -> Call[QueryReply]:
        """``query`` with the filters of ``POST .../query`` (``k``, ``types``, ``when``, …)."""
        body = (
            query
            if isinstance(query, QueryRequest)
            else QueryRequest.model_validate({"query": query, **filters})
        )
        return Call("POST", _user(user_id, "query"), QueryReply, body=body)

    @staticmethod
    def list_memories(
        user_id: str,
        types: Sequence[MemoryType] | None = None,
        limit: int = 100,
        cursor: int = 0,
    ) -> Call[MemoryPageReply]:
        params = {"type": list(types or []), "limit": limit, "cursor": cursor}
        return Call("GET", _user(user_id, "memories"), MemoryPageReply, params=params)

    @staticmethod
    def get_memory(user_id: str, memory_id: str) -> Call[MemoryReply]:
        return Call("GET", _user(user_id, "memories", memory_id), MemoryReply)

    @staticmethod
    def patch_memory(
        user_id: str, memory_id: str, text: str | None = None, importance: float | None = None
    ) -> Call[MemoryReply]:
        body = MemoryPatchIn.of(text, importance)
        return Call("PATCH", _user(user_id, "memories", memory_id), MemoryReply, body=body)

    @staticmethod
    def delete_memory(user_id: str, memory_id: str) -> Call[DeletedMemory]:
        return Call("DELETE", _user(user_id, "memories", memory_id), DeletedMemory)

    @staticmethod
    def feedback(
        user_id: str, memory_id: str, value: Literal["positive", "negative"]
    ) -> Call[MemoryReply]:
        path = _user(user_id, "memories", memory_id, "feedback")
        return Call("POST", path, MemoryReply, body=FeedbackIn(value=value))

    @staticmethod
    def list_facts(
        user_id: str, subject: str | None = None, history: bool = False
    ) -> Call[FactList]:
        params = {"subject": subject, "history": str(history).lower()}
        return Call("GET", _user(user_id, "facts"), FactList, params=params)

    @staticmethod
    def undo_fact(user_id: str, fact_id: str) -> Call[UndoneFactReply]:
        return Call("POST", _user(user_id, "facts", fact_id, "undo"), UndoneFactReply)

    @staticmethod
    def reread_facts(user_id: str) -> Call[RereadReply]:
        return Call("POST", _user(user_id, "facts", "reread"), RereadReply)

    @staticmethod
    def undo_reread(user_id: str) -> Call[RereadReply]:
        return Call("POST", _user(user_id, "facts", "reread", "undo"), RereadReply)

    @staticmethod
    def list_tasks(user_id: str, status: Sequence[TaskStatus] | None = None) -> Call[TaskList]:
        params = {"status": list(status or [])}
        return Call("GET", _user(user_id, "tasks"), TaskList, params=params)

    @staticmethod
    def create_task(
        user_id: str, title: str, due: datetime | None = None, task_id: str | None = None
    ) -> Call[MemoryReply]:
        body = TaskIn.model_validate({"title": title, "due": due, "task_id": task_id})
        return Call("POST", _user(user_id, "tasks"), MemoryReply, body=body)

    @staticmethod
    def update_task(
        user_id: str, task_id: str, status: TaskStatus, note: str = ""
    ) -> Call[MemoryReply]:
        body = TaskPatchIn(status=status, note=note)
        return Call("PATCH", _user(user_id, "tasks", task_id), MemoryReply, body=body)

    @staticmethod
    def list_users() -> Call[UserList]:
        return Call("GET", _path("v1", "users"), UserList)

    @staticmethod
    def get_user(user_id: str) -> Call[UserCounts]:
        return Call("GET", _user(user_id), UserCounts)

    @staticmethod
    def delete_user(user_id: str) -> Call[UserRemoved]:
        return Call("DELETE", _user(user_id), UserRemoved)

    @staticmethod
    def import_user(user_id: str, export: Path | Iterable[dict[str, Any]]) -> Call[ImportReply]:
        """Load an export (a file `memoryd export` or ``export`` wrote, or its records) into a
        user with no data."""
        content = export if isinstance(export, Path) else _json_lines(export)
        return Call("POST", _user(user_id, "import"), ImportReply, content=content)

    @staticmethod
    def tiers(user_id: str, moves: int = 20) -> Call[TierStatusReply]:
        return Call("GET", _user(user_id, "tiers"), TierStatusReply, params={"moves": moves})

    @staticmethod
    def reshuffle(user_id: str) -> Call[ReshuffleReply]:
        return Call("POST", _user(user_id, "tiers", "reshuffle"), ReshuffleReply)

    @staticmethod
    def router_status(user_id: str) -> Call[RouterStatusReply]:
        return Call("GET", _user(user_id, "router"), RouterStatusReply)

    @staticmethod
    def train_router(user_id: str) -> Call[RoundReply]:
        return Call("POST", _user(user_id, "router", "rounds"), RoundReply)

    @staticmethod
    def rollback_router(user_id: str) -> Call[RollbackReply]:
        return Call("POST", _user(user_id, "router", "rollback"), RollbackReply)

    @staticmethod
    def health() -> Call[HealthReply]:
        return Call("GET", "/healthz", HealthReply)

    @staticmethod
    def ready() -> Call[ReadyReply]:
        """``status`` is ``ready``, or ``starting`` / ``recovering`` (answered with a 503)."""
        return Call("GET", "/readyz", ReadyReply, ok=(200, 503))


# -- sending -----------------------------------------------------------------------------------


def _request(call: Call[Any]) -> dict[str, Any]:
    """httpx's arguments for ``call`` (a Path body is left to the transport)."""
    params = {k: v for k, v in call.params.items() if v is not None and v != []}
    request: dict[str, Any] = {"params": params}
    if call.body is not None:
        request["json"] = call.body.model_dump(mode="json", exclude_unset=True)
    elif isinstance(call.content, bytes):
        request["content"] = call.content
    if call.content is not None:
        request["headers"] = {"Content-Type": "application/x-ndjson"}
    return request


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _settings(url: str | None, token: str | None, config: Config | None) -> tuple[str, str | None]:
    """URL and token: given, else from ``config`` (by default the config file, MEMORYD_* and
    the data directory, as the CLI reads them)."""
    if url is not None and token is not None:
        return url, token
    config = config or load_config(default_config_path(), os.environ, {})
    return url or daemon_url(config), token if token is not None else token_for(config)


class SyncRoute(Generic[P, T]):
    """A route of :class:`Client`: the call :class:`Calls` builds, sent."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build

    def __get__(self, client: Client, owner: type | None = None) -> Callable[P, T]:
        def send(*args: P.args, **kwargs: P.kwargs) -> T:
            return client.send(self.build(*args, **kwargs))

        send.__doc__ = self.build.__doc__
        return send


class AsyncRoute(Generic[P, T]):
    """A route of :class:`AsyncClient`."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build

    def __get__(
        self, client: AsyncClient, owner: type | None = None
    ) -> Callable[P, Coroutine[Any, Any, T]]:
        async def send(*args: P.args, **kwargs: P.kwargs) -> T:
            return await client.send(self.build(*args, **kwargs))

        send.__doc__ = self.build.__doc__
        return send


class Client:
    """The daemon's API, blocking. ``url`` and ``token`` default to the configured daemon's."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        config: Config | None = None,
        timeout: float = TIMEOUT_S,
    ) -> None:
        self.url, token = _settings(url, token, config)
        self.http = httpx.Client(base_url=self.url, headers=_headers(token), timeout=timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def send(self, call: Call[T]) -> T:
        try:
            if isinstance(call.content, Path):
                with call.content.open("rb") as body:
                    reply = self.http.request(
                        call.method, call.path, content=body, **_request(call)
                    )
            else:
                reply = self.http.request(call.method, call.path, **_request(call))
        except httpx.TransportError as exc:
            raise DaemonUnavailableError(self.url, type(exc).__name__) from exc
        return call.parse(reply)

    def export(self, user_id: str) -> Iterator[dict[str, Any]]:
        """The user's export, record by record, as the daemon streams it."""
        try:
            with self.http.stream("GET", _user(user_id, "export")) as reply:
                if reply.status_code != 200:
                    reply.read()
                    raise error_of(reply)
                for line in reply.iter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.TransportError as exc:
            raise DaemonUnavailableError(self.url, type(exc).__name__) from exc

    ingest = SyncRoute(Calls.ingest)
    list_turns = SyncRoute(Calls.list_turns)
    get_turn = SyncRoute(Calls.get_turn)
    query = SyncRoute(Calls.query)
    list_memories = SyncRoute(Calls.list_memories)
    get_memory = SyncRoute(Calls.get_memory)
    patch_memory = SyncRoute(Calls.patch_memory)
    delete_memory = SyncRoute(Calls.delete_memory)
    feedback = SyncRoute(Calls.feedback)
    list_facts = SyncRoute(Calls.list_facts)
    undo_fact = SyncRoute(Calls.undo_fact)
    reread_facts = SyncRoute(Calls.reread_facts)
    undo_reread = SyncRoute(Calls.undo_reread)
    list_tasks = SyncRoute(Calls.list_tasks)
    create_task = SyncRoute(Calls.create_task)
    update_task = SyncRoute(Calls.update_task)
    list_users = SyncRoute(Calls.list_users)
    get_user = SyncRoute(Calls.get_user)
    delete_user = SyncRoute(Calls.delete_user)
    import_user = SyncRoute(Calls.import_user)
    tiers = SyncRoute(Calls.tiers)
    reshuffle = SyncRoute(Calls.reshuffle)
    router_status = SyncRoute(Calls.router_status)
    train_router = SyncRoute(Calls.train_router)
    rollback_router = SyncRoute(Calls.rollback_router)
    health = SyncRoute(Calls.health)
    ready = SyncRoute(Calls.ready)


async def _chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as body:
        while chunk := body.read(CHUNK):
            yield chunk


class AsyncClient:
    """The daemon's API for asyncio (or trio) code; the same methods as :class:`Client`."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        config: Config | None = None,
        timeout: float = TIMEOUT_S,
    ) -> None:
        self.url, token = _settings(url, token, config)
        self.http = httpx.AsyncClient(base_url=self.url, headers=_headers(token), timeout=timeout)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.http.aclose()

    async def send(self, call: Call[T]) -> T:
        request = _request(call)
        if isinstance(call.content, Path):
            request["content"] = _chunks(call.content)
        try:
            reply = await self.http.request(call.method, call.path, **request)
        except httpx.TransportError as exc:
            raise DaemonUnavailableError(self.url, type(exc).__name__) from exc
        return call.parse(reply)

    async def export(self, user_id: str) -> AsyncIterator[dict[str, Any]]:
        """The user's export, record by record, as the daemon streams it."""
        try:
            async with self.http.stream("GET", _user(user_id, "export")) as reply:
                if reply.status_code != 200:
                    await reply.aread()
                    raise error_of(reply)
                async for line in reply.aiter_lines():
                    if line.strip():
                        yield json.loads(line)
        except httpx.TransportError as exc:
            raise DaemonUnavailableError(self.url, type(exc).__name__) from exc

    ingest = AsyncRoute(Calls.ingest)
    list_turns = AsyncRoute(Calls.list_turns)
    get_turn = AsyncRoute(Calls.get_turn)
    query = AsyncRoute(Calls.query)
    list_memories = AsyncRoute(Calls.list_memories)
    get_memory = AsyncRoute(Calls.get_memory)
    patch_memory = AsyncRoute(Calls.patch_memory)
    delete_memory = AsyncRoute(Calls.delete_memory)
    feedback = AsyncRoute(Calls.feedback)
    list_facts = AsyncRoute(Calls.list_facts)
    undo_fact = AsyncRoute(Calls.undo_fact)
    reread_facts = AsyncRoute(Calls.reread_facts)
    undo_reread = AsyncRoute(Calls.undo_reread)
    list_tasks = AsyncRoute(Calls.list_tasks)
    create_task = AsyncRoute(Calls.create_task)
    update_task = AsyncRoute(Calls.update_task)
    list_users = AsyncRoute(Calls.list_users)
    get_user = AsyncRoute(Calls.get_user)
    delete_user = AsyncRoute(Calls.delete_user)
    import_user = AsyncRoute(Calls.import_user)
    tiers = AsyncRoute(Calls.tiers)
    reshuffle = AsyncRoute(Calls.reshuffle)
    router_status = AsyncRoute(Calls.router_status)
    train_router = AsyncRoute(Calls.train_router)
    rollback_router = AsyncRoute(Calls.rollback_router)
    health = AsyncRoute(Calls.health)
    ready = AsyncRoute(Calls.ready)
