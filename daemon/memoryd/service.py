"""MemoryService: the one façade that the HTTP API, the MCP tools and the CLI call.

It owns the encoder and router (shared by all users) and one :class:`Workspace` per open user,
and hands work to the modules that do it: routing (``router``), extraction (``memory``),
retrieval (``retrieve``) and storage (``store`` via ``workspace``). Every public method is
blocking; async callers run it through ``memoryd.api.concurrency.run_blocking``.

    service = MemoryService.from_config(load_config(environ=os.environ))
    service.ingest("alice", [NewTurn(session_id="s1", role=Role.USER, text="I live in Oslo")])
    result = service.query("alice", QueryParams(query="where do I live?"))
"""

from __future__ import annotations

import base64
import dataclasses
import fcntl
import hashlib
import logging
import os
import re
import shutil
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from memoryd import __version__
from memoryd.abstraction import abstract_user
from memoryd.config import Config
from memoryd.encoder import Encoder
from memoryd.errors import (
    ConfigError,
    ConflictError,
    DataDirBusyError,
    InvalidInputError,
    InvalidUserIdError,
    LLMError,
    MemorydError,
    MemoryNotFoundError,
    TurnNotFoundError,
    UserNotFoundError,
)
from memoryd.llm import LLM, make_llm
from memoryd.llm.prompts import (
    IMPORTANCE_BATCH,
    importance_prompt,
    importance_schema,
    parse_importance,
)
from memoryd.memory.build import build_memories
from memoryd.memory.changes import api_task, expired, reopen_fact, transition, with_feedback
from memoryd.memory.consolidate import BatchView, consolidate, consolidate_entries
from memoryd.memory.extract import extract
from memoryd.memory.models import (
    Fact,
    Header,
    Label,
    Memory,
    MemoryType,
    Role,
    RoutedBy,
    Task,
    TaskStatus,
    Turn,
    memory_type,
    to_payload,
)
from memoryd.retrieve import (
    Fusion,
    QueryParams,
    QueryResult,
    RetrievalConfig,
    SearchMode,
    Stores,
    retrieve,
)
from memoryd.router import Router, RouterHead
from memoryd.router.enhance import LoopSettings, SelfEnhancingRouter
from memoryd.router.trainer import in_pool_holdout
from memoryd.store.headers import ImportanceSource
from memoryd.store.journal import (
    FEEDBACK_POSITIVE,
    LogKind,
    MemoryChange,
    NewMemory,
    Relabel,
    StoredMemory,
    TurnEntry,
    change_of_payload,
    memory_of_record,
    turn_of_payload,
    updates_of_payload,
)
from memoryd.sufficiency import LLMSufficiency, ScoreSufficiency, Sufficiency
from memoryd.tiers import reshuffle, status
from memoryd.workspace import Workspace

log = logging.getLogger(__name__)

USER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
USERS_DIR = "users"
LOCK_FILE = ".lock"
EXPORT_FORMAT = "memoryd.export"
EXPORT_VERSION = 2  # 2 adds a last "headers" record: LLM/API importance and recall counts
IMPORTABLE_VERSIONS = (1, 2)
HEADERS_RECORD = "headers"
ROUTER_HEAD_FILE = "router_head.npz"
EXPANSION_THREADS = 4  # one per typed expansion of a query
LABEL_BATCH = 16  # deferred turns labelled per user per run of the labelling job
API_SESSION = "api"  # the session of memories made through the API rather than from a turn
LABEL_OUTCOMES = ("labelled", "retried", "failed", "rounds")  # what the labelling reports


@dataclass(frozen=True)
class NewTurn:
    """A turn as a client sends it. ``turn_id`` defaults to a hash of session, role, ts, text."""

    session_id: str
    role: Role
    text: str
    ts: datetime | None = None
    speaker: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    turn_id: str | None = None

    def resolved_id(self) -> str:
        if self.turn_id:
            return self.turn_id
        ts = self.ts.isoformat() if self.ts else ""
        key = "\x1f".join((self.session_id, self.role.value, ts, self.text))
        return "t_" + hashlib.sha256(key.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class MemoryPatch:
    """Editable parts of a memory; ``None`` leaves a part unchanged."""

    text: str | None = None
    importance: float | None = None


def check_user_id(user_id: str) -> str:
    if not USER_ID.match(user_id):
        raise InvalidUserIdError(user_id)
    return user_id


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryService:
    """The running system. Build it with :meth:`from_config`; ``close()`` when done.

    Parameters: ``config`` (validated settings), ``encoder`` (sentence encoder), ``router``
    (memory-type router with the shipped head; each user's head grows from it), ``llm`` (the
    labeller of deferred turns; None turns deferral off), ``owns_encoder`` (close the encoder
    and the LLM on close; true when built by :meth:`from_config`). Takes an exclusive lock on
    ``config.data_dir`` so that a second process cannot open the same stores.
    """

    def __init__(
        self,
        config: Config,
        encoder: Encoder,
        router: Router,
        *,
        llm: LLM | None = None,
        owns_encoder: bool = False,
    ) -> None:
        self.config = config
        self._owns_encoder = owns_encoder
        self.encoder = encoder
        self.router = router
        self.llm = llm
        self.loop = SelfEnhancingRouter(
            router.head, LoopSettings.from_config(config), config.model_dir, llm
        )
        self._pending: set[str] = set()
        self.retrieval = RetrievalConfig(
            fusion=Fusion(config.retrieval_fusion),
            rrf_k=config.retrieval_rrf_k,
            bm25_weight=config.retrieval_bm25_weight,
            dense_weight=config.retrieval_dense_weight,
            session_weight=config.retrieval_session_weight,
            candidates=config.retrieval_candidates,
            recent_hours=config.memory_recent_hours,
            sufficiency=_sufficiency(config, llm),
        )
        self.default_search = SearchMode(config.tiers_search)
        self.users_dir = config.data_dir / USERS_DIR
        self.users_dir.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock_data_dir(config.data_dir)
        self._lock = threading.Lock()
        self._open_locks: dict[str, threading.Lock] = {}
        self._workspaces: OrderedDict[str, Workspace] = OrderedDict()
        self._leases: dict[str, int] = {}
        self._expander = ThreadPoolExecutor(EXPANSION_THREADS, thread_name_prefix="expand")
        self._closed = False

    @classmethod
    def from_config(cls, config: Config) -> MemoryService:
        encoder = Encoder(config.model_dir, threads=config.encoder_threads)
        head = RouterHead.load(config.model_dir / ROUTER_HEAD_FILE)
        router = Router(head, threshold=config.router_threshold)
        return cls(config, encoder, router, llm=make_llm(config), owns_encoder=True)

    # -- workspaces --------------------------------------------------------------------------

    def _user_dir(self, user_id: str) -> Path:
        return self.users_dir / check_user_id(user_id)

    def user_exists(self, user_id: str) -> bool:
        return self._user_dir(user_id).is_dir()

    @contextmanager
    def _workspace(self, user_id: str, create: bool = False) -> Iterator[Workspace]:
        """Lease the user's workspace, opening it (and replaying) on first use."""
        directory = self._user_dir(user_id)
        if not create and not directory.is_dir():
            raise UserNotFoundError(user_id)
        with self._lock:
            open_lock = self._open_locks.setdefault(user_id, threading.Lock())
        with open_lock:
            with self._lock:
                ws = self._workspaces.get(user_id)
            if ws is None:
                ws = Workspace(
                    user_id, directory, self.config, self.encoder.dim, self.encoder.embed
                )
                log.info("opened user %s", user_id)
            with self._lock:
                self._workspaces[user_id] = ws
                self._workspaces.move_to_end(user_id)
                self._leases[user_id] = self._leases.get(user_id, 0) + 1
        try:
            yield ws
        finally:
            with self._lock:
                self._leases[user_id] -= 1
            self._evict()

    def _evict(self) -> None:
        """Close least-recently-used idle workspaces beyond ``limits.max_open_users``.

        A victim is closed under its user's open lock, so nobody reopens it half-closed."""
        with self._lock:
            excess = len(self._workspaces) - self.config.limits_max_open_users
            idle = [u for u in self._workspaces if self._leases.get(u, 0) == 0]
            candidates = idle[: max(0, excess)]
            locks = [(u, self._open_locks[u]) for u in candidates]
        for user_id, open_lock in locks:
            with open_lock:
                with self._lock:
                    unused = self._leases.get(user_id, 0) == 0
                    ws = self._workspaces.pop(user_id) if unused else None
                if ws is not None:
                    ws.close()
                    log.info("closed idle user %s", user_id)

    # -- write path --------------------------------------------------------------------------

    def ingest(
        self, user_id: str, turns: Sequence[NewTurn], now: datetime | None = None
    ) -> list[dict[str, Any]]:
        """Route, extract and durably store ``turns``; one reply per turn, in order.

        A turn id already stored (or repeated in the batch) returns its first reply with
        ``duplicate: true`` and writes nothing.
        """
        now = now or _now()
        self._check_turns(turns)
        ids = [t.resolved_id() for t in turns]
        committed: set[str] = set()
        with self._workspace(user_id, create=True) as ws:
            replies = ws.journal.replies(ids)
            prepared: dict[str, TurnEntry] = {}
            for i, (new, turn_id) in enumerate(zip(turns, ids, strict=True)):
                if turn_id not in replies and turn_id not in prepared:
                    # Turns sent without a time keep the request's order: 1 µs apart.
                    arrival = now + timedelta(microseconds=i)
                    prepared[turn_id] = self._prepare(ws, new, turn_id, arrival)
            if prepared:
                entries = list(prepared.values())
                committed, stored = ws.writer.call(lambda: self._commit(ws, entries))
                replies.update(stored)
                if any(e.routing and e.routing.deferred for e in entries):
                    with self._lock:
                        self._pending.add(user_id)
        out = []
        for turn_id in ids:
            out.append({**replies[turn_id], "duplicate": turn_id not in committed})
            committed.discard(turn_id)
        return out

    def _check_turns(self, turns: Sequence[NewTurn]) -> None:
        limit = self.config.limits_max_turn_bytes
        if not 1 <= len(turns) <= self.config.limits_max_turns_per_request:
            raise InvalidInputError(
                f"send 1-{self.config.limits_max_turns_per_request} turns, not {len(turns)}"
            )
        for i, t in enumerate(turns):
            if not t.text.strip():
                raise InvalidInputError(f"turns[{i}].text is empty")
            if len(t.text.encode()) > limit:
                raise InvalidInputError(f"turns[{i}].text is over {limit} bytes")

    def _prepare(self, ws: Workspace, new: NewTurn, turn_id: str, now: datetime) -> TurnEntry:
        vector = self.encoder.embed(new.text)
        decision, routing = self.loop.route(ws.user_id, ws.journal, vector, new.text)
        turn = Turn(
            turn_id=turn_id,
            session_id=new.session_id,
            role=new.role,
            text=new.text,
            ts=new.ts or now,
            speaker=new.speaker,
            metadata=dict(new.metadata),
            labels=decision.labels,
            confidence=decision.confidence,
            routed_by=decision.routed_by,
        )
        memories = build_memories(turn, extract(turn.text, turn.ts))
        reply = {
            "turn_id": turn_id,
            "labels": [label.value for label in turn.labels],
            "confidence": round(turn.confidence, 4),
            "routed_by": turn.routed_by.value,
            "low_confidence": routing.low_confidence,
            "memories": [{"id": m.id, "type": memory_type(m).value} for m in memories],
        }
        return TurnEntry(turn, vector, memories, reply, routing)

    @staticmethod
    def _commit(
        ws: Workspace, entries: list[TurnEntry]
    ) -> tuple[set[str], dict[str, dict[str, Any]]]:
        """On the writer: skip ids journaled since the caller looked, consolidate the rest
        against the stored memories (canonical entities, superseded facts, completed tasks)
        and commit them.

        Returns the committed ids and the reply of every entry (stored first replies for the
        skipped ones)."""
        stored = ws.journal.replies([e.turn.turn_id for e in entries])
        fresh = [e for e in entries if e.turn.turn_id not in stored]
        if fresh:
            fresh = consolidate_entries(fresh, ws.journal, ws.entities)
            ws.commit_turns(fresh)
        return {e.turn.turn_id for e in fresh}, stored | {e.turn.turn_id: e.reply for e in fresh}

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
        if params.search is None:
            params = dataclasses.replace(params, search=self.default_search)
        vector = self.encoder.embed(params.anchor if params.anchor is not None else params.query)
        with self._workspace(user_id) as ws:
            stores = Stores(ws.journal, ws.graph, ws.vectors, ws.headers)
            result = retrieve(stores, vector, params, self.retrieval, self._expander)
            _live_headers(ws, {i.num: i.memory for i in result.items})
            hits = [i.num for i in result.items if i.hit]
            if params.recall and hits:
                ws.note_recall(hits, params.reference_time())
        return result

    def get_turn(self, user_id: str, turn_id: str) -> dict[str, Any]:
        with self._workspace(user_id) as ws:
            found = ws.journal.turn(turn_id)
            if found is None:
                raise TurnNotFoundError(user_id, turn_id)
            turn, _, reply = found
            memories = ws.journal.memories_of_turn(turn_id)
        return {
            **_turn_dict(turn),
            "memories": [{"id": s.memory.id, "type": s.type.value} for s in memories],
            "reply": reply,
        }

    def list_turns(
        self, user_id: str, session_id: str | None, limit: int, cursor: int = 0
    ) -> dict[str, Any]:
        with self._workspace(user_id) as ws:
            rows = ws.journal.turns(session_id, limit, after_seq=cursor)
        return {
            "turns": [_turn_dict(t) for _, t in rows],
            "next_cursor": rows[-1][0] if len(rows) == limit else None,
        }

    def list_memories(
        self, user_id: str, types: Sequence[MemoryType], limit: int, cursor: int = 0
    ) -> dict[str, Any]:
        with self._workspace(user_id) as ws:
            stored = ws.journal.list_memories(types or tuple(MemoryType), limit, after_num=cursor)
            _live_headers(ws, {s.num: s.memory for s in stored})
        return {
            "memories": [_memory_dict(s.memory, s.type) for s in stored],
            "next_cursor": stored[-1].num if len(stored) == limit else None,
        }

    def get_memory(self, user_id: str, memory_id: str) -> dict[str, Any]:
        """The memory with its live header (importance, persona similarity, recalls, tier)."""
        with self._workspace(user_id) as ws:
            stored = self._stored(ws, user_id, memory_id)
            _live_headers(ws, {stored.num: stored.memory})
        return _memory_dict(stored.memory, stored.type)

    def patch_memory(self, user_id: str, memory_id: str, patch: MemoryPatch) -> dict[str, Any]:
        """Edit a memory's text (re-embedded) or importance; journaled, then projected."""
        if patch.text is not None and not patch.text.strip():
            raise InvalidInputError("text is empty")
        if patch.importance is not None and not 1.0 <= patch.importance <= 10.0:
            raise InvalidInputError("importance must be in [1, 10]")
        vector = self.encoder.embed(patch.text) if patch.text is not None else None
        with self._workspace(user_id) as ws:

            def write() -> Memory:
                memory = self._stored(ws, user_id, memory_id).memory
                if patch.text is not None:
                    memory = dataclasses.replace(memory, text=patch.text)
                if patch.importance is not None:
                    header = dataclasses.replace(memory.header, importance=patch.importance)
                    memory = dataclasses.replace(memory, header=header)
                ws.patch_memory(memory, vector, patch.importance)
                return memory

            memory = ws.writer.call(write)
        return _memory_dict(memory, memory_type(memory))

    def delete_memory(self, user_id: str, memory_id: str) -> dict[str, Any]:
        with self._workspace(user_id) as ws:

            def write() -> None:
                self._stored(ws, user_id, memory_id)
                ws.delete_memory(memory_id)

            ws.writer.call(write)
        return {"id": memory_id, "deleted": True}

    # -- semantic facts, tasks, feedback ----------------------------------------------------

    def list_facts(
        self, user_id: str, subject: str | None = None, history: bool = False
    ) -> dict[str, Any]:
        """The user's current facts (with ``history``, the superseded ones too), oldest first."""
        with self._workspace(user_id) as ws:
            stored = ws.journal.facts(subject, history)
        return {"facts": [_fact_dict(s) for s in stored]}

    def undo_supersession(self, user_id: str, fact_id: str) -> dict[str, Any]:
        """Make a superseded fact current again; the fact that closed it stays current too."""
        with self._workspace(user_id) as ws:

            def write() -> tuple[Memory, str | None]:
                stored = self._stored(ws, user_id, fact_id)
                superseded_by = getattr(stored.memory, "superseded_by", None)
                fact = reopen_fact(stored.memory)
                ws.change(MemoryChange("undo_supersession", fact_id, updates=[fact]))
                return fact, superseded_by

            fact, superseded_by = ws.writer.call(write)
        log.info("user %s: undid the supersession of %s by %s", user_id, fact_id, superseded_by)
        return {**_memory_dict(fact, MemoryType.SEMANTIC), "was_superseded_by": superseded_by}

    def create_task(
        self,
        user_id: str,
        title: str,
        due: datetime | None = None,
        task_id: str | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """A pending task made through the API (idempotent on ``task_id``)."""
        if not title.strip():
            raise InvalidInputError("title is empty")
        now = now or _now()
        task_id = task_id or "task_" + hashlib.sha256(os.urandom(16)).hexdigest()[:16]
        vector = self.encoder.embed(title)
        task = api_task(task_id, title.strip(), due, now, "created via the API")
        with self._workspace(user_id, create=True) as ws:

            def write() -> Memory:
                stored = ws.journal.memory(task_id)
                if stored is not None and not isinstance(stored.memory, Task):
                    raise ConflictError(f"{task_id} names a {stored.type.value} memory")
                if stored is not None:
                    return stored.memory
                new = NewMemory(task, API_SESSION, now, vector)
                ws.change(MemoryChange("task_created", task_id, created=[new]))
                return task

            task_now = ws.writer.call(write)
        return _memory_dict(task_now, MemoryType.WORKING)

    def update_task(
        self,
        user_id: str,
        task_id: str,
        status: TaskStatus,
        note: str = "",
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """Move a task to ``status`` (see :func:`memoryd.memory.changes.transition`)."""
        now = now or _now()
        with self._workspace(user_id) as ws:

            def write() -> Memory:
                stored = self._stored(ws, user_id, task_id)
                if not isinstance(stored.memory, Task):
                    raise InvalidInputError(f"{task_id} is {stored.type.value}, not a task")
                task = transition(stored.memory, status, now, note or "set via the API")
                ws.change(MemoryChange(f"task_{status.value}", task_id, updates=[task]))
                return task

            task = ws.writer.call(write)
        return _memory_dict(task, MemoryType.WORKING)

    def list_tasks(self, user_id: str, statuses: Sequence[TaskStatus]) -> dict[str, Any]:
        with self._workspace(user_id) as ws:
            stored = ws.journal.tasks(statuses or tuple(TaskStatus))
        return {"tasks": [_memory_dict(s.memory, s.type) for s in stored]}

    def feedback(self, user_id: str, memory_id: str, positive: bool) -> dict[str, Any]:
        """Count a vote on a rule or an episode (positive episodes feed A_proc)."""
        with self._workspace(user_id) as ws:

            def write() -> Memory:
                stored = self._stored(ws, user_id, memory_id)
                memory = with_feedback(stored.memory, positive)
                reason = FEEDBACK_POSITIVE if positive else "feedback_negative"
                ws.change(MemoryChange(reason, memory_id, updates=[memory]))
                return memory

            memory = ws.writer.call(write)
        return _memory_dict(memory, memory_type(memory))

    def expire_tasks(self, now: datetime | None = None) -> int:
        """Expire the overdue pending tasks of every open user (the maintenance job)."""
        now = now or _now()
        after = timedelta(seconds=self.config.memory_expire_after)
        counts = self._each_open_user("task expiry", lambda u: self._expire_user(u, now, after))
        for user_id, count in counts.items():
            if count:
                log.info("user %s: expired %d overdue task(s)", user_id, count)
        return sum(counts.values())

    def _expire_user(self, user_id: str, now: datetime, after: timedelta) -> int:
        with self._workspace(user_id) as ws:

            def write() -> int:
                tasks = expired(ws.journal.open_tasks(), now, after)
                if tasks:
                    ws.change(MemoryChange("expiry", ws.user_id, updates=tasks))
                return len(tasks)

            return ws.writer.call(write)

    def abstract_now(self, user_id: str) -> dict[str, int]:
        """Run the LLM abstraction operators over all of the user's new episodes now (the job
        does the same a few batches at a time). Raises LLMError when the LLM fails, and
        InvalidInputError when no LLM is configured."""
        if self.llm is None:
            raise InvalidInputError("no LLM is configured (llm.backend = none)")
        llm = self.llm
        totals: Counter[str] = Counter()
        with self._workspace(user_id) as ws:
            while counts := ws.writer.call(lambda: abstract_user(ws, llm, self.config)):
                totals.update(counts)
        return dict(totals)

    def abstract_pending(self) -> dict[str, int]:
        """One abstraction run over every open user (the background job); an LLM failure is
        logged and the user is retried at the next run."""
        if self.llm is None:
            return {}
        llm = self.llm

        def run(user_id: str) -> dict[str, int]:
            with self._workspace(user_id) as ws:
                return ws.writer.call(lambda: abstract_user(ws, llm, self.config))

        totals: Counter[str] = Counter()
        for counts in self._each_open_user("abstraction", run).values():
            totals.update(counts)
        return dict(totals)

    # -- tiers ------------------------------------------------------------------------------

    def tiers_status(self, user_id: str, moves: int = 20) -> dict[str, Any]:
        with self._workspace(user_id) as ws:  # on the writer: after the persona updates
            return {
                "user_id": user_id,
                **ws.writer.call(lambda: status(ws.headers, ws.tiers, moves)),
            }

    def reshuffle(self, user_id: str, now: datetime | None = None) -> dict[str, Any]:
        """Re-score and re-place the user's active records now (on the writer)."""
        with self._workspace(user_id) as ws:
            return ws.writer.call(lambda: reshuffle(ws.journal, ws.headers, ws.tiers, now))

    def reshuffle_open(self) -> int:
        """Reshuffle every open user whose memories, recalls or importances changed since its
        last reshuffle by this job (the background job); returns how many were."""

        def run(user_id: str) -> bool:
            with self._workspace(user_id) as ws:
                return ws.writer.call(lambda: _reshuffle_if_active(ws))

        return sum(self._each_open_user("reshuffle", run).values())

    def score_importance(self, user_id: str, limit: int = IMPORTANCE_BATCH) -> int:
        """Ask the LLM for the importance of up to ``limit`` records still rated by the
        heuristic (active tiers and newest first); returns how many it scored."""
        if self.llm is None:
            raise InvalidInputError("no LLM is configured (llm.backend = none)")
        with self._workspace(user_id) as ws:
            nums = ws.headers.unscored_importance(limit)
            stored = ws.journal.memories_by_num(nums)
            texts = [stored[n].memory.text for n in nums if n in stored]
            if not texts:
                return 0
            ordered = [n for n in nums if n in stored]
            answer = self.llm.generate_json(
                importance_prompt(texts),
                importance_schema(len(texts)),
                timeout=self.config.llm_timeout,
            )
            try:
                scores = parse_importance(answer, len(texts))
            except ValueError as exc:
                log.warning("user %s: importance answer unusable: %s", user_id, exc)
                return 0
            by_num = {ordered[i]: float(v) for i, v in scores.items()}
            return ws.writer.call(lambda: ws.headers.set_importance(by_num, ImportanceSource.LLM))

    def score_importance_open(self) -> int:
        """One LLM importance batch for every open user (the background job)."""
        if self.llm is None:
            return 0
        return sum(self._each_open_user("importance", self.score_importance).values())

    def _each_open_user(self, job: str, fn: Callable[[str], Any]) -> dict[str, Any]:
        """Run ``fn`` for every open user; one user's failure is logged and skipped."""
        with self._lock:
            users = list(self._workspaces)
        done: dict[str, Any] = {}
        for user_id in users:
            try:
                done[user_id] = fn(user_id)
            except (MemorydError, LLMError) as exc:
                log.warning("user %s: %s failed, retried next run: %s", user_id, job, exc)
        return done

    @staticmethod
    def _stored(ws: Workspace, user_id: str, memory_id: str) -> StoredMemory:
        stored = ws.journal.memory(memory_id)
        if stored is None:
            raise MemoryNotFoundError(user_id, memory_id)
        return stored

    # -- the self-enhancing router ----------------------------------------------------------

    def label_deferred(self) -> dict[str, int]:
        """Label the due deferred turns of every user with pending ones (the background job).

        Each label re-routes its turn and joins the user's pool; a failed call is retried
        with backoff and given up on after ``router.max_attempts`` (the turn keeps its
        classifier label). A user whose pool grew by ``router.retrain_every`` labels gets a
        training round. Returns counts of what happened."""
        totals: Counter[str] = Counter()
        with self._lock:
            users = sorted(self._pending) if self.llm is not None else []
        for user_id in users:
            try:
                with self._workspace(user_id) as ws:
                    counts, done = self._label_user(ws)
            except UserNotFoundError:
                counts, done = Counter(), True
            except MemorydError:  # one user's broken store must not stall the others
                log.exception("user %s: labelling deferred turns failed", user_id)
                continue
            totals.update(counts)
            if done:
                with self._lock:
                    self._pending.discard(user_id)
        return {key: totals[key] for key in LABEL_OUTCOMES}

    def label_now(self, user_id: str) -> dict[str, int]:
        """Label the user's queued turns now, waiting out retry backoffs (``memoryd router
        label`` with the daemon stopped). Returns counts as :meth:`label_deferred` does."""
        if self.llm is None:
            raise ConflictError("no LLM is configured: set llm.backend (see `memoryd doctor`)")
        totals: Counter[str] = Counter()
        with self._workspace(user_id) as ws:
            while (due := ws.journal.next_due()) is not None:
                time.sleep(max(0.0, due - time.time()))
                totals.update(self._label_user(ws)[0])
        return {key: totals[key] for key in LABEL_OUTCOMES}

    def _label_user(self, ws: Workspace) -> tuple[Counter[str], bool]:
        """Label the user's due turns (one batch), then train if a round is due. Returns the
        outcomes and whether nothing is left pending."""
        counts: Counter[str] = Counter()
        now = time.time()
        for due in ws.journal.due_labels(now, LABEL_BATCH):
            counts[self._label_one(ws, due.turn_id, due.attempts, now)] += 1
        if self.loop.train_if_due(ws.user_id, ws.journal, ws.writer.call) is not None:
            counts["rounds"] += 1
        return counts, ws.journal.next_due() is None

    def _label_one(self, ws: Workspace, turn_id: str, attempts: int, now: float) -> str:
        """Label one queued turn; returns "labelled", "retried" or "failed"."""
        found = ws.journal.turn(turn_id)
        if found is None:
            raise TurnNotFoundError(ws.user_id, turn_id)
        turn = found[0]
        try:
            labels = self.loop.label(turn.text, timeout=self.config.llm_timeout)
        except LLMError as exc:
            attempts += 1
            retry_at = self.loop.settings.retry_at(attempts, now)
            error = str(exc)
            ws.writer.call(lambda: ws.journal.label_failed(turn_id, attempts, error, retry_at))
            log.warning(
                "user %s: labelling turn %s failed (attempt %d%s): %s",
                ws.user_id,
                turn_id,
                attempts,
                "" if retry_at else ", giving up",
                exc,
            )
            return "retried" if retry_at else "failed"
        ws.writer.call(lambda: ws.relabel(self._relabel(ws, turn, labels)))
        return "labelled"

    def _relabel(self, ws: Workspace, turn: Turn, labels: tuple[Label, ...]) -> Relabel:
        """The re-routed turn's memories, consolidated like a new turn's (on the writer)."""
        relabelled = dataclasses.replace(turn, labels=labels, routed_by=RoutedBy.LLM)
        state = self.loop.user_head(ws.user_id, ws.journal)
        memories = build_memories(relabelled, extract(turn.text, turn.ts))
        ws.entities.resolve_memories(memories)
        result = consolidate(relabelled, memories, BatchView(ws.journal, turn.turn_id))
        return Relabel(
            turn=relabelled,
            memories=result.memories,
            source=getattr(self.llm, "name", "llm"),
            holdout=in_pool_holdout(turn.turn_id),
            after_round=state.completed,
            updates=result.updates,
        )

    def router_status(self, user_id: str) -> dict[str, Any]:
        with self._workspace(user_id) as ws:
            return {"user_id": user_id, **self.loop.status(user_id, ws.journal)}

    def train_router(self, user_id: str) -> dict[str, Any]:
        """Run a training round now, whatever the pool size (operators and tests)."""
        with self._workspace(user_id) as ws:
            record = self.loop.train(user_id, ws.journal, ws.writer.call)
        return {"round": record.round, "accepted": record.accepted, **record.report}

    def rollback_router(self, user_id: str) -> dict[str, Any]:
        with self._workspace(user_id) as ws:
            return self.loop.rollback(user_id, ws.journal, ws.writer.call)

    def router_statuses(self) -> dict[str, dict[str, Any]]:
        """Router status of the users whose stores are open now (for /metrics)."""
        with self._lock:
            workspaces = list(self._workspaces.values())
        return {ws.user_id: self.loop.status(ws.user_id, ws.journal) for ws in workspaces}

    # -- users -------------------------------------------------------------------------------

    def recover(self) -> dict[str, int]:
        """Open every user once so that projections replay what they miss (start-up), and
        resume the labelling of turns still queued for the LLM."""
        replayed: dict[str, int] = {}
        for user_id in self.users():
            try:
                with self._workspace(user_id) as ws:
                    replayed[user_id] = ws.replayed_on_open
                    if ws.journal.next_due() is not None:
                        with self._lock:
                            self._pending.add(user_id)
            except Exception:
                log.exception("recovering user %s failed", user_id)
        total = sum(replayed.values())
        log.info(
            "start-up recovery: %d users checked, %d journal entries replayed", len(replayed), total
        )
        return replayed

    def users(self) -> list[str]:
        return sorted(p.name for p in self.users_dir.iterdir() if p.is_dir())

    def delete_user(self, user_id: str) -> dict[str, int]:
        """Remove the user's journal, graph, vectors and router data; return what was removed."""
        directory = self._user_dir(user_id)
        with self._workspace(user_id) as ws:
            counts = ws.counts()
        with self._lock:
            open_lock = self._open_locks.setdefault(user_id, threading.Lock())
        with open_lock:
            with self._lock:
                ws = self._workspaces.pop(user_id, None)
            if ws is not None:
                ws.close()
            files = sum(1 for p in directory.rglob("*") if p.is_file())
            shutil.rmtree(directory)
            self.loop.forget(user_id)
            with self._lock:
                self._pending.discard(user_id)
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

    def rebuild(self, user_id: str) -> dict[str, int]:
        """Recreate the user's graph and vectors from the journal."""
        with self._workspace(user_id) as ws:
            return ws.writer.call(ws.rebuild)

    def counts(self, user_id: str) -> dict[str, int]:
        with self._workspace(user_id) as ws:
            return ws.counts()

    def open_counts(self) -> dict[str, dict[str, int]]:
        """Store sizes of the users whose stores are open now (for /metrics)."""
        with self._lock:
            workspaces = list(self._workspaces.values())
        return {ws.user_id: ws.journal.counts() | ws.vectors.counts() for ws in workspaces}

    # -- export / import ---------------------------------------------------------------------

    def export_user(self, user_id: str) -> Iterator[dict[str, Any]]:
        """The user's journal as versioned records: a header, then every log entry in order."""
        with self._workspace(user_id) as ws:
            yield {
                "format": EXPORT_FORMAT,
                "version": EXPORT_VERSION,
                "memoryd": __version__,
                "user_id": user_id,
                "exported_at": _now().isoformat(),
            }
            for entry in ws.journal.entries():
                record: dict[str, Any] = {
                    "seq": entry.seq,
                    "kind": entry.kind.value,
                    "ref": entry.ref,
                    "payload": entry.payload,
                }
                if entry.kind is LogKind.TURN:
                    found = ws.journal.turn(entry.ref)
                    if found is not None:
                        record["embedding"] = _b64(found[1])
                        record["reply"] = found[2]
                yield record
            yield {"kind": HEADERS_RECORD, "headers": ws.headers.export()}

    def import_user(self, user_id: str, records: Iterable[dict[str, Any]]) -> dict[str, int]:
        """Load an export into a user that has no data yet; returns counts."""
        if self.user_exists(user_id):
            raise ConflictError(f"user {user_id!r} already has data; delete it first")
        iterator = iter(records)
        header = next(iterator, None)
        if not header or header.get("format") != EXPORT_FORMAT:
            raise InvalidInputError("not a memoryd export (first line must be its header)")
        if header.get("version") not in IMPORTABLE_VERSIONS:
            raise InvalidInputError(f"export version {header.get('version')} is not supported")
        applied = 0
        with self._workspace(user_id, create=True) as ws:
            for record in iterator:
                if record.get("kind") == HEADERS_RECORD:
                    ws.writer.call(lambda r=record: ws.headers.restore(r["headers"]))
                else:
                    ws.writer.call(lambda r=record: _import_record(ws, r))
                applied += 1
            counts = ws.counts()
        return {"records": applied, **counts}

    def save_all(self) -> None:
        """Persist the vector indexes of every open user (on each user's writer)."""
        with self._lock:
            workspaces = list(self._workspaces.values())
        for ws in workspaces:
            ws.writer.call(ws.save)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            workspaces = list(self._workspaces.values())
            self._workspaces.clear()
        for ws in workspaces:
            try:
                ws.close()
            except Exception:
                log.exception("closing user %s failed", ws.user_id)
        self._expander.shutdown()
        if self._owns_encoder:
            self.encoder.close()
            if self.llm is not None:
                self.llm.close()
        os.close(self._lock_fd)


def _import_record(ws: Workspace, record: dict[str, Any]) -> None:
    kind = LogKind(record["kind"])
    payload = record["payload"]
    if kind is LogKind.TURN:
        turn, memories = turn_of_payload(payload)
        embedding = np.frombuffer(base64.b64decode(record["embedding"]), dtype=np.float32).copy()
        entry = TurnEntry(
            turn,
            embedding,
            memories,
            record.get("reply", {}),
            updates=updates_of_payload(payload),
            aliases=payload.get("aliases", {}),
        )
        ws.commit_turns([entry])
    elif kind is LogKind.TURN_RELABEL:
        turn, memories = turn_of_payload(payload)
        relabel = Relabel(
            turn,
            memories,
            payload["source"],
            payload["holdout"],
            payload["after_round"],
            updates=updates_of_payload(payload),
        )
        ws.relabel(relabel)
    elif kind is LogKind.MEMORY_CHANGE:
        ws.change(change_of_payload(record["ref"], payload))
    elif kind is LogKind.MEMORY_PATCH:
        vec = payload.get("embedding")
        ws.patch_memory(
            memory_of_record(payload),
            None if vec is None else np.asarray(vec, dtype=np.float32),
            payload.get("importance"),
        )
    else:
        ws.delete_memory(record["ref"])


def _b64(vec: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vec, dtype=np.float32).tobytes()).decode()


def _turn_dict(turn: Turn) -> dict[str, Any]:
    data = to_payload(turn)
    data["labels"] = [Label(v).value for v in data["labels"]]
    return data


def _memory_dict(memory: Memory, mtype: MemoryType) -> dict[str, Any]:
    return {"id": memory.id, "type": mtype.value, "text": memory.text, "record": to_payload(memory)}


def _reshuffle_if_active(ws: Workspace) -> bool:
    """On the writer: reshuffle unless nothing a placement depends on changed since the last
    time (a quiet user costs a read, not a transaction and an fsync every interval)."""
    activity = ws.headers.activity()
    if activity == ws.reshuffled_at:
        return False
    reshuffle(ws.journal, ws.headers, ws.tiers)
    ws.reshuffled_at = activity
    return True


def _live_headers(ws: Workspace, memories: dict[int, Memory]) -> None:
    """Put each memory's live header (the journal's headers table) on its record."""
    for row in ws.headers.rows(nums=list(memories)):
        memories[row.num].header = Header(
            importance=row.importance,
            persona_sim=row.persona_sim or 0.0,
            recall_count=row.recall_count,
            last_access=row.last_access,
            tier=int(row.tier),
            importance_by=row.importance_by.value,
        )


def _fact_dict(stored: StoredMemory) -> dict[str, Any]:
    fact = stored.memory
    current = isinstance(fact, Fact) and fact.valid_to is None
    return {**_memory_dict(fact, stored.type), "current": current, "session_id": stored.session_id}


def _sufficiency(config: Config, llm: LLM | None) -> Sufficiency:
    """The judge of the tiered search: ``llm`` needs a configured LLM."""
    if config.tiers_sufficiency == "llm":
        if llm is None:
            raise ConfigError("tiers.sufficiency", "llm", "needs an LLM: set llm.backend")
        return LLMSufficiency(llm, timeout=config.llm_timeout)
    return ScoreSufficiency(config.tiers_threshold)


def _lock_data_dir(data_dir: Path) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise DataDirBusyError(str(data_dir)) from exc
    return fd
