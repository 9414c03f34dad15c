"""memoryd.client against a real `memoryd serve`: every route through the sync client, the same
through the async one, each error raised as the daemon's own exception type, and an export →
import round trip that reproduces the user."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memoryd.client import AsyncClient, Calls, Client, RemoteError, daemon_url, token_for
from memoryd.errors import (
    ConflictError,
    DaemonUnavailableError,
    InvalidInputError,
    InvalidUserIdError,
    MemoryNotFoundError,
    NotFoundError,
    UserNotFoundError,
)
from memoryd.models import MemoryType, TaskStatus
from memoryd.schemas import QueryReply, TurnIn
from support.config import MODEL_DIR, make_config
from support.server import ServerProcess

TURNS = [
    TurnIn(session_id="s1", role="user", text="I live in Lisbon."),
    TurnIn(session_id="s2", role="user", text="I moved to Porto."),
    TurnIn(session_id="s2", role="user", text="I went kayaking on the Douro with Rui."),
    TurnIn(session_id="s2", role="user", text="Remind me to renew my passport on Friday."),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("client") / "data", MODEL_DIR)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, server.token) as c:
        yield c


def test_every_route_through_the_sync_client(client: Client) -> None:
    user = "sync"
    receipts = client.ingest(user, TURNS).turns
    assert [r.duplicate for r in receipts] == [False] * 4
    assert client.ingest(user, TURNS[:1]).turns[0].duplicate  # idempotent on the turn id
    page = client.list_turns(user, limit=2)
    assert len(page.turns) == 2 and page.next_cursor is not None
    assert client.list_turns(user, cursor=page.next_cursor).turns[0].turn_id == receipts[2].turn_id
    assert client.get_turn(user, receipts[0].turn_id).text == "I live in Lisbon."

    reply = client.query(user, "where did I go kayaking?", k=5)
    assert isinstance(reply, QueryReply) and "Douro" in reply.context
    only = client.query(user, "kayaking", types=[MemoryType.EPISODIC])
    assert only.sections[MemoryType.EPISODIC]
    assert not any(items for kind, items in only.sections.items() if kind != MemoryType.EPISODIC)

    facts = client.list_facts(user, history=True).facts
    lisbon = next(f for f in facts if "Lisbon" in f.text)
    assert not lisbon.current and len(client.list_facts(user).facts) == len(facts) - 1
    assert client.undo_fact(user, lisbon.id).was_superseded_by

    task = client.create_task(user, "Water the plants", task_id="plants")
    assert task.id == "plants"
    done = client.update_task(user, "plants", TaskStatus.DONE, note="watered")
    assert done.record["states"][-1]["status"] == "done"
    assert [t.id for t in client.list_tasks(user, [TaskStatus.DONE]).tasks] == ["plants"]

    episodes = client.list_memories(user, [MemoryType.EPISODIC]).memories
    episode = next(m for m in episodes if "Douro" in m.text)
    assert client.get_memory(user, episode.id).text == episode.text
    assert client.patch_memory(user, episode.id, importance=9.0).record["header"]
    assert client.feedback(user, episode.id, "positive").id == episode.id
    assert client.delete_memory(user, episode.id).deleted
    assert client.get_user(user).counts["turns"] == 4
    assert user in client.list_users().users
    assert client.tiers(user).sizes
    assert client.reshuffle(user).scored > 0
    assert client.router_status(user).round == 0
    assert client.health().status == "ok" and client.ready().status == "ready"
    assert client.delete_user(user).removed.turns == 4
    assert user not in client.list_users().users


def test_the_async_client_answers_as_the_sync_one(server: ServerProcess, client: Client) -> None:
    async def scenario() -> tuple[QueryReply, int, list[str]]:
        async with AsyncClient(server.url, server.token) as memory:
            await memory.ingest("async", TURNS)
            reply = await memory.query("async", "where do I live?")
            counts = (await memory.get_user("async")).counts
            with pytest.raises(UserNotFoundError):
                await memory.get_user("nobody")
            records = [r["kind"] async for r in memory.export("async") if "kind" in r]
            return reply, counts["turns"], records

    reply, turns, kinds = asyncio.run(scenario())
    client.ingest("twin", TURNS)
    assert reply.context == client.query("twin", "where do I live?").context
    assert turns == 4 and "turn" in kinds


def test_errors_are_the_daemons_exception_types(server: ServerProcess, client: Client) -> None:
    client.ingest("errs", TURNS[:1])
    with pytest.raises(UserNotFoundError) as missing_user:
        client.get_user("nobody")
    assert isinstance(missing_user.value, RemoteError) and missing_user.value.status == 404
    assert "has no stored data" in str(missing_user.value)
    with pytest.raises(MemoryNotFoundError):
        client.get_memory("errs", "nope")
    with pytest.raises(NotFoundError):
        client.delete_memory("errs", "nope")
    fact = client.list_facts("errs").facts[0]
    with pytest.raises(ConflictError) as conflict:
        client.undo_fact("errs", fact.id)  # it was never superseded
    assert conflict.value.status == 409
    with pytest.raises(InvalidUserIdError):
        client.get_user("no spaces")
    with pytest.raises(InvalidInputError):
        client.query("errs", "x", when="the day after never")
    with pytest.raises(ValueError):  # refused here, as the daemon would
        client.create_task("errs", "")
    with Client(server.url, "wrong") as stranger, pytest.raises(RemoteError) as refused:
        stranger.get_user("errs")
    assert refused.value.status == 401 and "refused the token" in str(refused.value)


def test_a_daemon_that_does_not_answer(tmp_path: Path) -> None:
    with Client("http://127.0.0.1:9", "t") as client, pytest.raises(DaemonUnavailableError) as e:
        client.health()
    assert "no memoryd daemon answers at http://127.0.0.1:9" in str(e.value)


def test_export_then_import_reproduces_the_user(client: Client, tmp_path: Path) -> None:
    client.ingest("origin", TURNS)
    facts = client.list_facts("origin", history=True).facts
    client.undo_fact("origin", next(f.id for f in facts if not f.current))
    client.create_task("origin", "Book the ferry", task_id="ferry")
    client.update_task("origin", "ferry", TaskStatus.CANCELLED)
    records = list(client.export("origin"))
    assert records[0]["format"] == "memoryd.export"

    from_records = client.import_user("copy", records)
    path = tmp_path / "origin.jsonl"
    path.write_text("".join(f"{line}\n" for line in _lines(client, "origin")))
    from_file = client.import_user("copy2", path)
    origin = client.get_user("origin").counts
    assert from_records.counts == from_file.counts == origin
    for copy in ("copy", "copy2"):
        assert _facts(client, copy) == _facts(client, "origin")
        assert _tasks(client, copy) == _tasks(client, "origin")
    with pytest.raises(ConflictError):
        client.import_user("copy", records)  # only into a user with no data


def _lines(client: Client, user: str) -> Iterator[str]:
    reply = client.http.get(f"/v1/users/{user}/export")
    reply.raise_for_status()
    return iter(reply.text.splitlines())


def _facts(client: Client, user: str) -> list[tuple[str, bool, str]]:
    return [(f.id, f.current, f.text) for f in client.list_facts(user, history=True).facts]


def _tasks(client: Client, user: str) -> list[tuple[str, list[str]]]:
    return [
        (t.id, [s["status"] for s in t.record["states"]]) for t in client.list_tasks(user).tasks
    ]


def test_url_and_token_come_from_the_config(tmp_path: Path, monkeypatch) -> None:
    config = make_config(tmp_path, host="0.0.0.0", port=9999)
    assert daemon_url(config) == "http://127.0.0.1:9999"
    assert token_for(config) is None and not (tmp_path / "token").exists()  # never created
    (tmp_path / "token").write_text("from-file\n")
    assert token_for(config) == "from-file"
    monkeypatch.setenv("MEMORYD_TOKEN", "from-env")
    assert token_for(config) == "from-env"
    with Client(config=config) as client:
        assert client.url == "http://127.0.0.1:9999"
        assert client.http.headers["authorization"] == "Bearer from-env"


def test_paths_are_quoted() -> None:
    call = Calls.get_memory("u", "a/b c")
    assert call.path == "/v1/users/u/memories/a%2Fb%20c"
    assert isinstance(httpx.URL("http://x" + call.path), httpx.URL)
