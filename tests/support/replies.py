"""The façade's typed results as the API's JSON: tests that assert on the reply shapes read
them through the same reply models the HTTP routes send (:mod:`memoryd.schemas`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from memoryd.models import Memory, Receipt
from memoryd.schemas.replies import (
    FactList,
    MemoryPageReply,
    MemoryReply,
    TaskList,
    TurnDetail,
    TurnReply,
    UndoneFactReply,
)
from memoryd.service import MemoryPage, TurnView
from memoryd.store import StoredMemory
from memoryd.workspace import UndoneFact


def as_json(reply: BaseModel) -> Any:
    return reply.model_dump(mode="json", by_alias=True)


def receipts_json(receipts: Sequence[Receipt]) -> list[dict[str, Any]]:
    """What ``POST .../turns`` replies for each turn."""
    return [as_json(TurnReply.of(r)) for r in receipts]


def memory_json(memory: Memory) -> dict[str, Any]:
    return as_json(MemoryReply.of(memory))


def facts_json(stored: Sequence[StoredMemory]) -> list[dict[str, Any]]:
    return as_json(FactList.of(stored))["facts"]


def tasks_json(stored: Sequence[StoredMemory]) -> list[dict[str, Any]]:
    return as_json(TaskList.of(stored))["tasks"]


def memories_json(page: MemoryPage) -> list[dict[str, Any]]:
    return as_json(MemoryPageReply.of(page))["memories"]


def turn_json(view: TurnView) -> dict[str, Any]:
    return as_json(TurnDetail.of_view(view))


def undone_json(undone: UndoneFact) -> dict[str, Any]:
    return as_json(UndoneFactReply.of_undone(undone))
