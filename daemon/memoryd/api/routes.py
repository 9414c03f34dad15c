"""HTTP routes: parse, call the service in a worker thread, shape the reply. Nothing else."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.concurrency import run_in_threadpool

from memoryd.api.middleware import Metrics
from memoryd.api.schemas import (
    FeedbackIn,
    IngestReply,
    IngestRequest,
    MemoryPatchIn,
    QueryRequest,
    TaskIn,
    TaskPatchIn,
)
from memoryd.memory.models import MemoryType, TaskStatus
from memoryd.retrieve import QueryResult, render_context
from memoryd.service import MemoryService, check_user_id

run_blocking = run_in_threadpool


def service_of(request: Request) -> MemoryService:
    return request.app.state.service


Service = Annotated[MemoryService, Depends(service_of)]


def user_id_param(user_id: str) -> str:
    return check_user_id(user_id)


UserId = Annotated[str, Depends(user_id_param)]


def query_reply(query: str, result: QueryResult) -> dict[str, Any]:
    sections = {t.value: [i.as_dict() for i in result.section(t)] for t in MemoryType}
    return {
        "query": query,
        "sections": sections,
        "context": render_context(result),
        "turn_ids": result.turn_ids(),
        "trace": [
            {
                "id": i.memory.id,
                "type": i.type.value,
                "turn_ids": i.turn_ids,
                "score": round(i.score, 6),
                "why": i.why,
                "hit": i.hit,
            }
            for i in result.items
        ],
        "candidates": result.candidates,
        "search": result.search,
    }


def v1_router() -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.post("/users/{user_id}/turns", status_code=201, response_model=IngestReply)
    async def ingest(user_id: UserId, body: IngestRequest, request: Request, service: Service):
        turns = [t.to_new_turn() for t in body.turns]
        replies = await run_blocking(service.ingest, user_id, turns)
        request.app.state.metrics.ingested.inc(sum(not r["duplicate"] for r in replies))
        return {"turns": replies}

    @router.get("/users/{user_id}/turns")
    async def list_turns(
        user_id: UserId,
        service: Service,
        session_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: Annotated[int, Query(ge=0)] = 0,
    ):
        return await run_blocking(service.list_turns, user_id, session_id, limit, cursor)

    @router.get("/users/{user_id}/turns/{turn_id}")
    async def get_turn(user_id: UserId, turn_id: str, service: Service):
        return await run_blocking(service.get_turn, user_id, turn_id)

    @router.post("/users/{user_id}/query")
    async def query(user_id: UserId, body: QueryRequest, request: Request, service: Service):
        result = await run_blocking(service.query, user_id, body.to_params())
        request.app.state.metrics.queries.inc()
        return query_reply(body.query, result)

    @router.get("/users/{user_id}/memories")
    async def list_memories(
        user_id: UserId,
        service: Service,
        type: Annotated[list[MemoryType] | None, Query()] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: Annotated[int, Query(ge=0)] = 0,
    ):
        types = tuple(type) if type else tuple(MemoryType)
        return await run_blocking(service.list_memories, user_id, types, limit, cursor)

    @router.get("/users/{user_id}/memories/{memory_id}")
    async def get_memory(user_id: UserId, memory_id: str, service: Service):
        return await run_blocking(service.get_memory, user_id, memory_id)

    @router.patch("/users/{user_id}/memories/{memory_id}")
    async def patch_memory(user_id: UserId, memory_id: str, body: MemoryPatchIn, service: Service):
        return await run_blocking(service.patch_memory, user_id, memory_id, body.to_patch())

    @router.delete("/users/{user_id}/memories/{memory_id}")
    async def delete_memory(user_id: UserId, memory_id: str, service: Service):
        return await run_blocking(service.delete_memory, user_id, memory_id)

    @router.post("/users/{user_id}/memories/{memory_id}/feedback")
    async def feedback(user_id: UserId, memory_id: str, body: FeedbackIn, service: Service):
        """Vote on a rule or an episode; positive episodes feed the rule abstraction (A_proc)."""
        positive = body.value == "positive"
        return await run_blocking(service.feedback, user_id, memory_id, positive)

    @router.get("/users/{user_id}/facts")
    async def list_facts(
        user_id: UserId,
        service: Service,
        subject: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
        history: bool = False,
    ):
        """Current facts; with ``history=true`` also the superseded ones (``current: false``)."""
        return await run_blocking(service.list_facts, user_id, subject, history)

    @router.post("/users/{user_id}/facts/{fact_id}/undo")
    async def undo_supersession(user_id: UserId, fact_id: str, service: Service):
        """Make a superseded fact current again (409 if it was not superseded)."""
        return await run_blocking(service.undo_supersession, user_id, fact_id)

    @router.get("/users/{user_id}/tasks")
    async def list_tasks(
        user_id: UserId,
        service: Service,
        status: Annotated[list[TaskStatus] | None, Query()] = None,
    ):
        """Tasks by current status (all by default), with their state trajectories."""
        statuses = tuple(status) if status else tuple(TaskStatus)
        return await run_blocking(service.list_tasks, user_id, statuses)

    @router.post("/users/{user_id}/tasks", status_code=201)
    async def create_task(user_id: UserId, body: TaskIn, service: Service):
        return await run_blocking(service.create_task, user_id, body.title, body.due, body.task_id)

    @router.patch("/users/{user_id}/tasks/{task_id}")
    async def update_task(user_id: UserId, task_id: str, body: TaskPatchIn, service: Service):
        """Move a task along its trajectory (pending → done/cancelled/expired, or reopen)."""
        return await run_blocking(service.update_task, user_id, task_id, body.status, body.note)

    @router.get("/users/{user_id}")
    async def get_user(user_id: UserId, service: Service):
        return {"user_id": user_id, "counts": await run_blocking(service.counts, user_id)}

    @router.delete("/users/{user_id}")
    async def delete_user(user_id: UserId, service: Service):
        return {"user_id": user_id, "removed": await run_blocking(service.delete_user, user_id)}

    @router.get("/users/{user_id}/tiers")
    async def tiers_status(
        user_id: UserId,
        service: Service,
        moves: Annotated[int, Query(ge=0, le=500)] = 20,
    ):
        """Tier sizes, the persona and its drift, the last reshuffle and the recent moves."""
        return await run_blocking(service.tiers_status, user_id, moves)

    @router.post("/users/{user_id}/tiers/reshuffle")
    async def reshuffle_tiers(user_id: UserId, service: Service):
        """Re-score and re-place the user's records now (the background job does it too)."""
        return await run_blocking(service.reshuffle, user_id)

    @router.get("/users/{user_id}/router")
    async def router_status(user_id: UserId, service: Service):
        """The user's self-enhancing router: round, τ_t, pool, queue, LLM share, validation."""
        return await run_blocking(service.router_status, user_id)

    @router.post("/users/{user_id}/router/rounds", status_code=201)
    async def train_router(user_id: UserId, service: Service):
        """Run a training round now; the new head is used only if validation accepts it."""
        return await run_blocking(service.train_router, user_id)

    @router.post("/users/{user_id}/router/rollback")
    async def rollback_router(user_id: UserId, service: Service):
        """Route with the head before the current one again."""
        return await run_blocking(service.rollback_router, user_id)

    return router


def ops_router() -> APIRouter:
    router = APIRouter()

    @router.get("/healthz")
    async def healthz():
        return {"status": "ok"}

    @router.get("/readyz")
    async def readyz(request: Request, response: Response):
        service = getattr(request.app.state, "service", None)
        if service is None or not getattr(request.app.state, "recovered", False):
            response.status_code = 503
            return {"status": "starting" if service is None else "recovering"}
        return {"status": "ready", "open_users": len(service.open_counts())}

    @router.get("/metrics", response_class=PlainTextResponse)
    async def metrics(request: Request):
        registry = request.app.state.metrics.registry
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router


__all__ = ["Metrics", "ops_router", "v1_router"]
