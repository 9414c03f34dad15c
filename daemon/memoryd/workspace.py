"""One user's open stores and the projection of the journal onto the graph and vectors.

A :class:`Workspace` is created and held by :class:`memoryd.service.MemoryService` (the only holder
of per-user state). All writes run on the workspace's :class:`SerialWriter`: the journal commits
first (that is the acknowledgement), then each projection catches up from the seq it last applied.
A projection that fails is left behind and caught up on the next write or the next open, so a
failure never skips an entry.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path

import numpy as np

from memoryd.config import Config
from memoryd.errors import MemorydError
from memoryd.memory.entities import EntityResolver
from memoryd.memory.models import (
    Memory,
    MemoryType,
    Turn,
    memory_type,
)
from memoryd.store.graph import GraphEngine, GraphStore
from memoryd.store.headers import HeaderStore
from memoryd.store.journal import (
    Journal,
    LogEntry,
    LogKind,
    MemoryChange,
    Relabel,
    TurnEntry,
    change_of_payload,
    memory_of_record,
    turn_of_payload,
    updates_of_payload,
)
from memoryd.store.vectors import VectorStore
from memoryd.tiers import TierConfig, record_recall, refresh_persona
from memoryd.writer import SerialWriter

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.sqlite"
GRAPH_DIR = "graph"
VECTORS_DIR = "vectors"


class Workspace:
    """The journal, graph, vectors and writer of one user, opened together.

    Parameters: ``user_id`` (already validated), ``directory`` (``<data_dir>/users/<user_id>``),
    ``config`` (graph engine and sizes, vector parameters), ``dim`` (embedding size), ``embed``
    (the encoder, for entity canonicalisation). Opening replays whatever the projections have
    not applied yet.
    """

    def __init__(
        self,
        user_id: str,
        directory: Path,
        config: Config,
        dim: int,
        embed: Callable[[str], np.ndarray],
    ) -> None:
        self.user_id = user_id
        self._embed = embed
        self.directory = directory
        self.config = config
        directory.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(directory / JOURNAL_FILE)
        self.headers = HeaderStore(self.journal)
        self.tiers = TierConfig.from_config(config)
        self._recalls: list[tuple[list[int], datetime]] = []
        self._persona_due = False
        self.reshuffled_at: tuple[int, int, int] | None = None  # headers.activity() then
        self._pending_lock = threading.Lock()  # guards _recalls and _persona_due
        self.graph = self._open_graph()
        self.dim = dim
        self.vectors = self._open_vectors()
        self.writer = SerialWriter(user_id)
        self._graph_seq = self.graph.applied_seq()
        self._graph_failing = False
        self._unsaved = 0
        self.replayed_on_open = self.writer.call(self.catch_up)

    def _open_graph(self) -> GraphStore:
        return GraphStore(
            self.directory / GRAPH_DIR,
            GraphEngine(self.config.graph_engine),
            max_db_size=self.config.graph_max_db_size,
            buffer_pool_size=self.config.graph_buffer_pool_size,
        )

    def _open_vectors(self) -> VectorStore:
        return VectorStore(
            self.directory / VECTORS_DIR,
            self.dim,
            m=self.config.vectors_m,
            ef_construction=self.config.vectors_ef_construction,
            ef_search=self.config.vectors_ef_search,
        )

    @cached_property
    def entities(self) -> EntityResolver:
        """The user's entity registry, loaded on first use (writer thread only)."""
        return EntityResolver(
            self.journal.known_entities(),
            self._embed,
            threshold=self.config.memory_entity_threshold,
        )

    # -- writes (run on the writer thread) ---------------------------------------------------
    # A write that creates, changes or removes a fact has the persona rebuilt (and the drift
    # gate run) next on the writer, after the write's reply: one rebuild for any number of
    # writes queued meanwhile. A crash before it leaves the old persona, which the next fact
    # change replaces.

    def commit_turns(self, entries: Sequence[TurnEntry]) -> list[int]:
        """Journal ``entries`` in one transaction, then project them. Returns their seqs."""
        seqs = self.journal.append_turns(entries)
        for seq, entry in zip(seqs, entries, strict=True):
            if self._graph_seq == seq - 1:
                self._project_graph_turn(seq, entry.turn, [*entry.memories, *entry.updates])
            if self.vectors.applied_seq == seq - 1:
                self._project_vectors_turn(seq, entry.memories, entry.embedding)
        self.catch_up()
        self._facts_changed([m for e in entries for m in (*e.memories, *e.updates)])
        return seqs

    def patch_memory(
        self, memory: Memory, embedding: np.ndarray | None, importance: float | None = None
    ) -> int:
        seq = self.journal.patch_memory(memory, embedding, importance)
        self.catch_up()
        self._facts_changed([memory])
        return seq

    def delete_memory(self, memory_id: str) -> int:
        stored = self.journal.memory(memory_id)
        seq = self.journal.delete_memory(memory_id)
        self.catch_up()
        self._facts_changed([stored.memory] if stored else [])
        return seq

    def change(self, change: MemoryChange) -> int:
        """Journal memories created or changed outside a turn, then project them."""
        seq = self.journal.change_memories(change)
        self.catch_up()
        self._facts_changed([n.memory for n in change.created] + change.updates)
        return seq

    def relabel(self, relabel: Relabel) -> int:
        """Journal an LLM label for a deferred turn, then move its memories in the projections."""
        seq = self.journal.relabel_turn(relabel)
        self.catch_up()
        self._facts_changed([], always=True)  # it may have removed the turn's facts
        return seq

    def note_recall(self, nums: list[int], at: datetime) -> None:
        """Count a retrieval of ``nums`` later, on the writer, without waiting for it.

        Retrievals noted while a count is pending join it: one transaction (one fsync) for
        all of them, so a burst of queries does not queue a write each."""
        with self._pending_lock:
            self._recalls.append((nums, at))
            if len(self._recalls) > 1:
                return
        self.writer.submit(self._apply_recalls)

    def _apply_recalls(self) -> None:
        with self._pending_lock:
            pending, self._recalls = self._recalls, []
        if pending:
            nums = [n for batch, _ in pending for n in batch]
            at = max(when for _, when in pending)
            record_recall(self.journal, self.headers, nums, self.tiers, at)

    def _facts_changed(self, memories: Sequence[Memory], always: bool = False) -> None:
        if not always and all(memory_type(m) is not MemoryType.SEMANTIC for m in memories):
            return
        with self._pending_lock:
            if self._persona_due:
                return
            self._persona_due = True
        self.writer.submit(self._refresh_persona)

    def _refresh_persona(self) -> None:
        with self._pending_lock:
            self._persona_due = False
        refresh_persona(self.journal, self.headers, self.tiers)

    def catch_up(self) -> int:
        """Apply journal entries each projection has not applied; return how many were read."""
        start = min(self._graph_seq, self.vectors.applied_seq)
        if start >= self.journal.max_seq():
            return 0
        count = 0
        for entry in self.journal.entries(after_seq=start):
            count += 1
            if entry.seq > self._graph_seq and not self._apply_graph(entry):
                break
            if entry.seq > self.vectors.applied_seq:
                self._apply_vectors(entry)
        if count:
            log.info("user %s: replayed %d journal entries", self.user_id, count)
        self._maybe_save(count)
        return count

    def _apply_graph(self, entry: LogEntry) -> bool:
        if entry.kind is LogKind.TURN:
            turn, memories = turn_of_payload(entry.payload)
            updates = updates_of_payload(entry.payload)
            return self._project_graph_turn(entry.seq, turn, [*memories, *updates])
        if entry.kind is LogKind.MEMORY_CHANGE:
            change = change_of_payload(entry.ref, entry.payload)
            records = [n.memory for n in change.created] + change.updates
            return self._graph_write(
                entry.seq, lambda: self.graph.upsert_memories(entry.seq, records)
            )
        if entry.kind is LogKind.TURN_RELABEL:
            turn, memories = turn_of_payload(entry.payload)
            memories += updates_of_payload(entry.payload)
            removed = entry.payload["removed"]
            return self._graph_write(
                entry.seq, lambda: self.graph.relabel_turn(entry.seq, turn, memories, removed)
            )
        if entry.kind is LogKind.MEMORY_PATCH:
            memory = memory_of_record(entry.payload)
            return self._graph_write(
                entry.seq, lambda: self.graph.upsert_memories(entry.seq, [memory])
            )
        return self._graph_write(entry.seq, lambda: self.graph.delete_memory(entry.seq, entry.ref))

    def _project_graph_turn(self, seq: int, turn: Turn, memories: list[Memory]) -> bool:
        return self._graph_write(seq, lambda: self.graph.apply_turn(seq, turn, memories))

    def _graph_write(self, seq: int, write: Callable[[], None]) -> bool:
        """Run one graph write for journal ``seq``; on failure leave the graph behind it."""
        try:
            write()
        except MemorydError as exc:
            self._graph_failed(seq, exc)
            return False
        self._graph_applied(seq)
        return True

    def _graph_failed(self, seq: int, exc: MemorydError) -> None:
        """Log the first failure with its traceback, repeats in one line (they retry per write)."""
        if self._graph_failing:
            log.warning("user %s: graph still behind at seq %d: %s", self.user_id, seq, exc)
        else:
            log.error(
                "user %s: graph apply of seq %d failed; the journal has it and the graph"
                " will catch up",
                self.user_id,
                seq,
                exc_info=exc,
            )
        self._graph_failing = True

    def _graph_applied(self, seq: int) -> None:
        if self._graph_failing:
            log.info("user %s: graph caught up at seq %d", self.user_id, seq)
        self._graph_failing = False
        self._graph_seq = seq

    def _apply_vectors(self, entry: LogEntry) -> None:
        if entry.kind is LogKind.TURN:
            _, memories = turn_of_payload(entry.payload)
            embedding = self.journal.turn_embeddings([entry.ref])[entry.ref]
            self._project_vectors_turn(entry.seq, memories, embedding)
            return
        if entry.kind is LogKind.TURN_RELABEL:
            self._project_vectors_relabel(entry)
            return
        if entry.kind is LogKind.MEMORY_CHANGE:
            self._project_vectors_change(entry)
            return
        num = self.journal.nums([entry.ref]).get(entry.ref)
        if num is None:
            self.vectors.mark_applied(entry.seq)
            return
        mtype = MemoryType(entry.payload.get("type", MemoryType.EPISODIC))
        if entry.kind is LogKind.MEMORY_DELETE:
            for t in MemoryType:
                self.vectors.remove(entry.seq, t, num)
        elif "embedding" in entry.payload:
            vec = np.asarray(entry.payload["embedding"], dtype=np.float32)[None, :]
            self.vectors.add(entry.seq, mtype, [num], vec)
        else:
            self.vectors.mark_applied(entry.seq)

    def _project_vectors_turn(
        self, seq: int, memories: list[Memory], embedding: np.ndarray
    ) -> None:
        nums = self.journal.nums([m.id for m in memories])
        by_type: dict[MemoryType, list[int]] = defaultdict(list)
        for memory in memories:
            by_type[memory_type(memory)].append(nums[memory.id])
        for mtype, labels in by_type.items():
            self.vectors.add(seq, mtype, labels, np.repeat(embedding[None, :], len(labels), axis=0))
        self.vectors.mark_applied(seq)
        self._maybe_save(1)

    def _project_vectors_relabel(self, entry: LogEntry) -> None:
        """Take the turn's old and new memories out of every type's index, then add the new
        ones under their (possibly new) type with their stored vectors."""
        _, memories = turn_of_payload(entry.payload)
        nums = self.journal.nums([m.id for m in memories] + list(entry.payload["removed"]))
        for num in nums.values():
            for mtype in MemoryType:
                self.vectors.remove(entry.seq, mtype, num)
        self._index_stored(entry.seq, memories)

    def _project_vectors_change(self, entry: LogEntry) -> None:
        """Index the memories a change created, each with its own or its turn's vector."""
        created = change_of_payload(entry.ref, entry.payload).created
        self._index_stored(entry.seq, [n.memory for n in created])

    def _index_stored(self, seq: int, memories: Sequence[Memory]) -> None:
        """Add ``memories`` under their types with the vectors the journal holds for them."""
        nums = self.journal.nums([m.id for m in memories])
        vectors = self.journal.memory_embeddings(list(nums.values()))
        for memory in memories:
            num = nums[memory.id]
            if num in vectors:
                self.vectors.add(seq, memory_type(memory), [num], vectors[num][None, :])
        self.vectors.mark_applied(seq)
        self._maybe_save(1)

    def _maybe_save(self, changes: int) -> None:
        self._unsaved += changes
        if self._unsaved >= self.config.vectors_save_every:
            self.vectors.save()
            self._unsaved = 0

    def save(self) -> None:
        """Persist the vectors if anything changed since the last save."""
        if self.vectors.applied_seq != self.vectors.saved_seq:
            self.vectors.save()
            self._unsaved = 0

    # -- maintenance -------------------------------------------------------------------------

    def rebuild(self) -> dict[str, int]:
        """Empty graph and vectors and recreate them from the journal (runs on the writer)."""
        self.graph.clear()
        self._graph_seq = 0
        self.vectors.close()
        shutil.rmtree(self.directory / VECTORS_DIR, ignore_errors=True)
        self.vectors = self._open_vectors()
        replayed = self.catch_up()
        self.vectors.save()
        self._unsaved = 0
        return {"replayed": replayed, **self.counts()}

    def counts(self) -> dict[str, int]:
        out = dict(self.journal.counts())
        out.update(self.vectors.counts())
        out.update({f"graph_{k}": v for k, v in self.graph.counts().items()})
        return out

    def close(self) -> None:
        """Drain the writer, save vectors, close every store. Guarded per step and logged."""

        def _final() -> None:
            try:
                self.vectors.save()
            except MemorydError:
                log.exception("user %s: saving vectors on close failed", self.user_id)

        try:
            self.writer.call(_final)
        finally:
            self.writer.close()
            for name, store in (
                ("vectors", self.vectors),
                ("graph", self.graph),
                ("journal", self.journal),
            ):
                try:
                    store.close()
                except Exception:
                    log.exception("user %s: closing %s failed", self.user_id, name)
