"""Explicit changes to stored memories: task transitions, expiry, feedback, undoing a
supersession. Pure functions from a record to its next version; the caller journals it.

Task trajectory. A task's states are its history, oldest first, and its status is the last one:

    pending ──► done | cancelled | expired        (a turn, the API, or the expiry job)
    done | cancelled | expired ──► pending        (the API reopens it)

A transition to the status a task already has is a conflict, not a no-op: the caller asked for a
change that cannot happen.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta

from memoryd.errors import ConflictError
from memoryd.memory.build import importance
from memoryd.models import (
    Episode,
    Fact,
    Header,
    Memory,
    Origin,
    Rule,
    State,
    Task,
    TaskStatus,
    memory_type,
)

__all__ = ["api_task", "expired", "reopen_fact", "transition", "with_feedback"]

FINAL_STATUSES = frozenset({TaskStatus.DONE, TaskStatus.CANCELLED, TaskStatus.EXPIRED})


def _state_id(task_id: str, index: int, status: TaskStatus) -> str:
    digest = hashlib.sha1(f"{task_id}\x1f{index}\x1f{status.value}".encode()).hexdigest()
    return f"st_{digest[:16]}"


def api_task(task_id: str, title: str, due: datetime | None, now: datetime, note: str) -> Task:
    """A pending task created through the API (it has no source turn)."""
    state = State(_state_id(task_id, 0, TaskStatus.PENDING), TaskStatus.PENDING, now, note)
    task = Task(task_id, "", title, title, due=due, states=[state], origin=Origin.API)
    task.header = Header(importance=importance(task))
    return task


def transition(
    task: Task, status: TaskStatus, ts: datetime, note: str, turn_id: str | None = None
) -> Task:
    """``task`` with one more state; ConflictError when the move is not allowed."""
    current = task.status
    if status is current:
        raise ConflictError(f"task {task.id} is already {current.value}")
    if current in FINAL_STATUSES and status is not TaskStatus.PENDING:
        raise ConflictError(
            f"task {task.id} is {current.value}; reopen it (status pending) before marking it "
            f"{status.value}"
        )
    state = State(_state_id(task.id, len(task.states), status), status, ts, note, turn_id)
    return dataclasses.replace(task, states=[*task.states, state])


def expired(tasks: Sequence[Task], now: datetime, after: timedelta) -> list[Task]:
    """The pending tasks whose due time is more than ``after`` before ``now``, expired."""
    return [
        transition(t, TaskStatus.EXPIRED, now, f"not done {after} after it was due")
        for t in tasks
        if t.status is TaskStatus.PENDING and t.due is not None and t.due + after < now
    ]


def with_feedback(memory: Memory, positive: bool) -> Memory:
    """A rule or episode with one more positive or negative vote."""
    if not isinstance(memory, Rule | Episode):
        raise ConflictError(
            f"feedback applies to procedural and episodic memories; {memory.id} is "
            f"{memory_type(memory).value}"
        )
    if positive:
        return dataclasses.replace(memory, positive=memory.positive + 1)
    return dataclasses.replace(memory, negative=memory.negative + 1)


def reopen_fact(fact: Memory) -> Fact:
    """A superseded fact made current again (the undo of its supersession)."""
    if not isinstance(fact, Fact):
        raise ConflictError(f"{fact.id} is {memory_type(fact).value}, not a fact")
    if fact.superseded_by is None:
        state = "current" if fact.valid_to is None else f"closed on {fact.valid_to.isoformat()}"
        raise ConflictError(f"fact {fact.id} was not superseded ({state}); nothing to undo")
    return dataclasses.replace(fact, valid_to=None, superseded_by=None)
