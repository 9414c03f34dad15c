"""The façade on real parts: encoder, router, journal, ladybug graph, hnswlib."""

import shutil
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest

from memoryd.errors import (
    ConflictError,
    DataDirBusyError,
    GraphError,
    InvalidInputError,
    InvalidUserIdError,
    MemoryNotFoundError,
    TurnNotFoundError,
    UserNotFoundError,
)
from memoryd.ingest import NewTurn
from memoryd.models import MemoryType, Role, Task, TaskStatus
from memoryd.reader import ReadFact
from memoryd.retrieve import QueryParams
from memoryd.service import MemoryService
from memoryd.store.graph import GraphStore
from memoryd.workspace import MemoryPatch
from memoryd.workspace.projection import GRAPH_BATCH
from support.config import make_config
from support.graph import graph_dump

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)

CHAT = [
    ("s1", "I'm allergic to ibuprofen."),
    ("s1", "Last weekend we went hiking in the Alps with my sister Anna."),
    ("s1", "If it rains, take the bus instead of biking."),
    ("s1", "Remind me to call the dentist tomorrow at 9am."),
    ("s2", "ok thanks"),
    ("s2", "I started learning to paint watercolour landscapes."),
    ("s2", "My favourite food is ramen from the place near the station."),
]


def turns(items=CHAT, start=T0) -> list[NewTurn]:
    return [
        NewTurn(session_id=s, role=Role.USER, text=t, ts=start + timedelta(minutes=i))
        for i, (s, t) in enumerate(items)
    ]


def ids_of(result) -> list[str]:
    return [i.memory.id for i in result.items]


def test_ingest_replies_with_labels_and_memories(service: MemoryService) -> None:
    replies = service.ingest("alice", turns())
    assert len(replies) == len(CHAT)
    for reply in replies:
        assert reply.labels and 0.0 <= reply.confidence <= 1.0
        assert reply.routed_by == "classifier"
        assert reply.duplicate is False
    fragmented = replies[4]
    assert list(fragmented.labels) == ["fragmented"] and list(fragmented.memories) == []
    assert all(r.memories for i, r in enumerate(replies) if i != 4)
    types = {m.type for r in replies for m in r.memories}
    assert {"episodic", "semantic", "working"} <= types


def test_retry_returns_the_first_reply(service: MemoryService) -> None:
    first = service.ingest("alice", turns()[:2])
    again = service.ingest("alice", turns()[:2] + turns()[:1])
    assert [r.duplicate for r in again] == [True, True, True]
    assert [r.memories for r in again[:2]] == [r.memories for r in first]
    assert service.counts("alice")["turns"] == 2


def test_duplicate_inside_one_batch(service: MemoryService) -> None:
    t = turns()[0]
    replies = service.ingest("alice", [t, t])
    assert [r.duplicate for r in replies] == [False, True]
    assert replies[0].turn_id == replies[1].turn_id


def test_explicit_turn_id_is_the_key(service: MemoryService) -> None:
    a = NewTurn(session_id="s", role=Role.USER, text="first text", turn_id="x1")
    b = NewTurn(session_id="s", role=Role.USER, text="other text", turn_id="x1")
    service.ingest("alice", [a])
    reply = service.ingest("alice", [b])[0]
    assert reply.duplicate is True
    assert service.get_turn("alice", "x1").turn.text == "first text"


def test_query_ranks_the_relevant_memory_first(service: MemoryService) -> None:
    service.ingest("alice", turns())
    result = service.query("alice", QueryParams("which painkiller am I allergic to?", k=3))
    top = result.items[0]
    assert "ibuprofen" in top.memory.text
    assert "bm25" in top.why or "dense" in top.why
    result = service.query("alice", QueryParams("hobbies: painting", k=3))
    assert "watercolour" in result.items[0].memory.text


def test_query_sections_and_open_tasks(service: MemoryService) -> None:
    service.ingest("alice", turns())
    result = service.query("alice", QueryParams("what is on my plate this week?", k=5))
    working = result.section(MemoryType.WORKING)
    assert any("dentist" in i.memory.text for i in working)


def test_query_shows_the_open_tasks_nearest_the_query_and_the_recently_finished(
    service: MemoryService,
) -> None:
    now = T0 + timedelta(days=1)
    titles = ["call the plumber", "book flights to Lisbon", "renew the passport", "buy paint"]
    titles += ["file the tax return", "return library books", "water the plants"]
    for n, title in enumerate(titles):
        service.create_task("alice", title, task_id=f"k{n}", now=T0)
    service.create_task("alice", "pay the gas bill", task_id="paid", now=T0)
    service.create_task("alice", "cancel the gym", task_id="old", now=T0)
    service.update_task("alice", "paid", TaskStatus.DONE, now=now - timedelta(hours=2))
    service.update_task("alice", "old", TaskStatus.DONE, now=now - timedelta(days=3))

    def open_tasks_and_why(query: str) -> tuple[list[str], dict[str, str]]:
        result = service.query("alice", QueryParams(query, k=3, now=now, recall=False))
        why = {i.memory.id: i.why for i in result.section(MemoryType.WORKING)}
        return [memory_id for memory_id, w in why.items() if "open task" in w], why

    shown, why = open_tasks_and_why("when is my flight to Lisbon?")
    assert "k1" in shown and len(shown) == 5  # five of the seven, the flight among them
    assert "done at" in why["paid"] and "done at" not in why.get("old", "")  # a day, not three
    with service._lease("alice") as ws:  # a projection behind the journal: no vectors yet
        nums = ws.journal.nums([f"k{n}" for n in (0, 2, 3, 4, 5, 6)])
        for num in nums.values():
            ws.projection.vectors.remove(ws.journal.max_seq(), MemoryType.WORKING, num)
    # k1 alone is ranked; the tasks without a vector follow it, oldest first
    assert open_tasks_and_why("anything at all")[0] == ["k1", "k0", "k2", "k3", "k4"]


def test_query_filters(service: MemoryService) -> None:
    service.ingest("alice", turns())
    only_s2 = service.query("alice", QueryParams("food painting allergy", session_id="s2"))
    assert only_s2.items and all(i.session_id == "s2" for i in only_s2.items if i.hit)
    everywhere = service.query("alice", QueryParams("allergic ibuprofen", k=3))
    assert all(i.session_id for i in everywhere.items)  # facts carry their turn's session
    late = service.query(
        "alice", QueryParams("food painting allergy", since=T0 + timedelta(minutes=5))
    )
    assert all(i.ts >= (T0 + timedelta(minutes=5)).isoformat() for i in late.items if i.hit)
    typed = service.query("alice", QueryParams("allergy", types=(MemoryType.SEMANTIC,)))
    assert typed.items and {i.type for i in typed.items} == {MemoryType.SEMANTIC}


def test_query_on_unknown_user_is_empty(service: MemoryService) -> None:
    assert service.query("nobody", QueryParams("anything")).items == []


def test_patch_reembeds_and_reindexes(service: MemoryService) -> None:
    service.ingest("alice", turns())
    target = service.query("alice", QueryParams("hiking Alps", k=1)).items[0].memory.id
    updated = service.patch_memory("alice", target, MemoryPatch(text="We went sailing off Crete."))
    assert updated.text == "We went sailing off Crete."
    assert service.query("alice", QueryParams("sailing Crete", k=1)).items[0].memory.id == target
    service.patch_memory("alice", target, MemoryPatch(importance=9))
    assert service.get_memory("alice", target).memory.header.importance == 9
    with pytest.raises(InvalidInputError):
        service.patch_memory("alice", target, MemoryPatch(importance=11))
    with pytest.raises(MemoryNotFoundError):
        service.patch_memory("alice", "nope", MemoryPatch(text="x"))


def test_delete_memory_removes_it_from_retrieval(service: MemoryService) -> None:
    service.ingest("alice", turns())
    target = service.query("alice", QueryParams("ramen", k=1)).items[0].memory.id
    service.delete_memory("alice", target)
    assert target not in ids_of(service.query("alice", QueryParams("ramen", k=10)))
    with pytest.raises(MemoryNotFoundError):
        service.get_memory("alice", target)
    with pytest.raises(MemoryNotFoundError):
        service.delete_memory("alice", target)


def test_lists_and_lookups(service: MemoryService) -> None:
    service.ingest("alice", turns())
    page = service.list_turns("alice", "s1", limit=2)
    assert len(page.turns) == 2 and page.next_cursor is not None
    rest = service.list_turns("alice", "s1", limit=10, cursor=page.next_cursor)
    assert len(rest.turns) == 2 and rest.next_cursor is None
    listed = service.list_memories("alice", (MemoryType.SEMANTIC,), limit=50)
    assert listed.memories and all(m.type == "semantic" for m in listed.memories)
    turn_id = page.turns[0].turn_id
    stored = service.get_turn("alice", turn_id)
    assert stored.memories and stored.receipt.turn_id == turn_id
    with pytest.raises(TurnNotFoundError):
        service.get_turn("alice", "missing")
    with pytest.raises(UserNotFoundError):
        service.get_turn("bob", "missing")


def test_delete_user_removes_everything(service: MemoryService) -> None:
    service.ingest("alice", turns())
    removed = service.delete_user("alice")
    assert removed["turns"] == len(CHAT)
    assert removed["memories"] >= len(CHAT) - 1 and removed["vectors"] == removed["memories"]
    assert removed["graph_nodes"] > 0 and removed["files"] > 0
    assert not (service.users_dir / "alice").exists()
    with pytest.raises(UserNotFoundError):
        service.delete_user("alice")
    assert service.query("alice", QueryParams("allergic")).items == []


@pytest.mark.parametrize("bad", ["../x", "a/b", "", "x" * 65, "ü", "a b"])
def test_bad_user_ids(service: MemoryService, bad: str) -> None:
    with pytest.raises(InvalidUserIdError):
        service.ingest(bad, turns()[:1])


def test_turn_limits(service: MemoryService) -> None:
    with pytest.raises(InvalidInputError):
        service.ingest("alice", [])
    big = NewTurn(session_id="s", role=Role.USER, text="x" * (32 * 1024 + 1))
    with pytest.raises(InvalidInputError, match="over"):
        service.ingest("alice", [big])
    assert not service.user_exists("alice")


def test_the_save_job_checkpoints_the_graphs_written_since(service: MemoryService) -> None:
    service.ingest("alice", turns())
    with service._lease("alice") as ws:
        graph = ws.projection.graph
    wal = graph.path.with_name(graph.path.name + ".wal")
    assert wal.exists() and wal.stat().st_size > 0
    service.save_all()
    assert not wal.exists() or wal.stat().st_size == 0
    assert not graph.checkpoint()  # nothing written since


def test_a_failed_checkpoint_leaves_the_other_users_saved(service: MemoryService) -> None:
    service.ingest("alice", turns())
    service.ingest("bob", turns())
    first, second = service.users.open_workspaces()
    first.projection.graph.close()  # its checkpoint now fails
    service.save_all()
    vectors = second.projection.vectors
    assert vectors.saved_seq == vectors.applied_seq > 0
    assert not second.projection.graph.checkpoint()  # the job checkpointed it


def test_rebuild_reproduces_graph_and_vectors(service: MemoryService) -> None:
    service.ingest("alice", turns())
    before = service.counts("alice")
    queries = ["allergic", "hiking sister", "dentist", "paint"]
    ranked = [ids_of(service.query("alice", QueryParams(q))) for q in queries]
    counts = service.rebuild("alice")
    assert counts["replayed"] == before["log"]
    after = service.counts("alice")
    assert after == before
    assert [ids_of(service.query("alice", QueryParams(q))) for q in queries] == ranked


def test_a_batch_past_one_graph_transaction_projects_as_its_replay(
    service: MemoryService,
) -> None:
    """One request of 80 turns (three graph transactions of GRAPH_BATCH) leaves the graph and
    vectors a rebuild makes entry by entry, and the vectors and graph caught up."""
    items = [(f"s{i // 10}", f"{text} (take {i})") for i, (_, text) in enumerate(CHAT * 12)][:80]
    assert len(items) > 2 * GRAPH_BATCH
    service.ingest("alice", turns(items))
    batched = service.counts("alice")
    assert batched["graph_Turn"] == 80
    with service.users.lease("alice") as ws:
        assert ws.projection.graph.applied_seq() == ws.journal.max_seq()
    counts = service.rebuild("alice")
    assert {k: v for k, v in counts.items() if k != "replayed"} == batched


def test_a_rebuild_replays_runs_of_turns_and_the_edits_between_them(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Turns past one graph batch, edits (a patch, a delete, a task), more turns: the replay, in
    runs of GRAPH_BATCH turns, makes the graph the live writes made, and a run the graph
    refuses in one transaction (injected) is applied turn by turn."""
    items = [(f"s{i // 10}", f"{text} (take {i})") for i, (_, text) in enumerate(CHAT * 12)][:50]
    service.ingest("alice", turns(items[:40]))
    target = service.query("alice", QueryParams("ramen", k=1)).items[0].memory.id
    service.patch_memory("alice", target, MemoryPatch(text="I love sushi now."))
    service.delete_memory(
        "alice", service.query("alice", QueryParams("dentist", k=1)).items[0].memory.id
    )
    service.create_task("alice", "book the flights")
    service.ingest("alice", turns(items[40:], start=T0 + timedelta(days=1)))
    before = service.counts("alice")
    with service.users.lease("alice") as ws:
        live = graph_dump(ws.projection.graph)
    runs: list[int] = []
    whole = GraphStore.apply_turns

    def refuse_the_first_run(store: GraphStore, batch: list) -> None:
        runs.append(len(batch))
        if len(runs) == 1:
            raise GraphError("injected: the first run fails as a whole")
        whole(store, batch)

    monkeypatch.setattr(GraphStore, "apply_turns", refuse_the_first_run)
    counts = service.rebuild("alice")
    assert runs[0] == GRAPH_BATCH and len(runs) >= 2
    assert {k: v for k, v in counts.items() if k != "replayed"} == before
    with service.users.lease("alice") as ws:
        assert graph_dump(ws.projection.graph) == live


def test_reopen_replays_what_projections_lack(config, service_factory) -> None:
    svc = service_factory(config)
    svc.ingest("alice", turns())
    before = svc.counts("alice")
    svc.close()
    user_dir = config.data_dir / "users" / "alice"
    shutil.rmtree(user_dir / "vectors")
    for path in user_dir.glob("graph*"):  # the database file and its WAL
        path.unlink()
    again = service_factory(config)
    assert again.counts("alice") == before
    assert "ibuprofen" in again.query("alice", QueryParams("allergic", k=1)).items[0].memory.text


def test_export_import_roundtrip(service: MemoryService) -> None:
    service.ingest("alice", turns())
    target = service.query("alice", QueryParams("ramen", k=1)).items[0].memory.id
    service.patch_memory("alice", target, MemoryPatch(text="I love sushi now."))
    records = list(service.export_user("alice"))
    assert records[0]["format"] == "memoryd.export" and records[0]["version"] == 2
    counts = service.import_user("alice2", records)
    assert counts["records"] == len(records) - 1
    for q in ["sushi", "allergic", "dentist"]:
        a = [i.memory.text for i in service.query("alice", QueryParams(q)).items]
        b = [i.memory.text for i in service.query("alice2", QueryParams(q)).items]
        assert a == b
    with pytest.raises(ConflictError):
        service.import_user("alice2", records)
    with pytest.raises(InvalidInputError):
        service.import_user("carol", [{"format": "other"}])


def test_second_process_on_the_same_data_dir_is_refused(config, service_factory) -> None:
    service_factory(config)
    with pytest.raises(DataDirBusyError):
        service_factory(config)


def test_open_users_are_bounded(tmp_path, service_factory) -> None:
    svc = service_factory(make_config(tmp_path / "d", **{"limits.max_open_users": 2}))
    for user in ["u1", "u2", "u3", "u4"]:
        svc.ingest(user, turns()[:1])
    assert len(svc.open_counts()) == 2
    assert svc.counts("u1")["turns"] == 1


def test_times_in_a_turn_are_read_on_the_speakers_clock(service: MemoryService) -> None:
    # said at noon in New York: "tonight at 9" is 21:00 there, 01:00 UTC the next day
    sent = datetime(2026, 10, 14, 12, 0, tzinfo=timezone(timedelta(hours=-4)))
    text = "Remind me tonight at 9 to book Saturday's reformer class."
    (receipt,) = service.ingest("alice", [NewTurn("s1", Role.USER, text, sent)])
    stored = service.get_turn("alice", receipt.turn_id)
    assert stored.turn.ts == datetime(2026, 10, 14, 16, 0, tzinfo=UTC)
    assert stored.turn.utc_offset == -240
    (task,) = [s.memory for s in stored.memories if isinstance(s.memory, Task)]
    assert task.due == datetime(2026, 10, 15, 1, 0, tzinfo=UTC)
    # the same turn sent in UTC is the same turn
    (again,) = service.ingest("alice", [NewTurn("s1", Role.USER, text, sent.astimezone(UTC))])
    assert again.turn_id == receipt.turn_id and again.duplicate


def test_a_turn_read_aside_while_the_workers_are_busy_is_read_by_its_caller(
    service: MemoryService,
) -> None:
    """A single turn's facts are read on an encoder worker while it is routed; when every
    worker is taken, the caller reads them itself instead of waiting."""
    shared = service.shared
    gate = threading.Event()
    busy = [shared.encoding.submit(gate.wait) for _ in range(service.config.encoder.pool_size)]
    new = NewTurn("s1", Role.USER, "My sister Lena moved to Leeds in May.")
    encoded = shared.encoder.encode(new.text)
    read: list[list[ReadFact]] = []
    caller = threading.Thread(target=lambda: read.append(shared.read_aside(new, encoded)()[0]))
    caller.start()
    caller.join(60)
    gate.set()
    assert not caller.is_alive(), "the read waited for a busy worker"
    assert all(f.result() for f in busy)
    assert read == [shared.read_facts(new.role, new.text, encoded)[0]]
    assert read[0]  # the sister and where she lives
