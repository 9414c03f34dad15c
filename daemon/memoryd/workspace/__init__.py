"""One user's workspace: the stores of the user, the writer they share, and every per-user
command and piece of per-user state, so that closing a workspace frees all of it.

    ws = Workspace("alice", data_dir / "users" / "alice", shared)   # opens, replays
    ws.ingest([NewTurn(...)], now)          # route, build, fold, journal, project
    ws.recall(vector, params, retriever)    # tiered retrieval; recalls counted after
    ws.edits.create_task("call the dentist", due, None, now)
    ws.tiers.reshuffle(now)
    ws.close()

All writes run on the workspace's :class:`SerialWriter` (one writer per user: the graph engine
allows one write transaction, SQLite one writer per file). A write journals first, in one
transaction across the stores of the journal file (:mod:`memoryd.workspace.writes`); the graph
and vectors catch up after it (:mod:`memoryd.workspace.projection`). The workspace's parts, one
subject each:

- :mod:`~memoryd.workspace.writes`: the journal writes and their projection;
- :mod:`~memoryd.workspace.edits`: memory edits, facts, tasks, feedback, expiry;
- :mod:`~memoryd.workspace.tiering`: recalls, the persona, reshuffles, LLM importance;
- :mod:`~memoryd.workspace.routing`: the user's router head, LLM labels, training rounds;
- :mod:`~memoryd.workspace.abstraction`: the LLM abstraction pass over new episodes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property, partial
from pathlib import Path

import numpy as np

from memoryd.config import Config
from memoryd.encoder import Encoded, Encoder
from memoryd.heap import release_free_memory
from memoryd.ingest import NewTurn, Prepared, fold_entries, prepare
from memoryd.llm import LLM
from memoryd.memory import EntityResolver, Named, named_in
from memoryd.models import Receipt, Role, Turn
from memoryd.reader import FactReader, Heard, ReadFact
from memoryd.retrieve import QueryParams, QueryResult, Retriever, Stores
from memoryd.router import SelfEnhancingRouter
from memoryd.store import (
    ActivePool,
    Database,
    HeaderStore,
    Journal,
    MentionIndex,
    RouterStore,
    TextSearch,
)
from memoryd.workspace.abstraction import abstract_user
from memoryd.workspace.edits import MemoryEdits, MemoryPatch, UndoneFact
from memoryd.workspace.projection import Projection
from memoryd.workspace.reread import FactReread, RereadReport
from memoryd.workspace.routing import LABEL_OUTCOMES, UserRouter
from memoryd.workspace.tiering import UserTiers
from memoryd.workspace.writes import Writes
from memoryd.writer import SerialWriter

__all__ = [
    "JOURNAL_FILE",
    "LABEL_OUTCOMES",
    "MemoryPatch",
    "RereadReport",
    "Shared",
    "UndoneFact",
    "Workspace",
]

log = logging.getLogger(__name__)

JOURNAL_FILE = "journal.sqlite"
Hearing = tuple[list[ReadFact], Named | None]
"""What the reader reads of a turn, and the stored values the turn may name."""
TRIM_AFTER = 32
"""New turns in one request after which the heap's free memory goes back to the kernel: a bulk
import leaves tens of MB free but resident (:func:`memoryd.heap.release_free_memory`)."""


@dataclass(frozen=True)
class Shared:
    """What every user's workspace uses and no user owns: the settings, the encoder, the
    self-enhancing router's shared part, the LLM (None: no LLM), the encoder workers that
    embed the turns of a batch (``encoder.workers`` threads) and the fact reader (with the
    inventory's slots)."""

    config: Config
    encoder: Encoder
    router: SelfEnhancingRouter
    llm: LLM | None
    encoding: Executor
    reader: FactReader

    def read_facts(self, role: Role, text: str, encoded: Encoded) -> Hearing:
        """What the reader reads of a user or log turn from its encoder pass, and the stored
        values it may name (an assistant's turn states none of the user's facts and ends
        none: not read)."""
        if role is Role.ASSISTANT:
            return [], None
        reader = self.reader
        facts, heard = reader.hear(text, self.encoder.read(encoded), encoded.offsets)
        return facts, named_in(heard, reader.judge, reader.slots)

    def read_stored(self, turn: Turn) -> Hearing:
        """:meth:`read_facts` for a stored turn, encoding its text again; its head states are
        not kept (a reread reads every turn before it folds them): the judge hears it again
        when a value it names is to be judged."""
        if turn.role is Role.ASSISTANT:
            return [], None
        facts, named = self.read_facts(turn.role, turn.text, self.encoder.encode(turn.text))
        if named is None:
            return facts, None
        return facts, dataclasses.replace(named, hear=partial(self._hear, turn.text))

    def _hear(self, text: str) -> Heard:
        encoded = self.encoder.encode(text)
        return self.reader.hear(text, self.encoder.read(encoded), encoded.offsets)[1]

    def read_aside(self, new: NewTurn, encoded: Encoded) -> Callable[[], Hearing]:
        """The facts of ``new``, read on an encoder worker while the caller routes it (a
        single turn leaves the workers idle); the returned call gives them, reading them on
        the caller's thread if no worker has taken the read by then."""
        read = partial(self.read_facts, new.role, new.text, encoded)
        if new.role is Role.ASSISTANT:
            return read
        future = self.encoding.submit(read)
        return lambda: read() if future.cancel() else future.result()


class Workspace:
    """The stores, writer, commands and state of one user (see the module docstring).

    Parameters: ``user_id`` (already validated), ``directory`` (``<data_dir>/users/<user_id>``),
    ``shared`` (settings and collaborators). Opening replays whatever the projections have not
    applied yet (``replayed_on_open`` counts the entries).
    """

    def __init__(self, user_id: str, directory: Path, shared: Shared) -> None:
        self.user_id = user_id
        self.directory = directory
        self.shared = shared
        directory.mkdir(parents=True, exist_ok=True)
        self.db = Database(directory / JOURNAL_FILE)
        self.journal = Journal(self.db)
        self.headers = HeaderStore(self.db)
        self.router_state = RouterStore(self.db)
        self.text = TextSearch(self.db)
        self.mentions = MentionIndex(self.db)
        self.pool = ActivePool(self.journal, self.headers)
        self.projection = Projection(
            user_id, directory, shared.config, shared.encoder.dim, self.journal
        )
        self.writer = SerialWriter(user_id)
        self.tiers = UserTiers(self)
        self.writes = Writes(self)
        self.edits = MemoryEdits(self)
        self.router = UserRouter(self, shared.router)
        self.reread = FactReread(self)
        self.replayed_on_open = self.writer.call(self.projection.catch_up)
        self.rebuilt_on_open = self.writer.call(self.projection.reconcile)

    @property
    def config(self) -> Config:
        return self.shared.config

    @property
    def stores(self) -> Stores:
        """The read side of the user's stores, as retrieval takes them."""
        p = self.projection
        return Stores(
            self.journal, p.graph, p.vectors, self.headers, self.text, self.mentions, self.pool
        )

    @cached_property
    def entities(self) -> EntityResolver:
        """The user's entity registry, loaded on first use (writer thread only)."""
        return EntityResolver(
            self.journal.known_entities(),
            self.shared.encoder.embed,
            threshold=self.config.memory.entity_threshold,
        )

    # -- ingest and recall -------------------------------------------------------------------

    def ingest(self, turns: Sequence[NewTurn], now: datetime) -> list[Receipt]:
        """Route, build and durably store ``turns``; one receipt per turn, in order.

        A turn id already stored (or repeated in the batch) gets its first receipt back with
        ``duplicate`` set and writes nothing. Turns sent without a time keep the request's
        order: 1 µs apart from ``now``."""
        ids = [t.resolved_id() for t in turns]
        receipts = self.journal.receipts(ids)
        pending: dict[str, tuple[NewTurn, str, datetime]] = {}
        for i, (new, turn_id) in enumerate(zip(turns, ids, strict=True)):
            if turn_id not in receipts and turn_id not in pending:
                pending[turn_id] = (new, turn_id, now + timedelta(microseconds=i))
        committed: set[str] = set()
        if pending:
            entries = self._prepare_all(list(pending.values()))
            committed, stored = self.writer.call(lambda: self._commit_new(list(pending), entries))
            receipts.update(stored)
            if len(committed) >= TRIM_AFTER:
                release_free_memory()
        out = []
        for turn_id in ids:
            out.append(dataclasses.replace(receipts[turn_id], duplicate=turn_id not in committed))
            committed.discard(turn_id)
        return out

    def _prepare_all(self, pending: list[tuple[NewTurn, str, datetime]]) -> Iterator[Prepared]:
        """Embed, route and build the turns of a batch on the encoder workers, each text alone;
        the entries come in order, each as soon as it is ready (one turn is prepared on the
        calling thread)."""
        if len(pending) == 1:
            return iter([self._prepare(*pending[0], alone=True)])
        return self.shared.encoding.map(lambda p: self._prepare(*p), pending)

    def _prepare(
        self, new: NewTurn, turn_id: str, arrival: datetime, alone: bool = False
    ) -> Prepared:
        """Encode, route, read and build one turn (``alone``: its facts are read on an encoder
        worker meanwhile)."""
        shared = self.shared
        encoded = shared.encoder.encode(new.text)
        if alone:
            read = shared.read_aside(new, encoded)
        else:
            read = partial(shared.read_facts, new.role, new.text, encoded)
        decision, routing = self.router.route(shared.encoder.routing(encoded), new.text)
        ts = new.ts or arrival
        offset = ts.utcoffset()
        turn = Turn(
            turn_id=turn_id,
            session_id=new.session_id,
            role=new.role,
            text=new.text,
            ts=ts.astimezone(UTC),
            utc_offset=0 if offset is None else int(offset.total_seconds() // 60),
            speaker=new.speaker,
            metadata=dict(new.metadata),
            labels=decision.labels,
            confidence=decision.confidence,
            routed_by=decision.routed_by,
        )
        facts, named = read()
        return prepare(turn, encoded.embedding, routing, facts, shared.reader.slots, named)

    def _commit_new(
        self, ids: list[str], entries: Iterator[Prepared]
    ) -> tuple[set[str], dict[str, Receipt]]:
        """On the writer: skip the ``ids`` journaled since the caller looked, fold the other
        ``entries`` against the stored memories as they are prepared (the encoder workers go on
        with the next turns meanwhile) and commit them. Returns the committed ids and the
        receipt of every entry (the first receipts of the skipped ones)."""
        stored = self.journal.receipts(ids)
        fresh = fold_entries(
            (p for p in entries if p.entry.turn.turn_id not in stored),
            self.journal,
            self.entities,
            self.shared.reader.slots,
        )
        if fresh:
            self.writes.turns(fresh)
        return {e.turn.turn_id for e in fresh}, stored | {e.turn.turn_id: e.receipt for e in fresh}

    @property
    def has_deferred(self) -> bool:
        """Whether turns of this user wait for the LLM labeller."""
        return self.router_state.next_due() is not None

    def recall(
        self,
        vector: np.ndarray,
        params: QueryParams,
        retriever: Retriever,
        executor: Executor | None = None,
    ) -> QueryResult:
        """Retrieve for ``params`` (``vector`` embeds its text or anchor), put the live headers
        on the items, and count the hits as recalled (after the reply) unless asked not to."""
        result = retriever.retrieve(self.stores, vector, params, executor)
        self.tiers.put_live_headers({i.num: i.memory for i in result.items})
        hits = [i.num for i in result.items if i.hit]
        if params.recall and hits:
            self.tiers.note_recall(hits, params.reference_time())
        return result

    def abstract(self, llm: LLM) -> Counter[str]:
        """One run of the LLM abstraction operators over new episodes (on the writer)."""
        return self.writer.call(lambda: abstract_user(self, llm, self.config))

    # -- maintenance -------------------------------------------------------------------------

    def rebuild(self) -> dict[str, int]:
        """Recreate the graph and vectors from the journal (on the writer)."""
        replayed = self.writer.call(self.projection.rebuild)
        return {"replayed": replayed, **self.counts()}

    def counts(self, graph: bool = True) -> dict[str, int]:
        """Items per store: journal, vectors and (unless ``graph`` is false: it takes a graph
        read) graph."""
        return self.journal.counts() | self.projection.counts(graph)

    def save(self) -> None:
        """Persist the vectors if anything changed since the last save (on the writer)."""
        self.writer.call(self.projection.save)

    def close(self) -> None:
        """Drain the writer, save vectors, close every store, and hand the memory they held
        back to the kernel. Guarded per step and logged."""
        try:
            self.writer.close()
        finally:
            self.projection.close()
            self.pool.close()
            try:
                self.db.close()
            except Exception:
                log.exception("user %s: closing the journal failed", self.user_id)
            release_free_memory()
