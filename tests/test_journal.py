import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from memoryd.errors import ClosedError, JournalError
from memoryd.models import (
    Entity,
    Episode,
    Fact,
    Label,
    MemoryType,
    Mention,
    Receipt,
    Role,
    RoutedBy,
    State,
    Task,
    TaskStatus,
    Turn,
)
from memoryd.retrieve.expand import HEALTH_PROFILE
from memoryd.store.headers import HeaderStore
from memoryd.store.journal import Journal
from memoryd.store.lexical import TextSearch
from memoryd.store.records import LogKind, TaskHead, TurnEntry
from memoryd.store.sqlite import Database

TS = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


def receipt(n: int) -> Receipt:
    return Receipt(f"t{n}", (Label.EPISODIC,), round(0.9 - n / 100, 4), RoutedBy.CLASSIFIER)


def entry(n: int, text: str, session: str = "s1", mentions: Sequence[Mention] = ()) -> TurnEntry:
    turn = Turn(f"t{n}", session, Role.USER, text, TS, labels=(Label.EPISODIC,), confidence=0.9)
    episode = Episode(f"ep{n}", turn.turn_id, session, text, TS, mentions=list(mentions))
    vec = np.full(4, n, dtype=np.float32)
    return TurnEntry(turn, vec, [episode], receipt(n))


def open_journal(path: Path) -> Journal:
    return Journal(Database(path))


@pytest.fixture
def journal(tmp_path: Path):
    j = open_journal(tmp_path / "journal.sqlite")
    yield j
    j.db.close()


def search(journal: Journal, query: str, types: list[MemoryType], limit: int):
    return TextSearch(journal.db).search(query, types, limit)


def test_wal_and_full_sync(journal: Journal) -> None:
    conn = sqlite3.connect(journal.db.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert journal.db.writer.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_append_returns_consecutive_seqs_and_reads_back(journal: Journal) -> None:
    written = journal.append_turns([entry(1, "hiking in the alps"), entry(2, "dinner with anna")])
    assert [w.seq for w in written] == [1, 2]
    turn, vec, first = journal.turn("t2")
    assert turn.text == "dinner with anna" and turn.labels == (Label.EPISODIC,)
    assert vec.tolist() == [2.0] * 4
    assert first == receipt(2)
    assert journal.receipts(["t1", "nope"]) == {"t1": receipt(1)}
    assert [s.memory.id for s in journal.memories_of_turn("t1")] == ["ep1"]


def test_batch_is_atomic(journal: Journal) -> None:
    journal.append_turns([entry(1, "first")])
    with pytest.raises(JournalError):
        journal.append_turns([entry(2, "second"), entry(1, "dup id")])
    assert journal.counts()["turns"] == 1
    assert journal.turn("t2") is None


def test_bm25_drops_stopwords_and_filters_types(journal: Journal) -> None:
    journal.append_turns([entry(1, "We went hiking in the Alps"), entry(2, "I cooked pasta")])
    hits = search(journal, "where did we go hiking?", [MemoryType.EPISODIC], 10)
    assert [h[0] for h in hits] == [1]
    assert hits[0][1] > 0
    assert search(journal, "the and of", [MemoryType.EPISODIC], 10) == []
    assert search(journal, "hiking", [MemoryType.SEMANTIC], 10) == []
    # Porter stemming: "hike" matches "hiking"
    assert [h[0] for h in search(journal, "hike", [MemoryType.EPISODIC], 10)] == [1]


def test_bm25_over_every_type_reads_the_index_alone(journal: Journal) -> None:
    """The index holds live memories only, so an unfiltered search joins nothing (a memory's
    row costs more than its score); a type or tier filter joins what it needs."""
    journal.append_turns([entry(1, "hiking in the alps"), entry(2, "hiking in the andes")])
    journal.delete_memory("ep2")
    HeaderStore(journal.db)  # every live memory gets a header, in tier 1
    text = TextSearch(journal.db)
    every = list(MemoryType)
    assert [h[0] for h in text.search("hiking", every, 10)] == [1]
    assert text.term_counts(["hike"], every) == {"hike": 1}
    plan = plan_of(journal, lambda: text.search("hiking", every, 10))
    assert "SEARCH" not in plan, plan  # the match alone: no row looked up beside it
    plan = plan_of(journal, lambda: text.search("hiking", [MemoryType.EPISODIC], 10, 2))
    assert "SEARCH m " in plan and "SEARCH h " in plan, plan
    assert [h[0] for h in text.search("hiking", [MemoryType.EPISODIC], 10, 1)] == [1]
    assert text.search("hiking", [MemoryType.SEMANTIC], 10) == []


def test_patch_and_delete_are_logged(journal: Journal) -> None:
    journal.append_turns([entry(1, "I live in Oslo")])
    stored = journal.memory("ep1")
    assert stored is not None
    patched = Episode("ep1", "t1", "s1", "I live in Bergen", TS)
    seq = journal.patch_memory(patched, np.ones(4, dtype=np.float32)).seq
    assert journal.memory("ep1").memory.text == "I live in Bergen"
    assert journal.memory_embeddings([stored.num])[stored.num].tolist() == [1.0] * 4
    assert [h[0] for h in search(journal, "bergen", list(MemoryType), 5)] == [stored.num]
    assert search(journal, "oslo", list(MemoryType), 5) == []
    seq2 = journal.delete_memory("ep1").seq
    assert seq2 == seq + 1
    assert journal.memory("ep1") is None
    assert journal.nums(["ep1"]) == {"ep1": stored.num}
    with pytest.raises(JournalError):
        journal.delete_memory("ep1")
    kinds = [e.kind for e in journal.entries()]
    assert kinds == [LogKind.TURN, LogKind.MEMORY_PATCH, LogKind.MEMORY_DELETE]


def test_entries_after_seq_in_batches(journal: Journal) -> None:
    journal.append_turns([entry(i, f"turn number {i}") for i in range(1, 8)])
    assert [e.seq for e in journal.entries(after_seq=3, batch=2)] == [4, 5, 6, 7]
    assert journal.max_seq() == 7


def test_memories_roundtrip_with_entities(journal: Journal) -> None:
    turn = Turn("t9", "s1", Role.USER, "I'm allergic to ibuprofen", TS)
    fact = Fact(
        "f9", "t9", "allergic_to", Entity("e1", "ibuprofen"), "allergic to ibuprofen", valid_from=TS
    )
    journal.append_turns([TurnEntry(turn, np.zeros(4, np.float32), [fact], receipt(9))])
    stored = journal.memory("f9")
    assert stored.type is MemoryType.SEMANTIC
    assert stored.memory == fact
    listed = journal.list_memories([MemoryType.SEMANTIC], limit=10)
    assert [s.memory.id for s in listed] == ["f9"]


def test_turns_page_by_session(journal: Journal) -> None:
    journal.append_turns(
        [entry(1, "a one", "s1"), entry(2, "b two", "s2"), entry(3, "c three", "s1")]
    )
    page = journal.turns("s1", limit=1)
    assert [t.turn_id for _, t in page] == ["t1"]
    page2 = journal.turns("s1", limit=5, after_seq=page[-1][0])
    assert [t.turn_id for _, t in page2] == ["t3"]


def test_closed_journal_refuses(tmp_path: Path) -> None:
    j = open_journal(tmp_path / "j.sqlite")
    j.db.close()
    with pytest.raises(ClosedError):
        j.append_turns([entry(1, "x")])
    with pytest.raises(ClosedError):
        j.max_seq()


def test_neighbour_episodes_are_the_turns_beside_in_the_same_session(journal: Journal) -> None:
    journal.append_turns(
        [entry(1, "a", "s1"), entry(2, "b", "s2"), entry(3, "c", "s1"), entry(4, "d", "s1")]
    )
    journal.append_turns([entry(5, "e", "s1"), entry(6, "f", "s3")])
    nums = {s.memory.turn_id: s.num for s in journal.list_memories([MemoryType.EPISODIC], 10)}
    of = {turn_id: (num, f"ep{turn_id[1:]}") for turn_id, num in nums.items()}
    beside = journal.neighbour_episodes(["t1", "t3", "t5", "t6"])
    assert beside["t1"] == [of["t3"]]  # nothing before the first; t2 is another session
    assert beside["t3"] == [of["t1"], of["t4"]]  # earlier first
    assert beside["t5"] == [of["t4"]]  # nothing after the last
    assert "t6" not in beside  # alone in its session
    journal.delete_memory("ep4")
    assert journal.neighbour_episodes(["t3"]) == {"t3": [of["t1"]]}


def test_neighbour_episodes_search_by_turn_never_walk_a_type(journal: Journal) -> None:
    """A plan that walks the episodes by type took a 10k-turn query from 26 to 268 ms."""
    journal.append_turns([entry(i, f"turn {i}", f"s{i // 4}") for i in range(1, 41)])
    assert journal.neighbour_episodes(["t5", "t9"])
    plan = plan_of(journal, lambda: journal.neighbour_episodes(["t5", "t9"]))
    assert "SCAN" not in plan and "memories_by_type" not in plan, plan


def task_entry(n: int, *statuses: TaskStatus) -> TurnEntry:
    turn = Turn(f"t{n}", "s1", Role.USER, f"task {n}", TS, labels=(Label.WORKING,))
    states = [State(f"st{n}-{i}", s, TS) for i, s in enumerate(statuses)]
    task = Task(f"k{n}", turn.turn_id, f"task {n}", f"task {n}", states=states)
    return TurnEntry(turn, np.zeros(4, np.float32), [task], receipt(n))


def plan_of(journal: Journal, read) -> str:
    """The query plans of the statements ``read()`` runs on this thread's connection."""
    statements: list[str] = []
    reader = journal.db._reader()
    reader.set_trace_callback(statements.append)
    read()
    reader.set_trace_callback(None)
    assert statements
    statements = [sql for sql in statements if not sql.startswith("--")]  # sqlite3's own reads
    plans = [journal.db.read(f"EXPLAIN QUERY PLAN {sql}") for sql in statements]
    return " | ".join(row[3] for plan in plans for row in plan)


def test_task_heads_and_counts_follow_every_logged_change(journal: Journal) -> None:
    """Both are kept between reads: a kept value that outlived a write would be a stale read."""
    journal.append_turns([task_entry(1), task_entry(2, TaskStatus.PENDING, TaskStatus.DONE)])
    working = [MemoryType.WORKING]
    heads = journal.task_heads()
    assert [(h.id, h.status, h.ts) for h in heads] == [
        ("k1", TaskStatus.PENDING, None),
        ("k2", TaskStatus.DONE, TS),
    ]
    assert isinstance(heads[0], TaskHead) and journal.live_count(working) == 2
    assert journal.task_heads() is heads  # kept
    done = Task("k1", "t1", "task 1", "task 1", states=[State("st", TaskStatus.CANCELLED, TS)])
    journal.patch_memory(done)
    assert [h.status for h in journal.task_heads()] == [TaskStatus.CANCELLED, TaskStatus.DONE]
    journal.delete_memory("k2")
    assert [h.id for h in journal.task_heads()] == ["k1"]
    assert journal.live_count(working) == 1
    journal.append_turns([task_entry(3)])
    assert journal.live_count(working) == 2 and len(journal.task_heads()) == 2


def test_facts_of_a_few_relations_are_read_by_relation(journal: Journal) -> None:
    """Read by type, every fact was read to find a health profile's few: 5 ms at 10k turns."""
    facts = [
        Fact(f"f{n}", f"t{n}", relation, Entity(f"e{n}", f"x{n}"), f"fact {n}")
        for n, relation in enumerate(["likes", "allergy", "medication", "likes", "allergy"])
    ]
    journal.append_turns(
        [
            TurnEntry(Turn(f.turn_id, "s1", Role.USER, f.text, TS), np.zeros(4), [f], receipt(n))
            for n, f in enumerate(facts)
        ]
    )
    found = journal.facts(relations=["allergy", "medication"], limit=2)
    assert [s.memory.id for s in found] == ["f1", "f2"]
    health = HEALTH_PROFILE  # with this many, the planner preferred the type index
    plan = plan_of(journal, lambda: journal.facts(relations=health, limit=10))
    assert "facts_by_relation" in plan and "memories_by_type" not in plan, plan
