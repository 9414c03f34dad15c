from pathlib import Path

import numpy as np
import pytest

from memoryd.errors import ClosedError
from memoryd.models import MemoryType
from memoryd.store.vectors import INITIAL_CAPACITY, VectorStore

DIM = 8


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_search_finds_the_exact_vector(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    vecs = unit(rng, 50)
    store = VectorStore(tmp_path, DIM)
    store.add(1, MemoryType.EPISODIC, list(range(50)), vecs)
    hits = store.search(vecs[17], [MemoryType.EPISODIC], 3)
    assert hits[0][0] == 17 and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert hits[0][2] is MemoryType.EPISODIC
    assert store.search(vecs[17], [MemoryType.SEMANTIC], 3) == []


def test_search_within_a_pool_keeps_to_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vecs = unit(rng, 300)
    store = VectorStore(tmp_path, DIM)
    store.add(1, MemoryType.EPISODIC, list(range(300)), vecs)
    store.remove(2, MemoryType.EPISODIC, 7)
    pool = set(range(0, 300, 10))  # 30 labels, 0 and 290 among them; 7 is not, and deleted
    pool.add(7)
    query = vecs[150]
    hits = store.search(query, [MemoryType.EPISODIC], 10, within=pool)
    members = sorted(pool - {7})
    exact = sorted(members, key=lambda n: -float(vecs[n] @ query))[:10]
    assert [h[0] for h in hits] == exact and hits[0][0] == 150
    # asked for more than the pool holds: every live member, once
    everything = store.search(query, [MemoryType.EPISODIC], 100, within=pool)
    assert sorted(h[0] for h in everything) == members
    assert store.search(query, [MemoryType.EPISODIC], 5, within={7, 1000}) == []


def test_types_are_separate_and_merged_by_score(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    vecs = unit(rng, 4)
    store = VectorStore(tmp_path, DIM)
    store.add(1, MemoryType.EPISODIC, [1, 2], vecs[:2])
    store.add(2, MemoryType.SEMANTIC, [3, 4], vecs[2:])
    hits = store.search(vecs[3], list(MemoryType), 4)
    assert hits[0][:1] == (4,) and hits[0][2] is MemoryType.SEMANTIC
    assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)


def test_grows_past_initial_capacity(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    n = INITIAL_CAPACITY + 100
    vecs = unit(rng, n)
    store = VectorStore(tmp_path, DIM)
    for start in range(0, n, 256):
        store.add(
            start + 1,
            MemoryType.WORKING,
            list(range(start, min(n, start + 256))),
            vecs[start : start + 256],
        )
    assert store.counts()["vectors_working"] == n
    assert store.search(vecs[n - 1], [MemoryType.WORKING], 1)[0][0] == n - 1


def test_remove_then_readd_revives(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vecs = unit(rng, 3)
    store = VectorStore(tmp_path, DIM)
    store.add(1, MemoryType.EPISODIC, [10, 11, 12], vecs)
    assert store.remove(2, MemoryType.EPISODIC, 11)
    assert not store.remove(3, MemoryType.EPISODIC, 11)
    assert 11 not in [h[0] for h in store.search(vecs[1], [MemoryType.EPISODIC], 3)]
    store.add(4, MemoryType.EPISODIC, [11], vecs[1:2])
    assert store.search(vecs[1], [MemoryType.EPISODIC], 1)[0][0] == 11
    assert store.applied_seq == 4


def test_save_and_load_keep_vectors_deletions_and_seq(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    vecs = unit(rng, 5)
    store = VectorStore(tmp_path, DIM)
    store.add(7, MemoryType.PROCEDURAL, list(range(5)), vecs)
    store.remove(8, MemoryType.PROCEDURAL, 2)
    store.save()
    store.close()
    again = VectorStore(tmp_path, DIM)
    assert again.applied_seq == 8
    assert again.counts()["vectors_procedural"] == 4
    assert 2 not in [h[0] for h in again.search(vecs[2], [MemoryType.PROCEDURAL], 5)]


def test_unsaved_changes_are_not_claimed(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    store = VectorStore(tmp_path, DIM)
    store.add(3, MemoryType.EPISODIC, [1], unit(rng, 1))
    store.save()
    store.add(9, MemoryType.EPISODIC, [2], unit(rng, 1))
    again = VectorStore(tmp_path, DIM)  # as after a crash: only the save is on disk
    assert again.applied_seq == 3
    assert again.counts()["vectors_episodic"] == 1


def test_corrupt_state_starts_empty(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    store = VectorStore(tmp_path, DIM)
    store.add(3, MemoryType.EPISODIC, [1], unit(rng, 1))
    store.save()
    (tmp_path / "episodic.bin").write_bytes(b"garbage")
    again = VectorStore(tmp_path, DIM)
    assert again.applied_seq == 0
    assert again.counts()["vectors_episodic"] == 0


def test_closed_store_refuses_use(tmp_path: Path) -> None:
    store = VectorStore(tmp_path, DIM)
    store.close()
    with pytest.raises(ClosedError):
        store.search(np.zeros(DIM, dtype=np.float32), [MemoryType.EPISODIC], 1)
