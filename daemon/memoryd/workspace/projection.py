"""The journal's projections of one user: the graph and the vector indexes, kept caught up.

The journal commits first (that is the acknowledgement); then each projection applies the new
entries from the seq it last applied. A projection that fails is left behind and caught up on
the next write or the next open, so a failure never skips an entry. Everything here runs on the
user's writer thread.

    projection = Projection("alice", directory, config, dim=384, journal=journal)
    projection.after_turns(entries, written)   # fast path: the entries are in hand
    projection.catch_up()                      # anything else the journal has
"""

from __future__ import annotations

import logging
import shutil
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memoryd.config import Config
from memoryd.errors import DiskFullError, GraphError, MemorydError, VectorIndexError
from memoryd.models import Memory, MemoryType, Turn, memory_type
from memoryd.store import (
    GraphStore,
    Journal,
    LogEntry,
    LogKind,
    TurnEntry,
    VectorStore,
    Written,
    change_of_payload,
    memory_of_record,
    patch_embedding,
    turn_of_payload,
    updates_of_payload,
)

__all__ = ["Projection"]

log = logging.getLogger(__name__)

GRAPH_DIR = "graph"
GRAPH_BATCH = 32
"""Turns per graph transaction. A transaction's new rows live in the engine's buffer pool until it
commits: with a 64 MiB pool, transactions of 128 LoCoMo turns left the pool full after 1,000
turns, of 32 turns not (docs/decisions.md, "Encoder workers and batched graph writes")."""
VECTORS_DIR = "vectors"
MIN_FREE_BYTES = 2**20  # below this, a graph that fails to open is a full disk, not damage


class Projection:
    """The graph and vectors of one user and how far each has applied the journal.

    Parameters: ``user_id`` (for the logs), ``directory`` (the user's), ``config`` (graph
    engine and sizes, vector parameters), ``dim`` (embedding size), ``journal`` (the source).
    """

    def __init__(
        self, user_id: str, directory: Path, config: Config, dim: int, journal: Journal
    ) -> None:
        self.user_id = user_id
        self.directory = directory
        self.config = config
        self.dim = dim
        self.journal = journal
        self.graph = self._open_graph()
        self.vectors = self._open_vectors()
        self._graph_seq = self.graph.applied_seq()
        self._graph_failing = False
        self._unsaved = 0

    def _open_graph(self) -> GraphStore:
        """The user's graph. One the engine cannot open (a damaged file) is removed and made
        anew: the journal has everything it held, and catching up replays it."""
        try:
            return self._graph_store()
        except GraphError as exc:
            if shutil.disk_usage(self.directory).free < MIN_FREE_BYTES:
                raise DiskFullError(str(self.directory)) from exc  # not damage: keep the file
            log.warning("user %s: %s; rebuilding the graph from the journal", self.user_id, exc)
        for path in self.directory.glob(GRAPH_DIR + "*"):  # the database and its WAL
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        return self._graph_store()

    def _graph_store(self) -> GraphStore:
        g = self.config.graph
        return GraphStore(
            self.directory / GRAPH_DIR,
            g.engine,
            max_db_size=g.max_db_size,
            buffer_pool_size=g.buffer_pool_size,
        )

    def _open_vectors(self) -> VectorStore:
        v = self.config.vectors
        return VectorStore(
            self.directory / VECTORS_DIR,
            self.dim,
            m=v.m,
            ef_construction=v.ef_construction,
            ef_search=v.ef_search,
        )

    def after_turns(self, entries: Sequence[TurnEntry], written: Sequence[Written]) -> None:
        """Project freshly journaled turns from the entries in hand (no log decoding) where a
        projection is right behind them, then catch up with anything else. The graph takes the
        batch in transactions of GRAPH_BATCH turns; one that fails is caught up entry by entry."""
        seqs = [w.seq for w in written]
        pairs = list(zip(written, entries, strict=True))
        if not seqs or seqs != list(range(seqs[0], seqs[0] + len(seqs))):
            self.catch_up()  # not one run of the log: entry by entry
            return
        for start in range(0, len(pairs), GRAPH_BATCH):
            if self._graph_seq != seqs[start] - 1:
                break
            self._project_graph_turns(pairs[start : start + GRAPH_BATCH])
        if self.vectors.applied_seq == seqs[0] - 1:
            self._project_vectors_turns([(w.seq, e.memories, e.embedding) for w, e in pairs])
        self.catch_up()

    def catch_up(self) -> int:
        """Apply journal entries each projection has not applied; return how many were read.

        Runs of turns are applied GRAPH_BATCH at a time, one graph transaction and one vector
        insert per type each (a run the graph refuses is applied turn by turn); any other entry
        alone, after the run before it."""
        start = min(self._graph_seq, self.vectors.applied_seq)
        if start >= self.journal.max_seq():
            return 0
        count = 0
        graph_run: list[LogEntry] = []
        vector_run: list[LogEntry] = []
        for entry in self.journal.entries(after_seq=start):
            count += 1
            if entry.seq > self._graph_seq and not self._graph_entry(entry, graph_run):
                break
            if entry.seq > self.vectors.applied_seq:
                self._vector_entry(entry, vector_run)
        self._apply_graph_run(graph_run)
        self._apply_vector_run(vector_run)
        if count:
            log.info("user %s: replayed %d journal entries", self.user_id, count)
        self._maybe_save(count)
        return count

    def _graph_entry(self, entry: LogEntry, run: list[LogEntry]) -> bool:
        """Queue a turn on ``run`` (applied once it is full), or apply the run and then the
        entry; False once a graph write failed."""
        if entry.kind is LogKind.TURN:
            run.append(entry)
            return len(run) < GRAPH_BATCH or self._apply_graph_run(run)
        return self._apply_graph_run(run) and self._apply_graph(entry)

    def _apply_graph_run(self, run: list[LogEntry]) -> bool:
        """Apply (and empty) a run of turn entries in one graph transaction, or turn by turn
        when that fails; False once a turn failed."""
        if not run:
            return True
        batch = [(entry.seq, *_graph_turn(entry)) for entry in run]
        run.clear()
        try:
            self.graph.apply_turns(batch)
        except MemorydError as exc:
            log.info(
                "user %s: %d turns in one graph transaction failed (%s); one by one",
                self.user_id,
                len(batch),
                exc,
            )
            return all(self._project_graph_turn(*turn) for turn in batch)
        self._graph_applied(batch[-1][0])
        return True

    def _vector_entry(self, entry: LogEntry, run: list[LogEntry]) -> None:
        """Queue a turn on ``run`` (indexed once it is full), or index the run and then the
        entry."""
        if entry.kind is LogKind.TURN:
            run.append(entry)
            if len(run) == GRAPH_BATCH:
                self._apply_vector_run(run)
            return
        self._apply_vector_run(run)
        self._apply_vectors(entry)

    def _apply_vector_run(self, run: list[LogEntry]) -> None:
        """Index (and empty) a run of turn entries, one insert per memory type."""
        if not run:
            return
        embeddings = self.journal.turn_embeddings([entry.ref for entry in run])
        turns = [(e.seq, turn_of_payload(e.payload)[1], embeddings[e.ref]) for e in run]
        run.clear()
        self._project_vectors_turns(turns)

    def _apply_graph(self, entry: LogEntry) -> bool:
        """Apply one entry other than a turn to the graph; False if the write failed."""
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

    def _project_graph_turns(self, pairs: Sequence[tuple[Written, TurnEntry]]) -> bool:
        batch = [(w.seq, e.turn, [*e.memories, *e.updates]) for w, e in pairs]
        return self._graph_write(pairs[-1][0].seq, lambda: self.graph.apply_turns(batch))

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
        """Apply one entry other than a turn to the vectors."""
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
        elif (vec := patch_embedding(entry.payload)) is not None:
            self.vectors.add(entry.seq, mtype, [num], vec[None, :])
        else:
            self.vectors.mark_applied(entry.seq)

    def _project_vectors_turns(
        self, turns: Sequence[tuple[int, Sequence[Memory], np.ndarray]]
    ) -> None:
        """Index the memories of journaled turns ``(seq, memories, turn vector)``: each memory
        of a turn under its type with the turn's vector, one index insert per type."""
        nums = self.journal.nums([m.id for _, memories, _ in turns for m in memories])
        labels: dict[MemoryType, list[int]] = defaultdict(list)
        rows: dict[MemoryType, list[np.ndarray]] = defaultdict(list)
        for _, memories, embedding in turns:
            for memory in memories:
                labels[memory_type(memory)].append(nums[memory.id])
                rows[memory_type(memory)].append(embedding)
        last = turns[-1][0]
        for mtype, of_type in labels.items():
            self.vectors.add(last, mtype, of_type, np.stack(rows[mtype]))
        self.vectors.mark_applied(last)
        self._maybe_save(len(turns))

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
        """Save the vectors every ``vectors.save_every`` changes. A save that fails (a full
        disk) is logged and tried again after as many changes or by the save job: the journal
        has what the vectors hold, and replays it past the last saved state."""
        self._unsaved += changes
        if self._unsaved < self.config.vectors.save_every:
            return
        self._unsaved = 0
        try:
            self.vectors.save()
        except VectorIndexError as exc:
            log.warning(
                "user %s: saving the vectors failed, tried again later: %s", self.user_id, exc
            )

    def save(self) -> None:
        """Persist the vectors if anything changed since the last save, and checkpoint the
        graph if it was written since its last checkpoint. A checkpoint that fails is logged
        and tried again at the next save (the engine also checkpoints at its threshold): the
        save job goes on to the other users."""
        if self.vectors.applied_seq != self.vectors.saved_seq:
            self.vectors.save()
            self._unsaved = 0
        try:
            self.graph.checkpoint()
        except MemorydError as exc:
            log.warning("user %s: graph checkpoint failed: %s", self.user_id, exc)

    # -- maintenance -------------------------------------------------------------------------

    def rebuild(self, graph: bool = True, vectors: bool = True) -> int:
        """Empty the graph and/or the vectors and recreate them from the journal; returns the
        entries replayed."""
        if graph:
            self.graph.clear()
            self._graph_seq = 0
        if vectors:
            self.vectors.close()
            shutil.rmtree(self.directory / VECTORS_DIR, ignore_errors=True)
            self.vectors = self._open_vectors()
        replayed = self.catch_up()
        self.vectors.save()
        self._unsaved = 0
        return replayed

    def reconcile(self) -> list[str]:
        """Rebuild a projection that, caught up, still disagrees with the journal (a file lost
        or damaged while the daemon was stopped): the graph must hold every turn, the vectors
        one vector per live memory with an embedding. Returns the projections rebuilt."""
        turns = self.journal.counts()["turns"]
        graph_turns = self.graph.counts()["Turn"]
        embedded = self.journal.embedded_counts()
        vectors = self.vectors.counts()
        wrong_vectors = {
            t.value: (vectors[f"vectors_{t.value}"], embedded.get(t, 0))
            for t in MemoryType
            if vectors[f"vectors_{t.value}"] != embedded.get(t, 0)
        }
        rebuilt = [
            name
            for name, wrong in (("graph", graph_turns != turns), ("vectors", wrong_vectors))
            if wrong
        ]
        if not rebuilt:
            return []
        log.warning(
            "user %s: projections disagree with the journal (graph %d of %d turns; vectors "
            "held/expected by type %s): rebuilding %s",
            self.user_id,
            graph_turns,
            turns,
            wrong_vectors or "as expected",
            " and ".join(rebuilt),
        )
        replayed = self.rebuild(graph="graph" in rebuilt, vectors="vectors" in rebuilt)
        log.info(
            "user %s: rebuilt %s from %d journal entries",
            self.user_id,
            " and ".join(rebuilt),
            replayed,
        )
        return rebuilt

    def counts(self, graph: bool = True) -> dict[str, int]:
        out = dict(self.vectors.counts())
        if graph:
            out.update({f"graph_{k}": v for k, v in self.graph.counts().items()})
        return out

    def close(self) -> None:
        """Save the vectors and close both projections; each step guarded and logged."""
        try:
            self.vectors.save()
        except MemorydError:
            log.exception("user %s: saving vectors on close failed", self.user_id)
        for name, store in (("vectors", self.vectors), ("graph", self.graph)):
            try:
                store.close()
            except Exception:
                log.exception("user %s: closing %s failed", self.user_id, name)


def _graph_turn(entry: LogEntry) -> tuple[Turn, list[Memory]]:
    """A turn entry's turn and what the graph writes for it: its memories and the ones it
    updated (superseded facts)."""
    turn, memories = turn_of_payload(entry.payload)
    return turn, [*memories, *updates_of_payload(entry.payload)]
