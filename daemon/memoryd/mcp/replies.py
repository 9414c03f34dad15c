"""What the MCP tools answer: the REST reply models with the user they served, and the text an
agent reads.

Each tool returns one of these as its structured output (its JSON schema is the tool's output
schema); :meth:`Scoped.render` is the text part: the rendered context for ``recall``, a one-line
receipt or a short list otherwise.
"""

from __future__ import annotations

from abc import abstractmethod

from pydantic import BaseModel, Field

from memoryd.models import MemoryType
from memoryd.schemas import (
    FactList,
    IngestReply,
    MemoryPageReply,
    MemoryReply,
    QueryReply,
    Removed,
    ReshuffleReply,
    RollbackReply,
    RoundReply,
    TurnPageReply,
    TurnReply,
    UndoneFactReply,
)

__all__ = [
    "Facts",
    "Forgotten",
    "Ingested",
    "Memories",
    "MemoryStatus",
    "OneMemory",
    "Recalled",
    "Remembered",
    "Reshuffled",
    "RouterRolledBack",
    "RouterTrained",
    "Scoped",
    "TaskSaved",
    "Tasks",
    "Turns",
    "UndoneFact",
    "UserForgotten",
    "one_memory",
]

MAX_LISTED = 50  # lines a list's text part shows (the structured part has them all)


class Scoped(BaseModel):
    """A reply for one user: every MCP reply names the user it read or wrote."""

    user_id: str = Field(description="the user this connection is bound to")

    @abstractmethod
    def render(self) -> str:
        """What the agent reads."""


def one_memory(memory: MemoryReply) -> str:
    """``[id] type: text`` on one line."""
    return f"[{memory.id}] {memory.type.value}: {_line(memory.text)}"


def _line(text: str, width: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _listing(title: str, lines: list[str]) -> str:
    shown = lines[:MAX_LISTED]
    more = [f"… and {len(lines) - len(shown)} more"] if len(lines) > len(shown) else []
    return "\n".join([title, *(f"- {line}" for line in shown), *more])


class Remembered(Scoped, TurnReply):
    """One stored turn: what the router said it is and what it became."""

    def render(self) -> str:
        if self.duplicate:
            return f"turn {self.turn_id} was already stored; nothing written"
        made = ", ".join(f"{m.type.value} {m.id}" for m in self.memories) or "no memory (noise)"
        changed = "".join(f"; {e.effect} {e.id}" for e in self.effects)
        labels = ", ".join(label.value for label in self.labels)
        return (
            f"stored turn {self.turn_id} as {labels} ({self.confidence:.2f}, "
            f"{self.routed_by.value}): {made}{changed}"
        )


class Ingested(Scoped, IngestReply):
    def render(self) -> str:
        new = [t for t in self.turns if not t.duplicate]
        memories = sum(len(t.memories) for t in new)
        return (
            f"stored {len(new)} of {len(self.turns)} turns ({len(self.turns) - len(new)} already "
            f"stored): {memories} memories"
        )


class Recalled(Scoped, QueryReply):
    def render(self) -> str:
        return self.context or f"nothing stored for {self.user_id} matches {self.query!r}"


class Facts(Scoped, FactList):
    def render(self) -> str:
        lines = [
            f"[{f.id}] {_line(f.line)}" + ("" if f.current else " (superseded)") for f in self.facts
        ]
        return _listing(f"{len(self.facts)} facts", lines)


class UndoneFact(Scoped, UndoneFactReply):
    def render(self) -> str:
        by = f" (it was superseded by {self.was_superseded_by})" if self.was_superseded_by else ""
        return f"fact {self.id} is current again{by}: {_line(self.text)}"


class Tasks(Scoped, BaseModel):
    tasks: list[MemoryReply]

    def render(self) -> str:
        lines = [
            f"{one_memory(t)} ({t.record.get('states', [{}])[-1].get('status')})"
            for t in self.tasks
        ]
        return _listing(f"{len(self.tasks)} tasks", lines)


class TaskSaved(Scoped, MemoryReply):
    def render(self) -> str:
        states = self.record.get("states") or [{}]
        return f"task {self.id} is {states[-1].get('status', 'pending')}: {_line(self.text)}"


class Forgotten(Scoped, MemoryReply):
    """The memory that was removed, as it was."""

    def render(self) -> str:
        return f"forgot {self.type.value} memory {self.id}: {_line(self.text)}"


class MemoryStatus(Scoped):
    """How much the user's memory holds and how its router and tiers stand."""

    counts: dict[str, int] = Field(description="turns and memories per type")
    tiers: dict[str, int] = Field(description="records per tier")
    persona: str = Field(description="the persona profile the tiers are scored against")
    router_round: int
    llm_share: float = Field(description="share of this round's routing sent to the LLM")

    def render(self) -> str:
        types = ", ".join(f"{self.counts.get(t.value, 0)} {t.value}" for t in MemoryType)
        return (
            f"{self.user_id}: {self.counts.get('turns', 0)} turns; {types}; tiers "
            + " / ".join(f"{k} {v}" for k, v in self.tiers.items())
            + f"; router round {self.router_round}, LLM share {self.llm_share:.0%}"
        )


class Memories(Scoped, MemoryPageReply):
    def render(self) -> str:
        more = f" (next cursor {self.next_cursor})" if self.next_cursor is not None else ""
        return _listing(
            f"{len(self.memories)} memories{more}", [one_memory(m) for m in self.memories]
        )


class OneMemory(Scoped, MemoryReply):
    def render(self) -> str:
        return one_memory(self)


class Turns(Scoped, TurnPageReply):
    def render(self) -> str:
        lines = [f"[{t.turn_id}] {t.ts} {t.role}: {_line(t.text)}" for t in self.turns]
        return _listing(f"{len(self.turns)} turns", lines)


class Reshuffled(Scoped, ReshuffleReply):
    def render(self) -> str:
        return (
            f"re-scored {self.scored} records: {self.promoted} promoted, {self.demoted} demoted; "
            + " / ".join(f"{k} {v}" for k, v in self.sizes.items())
        )


class RouterTrained(Scoped, RoundReply):
    def render(self) -> str:
        verdict = "accepted: routing uses it now" if self.accepted else "rejected by validation"
        return f"router round {self.round} {verdict}"


class RouterRolledBack(Scoped, RollbackReply):
    def render(self) -> str:
        return f"router rolled back from round {self.from_round} to round {self.to_round}"


class UserForgotten(Scoped):
    removed: Removed

    def render(self) -> str:
        r = self.removed
        return (
            f"forgot user {self.user_id}: {r.turns} turns, {r.memories} memories, "
            f"{r.vectors} vectors, {r.files} files removed"
        )
