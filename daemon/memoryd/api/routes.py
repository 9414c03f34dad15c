"""HTTP routes: parse, call the service in a worker thread, reply with its schema. Nothing else.

Every route declares its response model (:mod:`memoryd.schemas`), so ``/openapi.json``
documents every reply.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from typing import IO, Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import PlainTextResponse, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from memoryd.api.middleware import Metrics
from memoryd.errors import InvalidInputError, PayloadTooLargeError
from memoryd.models import USER_ID_PATTERN, MemoryType, TaskStatus
from memoryd.portability import read_records
from memoryd.schemas import (
    MAX_CURSOR,
    DeletedMemory,
    ErrorReply,
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
    TurnPageReply,
    UndoneFactReply,
    UserCounts,
    UserList,
    UserRemoved,
)
from memoryd.service import MemoryService, check_user_id

__all__ = ["STREAMED_BODIES", "Metrics", "ops_router", "v1_router"]

run_blocking = run_in_threadpool

# Routes whose request body is read by the route itself, with its own limit (paths ending so).
STREAMED_BODIES = ("/import",)
# An import body is kept in memory up to this size, then spooled to the data directory.
IMPORT_SPOOL_BYTES = 8 * 2**20
NDJSON = "application/x-ndjson"


def service_of(request: Request) -> MemoryService:
    service: MemoryService = request.app.state.service
    return service


Service = Annotated[MemoryService, Depends(service_of)]


def user_id_param(
    user_id: Annotated[
        str,
        Path(
            description="1-64 characters from A-Z a-z 0-9 _ - (it names a directory)",
            json_schema_extra={"pattern": USER_ID_PATTERN},
        ),
    ],
) -> str:
    """The user id, checked here (a 400 naming the rule) rather than by FastAPI (a 422)."""
    return check_user_id(user_id)


UserId = Annotated[str, Depends(user_id_param)]

ERROR_CAUSES = {
    400: "A user id that cannot name a directory, or a body that is not JSON",
    401: "No bearer token, or the wrong one",
    404: "No such user, turn or memory",
    409: "The request contradicts stored state: an id reused, a move the record does not allow",
    413: "The body is over its size limit",
    422: "A field has a bad value; the message names it",
    503: "A store failed, or the daemon is stopping; nothing was written",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, each with the error body's schema."""
    return {s: {"model": ErrorReply, "description": ERROR_CAUSES[s]} for s in statuses}


# What a route with a request body, and one that can conflict with stored state, adds to the
# errors every /v1 route can answer.
BODY = errors(413)
WRITE = errors(409, 413)


def v1_router() -> APIRouter:
    router = APIRouter(prefix="/v1", responses=errors(400, 401, 404, 422, 503))

    @router.post(
        "/users/{user_id}/turns", status_code=201, response_model=IngestReply, responses=BODY
    )
    async def ingest(
        user_id: UserId, body: IngestRequest, request: Request, service: Service
    ) -> IngestReply:
        turns = [t.to_new_turn() for t in body.turns]
        receipts = await run_blocking(service.ingest, user_id, turns)
        request.app.state.metrics.ingested.inc(sum(not r.duplicate for r in receipts))
        return IngestReply.of(receipts)

    @router.get("/users/{user_id}/turns", response_model=TurnPageReply)
    async def list_turns(
        user_id: UserId,
        service: Service,
        session_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: Annotated[int, Query(ge=0, le=MAX_CURSOR)] = 0,
    ) -> TurnPageReply:
        page = await run_blocking(service.list_turns, user_id, session_id, limit, cursor)
        return TurnPageReply.of(page)

    @router.get("/users/{user_id}/turns/{turn_id}", response_model=TurnDetail)
    async def get_turn(user_id: UserId, turn_id: str, service: Service) -> TurnDetail:
        return TurnDetail.of_view(await run_blocking(service.get_turn, user_id, turn_id))

    @router.post("/users/{user_id}/query", response_model=QueryReply, responses=BODY)
    async def query(
        user_id: UserId, body: QueryRequest, request: Request, service: Service
    ) -> QueryReply:
        result = await run_blocking(service.query, user_id, body.to_params())
        request.app.state.metrics.queries.inc()
        return QueryReply.of(body.query, result)

    @router.get("/users/{user_id}/memories", response_model=MemoryPageReply)
    async def list_memories(
        user_id: UserId,
        service: Service,
        type: Annotated[list[MemoryType] | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: Annotated[int, Query(ge=0, le=MAX_CURSOR)] = 0,
    ) -> MemoryPageReply:
        types = tuple(type) if type else tuple(MemoryType)
        page = await run_blocking(service.list_memories, user_id, types, limit, cursor)
        return MemoryPageReply.of(page)

    @router.get("/users/{user_id}/memories/{memory_id}", response_model=MemoryReply)
    async def get_memory(user_id: UserId, memory_id: str, service: Service) -> MemoryReply:
        stored = await run_blocking(service.get_memory, user_id, memory_id)
        return MemoryReply.of(stored.memory)

    @router.patch(
        "/users/{user_id}/memories/{memory_id}", response_model=MemoryReply, responses=BODY
    )
    async def patch_memory(
        user_id: UserId, memory_id: str, body: MemoryPatchIn, service: Service
    ) -> MemoryReply:
        patch = body.to_patch()
        return MemoryReply.of(await run_blocking(service.patch_memory, user_id, memory_id, patch))

    @router.delete("/users/{user_id}/memories/{memory_id}", response_model=DeletedMemory)
    async def delete_memory(user_id: UserId, memory_id: str, service: Service) -> DeletedMemory:
        await run_blocking(service.delete_memory, user_id, memory_id)
        return DeletedMemory(id=memory_id)

    @router.post(
        "/users/{user_id}/memories/{memory_id}/feedback",
        response_model=MemoryReply,
        responses=WRITE,
    )
    async def feedback(
        user_id: UserId, memory_id: str, body: FeedbackIn, service: Service
    ) -> MemoryReply:
        """Vote on a rule or an episode; positive episodes feed the rule abstraction (A_proc)."""
        positive = body.value == "positive"
        return MemoryReply.of(await run_blocking(service.feedback, user_id, memory_id, positive))

    @router.get("/users/{user_id}/facts", response_model=FactList)
    async def list_facts(
        user_id: UserId,
        service: Service,
        subject: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
        history: bool = False,
    ) -> FactList:
        """Current facts; with ``history=true`` also the superseded ones (``current: false``)."""
        return FactList.of(await run_blocking(service.list_facts, user_id, subject, history))

    @router.post("/users/{user_id}/facts/reread", response_model=RereadReply, responses=errors(409))
    async def reread_facts(user_id: UserId, service: Service) -> RereadReply:
        """Read the user's journaled turns again with the current fact reader and replace the
        facts read before, as one change (the old facts stay in the history; 409 while another
        reread of the user runs)."""
        return RereadReply.of(await run_blocking(service.reread_facts, user_id))

    @router.post(
        "/users/{user_id}/facts/reread/undo", response_model=RereadReply, responses=errors(409)
    )
    async def undo_reread(user_id: UserId, service: Service) -> RereadReply:
        """Reverse the user's last reread as one change (409 when there is none to undo)."""
        return RereadReply.of(await run_blocking(service.undo_reread, user_id))

    @router.post(
        "/users/{user_id}/facts/{fact_id}/undo",
        response_model=UndoneFactReply,
        responses=errors(409),
    )
    async def undo_supersession(user_id: UserId, fact_id: str, service: Service) -> UndoneFactReply:
        """Make a superseded fact current again (409 if it was not superseded)."""
        undone = await run_blocking(service.undo_supersession, user_id, fact_id)
        return UndoneFactReply.of_undone(undone)

    @router.get("/users/{user_id}/tasks", response_model=TaskList)
    async def list_tasks(
        user_id: UserId,
        service: Service,
        status: Annotated[list[TaskStatus] | None, Query()] = None,
    ) -> TaskList:
        """Tasks by current status (all by default), with their state trajectories."""
        statuses = tuple(status) if status else tuple(TaskStatus)
        return TaskList.of(await run_blocking(service.list_tasks, user_id, statuses))

    @router.post(
        "/users/{user_id}/tasks", status_code=201, response_model=MemoryReply, responses=WRITE
    )
    async def create_task(user_id: UserId, body: TaskIn, service: Service) -> MemoryReply:
        task = await run_blocking(service.create_task, user_id, body.title, body.due, body.task_id)
        return MemoryReply.of(task)

    @router.patch("/users/{user_id}/tasks/{task_id}", response_model=MemoryReply, responses=WRITE)
    async def update_task(
        user_id: UserId, task_id: str, body: TaskPatchIn, service: Service
    ) -> MemoryReply:
        """Move a task along its trajectory (pending → done/cancelled/expired, or reopen)."""
        task = await run_blocking(service.update_task, user_id, task_id, body.status, body.note)
        return MemoryReply.of(task)

    @router.get("/users", response_model=UserList)
    async def list_users(service: Service) -> UserList:
        """The ids of the users with data (opens none of them)."""
        return UserList(users=await run_blocking(service.users_with_data))

    @router.get("/users/{user_id}", response_model=UserCounts)
    async def get_user(user_id: UserId, service: Service) -> dict[str, Any]:
        return {"user_id": user_id, "counts": await run_blocking(service.counts, user_id)}

    @router.delete("/users/{user_id}", response_model=UserRemoved)
    async def delete_user(user_id: UserId, service: Service) -> dict[str, Any]:
        return {"user_id": user_id, "removed": await run_blocking(service.delete_user, user_id)}

    @router.get(
        "/users/{user_id}/export",
        response_class=StreamingResponse,
        responses={200: {"content": {NDJSON: {}}, "description": "The export, one record a line"}},
    )
    async def export_user(user_id: UserId, service: Service) -> StreamingResponse:
        """The user's journal as versioned JSONL, as `memoryd export` writes it: a header line,
        every log entry in order, the headers record (``docs/data-format.md``)."""
        records = await run_blocking(service.export_user, user_id)
        lines = (json.dumps(record) + "\n" for record in records)
        disposition = f'attachment; filename="{user_id}.jsonl"'
        return StreamingResponse(
            lines, media_type=NDJSON, headers={"Content-Disposition": disposition}
        )

    @router.post(
        "/users/{user_id}/import",
        status_code=201,
        response_model=ImportReply,
        responses=WRITE,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {NDJSON: {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    )
    async def import_user(user_id: UserId, request: Request, service: Service) -> ImportReply:
        """Load an export into a user with no data (409 otherwise); all or nothing. The body
        may be as large as ``limits.max_import_bytes`` (413 beyond)."""
        await run_blocking(service.check_importable, user_id)
        directory = service.config.data_dir
        with tempfile.SpooledTemporaryFile(IMPORT_SPOOL_BYTES, dir=str(directory)) as body:
            await _spool(request, body, service.config.limits.max_import_bytes)
            counts = await run_blocking(_import_body, service, user_id, body)
        return ImportReply.of(user_id, counts)

    @router.get("/users/{user_id}/tiers", response_model=TierStatusReply)
    async def tiers_status(
        user_id: UserId,
        service: Service,
        moves: Annotated[int, Query(ge=0, le=500)] = 20,
    ) -> dict[str, Any]:
        """Tier sizes, the persona and its drift, the last reshuffle and the recent moves."""
        return await run_blocking(service.tiers_status, user_id, moves)

    @router.post("/users/{user_id}/tiers/reshuffle", response_model=ReshuffleReply)
    async def reshuffle_tiers(user_id: UserId, service: Service) -> dict[str, Any]:
        """Re-score and re-place the user's records now (the background job does it too)."""
        return await run_blocking(service.reshuffle, user_id)

    @router.get("/users/{user_id}/router", response_model=RouterStatusReply)
    async def router_status(user_id: UserId, service: Service) -> dict[str, Any]:
        """The user's self-enhancing router: round, τ_t, pool, queue, LLM share, validation."""
        return await run_blocking(service.router_status, user_id)

    @router.post("/users/{user_id}/router/rounds", status_code=201, response_model=RoundReply)
    async def train_router(user_id: UserId, service: Service) -> dict[str, Any]:
        """Run a training round now; the new head is used only if validation accepts it."""
        return await run_blocking(service.train_router, user_id)

    @router.post(
        "/users/{user_id}/router/rollback", response_model=RollbackReply, responses=errors(409)
    )
    async def rollback_router(user_id: UserId, service: Service) -> dict[str, Any]:
        """Route with the head before the current one again."""
        return await run_blocking(service.rollback_router, user_id)

    return router


async def _spool(request: Request, body: IO[bytes], limit: int) -> None:
    """Write the request body to ``body``; PayloadTooLargeError past ``limit`` bytes."""
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(limit)
        body.write(chunk)
    body.seek(0)


def _import_body(service: MemoryService, user_id: str, body: IO[bytes]) -> dict[str, int]:
    """Import the spooled export: every line is checked to be a JSON object before any is
    applied, so a malformed body writes nothing."""
    for _ in read_records(_lines(body)):
        pass
    body.seek(0)
    return service.import_user(user_id, read_records(_lines(body)))


def _lines(body: IO[bytes]) -> Iterator[str]:
    try:
        for raw in body:
            yield raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"the export is not UTF-8 text: {exc.reason}") from exc


def ops_router() -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", response_model=HealthReply)
    async def healthz() -> HealthReply:
        return HealthReply(status="ok")

    @router.get("/readyz", response_model=ReadyReply, response_model_exclude_none=True)
    async def readyz(request: Request, response: Response) -> ReadyReply:
        service = getattr(request.app.state, "service", None)
        if service is None or not getattr(request.app.state, "recovered", False):
            response.status_code = 503
            return ReadyReply(status="starting" if service is None else "recovering")
        return ReadyReply(status="ready", open_users=len(service.users.open_users()))

    @router.get("/metrics", response_class=PlainTextResponse)
    async def metrics(request: Request) -> Response:
        """Prometheus metrics (text exposition format)."""
        registry = request.app.state.metrics.registry
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
