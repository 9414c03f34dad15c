"""The journal's mentions index: written with the episodes, read by a query's expansion."""

from pathlib import Path

import pytest

import memoryd.store.mentions as mentions_module
from memoryd.models import Entity, EntityType, Episode, Mention
from memoryd.store.journal import Journal
from memoryd.store.mentions import MentionIndex
from memoryd.store.records import TurnEntry
from memoryd.store.sqlite import Database
from test_journal import entry as journal_entry


def person(name: str) -> Entity:
    return Entity(f"person:{name.lower()}", name, EntityType.PERSON)


def entry(n: int, *names: str) -> TurnEntry:
    """Turn ``t<n>`` of session s1, its episode ``ep<n>`` mentioning ``names``."""
    return journal_entry(n, f"turn {n}", mentions=[Mention(person(name)) for name in names])


def episode(n: int, *names: str) -> Episode:
    memory = entry(n, *names).memories[0]
    assert isinstance(memory, Episode)
    return memory


@pytest.fixture
def journal(tmp_path: Path):
    j = Journal(Database(tmp_path / "journal.sqlite"))
    yield j
    j.db.close()


def ids(*names: str) -> list[str]:
    return [person(name).id for name in names]


def test_most_shared_first_then_latest(journal: Journal) -> None:
    journal.append_turns(
        [
            entry(1, "Ann", "Bob", "Cy"),
            entry(2, "Ann", "Bob"),
            entry(3, "Cy"),
            entry(4, "Dee"),
            entry(5, "Ann", "Bob", "Cy"),
            entry(6, "Cy", "Cy"),  # named twice, counted once
        ]
    )
    index = MentionIndex(journal.db)
    nums = journal.nums(["ep1", "ep5"])
    shared = index.episodes_sharing(ids("Ann", "Bob", "Cy"), [nums["ep1"]], 10)
    assert shared == [("ep5", 3), ("ep2", 2), ("ep6", 1), ("ep3", 1)]
    assert index.episodes_sharing(ids("Ann", "Bob", "Cy"), list(nums.values()), 2) == [
        ("ep2", 2),
        ("ep6", 1),
    ]
    assert index.episodes_sharing(ids("Dee"), journal.nums(["ep4"]).values(), 10) == []
    assert index.episodes_sharing(ids("Nobody"), [], 10) == []
    assert index.episodes_sharing([], [], 10) == []
    assert index.episodes_sharing(ids("Ann"), [], 0) == []


def test_follows_patches_and_deletes(journal: Journal) -> None:
    journal.append_turns([entry(1, "Ann"), entry(2, "Ann", "Bob"), entry(3, "Bob")])
    index = MentionIndex(journal.db)
    journal.patch_memory(episode(2, "Cy"))
    journal.delete_memory("ep3")
    assert index.episodes_sharing(ids("Ann", "Bob"), [], 10) == [("ep1", 1)]
    assert index.episodes_sharing(ids("Cy"), [], 10) == [("ep2", 1)]


def test_an_entity_gives_its_latest_mentions_only(
    journal: Journal, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name said in thousands of turns costs a query no more than its latest mentions."""
    monkeypatch.setattr(mentions_module, "MENTIONS_READ", 2)
    journal.append_turns([entry(1, "Ann", "Bob"), entry(2, "Ann"), entry(3, "Ann")])
    index = MentionIndex(journal.db)
    assert index.episodes_sharing(ids("Ann"), [], 10) == [("ep3", 1), ("ep2", 1)]
    # ep1 shares Bob too: through Bob's mentions it still counts once, not twice.
    assert index.episodes_sharing(ids("Ann", "Bob"), [], 10) == [
        ("ep3", 1),
        ("ep2", 1),
        ("ep1", 1),
    ]


def test_a_journal_from_before_the_index_gets_it_once(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite"
    journal = Journal(Database(path))
    journal.append_turns([entry(1, "Ann"), entry(2, "Ann", "Bob")])
    journal.delete_memory("ep1")
    with journal.db.transaction() as conn:  # as a journal written before the table existed
        conn.execute("DELETE FROM mentions")
        conn.execute("DELETE FROM cursors WHERE name = 'mentions'")
    journal.db.close()

    reopened = Journal(Database(path))
    index = MentionIndex(reopened.db)
    assert index.episodes_sharing(ids("Ann", "Bob"), [], 10) == [("ep2", 2)]
    with reopened.db.transaction() as conn:
        conn.execute("DELETE FROM mentions WHERE entity_id = ?", (person("Bob").id,))
    reopened.db.close()

    again = Journal(Database(path))  # the backfill ran once: what it wrote is not redone
    assert MentionIndex(again.db).episodes_sharing(ids("Ann", "Bob"), [], 10) == [("ep2", 1)]
    again.db.close()
