"""The MCP tools: each is one call of the façade for the user the connection is bound to.

The user is never an argument: :mod:`memoryd.mcp.surface` reads it from the request (the path
``/mcp/`` or ``/mcp/users/<user>/``) into :data:`caller` before a tool runs. Arguments are
checked by the same request models as REST (a bad one is an ``isError`` result with the daemon's
error JSON), writes return after the journal commit, and every tool answers a
:class:`~memoryd.mcp.replies.Scoped` model: its JSON is the structured output, its
:meth:`~memoryd.mcp.replies.Scoped.render` the text an agent reads.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

import anyio.to_thread
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from memoryd.errors import InvalidInputError, MemorydError
from memoryd.mcp.replies import (
    Facts,
    Forgotten,
    Ingested,
    Memories,
    MemoryStatus,
    OneMemory,
    Recalled,
    Remembered,
    Reshuffled,
    RouterRolledBack,
    RouterTrained,
    Scoped,
    Tasks,
    TaskSaved,
    Turns,
    UndoneFact,
    UserForgotten,
)
from memoryd.models import MemoryType, TaskStatus
from memoryd.schemas import (
    MAX_CURSOR,
    FactReply,
    FeedbackIn,
    MemoryPatchIn,
    MemoryReply,
    QueryReply,
    QueryRequest,
    Removed,
    TaskIn,
    TaskPatchIn,
    TurnIn,
    TurnPageReply,
    TurnReply,
)
from memoryd.service import MemoryService

__all__ = ["DEFAULT_TOOLS", "Caller", "MemoryTools", "ToolSpec", "caller", "error_json"]

P = ParamSpec("P")
R = TypeVar("R", bound=Scoped)
T = TypeVar("T")


@dataclass(frozen=True)
class Caller:
    """Who a request is for: the bound user and the client's name (from its handshake)."""

    user_id: str
    client: str | None = None

    def session_id(self, today: datetime) -> str:
        """The session a turn without one joins: the client's name and the date."""
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.client or "mcp").strip("-")[:64] or "mcp"
        return f"{name}-{today.date().isoformat()}"


caller: ContextVar[Caller] = ContextVar("memoryd_mcp_caller")


@dataclass(frozen=True)
class ToolSpec:
    title: str
    annotations: ToolAnnotations
    default: bool = True


def _hints(
    *, read_only: bool, destructive: bool = False, idempotent: bool = False
) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


READ = _hints(read_only=True, idempotent=True)
WRITE = _hints(read_only=False)
EDIT = _hints(read_only=False, idempotent=True)
REMOVE = _hints(read_only=False, destructive=True, idempotent=True)

SPECS: dict[str, ToolSpec] = {
    "remember": ToolSpec("Remember a turn", WRITE),
    "ingest_turns": ToolSpec("Store several turns", WRITE),
    "recall": ToolSpec("Recall typed memories", READ),
    "list_facts": ToolSpec("List facts", READ),
    "undo_fact": ToolSpec("Undo a fact's supersession", EDIT),
    "list_tasks": ToolSpec("List tasks", READ),
    "add_task": ToolSpec("Add a task", EDIT),
    "update_task": ToolSpec("Move a task", EDIT),
    "forget": ToolSpec("Forget one memory", REMOVE),
    "memory_status": ToolSpec("Memory status", READ),
    "get_memory": ToolSpec("Get a memory", READ, default=False),
    "list_memories": ToolSpec("List memories", READ, default=False),
    "update_memory": ToolSpec("Edit a memory", EDIT, default=False),
    "rate_memory": ToolSpec("Rate a memory", WRITE, default=False),
    "list_turns": ToolSpec("List turns", READ, default=False),
    "reshuffle_tiers": ToolSpec("Reshuffle the tiers", EDIT, default=False),
    "train_router": ToolSpec("Train the router", WRITE, default=False),
    "rollback_router": ToolSpec("Roll the router back", EDIT, default=False),
    "forget_user": ToolSpec("Forget everything", REMOVE, default=False),
}
DEFAULT_TOOLS = tuple(name for name, spec in SPECS.items() if spec.default)

Role = Literal["user", "assistant", "log"]
Id = Annotated[str, Field(min_length=1, max_length=128)]
Name = Annotated[str, Field(min_length=1, max_length=128)]


def error_json(exc: Exception) -> str:
    """The daemon's error body for ``exc``, as REST sends it."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        kind, message = "ValidationError", f"{where}: {first['msg']}"
    else:
        kind, message = type(exc).__name__, str(exc)
    return json.dumps({"error": {"type": kind, "message": message}})


def replying(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Run a tool and shape its answer: the reply's text and JSON, or ``isError`` with the
    daemon's error JSON. The signature (the tool's input and output schema) stays ``fn``'s."""

    @functools.wraps(fn)
    async def tool(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            reply = await fn(*args, **kwargs)
        except (MemorydError, ValidationError) as exc:
            return CallToolResult(content=[TextContent(text=error_json(exc))], is_error=True)
        return CallToolResult(
            content=[TextContent(text=reply.render())],
            structured_content=reply.model_dump(mode="json", by_alias=True),
        )

    return tool


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryTools:
    """The tools, bound to one service; the caller comes from :data:`caller`."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def tools(self, everything: bool) -> list[tuple[str, ToolSpec, Callable[..., Any]]]:
        """(name, spec, function) of the tools to offer."""
        return [
            (name, spec, replying(getattr(self, name)))
            for name, spec in SPECS.items()
            if spec.default or everything
        ]

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(fn, *args)

    # -- default tools ---------------------------------------------------------------------

    async def remember(
        self,
        text: Annotated[str, Field(description="what was said or done, as said")],
        role: Annotated[Role, Field(description="who said it")] = "user",
        session_id: Annotated[
            str | None, Field(description="the conversation; default: client name and date")
        ] = None,
        speaker: Annotated[str | None, Field(description="the speaker's name")] = None,
        ts: Annotated[datetime | None, Field(description="ISO-8601 time; default now")] = None,
        turn_id: Annotated[
            str | None, Field(description="idempotency key: a repeat is stored once")
        ] = None,
    ) -> Remembered:
        """Store one conversation turn. memoryd decides what it is (episode, fact, rule, task
        or noise), links it, and answers with what it became and what it changed (e.g. a fact
        it superseded). Call it for each user message worth keeping and for the assistant's
        commitments; it returns after the turn is durably stored."""
        who = caller.get()
        turn = TurnIn(
            text=text,
            role=role,
            session_id=session_id or who.session_id(_now()),
            speaker=speaker,
            ts=ts,
            turn_id=turn_id,
        )
        receipts = await self._run(self.service.ingest, who.user_id, [turn.to_new_turn()])
        return Remembered(user_id=who.user_id, **TurnReply.of(receipts[0]).model_dump())

    async def ingest_turns(
        self, turns: Annotated[list[TurnIn], Field(min_length=1, max_length=256)]
    ) -> Ingested:
        """Store 1-256 turns in order (a transcript import, or a hook's batch); each needs a
        session_id and a role. A turn_id already stored is reported as a duplicate."""
        who = caller.get()
        new_turns = [t.to_new_turn() for t in turns]
        receipts = await self._run(self.service.ingest, who.user_id, new_turns)
        return Ingested(user_id=who.user_id, turns=[TurnReply.of(r) for r in receipts])

    async def recall(
        self,
        query: Annotated[str, Field(description="what to remember, in words")],
        k: Annotated[int, Field(ge=1, le=200, description="how many memories")] = 10,
        types: Annotated[
            list[MemoryType] | None, Field(description="only these memory types")
        ] = None,
        when: Annotated[
            str | None, Field(description="time in words: 'yesterday', 'in May 2023'")
        ] = None,
        people: Annotated[list[str] | None, Field(description="names of persons")] = None,
        entities: Annotated[list[str] | None, Field(description="entity names")] = None,
        session_id: Annotated[Name | None, Field(description="only this conversation")] = None,
        since: Annotated[datetime | None, Field(description="not before (ISO-8601)")] = None,
        until: Annotated[datetime | None, Field(description="not after (ISO-8601)")] = None,
        history: Annotated[bool, Field(description="also superseded facts")] = False,
    ) -> Recalled:
        """Recall what is known about something: typed sections (facts, rules, tasks,
        episodes), a compact context block to read, and why each item was chosen. Call it
        before answering anything that depends on the user's past, preferences or plans."""
        who = caller.get()
        request = QueryRequest.model_validate(
            {
                "query": query,
                "k": k,
                "types": types,
                "when": when,
                "people": people or [],
                "entities": entities or [],
                "session_id": session_id,
                "since": since,
                "until": until,
                "history": history,
            }
        )
        result = await self._run(self.service.query, who.user_id, request.to_params())
        return Recalled(user_id=who.user_id, **QueryReply.of(query, result).model_dump())

    async def list_facts(
        self,
        subject: Annotated[Name | None, Field(description="only facts about this subject")] = None,
        history: Annotated[bool, Field(description="also superseded facts")] = False,
    ) -> Facts:
        """The user's facts (preferences, attributes, relations); with history, also the
        values later facts replaced."""
        who = caller.get()
        stored = await self._run(self.service.list_facts, who.user_id, subject, history)
        return Facts(user_id=who.user_id, facts=[FactReply.of_stored(s) for s in stored])

    async def undo_fact(self, fact_id: Id) -> UndoneFact:
        """Make a superseded fact current again (when memoryd wrongly replaced it)."""
        who = caller.get()
        undone = await self._run(self.service.undo_supersession, who.user_id, fact_id)
        return UndoneFact(
            user_id=who.user_id,
            was_superseded_by=undone.was_superseded_by,
            **MemoryReply.of(undone.fact).model_dump(),
        )

    async def list_tasks(
        self,
        status: Annotated[
            list[TaskStatus] | None, Field(description="only these states; default all")
        ] = None,
    ) -> Tasks:
        """The user's tasks with their state trajectories."""
        who = caller.get()
        statuses = tuple(status) if status else tuple(TaskStatus)
        stored = await self._run(self.service.list_tasks, who.user_id, statuses)
        return Tasks(user_id=who.user_id, tasks=[MemoryReply.of(s.memory) for s in stored])

    async def add_task(
        self,
        title: Annotated[str, Field(description="what is to be done")],
        due: Annotated[datetime | None, Field(description="ISO-8601; naive means UTC")] = None,
        task_id: Annotated[str | None, Field(description="idempotency key")] = None,
    ) -> TaskSaved:
        """Add a pending task (a to-do or reminder)."""
        who = caller.get()
        task = TaskIn(title=title, due=due, task_id=task_id)
        created = await self._run(
            self.service.create_task, who.user_id, task.title, task.due, task.task_id
        )
        return TaskSaved(user_id=who.user_id, **MemoryReply.of(created).model_dump())

    async def update_task(
        self,
        task_id: Id,
        status: Annotated[TaskStatus, Field(description="the task's new state")],
        note: Annotated[str, Field(description="why")] = "",
    ) -> TaskSaved:
        """Move a task: done, cancelled or expired, or back to pending."""
        who = caller.get()
        patch = TaskPatchIn(status=status, note=note)
        task = await self._run(
            self.service.update_task, who.user_id, task_id, patch.status, patch.note
        )
        return TaskSaved(user_id=who.user_id, **MemoryReply.of(task).model_dump())

    async def forget(self, memory_id: Id) -> Forgotten:
        """Remove one memory for good; answers with the memory as it was."""
        who = caller.get()
        stored = await self._run(self.service.get_memory, who.user_id, memory_id)
        await self._run(self.service.delete_memory, who.user_id, memory_id)
        return Forgotten(user_id=who.user_id, **MemoryReply.of(stored.memory).model_dump())

    async def memory_status(self) -> MemoryStatus:
        """How much is remembered: turns and memories per type, tier sizes, the persona
        profile, and the router's training round and LLM share."""
        return await self._run(self._status, caller.get().user_id)

    def _status(self, user_id: str) -> MemoryStatus:
        if not self.service.user_exists(user_id):
            return MemoryStatus(
                user_id=user_id, counts={}, tiers={}, persona="", router_round=0, llm_share=0.0
            )
        counts = self.service.counts(user_id)
        tiers = self.service.tiers_status(user_id, 0)
        router = self.service.router_status(user_id)
        shares = {d["round"]: d["llm_share"] for d in router["decisions"]}
        return MemoryStatus(
            user_id=user_id,
            counts={
                "turns": counts.get("turns", 0),
                **{t.value: counts.get(f"memories_{t.value}", 0) for t in MemoryType},
            },
            tiers=tiers["sizes"],
            persona=tiers["persona"]["profile"],
            router_round=router["round"],
            llm_share=shares.get(router["round"], 0.0),
        )

    # -- opt-in tools (mcp.tools = "all") ---------------------------------------------------

    async def get_memory(self, memory_id: Id) -> OneMemory:
        """One memory with its whole record."""
        who = caller.get()
        stored = await self._run(self.service.get_memory, who.user_id, memory_id)
        return OneMemory(user_id=who.user_id, **MemoryReply.of(stored.memory).model_dump())

    async def list_memories(
        self,
        types: list[MemoryType] | None = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 100,
        cursor: Annotated[int, Field(ge=0, le=MAX_CURSOR)] = 0,
    ) -> Memories:
        """Memories oldest first, a page at a time (pass next_cursor on)."""
        who = caller.get()
        wanted = tuple(types) if types else tuple(MemoryType)
        page = await self._run(self.service.list_memories, who.user_id, wanted, limit, cursor)
        memories = [MemoryReply.of(s.memory) for s in page.memories]
        return Memories(user_id=who.user_id, memories=memories, next_cursor=page.next_cursor)

    async def update_memory(
        self,
        memory_id: Id,
        text: str | None = None,
        importance: Annotated[float | None, Field(description="1-10")] = None,
    ) -> OneMemory:
        """Correct a memory's text or set its importance."""
        who = caller.get()
        patch = MemoryPatchIn.of(text, importance).to_patch()
        memory = await self._run(self.service.patch_memory, who.user_id, memory_id, patch)
        return OneMemory(user_id=who.user_id, **MemoryReply.of(memory).model_dump())

    async def rate_memory(self, memory_id: Id, value: Literal["positive", "negative"]) -> OneMemory:
        """Vote on a rule or an episode (positive episodes feed the rules memoryd learns)."""
        who = caller.get()
        positive = FeedbackIn(value=value).value == "positive"
        memory = await self._run(self.service.feedback, who.user_id, memory_id, positive)
        return OneMemory(user_id=who.user_id, **MemoryReply.of(memory).model_dump())

    async def list_turns(
        self,
        session_id: Name | None = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 100,
        cursor: Annotated[int, Field(ge=0, le=MAX_CURSOR)] = 0,
    ) -> Turns:
        """Stored turns oldest first, a page at a time."""
        who = caller.get()
        page = await self._run(self.service.list_turns, who.user_id, session_id, limit, cursor)
        return Turns(user_id=who.user_id, **TurnPageReply.of(page).model_dump())

    async def reshuffle_tiers(self) -> Reshuffled:
        """Re-score and re-place the memories in tiers now."""
        who = caller.get()
        done = await self._run(self.service.reshuffle, who.user_id)
        return Reshuffled(user_id=who.user_id, **done)

    async def train_router(self) -> RouterTrained:
        """Run a router training round; its head is used only if validation accepts it."""
        who = caller.get()
        done = await self._run(self.service.train_router, who.user_id)
        return RouterTrained(user_id=who.user_id, **done)

    async def rollback_router(self) -> RouterRolledBack:
        """Route with the head before the current one again."""
        who = caller.get()
        done = await self._run(self.service.rollback_router, who.user_id)
        return RouterRolledBack(user_id=who.user_id, **done)

    async def forget_user(
        self,
        confirm: Annotated[
            bool, Field(description="true to remove every turn and memory of this user")
        ] = False,
    ) -> UserForgotten:
        """Remove everything stored for this user. Refused unless confirm is true."""
        who = caller.get()
        if not confirm:
            raise InvalidInputError(
                f"forget_user removes every turn and memory of {who.user_id!r}: call it with "
                "confirm=true to go ahead"
            )
        removed = await self._run(self.service.delete_user, who.user_id)
        return UserForgotten(user_id=who.user_id, removed=Removed(**removed))
