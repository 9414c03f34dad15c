"""Per-user vector indexes: one hnswlib index per memory type, labelled by ``memories.num``.

Vectors are L2-normalised, so the inner-product space ranks by cosine. An index records the last
journal ``seq`` it applied in ``state.json``; the service replays the journal past it on open. Saves
are atomic (write to a temporary file, then rename), so a crash leaves the previous save intact.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence, Set
from pathlib import Path

import hnswlib
import numpy as np

from memoryd.errors import ClosedError, VectorIndexError
from memoryd.files import fsync_file, replace_durably
from memoryd.models import MemoryType

log = logging.getLogger(__name__)

STATE_FILE = "state.json"
INITIAL_CAPACITY = 1024
GROWTH = 1.25  # capacity grows by a quarter: an index is ~1.7 KB per slot, doubling wastes MBs
FORMAT_VERSION = 1


class TypeIndex:
    """One hnswlib index. All calls hold one lock: hnswlib cannot search while it resizes."""

    def __init__(self, dim: int, m: int, ef_construction: int, ef_search: int) -> None:
        self.dim, self.m, self.ef_construction, self.ef_search = dim, m, ef_construction, ef_search
        self._lock = threading.Lock()
        self._index = self._new(INITIAL_CAPACITY)
        self._live: set[int] = set()

    def _new(self, capacity: int) -> hnswlib.Index:
        index = hnswlib.Index(space="ip", dim=self.dim)
        index.init_index(
            max_elements=capacity,
            M=self.m,
            ef_construction=self.ef_construction,
            allow_replace_deleted=False,
        )
        index.set_ef(self.ef_search)
        return index

    def __len__(self) -> int:
        return len(self._live)

    def add(self, labels: Sequence[int], vectors: np.ndarray) -> None:
        """Insert or replace vectors under integer labels; re-adding a removed label revives it."""
        if not len(labels):
            return
        with self._lock:
            need = self._index.get_current_count() + len(labels)
            if need > self._index.get_max_elements():
                grown = int(self._index.get_max_elements() * GROWTH)
                self._index.resize_index(max(need, grown))
            self._index.add_items(np.asarray(vectors, dtype=np.float32), list(labels))
            self._live.update(labels)

    def remove(self, label: int) -> bool:
        with self._lock:
            if label not in self._live:
                return False
            self._index.mark_deleted(label)
            self._live.discard(label)
            return True

    def search(
        self, vector: np.ndarray, k: int, within: Set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Top ``k`` (label, cosine) pairs, best first, among the labels ``within`` if given
        (hnswlib's filtered search: it walks the graph until it has ``k`` allowed labels, so a
        pool that is a small share of the index is better searched exactly); [] when empty."""
        with self._lock:
            k = min(k, len(self._live if within is None else self._live & within))
            if k == 0:
                return []
            self._index.set_ef(max(self.ef_search, k))
            allowed = None if within is None else within.__contains__
            return self._knn(np.asarray(vector, dtype=np.float32), k, allowed)

    def _knn(
        self, query: np.ndarray, k: int, allowed: Callable[[int], bool] | None
    ) -> list[tuple[int, float]]:
        """hnswlib's search under the lock, asking for fewer labels when the graph cannot reach
        ``k`` allowed ones (deletions can cut it apart)."""
        while k > 0:
            try:
                labels, distances = self._index.knn_query(query, k=k, filter=allowed)
            except RuntimeError:
                k //= 2
                continue
            pairs = zip(labels[0], distances[0], strict=True)
            return [(int(label), 1.0 - float(distance)) for label, distance in pairs]
        return []

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        with self._lock:
            self._index.save_index(str(tmp))
        fsync_file(tmp)
        os.replace(tmp, path)

    def load(self, path: Path) -> None:
        with self._lock:
            index = hnswlib.Index(space="ip", dim=self.dim)
            index.load_index(str(path), allow_replace_deleted=False)
            index.set_ef(self.ef_search)
            self._index = index
            ids = set(index.get_ids_list())
            deleted = {i for i in ids if _is_deleted(index, i)}
            self._live = ids - deleted


def _is_deleted(index: hnswlib.Index, label: int) -> bool:
    try:
        index.get_items([label])
    except RuntimeError:
        return True
    return False


class VectorStore:
    """The four per-type indexes of one user, persisted under ``directory``.

    Contract: ``add``/``remove`` are called by the user's single writer; ``search`` may run from
    any thread. ``applied_seq`` is the last journal seq whose vectors are in memory; ``save``
    persists the indexes and that seq together (state.json is written last, so a crash between
    files leaves an older seq and the replay re-applies, which is idempotent).
    """

    def __init__(
        self,
        directory: Path,
        dim: int,
        *,
        m: int = 16,
        ef_construction: int = 100,
        ef_search: int = 64,
    ) -> None:
        self.directory = directory
        self.dim = dim
        self._indexes = {t: TypeIndex(dim, m, ef_construction, ef_search) for t in MemoryType}
        self.applied_seq = 0
        self.saved_seq = 0
        self._closed = False
        directory.mkdir(parents=True, exist_ok=True)
        self._load()

    def _path(self, mtype: MemoryType) -> Path:
        return self.directory / f"{mtype.value}.bin"

    def _load(self) -> None:
        state_path = self.directory / STATE_FILE
        if not state_path.exists():
            return
        try:
            state = json.loads(state_path.read_text())
            if state.get("version") != FORMAT_VERSION or state.get("dim") != self.dim:
                log.warning("vector index at %s has another format; rebuilding", self.directory)
                return
            for mtype, index in self._indexes.items():
                if self._path(mtype).exists():
                    index.load(self._path(mtype))
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning("vector index at %s unreadable (%s); rebuilding", self.directory, exc)
            self._indexes = {
                t: TypeIndex(self.dim, i.m, i.ef_construction, i.ef_search)
                for t, i in self._indexes.items()
            }
            return
        self.applied_seq = self.saved_seq = int(state["applied_seq"])

    def _check(self) -> None:
        if self._closed:
            raise ClosedError("vector store")

    def add(self, seq: int, mtype: MemoryType, labels: Sequence[int], vectors: np.ndarray) -> None:
        self._check()
        try:
            self._indexes[mtype].add(labels, vectors)
        except RuntimeError as exc:
            raise VectorIndexError(f"add to {mtype.value} failed: {exc}") from exc
        self.applied_seq = max(self.applied_seq, seq)

    def remove(self, seq: int, mtype: MemoryType, label: int) -> bool:
        self._check()
        removed = self._indexes[mtype].remove(label)
        self.applied_seq = max(self.applied_seq, seq)
        return removed

    def mark_applied(self, seq: int) -> None:
        self.applied_seq = max(self.applied_seq, seq)

    def search(
        self,
        vector: np.ndarray,
        types: Sequence[MemoryType],
        k: int,
        within: Set[int] | None = None,
    ) -> list[tuple[int, float, MemoryType]]:
        """Top ``k`` over the given types (and labels ``within``, if given): (label, cosine,
        type), best first."""
        self._check()
        hits = [
            (label, score, mtype)
            for mtype in types
            for label, score in self._indexes[mtype].search(vector, k, within)
        ]
        hits.sort(key=lambda h: h[1], reverse=True)
        return hits[:k]

    def counts(self) -> dict[str, int]:
        return {f"vectors_{t.value}": len(i) for t, i in self._indexes.items()}

    def size(self, types: Sequence[MemoryType]) -> int:
        """How many live vectors the indexes of ``types`` hold."""
        self._check()
        return sum(len(self._indexes[t]) for t in types)

    def save(self) -> None:
        """Persist all indexes, then state.json (atomic renames)."""
        self._check()
        try:
            for mtype, index in self._indexes.items():
                index.save(self._path(mtype))
            state = {"version": FORMAT_VERSION, "dim": self.dim, "applied_seq": self.applied_seq}
            tmp = self.directory / (STATE_FILE + ".tmp")
            tmp.write_text(json.dumps(state))
            # the indexes are on the disk before the state that says what they hold
            replace_durably(tmp, self.directory / STATE_FILE)
        except (OSError, RuntimeError) as exc:
            raise VectorIndexError(f"save to {self.directory} failed: {exc}") from exc
        self.saved_seq = self.applied_seq

    def close(self) -> None:
        """Release the indexes' memory now (~3-7 MB each, half of it hnswlib's lock tables), not
        whenever the garbage collector reaches whatever still refers to this store."""
        if not self._closed:
            self._closed = True
            self._indexes = {}
