"""Explicit changes to one user's memories: edits and deletes, facts made current again,
tasks created and moved along their trajectory, feedback, and the expiry of overdue tasks.

Each command looks the record up, computes its next version (the pure functions of
:mod:`memoryd.memory.changes`) and journals it, all on the user's writer, so that a command
never acts on a record another write changed meanwhile. A missing memory is a
:class:`MemoryNotFoundError`; a move the record does not allow is a :class:`ConflictError`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np

from memoryd.errors import ConflictError, MemoryNotFoundError
from memoryd.memory import expired, reopen_fact, transition, with_feedback
from memoryd.models import Fact, Memory, Task, TaskStatus
from memoryd.store import FEEDBACK_POSITIVE, MemoryChange, NewMemory, StoredMemory

if TYPE_CHECKING:
    from memoryd.workspace import Workspace

__all__ = ["API_SESSION", "MemoryEdits", "MemoryPatch", "UndoneFact"]

API_SESSION = "api"  # the session of memories made through the API rather than from a turn


@dataclass(frozen=True)
class MemoryPatch:
    """Editable parts of a memory; ``None`` leaves a part unchanged."""

    text: str | None = None
    importance: float | None = None


@dataclass(frozen=True)
class UndoneFact:
    """A fact made current again, and the id of the fact that had superseded it."""

    fact: Fact
    was_superseded_by: str | None


class MemoryEdits:
    """The memory commands of ``ws`` (see the module docstring). Call from any thread."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws

    def stored(self, memory_id: str) -> StoredMemory:
        """The live memory ``memory_id``; MemoryNotFoundError when there is none."""
        stored = self.ws.journal.memory(memory_id)
        if stored is None:
            raise MemoryNotFoundError(self.ws.user_id, memory_id)
        return stored

    def patch(self, memory_id: str, patch: MemoryPatch, vector: np.ndarray | None) -> Memory:
        """Replace the memory's text (``vector`` embeds the new one) or importance."""

        def write() -> Memory:
            memory = self.stored(memory_id).memory
            if patch.text is not None:
                memory = dataclasses.replace(memory, text=patch.text)
            if patch.importance is not None:
                header = dataclasses.replace(memory.header, importance=patch.importance)
                memory = dataclasses.replace(memory, header=header)
            self.ws.writes.patch(memory, vector, patch.importance)
            return memory

        return self.ws.writer.call(write)

    def delete(self, memory_id: str) -> None:
        def write() -> None:
            self.stored(memory_id)
            self.ws.writes.delete(memory_id)

        self.ws.writer.call(write)

    def undo_supersession(self, fact_id: str) -> UndoneFact:
        """Make a superseded fact current again; the fact that closed it stays current too."""

        def write() -> UndoneFact:
            stored = self.stored(fact_id)
            superseded_by = getattr(stored.memory, "superseded_by", None)
            fact = reopen_fact(stored.memory)
            self.ws.writes.change(MemoryChange("undo_supersession", fact_id, updates=[fact]))
            return UndoneFact(fact, superseded_by)

        return self.ws.writer.call(write)

    def create_task(self, task: Task, vector: np.ndarray, now: datetime) -> Task:
        """Store ``task`` (made through the API) unless its id is taken: the stored task then
        (idempotent on the id), ConflictError when the id names another kind of memory or one
        that was deleted (ids are never reused)."""

        def write() -> Task:
            stored = self.ws.journal.memory(task.id)
            if stored is not None:
                if not isinstance(stored.memory, Task):
                    raise ConflictError(f"{task.id} names a {stored.type.value} memory")
                return stored.memory
            if self.ws.journal.was_deleted(task.id):
                raise ConflictError(
                    f"{task.id} named a memory that was deleted, and ids are not reused: "
                    "choose another task_id"
                )
            new = NewMemory(task, API_SESSION, now, vector)
            self.ws.writes.change(MemoryChange("task_created", task.id, created=[new]))
            return task

        return self.ws.writer.call(write)

    def update_task(self, task_id: str, status: TaskStatus, note: str, now: datetime) -> Task:
        """Move a task to ``status`` (see :func:`memoryd.memory.changes.transition`)."""

        def write() -> Task:
            stored = self.stored(task_id)
            if not isinstance(stored.memory, Task):
                raise ConflictError(f"{task_id} is {stored.type.value}, not a task")
            task = transition(stored.memory, status, now, note or "set via the API")
            self.ws.writes.change(MemoryChange(f"task_{status.value}", task_id, updates=[task]))
            return task

        return self.ws.writer.call(write)

    def feedback(self, memory_id: str, positive: bool) -> Memory:
        """Count a vote on a rule or an episode (positive episodes feed A_proc)."""

        def write() -> Memory:
            memory = with_feedback(self.stored(memory_id).memory, positive)
            reason = FEEDBACK_POSITIVE if positive else "feedback_negative"
            self.ws.writes.change(MemoryChange(reason, memory_id, updates=[memory]))
            return memory

        return self.ws.writer.call(write)

    def expire_tasks(self, now: datetime, after: timedelta) -> int:
        """Expire the pending tasks more than ``after`` past due; returns how many."""

        def write() -> int:
            tasks: list[Memory] = list(expired(self.ws.journal.open_tasks(), now, after))
            if tasks:
                self.ws.writes.change(MemoryChange("expiry", self.ws.user_id, updates=tasks))
            return len(tasks)

        return self.ws.writer.call(write)
