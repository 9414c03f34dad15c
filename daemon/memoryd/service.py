"""MemoryService: the one façade that the HTTP API, the MCP tools and the CLI call.

It owns what all users share (the encoder, the router's shared part, the LLM, the retriever)
and the registry of open workspaces, checks what a request asks for, leases the user's
workspace and hands the work to it. Every public method is blocking (async callers run it in a
worker thread) and returns typed results: records of :mod:`memoryd.models` and
:mod:`memoryd.store`, :class:`memoryd.retrieve.QueryResult`, and plain reports (counts, status)
as ``dict``. How a result looks in JSON is decided by :mod:`memoryd.schemas`, not here.

    service = MemoryService.from_config(load_config(environ=os.environ))
    service.ingest("alice", [NewTurn(session_id="s1", role=Role.USER, text="I live in Oslo")])
    result = service.query("alice", QueryParams(query="where do I live?"))
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memoryd import __version__
from memoryd.config import Config
from memoryd.encoder import Encoder
from memoryd.errors import (
    ClosedError,
    ConfigError,
    ConflictError,
    DiskFullError,
    InvalidInputError,
    InvalidUserIdError,
    JournalDamagedError,
    LLMError,
    MemorydError,
    TurnNotFoundError,
    UserNotFoundError,
)
from memoryd.files import lock_data_dir
from memoryd.heap import release_free_memory
from memoryd.ingest import NewTurn
from memoryd.labelling import Labelling
from memoryd.llm import IMPORTANCE_BATCH, LLM, make_llm
from memoryd.memory import api_task
from memoryd.models import (
    USER_ID,
    Memory,
    MemoryType,
    Receipt,
    RoutedBy,
    SufficiencyJudge,
    Task,
    TaskStatus,
    Turn,
)
from memoryd.portability import check_header, export_records, import_records
from memoryd.reader import FactReader
from memoryd.registry import Registry
from memoryd.retrieve import (
    LLMSufficiency,
    QueryParams,
    QueryResult,
    Retriever,
    ScoreSufficiency,
    Sufficiency,
)
from memoryd.router import Router, RouterHead, SelfEnhancingRouter
from memoryd.store import StoredMemory, integrity_problems
from memoryd.workspace import (
    JOURNAL_FILE,
    LABEL_OUTCOMES,
    MemoryPatch,
    RereadReport,
    Shared,
    UndoneFact,
    Workspace,
)

__all__ = [
    "USER_ID",
    "MemoryPage",
    "MemoryService",
    "TurnPage",
    "TurnView",
    "check_user_id",
]

log = logging.getLogger(__name__)

USERS_DIR = "users"
ROUTER_HEAD_FILE = "router_head.npz"
EXPANSION_THREADS = 4  # one per typed expansion of a query


def check_user_id(user_id: str) -> str:
    if not USER_ID.fullmatch(user_id):
        raise InvalidUserIdError(user_id)
    return user_id


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class TurnView:
    """A stored turn, the memories made from it and its first receipt."""

    turn: Turn
    memories: list[StoredMemory]
    receipt: Receipt


@dataclass(frozen=True)
class TurnPage:
    """Turns in journal order and the cursor of the next page (None: the last page)."""

    turns: list[Turn]
    next_cursor: int | None


@dataclass(frozen=True)
class MemoryPage:
    """Memories in insertion order and the cursor of the next page (None: the last page)."""

    memories: list[StoredMemory]
    next_cursor: int | None


class MemoryService:
    """The running system. Build it with :meth:`from_config`; ``close()`` when done.

    Parameters: ``config`` (validated settings), ``encoder`` (sentence encoder), ``router``
    (memory-type router with the shipped head; each user's head grows from it), ``llm`` (the
    labeller of deferred turns and the background LLM; None turns them off), ``reader`` (the
    fact reader; by default the one built into ``config.model_dir``), ``owns_encoder``
    (close the encoder and the LLM on close; true when built by :meth:`from_config`). Takes an
    exclusive lock on ``config.data_dir`` so that a second process cannot open the same stores.
    """

    def __init__(
        self,
        config: Config,
        encoder: Encoder,
        router: Router,
        *,
        llm: LLM | None = None,
        reader: FactReader | None = None,
        owns_encoder: bool = False,
    ) -> None:
        self.config = config
        self._owns_encoder = owns_encoder
        self.encoder = encoder
        self.llm = llm
        loop = SelfEnhancingRouter(
            router.head, config.router, config.model_dir, encoder.routing_vector, llm
        )
        self._encoding = ThreadPoolExecutor(config.encoder.pool_size, thread_name_prefix="encode")
        reader = reader or FactReader.load(config.model_dir)
        reader.check_input(encoder.reads_tuned)
        self.shared = Shared(config, encoder, loop, llm, self._encoding, reader)
        self.retriever = Retriever(
            config.retrieval,
            _judge(config, llm),
            timedelta(hours=config.memory.recent_hours),
            config.tiers.search,
        )
        self.users_dir = config.data_dir / USERS_DIR
        self.users_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = lock_data_dir(config.data_dir)
        self.users = Registry(self._open, config.limits.max_open_users)
        self.labelling = Labelling(self.users, self.user_exists, config.llm.timeout)
        self._expander = ThreadPoolExecutor(EXPANSION_THREADS, thread_name_prefix="expand")
        self._importing: set[str] = set()  # users an import is filling (guarded by the lock)
        self._importing_lock = threading.Lock()
        self._sound: set[str] = set()  # users whose journal passed the integrity check
        self._closed = False

    @classmethod
    def from_config(cls, config: Config) -> MemoryService:
        encoder = Encoder(config.model_dir, threads=config.encoder.threads)
        head = RouterHead.load(config.model_dir / ROUTER_HEAD_FILE)
        router = Router(head, threshold=config.router.threshold)
        return cls(config, encoder, router, llm=make_llm(config), owns_encoder=True)

    # -- users -------------------------------------------------------------------------------

    def _user_dir(self, user_id: str) -> Path:
        return self.users_dir / check_user_id(user_id)

    def _open(self, user_id: str) -> Workspace:
        directory = self._user_dir(user_id)
        self._check_journal(user_id, directory / JOURNAL_FILE)
        try:
            return Workspace(user_id, directory, self.shared)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFullError(str(directory)) from exc
            raise

    def _check_journal(self, user_id: str, path: Path) -> None:
        """The first open of a user in this process runs SQLite's integrity check on its
        journal: a damaged journal is refused (JournalDamagedError), never used."""
        if user_id in self._sound or not path.exists():
            return
        problems = integrity_problems(path)
        if problems:
            error = JournalDamagedError(user_id, "; ".join(problems)[:300])
            log.error("%s", error)
            raise error
        self._sound.add(user_id)

    def user_exists(self, user_id: str) -> bool:
        return self._user_dir(user_id).is_dir()

    def users_with_data(self) -> list[str]:
        return sorted(p.name for p in self.users_dir.iterdir() if p.is_dir())

    def _lease(self, user_id: str, create: bool = False) -> AbstractContextManager[Workspace]:
        """The user's workspace (UserNotFoundError unless the user has data or ``create``)."""
        if not create and not self.user_exists(user_id):
            raise UserNotFoundError(user_id)
        return self.users.lease(check_user_id(user_id))

    # -- write path --------------------------------------------------------------------------

    def ingest(
        self, user_id: str, turns: Sequence[NewTurn], now: datetime | None = None
    ) -> list[Receipt]:
        """Route, extract and durably store ``turns``; one receipt per turn, in order.

        A turn id already stored (or repeated in the batch) returns its first receipt with
        ``duplicate`` set and writes nothing.
        """
        self._check_turns(turns)
        with self._lease(user_id, create=True) as ws:
            receipts = ws.ingest(turns, now or _now())
        if any(r.routed_by is RoutedBy.DEFERRED and not r.duplicate for r in receipts):
            self.labelling.add(user_id)
        return receipts

    def _check_turns(self, turns: Sequence[NewTurn]) -> None:
        limits = self.config.limits
        if not 1 <= len(turns) <= limits.max_turns_per_request:
            raise InvalidInputError(
                f"send 1-{limits.max_turns_per_request} turns, not {len(turns)}"
            )
        for i, t in enumerate(turns):
            if not t.text.strip():
                raise InvalidInputError(f"turns[{i}].text is empty")
            if len(t.text.encode()) > limits.max_turn_bytes:
                raise InvalidInputError(f"turns[{i}].text is over {limits.max_turn_bytes} bytes")

    # -- read path ---------------------------------------------------------------------------

    def query(self, user_id: str, params: QueryParams) -> QueryResult:
        """Typed, explained retrieval. A user with no data gets an empty result.

        With ``before``/``after`` the anchor text is what gets embedded: it finds the anchor
        episode, whose timeline neighbours are the answer (see :mod:`memoryd.retrieve`)."""
        check_user_id(user_id)
        if not params.query.strip():
            raise InvalidInputError("query is empty")
        if not self.user_exists(user_id):
            return QueryResult()
        vector = self.encoder.embed(params.anchor if params.anchor is not None else params.query)
        with self._lease(user_id) as ws:
            return ws.recall(vector, params, self.retriever, self._expander)

    def get_turn(self, user_id: str, turn_id: str) -> TurnView:
        """The turn with its labels, the memories made from it and its first receipt."""
        with self._lease(user_id) as ws:
            found = ws.journal.turn(turn_id)
            if found is None:
                raise TurnNotFoundError(user_id, turn_id)
            turn, _, receipt = found
            return TurnView(turn, ws.journal.memories_of_turn(turn_id), receipt)

    def list_turns(
        self, user_id: str, session_id: str | None, limit: int, cursor: int = 0
    ) -> TurnPage:
        with self._lease(user_id) as ws:
            rows = ws.journal.turns(session_id, limit, after_seq=cursor)
        return TurnPage([t for _, t in rows], rows[-1][0] if len(rows) == limit else None)

    def list_memories(
        self, user_id: str, types: Sequence[MemoryType], limit: int, cursor: int = 0
    ) -> MemoryPage:
        """Live memories of ``types`` (all when empty) in insertion order, with live headers."""
        with self._lease(user_id) as ws:
            stored = ws.journal.list_memories(types or tuple(MemoryType), limit, after_num=cursor)
            ws.tiers.put_live_headers({s.num: s.memory for s in stored})
        return MemoryPage(stored, stored[-1].num if len(stored) == limit else None)

    def get_memory(self, user_id: str, memory_id: str) -> StoredMemory:
        """The memory with its live header (importance, persona similarity, recalls, tier)."""
        with self._lease(user_id) as ws:
            stored = ws.edits.stored(memory_id)
            ws.tiers.put_live_headers({stored.num: stored.memory})
        return stored

    def patch_memory(self, user_id: str, memory_id: str, patch: MemoryPatch) -> Memory:
        """Edit a memory's text (re-embedded) or importance; journaled, then projected."""
        if patch.text is not None and not patch.text.strip():
            raise InvalidInputError("text is empty")
        if patch.importance is not None and not 1.0 <= patch.importance <= 10.0:
            raise InvalidInputError("importance must be in [1, 10]")
        vector = self.encoder.embed(patch.text) if patch.text is not None else None
        with self._lease(user_id) as ws:
            return ws.edits.patch(memory_id, patch, vector)

    def delete_memory(self, user_id: str, memory_id: str) -> None:
        with self._lease(user_id) as ws:
            ws.edits.delete(memory_id)

    # -- semantic facts, tasks, feedback ----------------------------------------------------

    def list_facts(
        self, user_id: str, subject: str | None = None, history: bool = False
    ) -> list[StoredMemory]:
        """The user's current facts (with ``history``, the superseded ones too), oldest first."""
        with self._lease(user_id) as ws:
            return ws.journal.facts(subject, history)

    def reread_facts(self, user_id: str) -> RereadReport:
        """Read the user's journaled turns again with the current fact reader and replace the
        facts read before, in one journaled change (:mod:`memoryd.workspace.reread`)."""
        with self._lease(user_id) as ws:
            return ws.reread.run(_now())

    def undo_reread(self, user_id: str) -> RereadReport:
        """Reverse the user's last reread in one journaled change."""
        with self._lease(user_id) as ws:
            return ws.reread.undo(_now())

    def undo_supersession(self, user_id: str, fact_id: str) -> UndoneFact:
        """Make a superseded fact current again; the fact that closed it stays current too."""
        with self._lease(user_id) as ws:
            undone = ws.edits.undo_supersession(fact_id)
        log.info(
            "user %s: undid the supersession of %s by %s",
            user_id,
            fact_id,
            undone.was_superseded_by,
        )
        return undone

    def create_task(
        self,
        user_id: str,
        title: str,
        due: datetime | None = None,
        task_id: str | None = None,
        now: datetime | None = None,
    ) -> Task:
        """A pending task made through the API (idempotent on ``task_id``)."""
        if not title.strip():
            raise InvalidInputError("title is empty")
        now = now or _now()
        task_id = task_id or "task_" + hashlib.sha256(os.urandom(16)).hexdigest()[:16]
        vector = self.encoder.embed(title)
        task = api_task(task_id, title.strip(), due, now, "created via the API")
        with self._lease(user_id, create=True) as ws:
            return ws.edits.create_task(task, vector, now)

    def update_task(
        self,
        user_id: str,
        task_id: str,
        status: TaskStatus,
        note: str = "",
        now: datetime | None = None,
    ) -> Task:
        """Move a task to ``status`` (see :func:`memoryd.memory.changes.transition`)."""
        with self._lease(user_id) as ws:
            return ws.edits.update_task(task_id, status, note, now or _now())

    def list_tasks(self, user_id: str, statuses: Sequence[TaskStatus]) -> list[StoredMemory]:
        with self._lease(user_id) as ws:
            return ws.journal.tasks(statuses or tuple(TaskStatus))

    def feedback(self, user_id: str, memory_id: str, positive: bool) -> Memory:
        """Count a vote on a rule or an episode (positive episodes feed A_proc)."""
        with self._lease(user_id) as ws:
            return ws.edits.feedback(memory_id, positive)

    def expire_tasks(self, now: datetime | None = None) -> int:
        """Expire the overdue pending tasks of every open user (the maintenance job)."""
        now = now or _now()
        after = timedelta(seconds=self.config.memory.expire_after)
        counts = self._each_open_user("task expiry", lambda ws: ws.edits.expire_tasks(now, after))
        for user_id, count in counts.items():
            if count:
                log.info("user %s: expired %d overdue task(s)", user_id, count)
        return sum(counts.values())

    # -- background LLM work -----------------------------------------------------------------

    def _require_llm(self) -> LLM:
        if self.llm is None:
            raise InvalidInputError("no LLM is configured (llm.backend = none)")
        return self.llm

    def abstract_now(self, user_id: str) -> dict[str, int]:
        """Run the LLM abstraction operators over all of the user's new episodes now (the job
        does the same a few batches at a time). Raises LLMError when the LLM fails, and
        InvalidInputError when no LLM is configured."""
        llm = self._require_llm()
        totals: Counter[str] = Counter()
        with self._lease(user_id) as ws:
            while counts := ws.abstract(llm):
                totals.update(counts)
        return dict(totals)

    def abstract_pending(self) -> dict[str, int]:
        """One abstraction run over every open user (the background job); an LLM failure is
        logged and the user is retried at the next run."""
        if self.llm is None:
            return {}
        llm = self.llm
        totals: Counter[str] = Counter()
        for counts in self._each_open_user("abstraction", lambda ws: ws.abstract(llm)).values():
            totals.update(counts)
        return dict(totals)

    def score_importance(self, user_id: str, limit: int = IMPORTANCE_BATCH) -> int:
        """Ask the LLM for the importance of a batch of records still rated by the heuristic
        (active tiers and newest first); returns how many it scored."""
        llm = self._require_llm()
        with self._lease(user_id) as ws:
            return ws.tiers.score_importance(llm, self.config.llm.timeout, limit)

    def score_importance_open(self) -> int:
        """One LLM importance batch for every open user (the background job)."""
        if self.llm is None:
            return 0
        llm, timeout = self.llm, self.config.llm.timeout
        scored = self._each_open_user(
            "importance", lambda ws: ws.tiers.score_importance(llm, timeout)
        )
        return sum(scored.values())

    def _each_open_user(self, job: str, fn: Callable[[Workspace], Any]) -> dict[str, Any]:
        """Run ``fn`` on every open user's workspace; one user's failure is logged and
        skipped."""
        done: dict[str, Any] = {}
        for user_id in self.users.open_users():
            try:
                with self._lease(user_id) as ws:
                    done[user_id] = fn(ws)
            except (MemorydError, LLMError) as exc:
                log.warning("user %s: %s failed, retried next run: %s", user_id, job, exc)
        return done

    # -- tiers -------------------------------------------------------------------------------

    def tiers_status(self, user_id: str, moves: int = 20) -> dict[str, Any]:
        with self._lease(user_id) as ws:
            return {"user_id": user_id, **ws.tiers.status(moves)}

    def reshuffle(self, user_id: str, now: datetime | None = None) -> dict[str, Any]:
        """Re-score and re-place the user's active records now (on the writer)."""
        with self._lease(user_id) as ws:
            return ws.tiers.reshuffle(now)

    def reshuffle_open(self) -> int:
        """Reshuffle every open user whose memories, recalls or importances changed since its
        last reshuffle by this job (the background job); returns how many were."""
        done = self._each_open_user("reshuffle", lambda ws: ws.tiers.reshuffle_if_active())
        return sum(done.values())

    # -- the self-enhancing router ----------------------------------------------------------

    def label_deferred(self) -> dict[str, int]:
        """Label the due deferred turns of every user with pending ones (the background job).

        Each label re-routes its turn and joins the user's pool; a failed call is retried
        with backoff and given up on after ``router.max_attempts`` (the turn keeps its
        classifier label). A user whose pool grew by ``router.retrain_every`` labels gets a
        training round. Returns counts of what happened."""
        if self.llm is None:
            return dict.fromkeys(LABEL_OUTCOMES, 0)
        return self.labelling.run()

    def label_now(self, user_id: str) -> dict[str, int]:
        """Label the user's queued turns now, waiting out retry backoffs (``memoryd router
        label`` with the daemon stopped). Returns counts as :meth:`label_deferred` does."""
        if self.llm is None:
            raise ConflictError("no LLM is configured: set llm.backend (see `memoryd doctor`)")
        with self._lease(user_id) as ws:
            totals = ws.router.label_all(self.config.llm.timeout)
        return {key: totals[key] for key in LABEL_OUTCOMES}

    def router_status(self, user_id: str) -> dict[str, Any]:
        with self._lease(user_id) as ws:
            return {"user_id": user_id, **ws.router.status()}

    def train_router(self, user_id: str) -> dict[str, Any]:
        """Run a training round now, whatever the pool size (operators and tests)."""
        with self._lease(user_id) as ws:
            record = ws.router.train()
        return {"round": record.round, "accepted": record.accepted, **record.report}

    def rollback_router(self, user_id: str) -> dict[str, Any]:
        with self._lease(user_id) as ws:
            return ws.router.rollback()

    def router_statuses(self) -> dict[str, dict[str, Any]]:
        """Router status of the users whose stores are open now (for /metrics)."""
        return self._each_open_workspace(lambda ws: ws.router.status())

    # -- users -------------------------------------------------------------------------------

    def recover(self) -> dict[str, int]:
        """Open every user once so that projections replay what they miss (start-up), and
        resume the labelling of turns still queued for the LLM."""
        replayed: dict[str, int] = {}
        rebuilt: list[str] = []
        for user_id in self.users_with_data():
            try:
                with self._lease(user_id) as ws:
                    replayed[user_id] = ws.replayed_on_open
                    rebuilt += [f"{user_id} {name}" for name in ws.rebuilt_on_open]
                    if ws.has_deferred:
                        self.labelling.add(user_id)
            except JournalDamagedError:
                continue  # logged when found; the user is refused until restored
            except Exception:
                log.exception("recovering user %s failed", user_id)
        log.info(
            "start-up recovery: %d users checked, %d journal entries replayed, %s rebuilt",
            len(replayed),
            sum(replayed.values()),
            ", ".join(rebuilt) or "no projection",
        )
        return replayed

    def delete_user(self, user_id: str) -> dict[str, int]:
        """Remove the user's journal, graph, vectors and router data; return what was removed."""
        try:
            with self._lease(user_id) as ws:
                counts = ws.counts()
        except JournalDamagedError:
            counts = {}  # a damaged journal can still be forgotten
        files = self._remove_user(user_id)
        self._sound.discard(user_id)
        log.info("deleted user %s (%d turns)", user_id, counts.get("turns", 0))
        return {
            "turns": counts.get("turns", 0),
            "memories": sum(v for k, v in counts.items() if k.startswith("memories_")),
            "vectors": sum(v for k, v in counts.items() if k.startswith("vectors_")),
            "graph_nodes": sum(
                v for k, v in counts.items() if k.startswith("graph_") and k != "graph_FACT"
            ),
            "files": files,
        }

    def _remove_user(self, user_id: str) -> int:
        """Close the user's stores and remove its directory; returns how many files it held."""
        directory = self._user_dir(user_id)
        with self.users.closed(user_id):
            files = sum(1 for p in directory.rglob("*") if p.is_file())
            if directory.exists():
                shutil.rmtree(directory)
            self.labelling.discard(user_id)
        return files

    def rebuild(self, user_id: str) -> dict[str, int]:
        """Recreate the user's graph and vectors from the journal."""
        with self._lease(user_id) as ws:
            return ws.rebuild()

    def counts(self, user_id: str) -> dict[str, int]:
        with self._lease(user_id) as ws:
            return ws.counts()

    def open_counts(self) -> dict[str, dict[str, int]]:
        """Store sizes of the users whose stores are open now (for /metrics)."""
        return self._each_open_workspace(lambda ws: ws.counts(graph=False))

    def _each_open_workspace(self, fn: Callable[[Workspace], Any]) -> dict[str, Any]:
        """``fn`` on each workspace open now, without a lease (nothing is reopened); a user
        closed since the list was taken is left out: closing saved it."""
        done: dict[str, Any] = {}
        for ws in self.users.open_workspaces():
            with contextlib.suppress(ClosedError):
                done[ws.user_id] = fn(ws)
        return done

    # -- export / import ---------------------------------------------------------------------

    def export_user(self, user_id: str) -> Iterator[dict[str, Any]]:
        """The user's journal as versioned records (see :mod:`memoryd.portability`), read as
        they are iterated; UserNotFoundError at once for a user with no data."""
        check_user_id(user_id)
        if not self.user_exists(user_id):
            raise UserNotFoundError(user_id)
        return self._export(user_id)

    def _export(self, user_id: str) -> Iterator[dict[str, Any]]:
        with self._lease(user_id) as ws:
            yield from export_records(ws.journal, ws.headers, user_id, __version__, _now())

    def import_user(self, user_id: str, records: Iterable[dict[str, Any]]) -> dict[str, int]:
        """Load an export into a user that has no data yet; returns counts. All or nothing:
        an import that fails part way removes what it wrote."""
        iterator = iter(records)
        with self._importing_lock:
            self.check_importable(user_id)
            check_header(next(iterator, None))
            self._importing.add(user_id)
        try:
            with self._lease(user_id, create=True) as ws:
                applied = import_records(ws, iterator)
                counts = ws.counts()
        except BaseException:
            self._remove_user(user_id)
            log.warning("import into user %s failed; removed what it wrote", user_id)
            raise
        finally:
            with self._importing_lock:
                self._importing.discard(user_id)
        log.info("imported user %s (%d records)", user_id, applied)
        return {"records": applied, **counts}

    def check_importable(self, user_id: str) -> None:
        """ConflictError unless the user has no data and no import is filling it (an import
        only fills an empty user)."""
        check_user_id(user_id)
        if user_id in self._importing:
            raise ConflictError(f"user {user_id!r} is being imported")
        if self.user_exists(user_id):
            raise ConflictError(f"user {user_id!r} already has data; delete it first")

    def save_all(self) -> None:
        """Persist the vector indexes of every open user and checkpoint the graphs written
        since (on each user's writer), then hand the heap's free memory back to the kernel."""
        self._each_open_workspace(lambda ws: ws.save())
        release_free_memory()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.users.close()
        self._expander.shutdown()
        self._encoding.shutdown()
        if self._owns_encoder:
            self.encoder.close()
            if self.llm is not None:
                self.llm.close()
        os.close(self._lock_fd)


def _judge(config: Config, llm: LLM | None) -> Sufficiency:
    """The judge of the tiered search: ``llm`` needs a configured LLM."""
    if config.tiers.sufficiency is SufficiencyJudge.LLM:
        if llm is None:
            raise ConfigError("tiers.sufficiency", "llm", "needs an LLM: set llm.backend")
        return LLMSufficiency(llm, timeout=config.llm.timeout)
    return ScoreSufficiency(config.tiers.threshold)
