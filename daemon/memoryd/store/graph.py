"""Per-user graph projection of the journal, on a Kùzu-family engine.

The journal is the source of truth; this store is rebuilt from it. Every write is idempotent
(nodes are MERGEd by id, a memory's edges and private nodes are replaced) and records the journal
sequence number it applied, so a replay from any point converges on the same graph::

    with GraphStore(path, GraphEngine.LADYBUG, max_db_size=1 << 30, buffer_pool_size=64 << 20) as g:
        g.apply_turn(seq, turn, memories)
        g.timeline(episode_id, later=True, hops=2, session_only=True)

Writes go through the store's one write connection, one transaction per call; the caller keeps to
one writer thread per store (a second write transaction gets an engine error, not a wait). Reads
use a small pool of separate connections and are retried once, because a reader may see a
transient error while the writer runs. Engine errors become :class:`GraphError`; any method called
after :meth:`GraphStore.close` raises :class:`ClosedError`. A failed write is rolled back, except
that an engine failing inside COMMIT (in the checkpoint a commit triggers) may have kept it:
writes are idempotent, so the caller simply retries or replays.

Datetimes are stored as naive UTC ``TIMESTAMP`` values: both engines drop the offset of an aware
datetime without converting it.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from enum import StrEnum
from itertools import pairwise
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Self, overload

from memoryd.errors import ClosedError, GraphError
from memoryd.models import (
    Entity,
    EntityType,
    Episode,
    Fact,
    GraphEngine,
    Header,
    Memory,
    Rule,
    RuleNode,
    RuleNodeKind,
    Task,
    Turn,
)
from memoryd.store.episode_order import EpisodeOrder, Relink

__all__ = ["MAX_CHAIN_HOPS", "SCHEMA", "GraphEngine", "GraphStore"]

logger = logging.getLogger(__name__)

APPLIED_SEQ = "applied_seq"
MAX_SHOWN_CHARS = 40
MAX_SHOWN_ITEMS = 5
QUERY_THREADS = 1
CHECKPOINT_SHARE = 32
MERGE_ONE_BY_ONE = 8  # rows merged one statement each; more go in one UNWIND
# A row field (``p.id``) or the row carried through a WITH (``WITH n, p``) in a MERGE query of
# :meth:`GraphStore._merge`; a statement for one row binds ``$id`` and carries nothing.
_ROW_REF = re.compile(r"\bp\.|, p\b")
MAX_CHAIN_HOPS = 30  # both engines refuse variable-length patterns longer than 30 by default
# An episode's ts read as the INTERVAL since datetime.min: ladybug 0.22 keeps about 40 bytes of
# every TIMESTAMP it hands to Python (1.2 MB a read of 30k episodes) and none of an INTERVAL.
_EPISODE_TS = "e.ts - timestamp('0001-01-01')"


_HEADER = (
    "importance DOUBLE, persona_sim DOUBLE, recall_count INT64, last_access TIMESTAMP, tier INT64"
)

SCHEMA: list[str] = [
    "CREATE NODE TABLE IF NOT EXISTS Turn(id STRING PRIMARY KEY, session_id STRING, role STRING, "
    "text STRING, ts TIMESTAMP, labels STRING[], "
    "routed_by STRING, seq INT64)",
    "CREATE NODE TABLE IF NOT EXISTS Episode(id STRING PRIMARY KEY, turn_id STRING, "
    "session_id STRING, text STRING, ts TIMESTAMP, speaker STRING, event_time TIMESTAMP, "
    f"{_HEADER})",
    "CREATE NODE TABLE IF NOT EXISTS Entity(id STRING PRIMARY KEY, name STRING, type STRING)",
    "CREATE NODE TABLE IF NOT EXISTS User(id STRING PRIMARY KEY)",
    "CREATE NODE TABLE IF NOT EXISTS Rule(id STRING PRIMARY KEY, turn_id STRING, title STRING, "
    f"text STRING, tags STRING[], support INT64, {_HEADER})",
    # `when` is a Cypher keyword (CASE WHEN) in both engines: it is quoted wherever it is used.
    "CREATE NODE TABLE IF NOT EXISTS RuleNode(id STRING PRIMARY KEY, kind STRING, text STRING, "
    "ord INT64, `when` STRING)",
    "CREATE NODE TABLE IF NOT EXISTS Task(id STRING PRIMARY KEY, turn_id STRING, title STRING, "
    f"text STRING, due TIMESTAMP, status STRING, {_HEADER})",
    "CREATE NODE TABLE IF NOT EXISTS State(id STRING PRIMARY KEY, status STRING, ts TIMESTAMP, "
    "note STRING, turn_id STRING)",
    "CREATE NODE TABLE IF NOT EXISTS Meta(key STRING PRIMARY KEY, value INT64)",
    # A fact is an edge, as in the design; rel properties cannot be primary keys, so the store
    # keeps `id` unique itself by deleting the old edge before it creates the new one.
    "CREATE REL TABLE IF NOT EXISTS FACT(FROM User TO Entity, id STRING, relation STRING, "
    "confidence DOUBLE, valid_from TIMESTAMP, valid_to TIMESTAMP, text STRING, negated BOOL, "
    f"turn_id STRING, {_HEADER})",
    "CREATE REL TABLE IF NOT EXISTS NEXT(FROM Episode TO Episode)",
    # The user's whole timeline: every episode, across sessions, chained by (ts, id). Databases
    # made before it existed get it on open (see GraphStore._backfill_timeline).
    "CREATE REL TABLE IF NOT EXISTS PRECEDES(FROM Episode TO Episode)",
    "CREATE REL TABLE IF NOT EXISTS MENTIONS(FROM Episode TO Entity, role STRING)",
    # One rel table group: both engines support several FROM/TO pairs in one table.
    "CREATE REL TABLE IF NOT EXISTS FROM_TURN(FROM Episode TO Turn, FROM Rule TO Turn, "
    "FROM Task TO Turn)",
    "CREATE REL TABLE IF NOT EXISTS HAS_NODE(FROM Rule TO RuleNode)",
    "CREATE REL TABLE IF NOT EXISTS NEXT_STEP(FROM RuleNode TO RuleNode)",
    "CREATE REL TABLE IF NOT EXISTS BRANCH(FROM RuleNode TO RuleNode, `when` STRING)",
    "CREATE REL TABLE IF NOT EXISTS HAS_STATE(FROM Task TO State)",
    "CREATE REL TABLE IF NOT EXISTS TRANSITION(FROM State TO State)",
]

_NODE_TABLES = ("Turn", "Episode", "Entity", "User", "Rule", "RuleNode", "Task", "State", "Meta")
_COUNTED_TABLES = tuple(t for t in _NODE_TABLES if t != "Meta")
# Episode chains, both ordered by (ts, id): NEXT within a session, PRECEDES over the timeline.
_CHAINS = ("NEXT", "PRECEDES")
# Both engines report every failure (parse, bind, constraint, I/O, conversion) as RuntimeError;
# parameter conversion can also raise TypeError or ValueError before the query runs.
_ENGINE_ERRORS = (RuntimeError, TypeError, ValueError)


class _State(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


@overload
def _utc(value: datetime) -> datetime: ...
@overload
def _utc(value: None) -> None: ...
@overload
def _utc(value: datetime | None) -> datetime | None: ...
def _utc(value: datetime | None) -> datetime | None:
    """Naive UTC for the engine (a naive input is taken to be UTC already)."""
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def _header_params(header: Header) -> dict[str, Any]:
    return {
        "importance": float(header.importance),
        "persona_sim": float(header.persona_sim),
        "recall_count": int(header.recall_count),
        "last_access": _utc(header.last_access),
        "tier": int(header.tier),
    }


def _shorten(value: Any) -> Any:
    """A loggable stand-in for a parameter: no whole texts, no whole vectors."""
    if isinstance(value, str) and len(value) > MAX_SHOWN_CHARS:
        return f"{value[:MAX_SHOWN_CHARS]}…({len(value)} chars)"
    if isinstance(value, list | tuple):
        if len(value) > MAX_SHOWN_ITEMS:
            return f"[{len(value)} items]"
        return [_shorten(v) for v in value]
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    return value


def _rows(result: Any) -> list[list[Any]]:
    try:
        rows: list[list[Any]] = result.get_all()
        return rows
    finally:
        result.close()


def _pairs(ids: Sequence[str]) -> list[dict[str, str]]:
    """Consecutive (src, dst) pairs, as UNWIND rows."""
    return [{"src": a, "dst": b} for a, b in pairwise(ids)]


# Properties of type TIMESTAMP: in an UNWIND row that holds None in every row the engines type
# the field STRING and refuse to store it, so these are cast (a NULL stays NULL).
_TIMESTAMPS = frozenset({"ts", "event_time", "last_access", "due", "valid_from", "valid_to"})


def _field(name: str) -> str:
    """The expression reading property ``name`` of UNWIND row ``p``."""
    value = f"p.`{name}`"
    return f"CAST({value} AS TIMESTAMP)" if name in _TIMESTAMPS else value


def _assignments(names: Sequence[str]) -> str:
    """``name: value`` pairs setting properties ``names`` from UNWIND row ``p``."""
    return ", ".join(f"`{name}`: {_field(name)}" for name in names)


FACT_FIELDS = (
    "id relation confidence valid_from valid_to text negated turn_id "
    "importance persona_sim recall_count last_access tier"
).split()
STATE_FIELDS = ("id", "status", "ts", "note", "turn_id")


def _rule_edges(nodes: Sequence[RuleNode]) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The NEXT_STEP and BRANCH edges (UNWIND rows) of a rule's nodes, given in (ord, id)
    order; the rule links every node by HAS_NODE::

        C1 -NEXT_STEP-> C2 -NEXT_STEP-> SEQUENCE -NEXT_STEP-> A1 -NEXT_STEP-> A2
        SEQUENCE -BRANCH(when)-> BRANCH(when) -NEXT_STEP-> B1 -NEXT_STEP-> B2

    The main line is the nodes without ``when``, chained in order (conditions lead to the
    sequence, the sequence to its actions). The nodes sharing one ``when`` form that case's
    branch: its first node (the BRANCH node in the shared layout) hangs by BRANCH(when) from the
    anchor, the main line's first SEQUENCE node (else its last CONDITION; a rule with neither
    leaves the branch a root), and the rest follow it by NEXT_STEP. Branches are flat: a branch
    inside a branch is not represented.
    """
    main_line = [n for n in nodes if n.when is None]
    cases: dict[str, list[str]] = {}
    for node in nodes:
        if node.when is not None:
            cases.setdefault(node.when, []).append(node.id)
    sequence = [n.id for n in main_line if n.kind is RuleNodeKind.SEQUENCE]
    conditions = [n.id for n in main_line if n.kind is RuleNodeKind.CONDITION]
    anchor = sequence[0] if sequence else conditions[-1] if conditions else None
    steps = _pairs([n.id for n in main_line])
    branches: list[dict[str, str]] = []
    for when, ids in cases.items():
        steps += _pairs(ids)
        if anchor is not None:
            branches.append({"src": anchor, "dst": ids[0], "when": when})
    return steps, branches


class GraphStore:
    """Typed memory graph of one user, projected from that user's journal.

    Args:
        path: the database file; the engine keeps ``<path>.wal`` beside it. The parent directory
            is created. To rebuild from nothing, call :meth:`clear` or close the store and delete
            both files.
        engine: which engine module to load.
        max_db_size: bytes of address space the engine may map (its 8 TiB default fails on small
            address spaces).
        buffer_pool_size: bytes of page cache. It holds every write not yet checkpointed, and a
            full pool fails writes with :class:`GraphError` ("buffer pool is full") until the
            store is reopened. Once all tables hold rows it needs about 40 MiB, plus about
            6 bytes per byte of WAL behind the checkpoint threshold.
        checkpoint_threshold: WAL bytes that trigger a checkpoint; by default 1/32 of the
            buffer pool (2 MiB for 64 MiB, which peaked under 50 MiB over 3k turns; the
            engines' own 16 MiB default peaked near 140 MiB and failed a 64 MiB pool at ~1k turns).

    The database must be opened by one ``GraphStore`` per process: the engines do not stop a
    second open of the same path in one process.
    """

    def __init__(
        self,
        path: Path,
        engine: GraphEngine = GraphEngine.LADYBUG,
        *,
        max_db_size: int,
        buffer_pool_size: int,
        checkpoint_threshold: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.engine = GraphEngine(engine)
        self._module: ModuleType = importlib.import_module(self.engine.value)
        self._state = _State.OPEN
        # The (ts, id) order of the chained episodes, read from the graph by the first write
        # that links or unlinks one and kept up to date by the writes after it (see
        # :meth:`_episode_order`); None until then, and again after a failed transaction.
        self._order: EpisodeOrder | None = None
        self._busy = 0
        self._idle = threading.Condition()
        self._write_lock = threading.Lock()
        # Bumped after every write transaction, kept or not: a cached read is valid while the
        # generation it was read at is the current one (read the generation before the rows).
        self._generation = 0
        self._checkpointed = 0  # the _generation the last checkpoint() saw
        self._rule_conditions: tuple[int, list[tuple[str, list[str]]]] | None = None
        self._readers: list[Any] = []
        self._free_readers: list[Any] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._open_database(max_db_size, buffer_pool_size, checkpoint_threshold)
            self._writer = self._connect()
        except _ENGINE_ERRORS as exc:
            logger.error("graph open failed: engine=%s path=%s: %s", self.engine, self.path, exc)
            raise GraphError(f"cannot open {self.path} with {self.engine}: {exc}") from exc
        try:
            for statement in SCHEMA:
                self._execute(self._writer, "schema", statement)
            self._backfill_timeline()
        except GraphError:
            self.close()
            raise

    def _backfill_timeline(self) -> None:
        """Chain the episodes of a database made before the PRECEDES timeline existed; a no-op
        once the timeline has an edge or with fewer than two episodes."""
        edges = self._execute(
            self._writer, "timeline_edges", "MATCH ()-[r:PRECEDES]->() RETURN count(r)"
        )
        if edges[0][0]:
            return
        rows = self._execute(
            self._writer, "timeline_order", "MATCH (e:Episode) RETURN e.id ORDER BY e.ts, e.id"
        )
        if len(rows) < 2:
            return
        logger.info("graph %s: chaining %d episodes into the timeline", self.path, len(rows))
        with self._transaction() as conn:
            self._execute(
                conn,
                "backfill_timeline",
                "UNWIND $pairs AS p MATCH (a:Episode {id: p.src}) MATCH (b:Episode {id: p.dst}) "
                "CREATE (a)-[:PRECEDES]->(b)",
                {"pairs": _pairs([row[0] for row in rows])},
            )

    def _open_database(
        self, max_db_size: int, buffer_pool_size: int, checkpoint_threshold: int | None
    ) -> Any:
        options: dict[str, Any] = {
            "max_db_size": max_db_size,
            "buffer_pool_size": buffer_pool_size,
        }
        # Uncheckpointed writes live in the buffer pool and a full pool cannot even checkpoint
        # (ladybug stays stuck until reopened; kuzu 0.11.3 aborted in malloc on the next write),
        # so the WAL is checkpointed long before it could fill the pool.
        options["checkpoint_threshold"] = (
            checkpoint_threshold
            if checkpoint_threshold is not None
            else buffer_pool_size // CHECKPOINT_SHARE
        )
        accepted = inspect.signature(self._module.Database).parameters
        if "throw_on_wal_replay_failure" in accepted:
            # ladybug: replay the WAL up to a torn tail instead of refusing to open after a crash;
            # the journal replays whatever the graph lost.
            options["throw_on_wal_replay_failure"] = False
        return self._module.Database(str(self.path), **options)

    def _connect(self) -> Any:
        # Queries here touch a handful of rows: spreading one over the engine's worker threads
        # costs more than it saves (apply_turn p50 halves with one thread on 2 cores).
        return self._module.Connection(self._db, num_threads=QUERY_THREADS)

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Wait for running calls, then release the connections and the database (idempotent)."""
        with self._idle:
            if self._state is _State.CLOSED:
                return
            self._state = _State.CLOSED
            self._idle.wait_for(lambda: self._busy == 0)
        for conn in [*self._readers, self._writer]:
            conn.close()
        self._readers.clear()
        self._free_readers.clear()
        self._db.close()

    @contextmanager
    def _in_use(self) -> Iterator[None]:
        with self._idle:
            if self._state is _State.CLOSED:
                raise ClosedError("graph store")
            self._busy += 1
        try:
            yield
        finally:
            with self._idle:
                self._busy -= 1
                self._idle.notify_all()

    # -- execution ----------------------------------------------------------------------------

    def _execute(
        self, conn: Any, name: str, query: str, params: dict[str, Any] | None = None
    ) -> list[list[Any]]:
        try:
            return _rows(conn.execute(query, params or {}))
        except _ENGINE_ERRORS as exc:
            logger.error("graph query %s failed: %s params=%s", name, exc, _shorten(params or {}))
            raise GraphError(f"query {name!r} failed: {exc}") from exc

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """One write transaction on the write connection: commit on success, else roll back."""
        with self._in_use(), self._write_lock:
            try:
                yield from self._write_transaction()
            finally:
                self._generation += 1

    def checkpoint(self) -> bool:
        """Fold the WAL into the database file, if the store wrote since its last checkpoint;
        whether it ran. The engine checkpoints by itself only past ``checkpoint_threshold``,
        and until then keeps far more memory than the WAL's size: at 10k turns a 2.5 MB WAL
        held 60 MB of heap (``docs/decisions.md``, "Graph checkpoint when idle"). On the
        writer's thread, between writes."""
        with self._in_use(), self._write_lock:
            if self._checkpointed == self._generation:
                return False
            self._execute(self._writer, "checkpoint", "CHECKPOINT")
            self._checkpointed = self._generation
            return True

    def _write_transaction(self) -> Iterator[Any]:
        self._execute(self._writer, "begin", "BEGIN TRANSACTION")
        try:
            yield self._writer
        except BaseException:
            # A failed statement already ends the transaction in both engines, and later
            # statements would run in auto-commit mode; ROLLBACK then finds nothing to undo.
            with suppress(*_ENGINE_ERRORS):
                _rows(self._writer.execute("ROLLBACK"))
            self._order = None  # it holds the episodes of the transaction: read it again
            raise
        try:
            self._execute(self._writer, "commit", "COMMIT")
        except GraphError:
            self._order = None  # the commit may or may not have been kept
            raise

    def _read(self, name: str, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Rows of one read query on a pooled connection."""
        return self._read_all(name, [(query, params or {})])[0]

    def _read_all(
        self, name: str, statements: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[list[list[Any]]]:
        """Rows of each statement, all from one committed state (one read-only transaction when
        there are several). Retried once on an engine error, then :class:`GraphError`."""
        with self._in_use():
            conn = self._borrow_reader()
            try:
                try:
                    return self._run_reads(conn, statements)
                except _ENGINE_ERRORS as exc:
                    logger.info("graph read %s failed, retrying once: %s", name, exc)
                try:
                    return self._run_reads(conn, statements)
                except _ENGINE_ERRORS as exc:
                    shown = _shorten([params for _, params in statements])
                    logger.error("graph read %s failed: %s params=%s", name, exc, shown)
                    raise GraphError(f"read {name!r} failed: {exc}") from exc
            finally:
                with self._idle:
                    self._free_readers.append(conn)

    @staticmethod
    def _run_reads(
        conn: Any, statements: Sequence[tuple[str, dict[str, Any]]]
    ) -> list[list[list[Any]]]:
        if len(statements) == 1:
            query, params = statements[0]
            return [_rows(conn.execute(query, params))]
        _rows(conn.execute("BEGIN TRANSACTION READ ONLY"))
        try:
            results = [_rows(conn.execute(query, params)) for query, params in statements]
        except BaseException:
            with suppress(*_ENGINE_ERRORS):
                _rows(conn.execute("ROLLBACK"))
            raise
        _rows(conn.execute("COMMIT"))
        return results

    def _borrow_reader(self) -> Any:
        with self._idle:
            if self._free_readers:
                return self._free_readers.pop()
            conn = self._connect()
            self._readers.append(conn)
            return conn

    # -- writes -------------------------------------------------------------------------------

    def apply_turn(self, seq: int, turn: Turn, memories: Sequence[Memory]) -> None:
        """Project one journaled turn and the memories derived from it, atomically.

        One transaction MERGEs the Turn, writes each memory as :meth:`upsert_memories` does and sets
        ``applied_seq`` to ``max(applied_seq, seq)``. On error :class:`GraphError` is raised and
        the transaction is rolled back, except when the engine fails inside COMMIT (for example in
        the checkpoint a commit triggers): then it may have been kept. Applying the same turn again
        leaves the same graph, so retrying is always safe.
        """
        self.apply_turns([(seq, turn, memories)])

    def apply_turns(self, turns: Sequence[tuple[int, Turn, Sequence[Memory]]]) -> None:
        """Project journaled turns ``(seq, turn, memories)`` in one transaction, as
        :meth:`apply_turn` does each: a batch costs one commit and a few statements, not a few
        per memory. ``applied_seq`` becomes the batch's highest seq; on error nothing of the
        batch is kept (see :meth:`apply_turn`)."""
        if not turns:
            return
        with self._transaction() as conn:
            self._write_turns(conn, [(seq, turn) for seq, turn, _ in turns])
            self._write_memories(conn, [m for _, _, memories in turns for m in memories])
            self._advance_seq(conn, max(seq for seq, _, _ in turns))

    def upsert_memories(self, seq: int, memories: Sequence[Memory]) -> None:
        """Create or replace memories: each one's properties, edges and private nodes (rule
        nodes, task states) become exactly what it holds. Atomic; advances ``applied_seq``.

        Rule-node and state ids must be unique across the user's memories: one already owned by
        another memory fails the write with :class:`GraphError`.
        """
        with self._transaction() as conn:
            self._write_memories(conn, memories)
            self._advance_seq(conn, seq)

    def delete_memory(self, seq: int, memory_id: str) -> None:
        """Delete a memory of any type with its edges and private nodes (a fact: its edge).

        Entities stay, they are shared. An unknown id deletes nothing. Atomic; advances
        ``applied_seq``.
        """
        with self._transaction() as conn:
            self._delete_memory(conn, memory_id)
            self._advance_seq(conn, seq)

    def relabel_turn(
        self, seq: int, turn: Turn, memories: Sequence[Memory], removed: Sequence[str]
    ) -> None:
        """Re-route a turn in one transaction: set its labels and ``routed_by``, delete the
        memories in ``removed`` and write ``memories`` as :meth:`upsert_memories` does. The Turn
        keeps the seq it was ingested at. Atomic, idempotent; advances ``applied_seq``."""
        with self._transaction() as conn:
            self._execute(
                conn,
                "relabel_turn",
                "MATCH (t:Turn {id: $id}) SET t.labels = $labels, t.routed_by = $routed_by",
                {
                    "id": turn.turn_id,
                    "labels": [str(label) for label in turn.labels],
                    "routed_by": str(turn.routed_by),
                },
            )
            for memory_id in removed:
                self._delete_memory(conn, memory_id)
            self._write_memories(conn, memories)
            self._advance_seq(conn, seq)

    def _delete_memory(self, conn: Any, memory_id: str) -> None:
        self._delete_episode(conn, memory_id)
        self._delete_fact(conn, memory_id)
        self._delete_owner(conn, "Rule", "HAS_NODE", "RuleNode", memory_id)
        self._delete_owner(conn, "Task", "HAS_STATE", "State", memory_id)

    def clear(self) -> None:
        """Delete every node and edge and reset ``applied_seq`` to 0, in one transaction."""
        with self._transaction() as conn:
            for table in _NODE_TABLES:
                self._execute(conn, "clear", f"MATCH (n:{table}) DETACH DELETE n")
        self._order = EpisodeOrder()

    def _write_memories(self, conn: Any, memories: Sequence[Memory]) -> None:
        """Write the last version of each memory in ``memories``: one already in the graph is
        deleted first (its node, edges and private nodes), then all are created anew, a few
        statements per memory type (UNWIND) whatever their number."""
        latest = list({m.id: m for m in memories}.values())
        entities = [  # in memory order: the last spelling of an entity wins, as turn by turn
            entity
            for m in latest
            for entity in (
                [m.object]
                if isinstance(m, Fact)
                else [x.entity for x in m.mentions]
                if isinstance(m, Episode)
                else []
            )
        ]
        if entities:
            self._merge_entities(conn, entities)
        stored = self._stored_ids(conn, latest)
        for memory in latest:
            if memory.id in stored:
                self._delete_typed(conn, memory)
        self._create_episodes(conn, [m for m in latest if isinstance(m, Episode)])
        self._create_facts(conn, [m for m in latest if isinstance(m, Fact)])
        self._create_rules(conn, [m for m in latest if isinstance(m, Rule)])
        self._create_tasks(conn, [m for m in latest if isinstance(m, Task)])

    def _stored_ids(self, conn: Any, memories: Sequence[Memory]) -> set[str]:
        """The ids of ``memories`` the graph already holds (a node, or a FACT edge)."""
        stored: set[str] = set()
        for table, kind in (("Episode", Episode), ("Rule", Rule), ("Task", Task)):
            ids = [m.id for m in memories if isinstance(m, kind)]
            if ids:
                rows = self._execute(
                    conn,
                    f"stored_{table.lower()}s",
                    f"UNWIND $ids AS i MATCH (m:{table} {{id: i}}) RETURN m.id",
                    {"ids": ids},
                )
                stored.update(row[0] for row in rows)
        facts = [m.id for m in memories if isinstance(m, Fact)]
        if facts:
            rows = self._execute(
                conn,
                "stored_facts",
                "MATCH (:User)-[f:FACT]->(:Entity) WHERE f.id IN $ids RETURN f.id",
                {"ids": facts},
            )
            stored.update(row[0] for row in rows)
        return stored

    def _delete_typed(self, conn: Any, memory: Memory) -> None:
        if isinstance(memory, Episode):
            self._delete_episode(conn, memory.id)
        elif isinstance(memory, Fact):
            self._delete_fact(conn, memory.id)
        elif isinstance(memory, Rule):
            self._delete_owner(conn, "Rule", "HAS_NODE", "RuleNode", memory.id)
        else:
            self._delete_owner(conn, "Task", "HAS_STATE", "State", memory.id)

    def _create(self, conn: Any, table: str, rows: list[dict[str, Any]]) -> None:
        """CREATE one ``table`` node per row (its keys are the properties, the same in every
        row) with its FROM_TURN edge to ``row["turn_id"]`` (none while that turn is not in the
        graph)."""
        if not rows:
            return
        assignments = _assignments(tuple(rows[0]))
        self._execute(
            conn,
            f"create_{table.lower()}s",
            f"UNWIND $rows AS p CREATE (m:{table} {{{assignments}}}) "
            "WITH m, p MATCH (t:Turn {id: p.turn_id}) CREATE (m)-[:FROM_TURN]->(t)",
            {"rows": rows},
        )

    def _link(self, conn: Any, name: str, query: str, rows: list[dict[str, Any]]) -> None:
        """Run an UNWIND ``query`` over ``rows`` (nothing when there are none).

        A row's nodes are matched one MATCH clause each: one pattern naming two nodes
        (``MATCH (a {id: p.src}), (b {id: p.dst})``) is planned as a join over a scan of a
        whole table, 2.5 ms at 10k episodes against 0.1 ms for two primary-key lookups."""
        if rows:
            self._execute(conn, name, query, {"rows": rows})

    def _merge(self, conn: Any, name: str, query: str, rows: list[dict[str, Any]]) -> None:
        """Run a MERGE ``query`` over ``rows``, its row written ``p`` (``p.id``, ``WITH n, p``).

        Up to :data:`MERGE_ONE_BY_ONE` rows are merged one statement each, a primary-key
        lookup (0.12 ms a turn at 10k turns); more run in one UNWIND, which the engine plans as
        a join over the whole table (1.6 ms for one turn at 10k turns, 3.5 ms for 32)."""
        if len(rows) > MERGE_ONE_BY_ONE:
            self._execute(conn, name, f"UNWIND $rows AS p {query}", {"rows": rows})
            return
        one = _ROW_REF.sub(lambda ref: "$" if ref.group() == "p." else "", query)
        for row in rows:
            self._execute(conn, name, one, row)

    def _advance_seq(self, conn: Any, seq: int) -> None:
        self._execute(
            conn,
            "advance_seq",
            "MERGE (m:Meta {key: $key}) ON CREATE SET m.value = $seq "
            "ON MATCH SET m.value = CASE WHEN m.value < $seq THEN $seq ELSE m.value END",
            {"key": APPLIED_SEQ, "seq": int(seq)},
        )

    def _merge_entities(self, conn: Any, entities: Sequence[Entity]) -> None:
        """MERGE entities by id; a changed name or type is updated, the last spelling wins."""
        # MERGE inside UNWIND mis-binds rows whose key repeats (kuzu 0.11.3 attaches later rows to
        # the wrong node; ladybug drops them), so each id is merged once. An unchanged entity is
        # not SET again: every update is kept in the buffer pool until the next checkpoint, and
        # re-setting the same entities on every turn tripled this query's cost by 3k turns.
        unique = {e.id: {"id": e.id, "name": e.name, "type": str(e.type)} for e in entities}
        self._merge(
            conn,
            "merge_entities",
            "MERGE (n:Entity {id: p.id}) ON CREATE SET n.name = p.name, n.type = p.type "
            "WITH n, p WHERE n.name <> p.name OR n.type <> p.type "
            "SET n.name = p.name, n.type = p.type",
            list(unique.values()),
        )

    def _delete_owner(self, conn: Any, table: str, rel: str, child: str, memory_id: str) -> None:
        """DETACH DELETE a rule or task and the private nodes it owns."""
        key = {"id": memory_id}
        self._delete_children(conn, table, rel, child, memory_id)
        self._execute(conn, "delete_owner", f"MATCH (m:{table} {{id: $id}}) DETACH DELETE m", key)

    def _delete_children(self, conn: Any, table: str, rel: str, child: str, owner: str) -> None:
        self._execute(
            conn,
            "delete_children",
            f"MATCH (:{table} {{id: $id}})-[:{rel}]->(c:{child}) DETACH DELETE c",
            {"id": owner},
        )

    # turns

    def _write_turns(self, conn: Any, turns: Sequence[tuple[int, Turn]]) -> None:
        """MERGE each Turn with its properties (the last of a repeated id: MERGE inside UNWIND
        mis-binds rows whose key repeats, see :meth:`_merge_entities`)."""
        rows = {
            turn.turn_id: {
                "id": turn.turn_id,
                "session_id": turn.session_id,
                "role": str(turn.role),
                "text": turn.text,
                "ts": _utc(turn.ts),
                "labels": [str(label) for label in turn.labels],
                "routed_by": str(turn.routed_by),
                "seq": int(seq),
            }
            for seq, turn in turns
        }
        self._merge(
            conn,
            "merge_turns",
            "MERGE (t:Turn {id: p.id}) SET t.session_id = p.session_id, "
            "t.role = p.role, t.text = p.text, t.ts = p.ts, t.labels = p.labels, "
            "t.routed_by = p.routed_by, t.seq = p.seq",
            list(rows.values()),
        )

    # episodes

    def _create_episodes(self, conn: Any, episodes: Sequence[Episode]) -> None:
        """Create episodes not in the graph, their mentions, and their places in the chains."""
        if not episodes:
            return
        order = self._episode_order(conn)  # before the new nodes: it holds chained episodes
        self._create(
            conn,
            "Episode",
            [
                {
                    "id": e.id,
                    "turn_id": e.turn_id,
                    "session_id": e.session_id,
                    "text": e.text,
                    "ts": _utc(e.ts),
                    "speaker": e.speaker,
                    "event_time": _utc(e.event_time),
                    **_header_params(e.header),
                }
                for e in episodes
            ],
        )
        self._link(
            conn,
            "create_mentions",
            "UNWIND $rows AS m MATCH (e:Episode {id: m.episode}) MATCH (x:Entity {id: m.entity}) "
            "CREATE (e)-[:MENTIONS {role: m.role}]->(x)",
            [
                {"episode": e.id, "entity": m.entity.id, "role": m.role}
                for e in episodes
                for m in e.mentions
            ],
        )
        timeline, sessions = order.insert([(_utc(e.ts), e.id, e.session_id) for e in episodes])
        self._relink(conn, "PRECEDES", timeline)
        self._relink(conn, "NEXT", sessions)

    def _episode_order(self, conn: Any) -> EpisodeOrder:
        """The (ts, id) order of the chained episodes, read on first use with ``conn`` (one
        scan of every episode) and kept from then on: the first write after an open, or after
        a failed transaction, reads it."""
        if self._order is None:
            rows = self._execute(
                conn,
                "episode_order",
                f"MATCH (e:Episode) RETURN {_EPISODE_TS}, e.id, e.session_id",
            )
            self._order = EpisodeOrder((datetime.min + ts, eid, sid) for ts, eid, sid in rows)
        return self._order

    def _relink(self, conn: Any, rel: str, relink: Relink) -> None:
        """Apply an insert's changes to the ``rel`` chain: delete the edges between chained
        episodes that new ones now come between (none when they follow the chain, one for each
        gap they fill otherwise), then create the new edges in one statement."""
        for src, dst in relink.removed:
            self._execute(
                conn,
                f"split_{rel.lower()}",
                f"MATCH (:Episode {{id: $a}})-[r:{rel}]->(:Episode {{id: $b}}) DELETE r",
                {"a": src, "b": dst},
            )
        self._link(
            conn,
            f"link_{rel.lower()}s",
            f"UNWIND $rows AS p MATCH (a:Episode {{id: p.src}}) MATCH (b:Episode {{id: p.dst}}) "
            f"CREATE (a)-[:{rel}]->(b)",
            [{"src": src, "dst": dst} for src, dst in relink.added],
        )

    def _unlink_episode(self, conn: Any, episode_id: str) -> None:
        """Take an episode out of its NEXT chain and the timeline, joining its neighbours."""
        key = {"id": episode_id}
        order = self._episode_order(conn)
        for ts, session_id in self._execute(
            conn,
            "episode_place",
            f"MATCH (e:Episode {{id: $id}}) RETURN {_EPISODE_TS}, e.session_id",
            key,
        ):
            order.remove(datetime.min + ts, episode_id, session_id)
        for rel in _CHAINS:
            self._execute(
                conn,
                f"bridge_{rel.lower()}",
                f"MATCH (p:Episode)-[:{rel}]->(:Episode {{id: $id}})-[:{rel}]->(n:Episode) "
                f"CREATE (p)-[:{rel}]->(n)",
                key,
            )
            # Neither engine deletes through an undirected pattern: one statement per direction.
            for pattern in (
                f"()-[r:{rel}]->(:Episode {{id: $id}})",
                f"(:Episode {{id: $id}})-[r:{rel}]->()",
            ):
                self._execute(conn, f"unlink_{rel.lower()}", f"MATCH {pattern} DELETE r", key)

    def _delete_episode(self, conn: Any, episode_id: str) -> None:
        self._unlink_episode(conn, episode_id)
        self._execute(
            conn,
            "delete_episode",
            "MATCH (e:Episode {id: $id}) DETACH DELETE e",
            {"id": episode_id},
        )

    # facts

    def _create_facts(self, conn: Any, facts: Sequence[Fact]) -> None:
        """Create the FACT edges of facts not in the graph; their object entities are merged."""
        if not facts:
            return
        for subject in dict.fromkeys(f.subject for f in facts):
            self._execute(conn, "merge_user", "MERGE (u:User {id: $id})", {"id": subject})
        self._link(
            conn,
            "create_facts",
            "UNWIND $rows AS p MATCH (u:User {id: p.subject}) MATCH (x:Entity {id: p.entity}) "
            f"CREATE (u)-[f:FACT {{{_assignments(FACT_FIELDS)}}}]->(x)",
            [
                {
                    "id": fact.id,
                    "subject": fact.subject,
                    "entity": fact.object.id,
                    "relation": fact.relation,
                    "confidence": float(fact.confidence),
                    "valid_from": _utc(fact.valid_from),
                    "valid_to": _utc(fact.valid_to),
                    "text": fact.text,
                    "negated": bool(fact.negated),
                    "turn_id": fact.turn_id,
                    **_header_params(fact.header),
                }
                for fact in facts
            ],
        )

    def _delete_fact(self, conn: Any, fact_id: str) -> None:
        self._execute(
            conn,
            "delete_fact",
            "MATCH (:User)-[f:FACT]->(:Entity) WHERE f.id = $id DELETE f",
            {"id": fact_id},
        )

    # rules

    def _create_rules(self, conn: Any, rules: Sequence[Rule]) -> None:
        """Create rules not in the graph, with their nodes and trees (:func:`_rule_edges`)."""
        self._create(
            conn,
            "Rule",
            [
                {
                    "id": rule.id,
                    "turn_id": rule.turn_id,
                    "title": rule.title,
                    "text": rule.text,
                    "tags": list(rule.tags),
                    "support": int(rule.support),
                    **_header_params(rule.header),
                }
                for rule in rules
            ],
        )
        ordered = {rule.id: sorted(rule.nodes, key=lambda n: (n.ord, n.id)) for rule in rules}
        self._link(
            conn,
            "create_rule_nodes",
            "UNWIND $rows AS n MATCH (r:Rule {id: n.rule}) CREATE (r)-[:HAS_NODE]->(:RuleNode "
            "{id: n.id, kind: n.kind, text: n.text, ord: n.ord, `when`: n.`when`})",
            [
                {
                    "rule": rule_id,
                    "id": n.id,
                    "kind": str(n.kind),
                    "text": n.text,
                    "ord": n.ord,
                    "when": n.when,
                }
                for rule_id, nodes in ordered.items()
                for n in nodes
            ],
        )
        edges = [_rule_edges(nodes) for nodes in ordered.values()]
        self._link(
            conn,
            "create_next_steps",
            "UNWIND $rows AS p MATCH (a:RuleNode {id: p.src}) MATCH (b:RuleNode {id: p.dst}) "
            "CREATE (a)-[:NEXT_STEP]->(b)",
            [pair for steps, _ in edges for pair in steps],
        )
        self._link(
            conn,
            "create_branches",
            "UNWIND $rows AS p MATCH (a:RuleNode {id: p.src}) MATCH (b:RuleNode {id: p.dst}) "
            "CREATE (a)-[:BRANCH {`when`: p.`when`}]->(b)",
            [pair for _, branches in edges for pair in branches],
        )

    # tasks

    def _create_tasks(self, conn: Any, tasks: Sequence[Task]) -> None:
        """Create tasks not in the graph, with their states chained by TRANSITION."""
        self._create(
            conn,
            "Task",
            [
                {
                    "id": task.id,
                    "turn_id": task.turn_id,
                    "title": task.title,
                    "text": task.text,
                    "due": _utc(task.due),
                    "status": str(task.status),
                    **_header_params(task.header),
                }
                for task in tasks
            ],
        )
        self._link(
            conn,
            "create_states",
            "UNWIND $rows AS p MATCH (t:Task {id: p.task}) CREATE (t)-[:HAS_STATE]->(:State "
            f"{{{_assignments(STATE_FIELDS)}}})",
            [
                {
                    "task": task.id,
                    "id": s.id,
                    "status": str(s.status),
                    "ts": _utc(s.ts),
                    "note": s.note,
                    "turn_id": s.turn_id,
                }
                for task in tasks
                for s in task.states
            ],
        )
        self._link(
            conn,
            "create_transitions",
            "UNWIND $rows AS p MATCH (a:State {id: p.src}) MATCH (b:State {id: p.dst}) "
            "CREATE (a)-[:TRANSITION]->(b)",
            [pair for task in tasks for pair in _pairs([s.id for s in task.states])],
        )

    # -- reads --------------------------------------------------------------------------------

    def applied_seq(self) -> int:
        """The highest journal sequence number applied so far; 0 for an empty graph."""
        rows = self._read(
            "applied_seq", "MATCH (m:Meta {key: $key}) RETURN m.value", {"key": APPLIED_SEQ}
        )
        return int(rows[0][0]) if rows else 0

    def counts(self) -> dict[str, int]:
        """Nodes per table (``Turn``, ``Episode``, ``Entity``, ``User``, ``Rule``, ``RuleNode``,
        ``Task``, ``State``) and fact edges (``FACT``), all from one committed state."""
        statements: list[tuple[str, dict[str, Any]]] = [
            (f"MATCH (n:{table}) RETURN count(n)", {}) for table in _COUNTED_TABLES
        ]
        statements.append(("MATCH ()-[f:FACT]->() RETURN count(f)", {}))
        results = self._read_all("counts", statements)
        return {
            table: int(rows[0][0])
            for table, rows in zip([*_COUNTED_TABLES, "FACT"], results, strict=True)
        }

    # turns

    def has_turn(self, turn_id: str) -> bool:
        """Whether the turn has been applied (and not cleared)."""
        rows = self._read("has_turn", "MATCH (t:Turn {id: $id}) RETURN t.id", {"id": turn_id})
        return bool(rows)

    def memory_ids_for_turn(self, turn_id: str) -> list[str]:
        """Ids of the episodes, rules, tasks and facts derived from a turn, sorted; [] if none."""
        params = {"id": turn_id}
        nodes, facts = self._read_all(
            "memory_ids_for_turn",
            [
                ("MATCH (m)-[:FROM_TURN]->(:Turn {id: $id}) RETURN m.id", params),
                ("MATCH (:User)-[f:FACT]->(:Entity) WHERE f.turn_id = $id RETURN f.id", params),
            ],
        )
        return sorted(row[0] for row in nodes + facts)

    # episodes

    def timeline(
        self, episode_id: str, *, later: bool, hops: int, session_only: bool = False
    ) -> list[str]:
        """Episodes up to ``hops`` steps after (``later``) or before an episode, nearest first.

        The steps follow the user's whole timeline (PRECEDES: every session, by (ts, id)), or
        with ``session_only`` the episode's session (NEXT). An unknown id gives []. ``hops`` is
        1 to :data:`MAX_CHAIN_HOPS` (the engines' variable-length limit).
        """
        if not 1 <= hops <= MAX_CHAIN_HOPS:
            raise ValueError(f"hops must be 1 to {MAX_CHAIN_HOPS}, got {hops}")
        rel = "NEXT" if session_only else "PRECEDES"
        step = f"[:{rel}*1..{int(hops)}]"
        path = (
            f"(a:Episode {{id: $id}})-{step}->(n:Episode)"
            if later
            else f"(n:Episode)-{step}->(a:Episode {{id: $id}})"
        )
        rows = self._read(
            "timeline",
            f"MATCH p = {path} RETURN n.id, length(p) AS d ORDER BY d",
            {"id": episode_id},
        )
        return [row[0] for row in rows]

    def episodes_mentioning(self, entity_ids: Sequence[str], limit: int) -> dict[str, list[str]]:
        """Episodes that mention any of the entities, with the ids of those they mention
        (sorted); the ``limit`` most recent episodes by (ts, id), in that order. {} if none."""
        if not entity_ids or limit < 1:
            return {}
        rows = self._read(
            "episodes_mentioning",
            "MATCH (e:Episode)-[:MENTIONS]->(x:Entity) WHERE x.id IN $ids "
            f"RETURN e.id, collect(x.id) AS found, {_EPISODE_TS} AS ts ORDER BY ts DESC, e.id DESC "
            "LIMIT $limit",
            {"ids": list(entity_ids), "limit": int(limit)},
        )
        return {eid: sorted(set(found)) for eid, found, _ in rows}

    def episodes_in_window(self, start: datetime, end: datetime, limit: int) -> list[str]:
        """Episodes whose time (``event_time`` if set, else ``ts``) is in [start, end), earliest
        first, at most ``limit``; [] if none."""
        if limit < 1:
            return []
        rows = self._read(
            "episodes_in_window",
            "MATCH (e:Episode) WITH e, coalesce(e.event_time, e.ts) AS t "
            "WHERE t >= $since AND t < $until RETURN e.id ORDER BY t, e.id LIMIT $limit",
            {"since": _utc(start), "until": _utc(end), "limit": int(limit)},
        )
        return [row[0] for row in rows]

    def entities_of(self, memory_ids: Sequence[str]) -> dict[str, list[Entity]]:
        """Entities each memory is about: an episode's mentions, a fact's object.

        Every requested id is a key; rules, tasks and unknown ids map to []. Entities are
        distinct and sorted by id.
        """
        if not memory_ids:
            return {}
        params = {"ids": list(memory_ids)}
        mentioned, objects = self._read_all(
            "entities_of",
            [
                (
                    "MATCH (e:Episode)-[:MENTIONS]->(x:Entity) WHERE e.id IN $ids "
                    "RETURN e.id, x.id, x.name, x.type",
                    params,
                ),
                (
                    "MATCH (:User)-[f:FACT]->(x:Entity) WHERE f.id IN $ids "
                    "RETURN f.id, x.id, x.name, x.type",
                    params,
                ),
            ],
        )
        found: dict[str, dict[str, Entity]] = {mid: {} for mid in memory_ids}
        for mid, xid, name, kind in mentioned + objects:
            found[mid][xid] = Entity(xid, name, EntityType(kind))
        return {mid: [by_id[x] for x in sorted(by_id)] for mid, by_id in found.items()}

    # facts

    def facts_about(self, entity_ids: Sequence[str], current_only: bool = True) -> list[str]:
        """Ids of facts whose object is one of the entities, sorted; with ``current_only`` only
        those whose ``valid_to`` is unset. [] if none."""
        if not entity_ids:
            return []
        current = " AND f.valid_to IS NULL" if current_only else ""
        rows = self._read(
            "facts_about",
            f"MATCH (:User)-[f:FACT]->(x:Entity) WHERE x.id IN $ids{current} "
            "RETURN f.id ORDER BY f.id",
            {"ids": list(entity_ids)},
        )
        return [row[0] for row in rows]

    # rules

    def rules_with_conditions(self) -> list[tuple[str, list[str]]]:
        """Every rule that has condition nodes, with their texts in (ord, id) order; sorted by
        rule id. Rules without conditions are left out.

        Every query matches its words against all of them, so the list is kept until the next
        write (1,100 conditions at 10k turns took 3.5 ms to read); callers must not change it.
        """
        generation = self._generation
        cached = self._rule_conditions
        if cached is not None and cached[0] == generation:
            return cached[1]
        rows = self._read(
            "rules_with_conditions",
            "MATCH (r:Rule)-[:HAS_NODE]->(n:RuleNode) WHERE n.kind = $kind "
            "RETURN r.id, n.text ORDER BY r.id, n.ord, n.id",
            {"kind": str(RuleNodeKind.CONDITION)},
        )
        grouped: dict[str, list[str]] = {}
        for rule_id, text in rows:
            grouped.setdefault(rule_id, []).append(text)
        self._rule_conditions = (generation, list(grouped.items()))
        return self._rule_conditions[1]

    def rule_tree(
        self, rule_id: str, *, edges: bool = False
    ) -> list[RuleNode] | tuple[list[RuleNode], list[tuple[str, str, str, str | None]]]:
        """A rule's nodes in (ord, id) order; [] for an unknown rule.

        With ``edges=True``: ``(nodes, edges)``, read from one committed state, where ``edges``
        are the tree's ``(rel, src, dst, when)`` between the rule's nodes, ``rel`` "NEXT_STEP"
        (``when`` None) or "BRANCH", sorted (see :func:`_rule_edges` for the shape).
        """
        key = {"id": rule_id}
        statements = [
            (
                "MATCH (:Rule {id: $id})-[:HAS_NODE]->(n:RuleNode) "
                "RETURN n.id, n.kind, n.text, n.ord, n.`when` ORDER BY n.ord, n.id",
                key,
            )
        ]
        if edges:
            statements += [
                (
                    "MATCH (:Rule {id: $id})-[:HAS_NODE]->(a:RuleNode)-[:NEXT_STEP]->(b:RuleNode) "
                    "RETURN a.id, b.id",
                    key,
                ),
                (
                    "MATCH (:Rule {id: $id})-[:HAS_NODE]->(a:RuleNode)-[e:BRANCH]->(b:RuleNode) "
                    "RETURN a.id, b.id, e.`when`",
                    key,
                ),
            ]
        results = self._read_all("rule_tree", statements)
        nodes = [
            RuleNode(nid, RuleNodeKind(kind), text, int(ord_), when)
            for nid, kind, text, ord_, when in results[0]
        ]
        if not edges:
            return nodes
        links: list[tuple[str, str, str, str | None]] = [
            ("NEXT_STEP", a, b, None) for a, b in results[1]
        ]
        links += [("BRANCH", a, b, when) for a, b, when in results[2]]
        return nodes, sorted(links, key=lambda e: (e[0], e[1], e[2], e[3] or ""))
