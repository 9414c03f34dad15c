"""How records are written in the journal and read back, in one place.

Records become JSON-ready data with :func:`to_payload` (datetimes as ISO strings, enums as their
values) and come back with the ``*_of_*`` functions. The log payload of each entry kind is built
here (``*_payload``) and read here, so that the journal's SQL never shapes JSON itself; vectors are
float32 bytes (:func:`encode_embedding`). ``docs/data-format.md`` documents every payload.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from memoryd.models import (
    Effect,
    Entity,
    EntityType,
    Episode,
    Fact,
    Header,
    Label,
    Memory,
    MemoryRef,
    MemoryType,
    Mention,
    Origin,
    Parse,
    Receipt,
    Role,
    RoutedBy,
    Rule,
    RuleNode,
    RuleNodeKind,
    State,
    Task,
    TaskStatus,
    Turn,
    memory_type,
)
from memoryd.store.records import MemoryChange, NewMemory, Relabel, TurnEntry

EMBEDDING_DTYPE = np.float32
_FACT_FIELDS = frozenset(f.name for f in dataclasses.fields(Fact))
"""What a fact record may hold; a journal written before the fact reader also holds ``update``
(the old extractors' "replaces its relation's values"), which nothing reads any more."""


def to_payload(obj: Any) -> Any:
    """Turn a record (or nested records) into JSON-ready data; datetimes become ISO strings."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_payload(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, list | tuple):
        return [to_payload(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_payload(v) for k, v in obj.items()}
    return obj


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _header(data: dict[str, Any]) -> Header:
    return Header(**{**data, "last_access": _dt(data.get("last_access"))})


def _entity(data: dict[str, Any]) -> Entity:
    return Entity(data["id"], data["name"], EntityType(data["type"]))


def memory_from_payload(kind: MemoryType, data: dict[str, Any]) -> Memory:
    """Inverse of :func:`to_payload` for the four memory classes."""
    d = dict(data)
    d["header"] = _header(d.get("header", {}))
    if kind is MemoryType.EPISODIC:
        d["ts"] = _dt(d["ts"])
        d["event_time"] = _dt(d.get("event_time"))
        d["mentions"] = [Mention(_entity(m["entity"]), m["role"]) for m in d.get("mentions", [])]
        return Episode(**d)
    if kind is MemoryType.SEMANTIC:
        d["object"] = _entity(d["object"])
        d["valid_from"], d["valid_to"] = _dt(d.get("valid_from")), _dt(d.get("valid_to"))
        d["origin"] = Origin(d.get("origin", Origin.EXTRACTOR))
        d["parse"] = Parse(d.get("parse", Parse.PATTERN))
        return Fact(**{k: v for k, v in d.items() if k in _FACT_FIELDS})
    if kind is MemoryType.PROCEDURAL:
        d["nodes"] = [
            RuleNode(**{**n, "kind": RuleNodeKind(n["kind"])}) for n in d.get("nodes", [])
        ]
        d["origin"] = Origin(d.get("origin", Origin.EXTRACTOR))
        d["parse"] = Parse(d.get("parse", Parse.PATTERN))
        return Rule(**d)
    d["due"] = _dt(d.get("due"))
    d["states"] = [
        State(**{**s, "status": TaskStatus(s["status"]), "ts": _dt(s["ts"])})
        for s in d.get("states", [])
    ]
    d["origin"] = Origin(d.get("origin", Origin.EXTRACTOR))
    d["parse"] = Parse(d.get("parse", Parse.PATTERN))
    return Task(**d)


def turn_from_payload(data: dict[str, Any]) -> Turn:
    """Inverse of :func:`to_payload` for a :class:`Turn`."""
    return Turn(
        turn_id=data["turn_id"],
        session_id=data["session_id"],
        role=Role(data["role"]),
        text=data["text"],
        ts=datetime.fromisoformat(data["ts"]),
        speaker=data.get("speaker"),
        metadata=data.get("metadata") or {},
        labels=tuple(Label(v) for v in data.get("labels", ())),
        confidence=float(data.get("confidence", 0.0)),
        routed_by=RoutedBy(data.get("routed_by", RoutedBy.CLASSIFIER)),
        utc_offset=int(data.get("utc_offset", 0)),
    )


# -- log payloads ----------------------------------------------------------------------------


def memory_record(memory: Memory) -> dict[str, Any]:
    """A memory as the log stores it: its type and its record."""
    return {"type": memory_type(memory).value, "record": to_payload(memory)}


def memory_of_record(record: dict[str, Any]) -> Memory:
    """The inverse of :func:`memory_record`."""
    return memory_from_payload(MemoryType(record["type"]), record["record"])


def turn_payload(entry: TurnEntry) -> dict[str, Any]:
    """The payload of a ``turn`` entry: the turn, its memories, the stored memories it changed
    and the names it folded into known entities (the last two only when there are any)."""
    payload: dict[str, Any] = {
        "turn": to_payload(entry.turn),
        "memories": [memory_record(m) for m in entry.memories],
    }
    if entry.updates:
        payload["updates"] = [memory_record(m) for m in entry.updates]
    if entry.aliases:
        payload["aliases"] = entry.aliases
    return payload


def turn_of_payload(payload: dict[str, Any]) -> tuple[Turn, list[Memory]]:
    """The turn and memories of a ``turn`` or ``turn_relabel`` log payload."""
    return turn_from_payload(payload["turn"]), [memory_of_record(m) for m in payload["memories"]]


def updates_of_payload(payload: dict[str, Any]) -> list[Memory]:
    """The stored memories a ``turn`` entry changed (none for entries before consolidation)."""
    return [memory_of_record(m) for m in payload.get("updates", ())]


def relabel_payload(relabel: Relabel, removed: Sequence[str]) -> dict[str, Any]:
    """The payload of a ``turn_relabel`` entry; ``removed`` are the ids the turn lost."""
    return {
        "turn": to_payload(relabel.turn),
        "memories": [memory_record(m) for m in relabel.memories],
        "removed": list(removed),
        "updates": [memory_record(m) for m in relabel.updates],
        "source": relabel.source,
        "holdout": relabel.holdout,
        "after_round": relabel.after_round,
    }


def relabel_of_payload(payload: dict[str, Any]) -> Relabel:
    """The inverse of :func:`relabel_payload` (without the removed ids)."""
    turn, memories = turn_of_payload(payload)
    return Relabel(
        turn,
        memories,
        payload["source"],
        payload["holdout"],
        payload["after_round"],
        updates=updates_of_payload(payload),
    )


def _new_memory_record(new: NewMemory) -> dict[str, Any]:
    record = memory_record(new.memory) | {"session_id": new.session_id, "ts": new.ts.isoformat()}
    if new.embedding is not None:
        record["embedding"] = np.asarray(new.embedding, dtype=EMBEDDING_DTYPE).tolist()
    return record


def _new_memory_of_record(record: dict[str, Any]) -> NewMemory:
    vec = record.get("embedding")
    return NewMemory(
        memory_of_record(record),
        record["session_id"],
        datetime.fromisoformat(record["ts"]),
        None if vec is None else np.asarray(vec, dtype=EMBEDDING_DTYPE),
    )


def change_payload(change: MemoryChange) -> dict[str, Any]:
    """The payload of a ``memory_change`` entry."""
    payload: dict[str, Any] = {
        "reason": change.reason,
        "created": [_new_memory_record(n) for n in change.created],
        "updates": [memory_record(m) for m in change.updates],
    }
    if change.cursor is not None:
        payload["cursor"] = list(change.cursor)
    return payload


def change_of_payload(ref: str, payload: dict[str, Any]) -> MemoryChange:
    """The :class:`MemoryChange` a ``memory_change`` log payload records."""
    cursor = payload.get("cursor")
    return MemoryChange(
        reason=payload["reason"],
        ref=ref,
        created=[_new_memory_of_record(r) for r in payload["created"]],
        updates=[memory_of_record(r) for r in payload["updates"]],
        cursor=None if cursor is None else (cursor[0], int(cursor[1])),
    )


def patch_payload(
    memory: Memory, embedding: np.ndarray | None, importance: float | None
) -> dict[str, Any]:
    """The payload of a ``memory_patch`` entry: the new record, and its new vector and the
    importance a client set, when given."""
    payload = memory_record(memory)
    if embedding is not None:
        payload["embedding"] = np.asarray(embedding, dtype=EMBEDDING_DTYPE).tolist()
    if importance is not None:
        payload["importance"] = float(importance)
    return payload


def patch_embedding(payload: dict[str, Any]) -> np.ndarray | None:
    """The new vector of a ``memory_patch`` payload, if it has one."""
    vec = payload.get("embedding")
    return None if vec is None else np.asarray(vec, dtype=EMBEDDING_DTYPE)


# -- receipts and vectors --------------------------------------------------------------------


def receipt_payload(receipt: Receipt) -> dict[str, Any]:
    """A turn's first receipt as the journal keeps it (``duplicate`` is the caller's)."""
    payload: dict[str, Any] = to_payload(receipt)
    del payload["duplicate"]
    return payload


def receipt_of_payload(turn_id: str, data: Mapping[str, Any]) -> Receipt:
    """The inverse of :func:`receipt_payload`. Replies journaled before a field existed (or an
    imported turn exported without one) read as its default."""
    return Receipt(
        turn_id=data.get("turn_id", turn_id),
        labels=tuple(Label(v) for v in data.get("labels", ())),
        confidence=float(data.get("confidence", 0.0)),
        routed_by=RoutedBy(data.get("routed_by", RoutedBy.CLASSIFIER)),
        low_confidence=bool(data.get("low_confidence", False)),
        memories=tuple(MemoryRef(m["id"], MemoryType(m["type"])) for m in data.get("memories", ())),
        effects=tuple(Effect(e["id"], e["effect"], e["by"]) for e in data.get("effects", ())),
    )


def encode_embedding(vec: np.ndarray) -> bytes:
    return np.asarray(vec, dtype=EMBEDDING_DTYPE).tobytes()


def decode_embedding(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=EMBEDDING_DTYPE).copy()
