"""Export and import of one user: the journal as versioned JSON records (``docs/data-format.md``).

An export is a header record, then every log entry in order (a turn with its embedding and
first receipt), then one ``headers`` record with what the log cannot recompute: importance set
by an LLM or a client, recall counts and last accesses. Version 1 exports (before the headers
record existed) import too. An import replays the records through the same journal writes as
the live daemon, so the user it makes is the one exported, projections included.

    for record in export_records(ws.journal, ws.headers, "alice", __version__, now): ...
    import_records(ws, records)
"""

from __future__ import annotations

import base64
import binascii
import sqlite3
from collections.abc import Iterable, Iterator
from datetime import datetime
from functools import partial
from typing import Any

from memoryd.errors import InvalidInputError, JournalError
from memoryd.jsonlines import json_objects
from memoryd.store import (
    HeaderStore,
    Journal,
    LogKind,
    TurnEntry,
    change_of_payload,
    decode_embedding,
    encode_embedding,
    memory_of_record,
    patch_embedding,
    receipt_of_payload,
    receipt_payload,
    relabel_of_payload,
    turn_of_payload,
    updates_of_payload,
)
from memoryd.workspace import Workspace

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "check_header",
    "export_records",
    "import_records",
    "read_records",
]

EXPORT_FORMAT = "memoryd.export"
EXPORT_VERSION = 2  # 2 adds a last "headers" record: LLM/API importance and recall counts
IMPORTABLE_VERSIONS = (1, 2)
HEADERS_RECORD = "headers"


def export_records(
    journal: Journal, headers: HeaderStore, user_id: str, version: str, now: datetime
) -> Iterator[dict[str, Any]]:
    """The user's journal as versioned records: a header, every log entry in order, the
    headers record. ``version`` is memoryd's. Reads only the journal file (a workspace's
    stores, or a backup's copy)."""
    yield {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "memoryd": version,
        "user_id": user_id,
        "exported_at": now.isoformat(),
    }
    for entry in journal.entries():
        record: dict[str, Any] = {
            "seq": entry.seq,
            "kind": entry.kind.value,
            "ref": entry.ref,
            "payload": entry.payload,
        }
        if entry.kind is LogKind.TURN:
            found = journal.turn(entry.ref)
            if found is not None:
                record["embedding"] = base64.b64encode(encode_embedding(found[1])).decode()
                record["reply"] = receipt_payload(found[2])
        yield record
    yield {"kind": HEADERS_RECORD, "headers": headers.export()}


def check_header(header: dict[str, Any] | None) -> None:
    """InvalidInputError unless ``header`` opens an export this version can import."""
    if not header or header.get("format") != EXPORT_FORMAT:
        raise InvalidInputError("not a memoryd export (first line must be its header)")
    if header.get("version") not in IMPORTABLE_VERSIONS:
        raise InvalidInputError(f"export version {header.get('version')} is not supported")


def read_records(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of an export's lines, blank lines skipped; InvalidInputError names the
    first line that is not one."""
    for _, record in json_objects(lines, InvalidInputError, lambda number: f"line {number}"):
        yield record


def import_records(ws: Workspace, records: Iterable[dict[str, Any]]) -> int:
    """Apply the records after an export's header, each on the writer; returns how many.
    A record that is not one an export writes is an InvalidInputError naming it."""
    applied = 0
    for record in records:
        try:
            if record.get("kind") == HEADERS_RECORD:
                ws.writer.call(partial(ws.headers.restore, record["headers"]))
            else:
                ws.writer.call(partial(_import_record, ws, record))
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            kind = record.get("kind")
            raise InvalidInputError(
                f"record {applied + 1} after the header (kind {kind!r}) is not one an export"
                f" writes: {type(exc).__name__} {exc}"
            ) from exc
        except JournalError as exc:
            if not isinstance(exc.__cause__, sqlite3.IntegrityError):
                raise
            raise InvalidInputError(  # e.g. a turn the export holds twice
                f"record {applied + 1} after the header (kind {record.get('kind')!r}) repeats "
                f"or contradicts an earlier record: {exc.__cause__}"
            ) from exc
        applied += 1
    return applied


def _import_record(ws: Workspace, record: dict[str, Any]) -> None:
    kind = LogKind(record["kind"])
    payload = record["payload"]
    if kind is LogKind.TURN:
        turn, memories = turn_of_payload(payload)
        embedding = decode_embedding(base64.b64decode(record["embedding"]))
        entry = TurnEntry(
            turn,
            embedding,
            memories,
            receipt_of_payload(turn.turn_id, record.get("reply", {})),
            updates=updates_of_payload(payload),
            aliases=payload.get("aliases", {}),
        )
        ws.writes.turns([entry])
    elif kind is LogKind.TURN_RELABEL:
        ws.writes.relabel(relabel_of_payload(payload))
    elif kind is LogKind.MEMORY_CHANGE:
        ws.writes.change(change_of_payload(record["ref"], payload))
    elif kind is LogKind.MEMORY_PATCH:
        ws.writes.patch(
            memory_of_record(payload), patch_embedding(payload), payload.get("importance")
        )
    else:
        ws.writes.delete(record["ref"])
