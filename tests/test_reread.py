"""Re-reading a user's facts (memoryd facts reread, POST /v1/users/{u}/facts/reread): one
journaled change that replaces the facts read before, its undo, the errors, and a kill in the
middle against a real daemon."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from memoryd.errors import ConflictError, UserNotFoundError
from memoryd.ingest import NewTurn
from memoryd.models import Role
from memoryd.service import MemoryService
from memoryd.workspace.reread import REREAD
from support.config import MODEL_DIR
from support.server import ServerProcess

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
TEXTS = (
    "My line manager is Priya Shah.",
    "we're with Octopus for gas and electric",
    "I'm allergic to peanuts",
    "after the restructure I'm reporting to Marcus Lee now",
)


def turns(texts: tuple[str, ...] = TEXTS, start: int = 0) -> list[NewTurn]:
    return [
        NewTurn("s1", Role.USER, t, ts=T0 + timedelta(days=start + i), turn_id=f"t{start + i}")
        for i, t in enumerate(texts)
    ]


def facts(service: MemoryService, history: bool = False) -> list:
    return [s.memory for s in service.list_facts("u", history=history)]


def slots(found: list) -> set[tuple[str, str, str]]:
    return {(f.subject, f.relation, f.object.name) for f in found if f.valid_to is None}


def test_a_reread_replaces_the_facts_in_one_change_and_its_undo_reverses_it(
    service: MemoryService,
) -> None:
    service.ingest("u", turns())
    before = facts(service)
    report = service.reread_facts("u")
    assert (report.turns, report.closed) == (len(TEXTS), len(before))
    after = facts(service)
    assert slots(after) == slots(before)  # the same reader reads the same facts
    assert not {f.id for f in after} & {f.id for f in before}
    closed = [f for f in facts(service, history=True) if f.id in {b.id for b in before}]
    assert {f.superseded_by for f in closed} == {f"{REREAD}:1"}
    undone = service.undo_reread("u")
    assert undone.undo and undone.current == len(before)
    assert {f.id for f in facts(service)} == {f.id for f in before}
    with pytest.raises(ConflictError, match="no reread"):
        service.undo_reread("u")


def test_a_second_reread_gets_new_ids_and_later_turns_fold_over_it(
    service: MemoryService,
) -> None:
    service.ingest("u", turns(TEXTS[:3]))
    service.reread_facts("u")
    service.reread_facts("u")
    service.ingest("u", turns(TEXTS[3:], start=3))
    managers = [f.object.name for f in facts(service) if f.relation == "manager"]
    assert managers == ["Marcus Lee"]


def test_an_unknown_user_and_a_reread_already_running(service: MemoryService) -> None:
    with pytest.raises(UserNotFoundError):
        service.reread_facts("nobody")
    service.ingest("u", turns())
    with service._lease("u") as ws:  # a reread of this user holds the flag while it reads
        assert ws.reread._running.acquire(blocking=False)
        try:
            with pytest.raises(ConflictError, match="already running"):
                service.reread_facts("u")
        finally:
            ws.reread._running.release()
    assert service.reread_facts("u").turns == len(TEXTS)


def test_a_kill_in_the_middle_leaves_the_old_facts_current(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, MODEL_DIR)
    texts = [f"{TEXTS[i % len(TEXTS)]} (note {i})" for i in range(1000)]
    turns = [{"session_id": "s", "role": "user", "text": t} for t in texts]
    with server.client() as client:
        for start in range(0, len(texts), 125):
            chunk = {"turns": turns[start : start + 125]}
            assert client.post("/v1/users/u/turns", json=chunk).status_code == 201
        before = {f["id"] for f in client.get("/v1/users/u/facts").json()["facts"]}
    replies: list[int] = []

    def reread() -> None:
        with server.client() as client, contextlib.suppress(httpx.HTTPError):
            replies.append(client.post("/v1/users/u/facts/reread").status_code)

    caller = threading.Thread(target=reread)
    caller.start()
    time.sleep(0.8)  # 1,000 turns take seconds to read again: the kill comes first
    server.kill()
    caller.join()
    committed = any("facts reread 1 from" in line for line in server.log)
    server = ServerProcess(data, MODEL_DIR)
    try:
        with server.client() as client:
            found = client.get("/v1/users/u/facts", params={"history": True}).json()["facts"]
            current = {f["id"] for f in found if f["current"]}
            assert not committed and not replies, "the reread ended before the kill"
            assert current == before  # nothing of the reread was journaled
            reply = client.post("/v1/users/u/facts/reread")
            assert reply.status_code == 200, reply.text
            assert reply.json()["turns"] == len(texts)
            again = client.get("/v1/users/u/facts").json()["facts"]
            assert Counter(f["id"].rsplit("_", 1)[-1] for f in again) == Counter({"r1": len(again)})
            assert client.post("/v1/users/nobody/facts/reread").status_code == 404
    finally:
        server.stop()
