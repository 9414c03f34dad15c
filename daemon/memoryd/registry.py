"""The open workspaces: leased to callers, opened on first use, closed least recently used.

    users = Registry(open_workspace, max_open=32)
    with users.lease("alice", create=True) as ws:
        ws.ingest(...)
    users.close()

At most ``max_open`` idle workspaces stay open; a workspace is closed only when nobody holds a
lease on it, under its user's slot lock, so nobody reopens it half-closed. A user's slot (its
lock and lease count) lives only while the workspace is open or leased: the registry holds
nothing for a user it has closed, however many users it has ever opened.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from memoryd.workspace import Workspace

__all__ = ["Registry"]

log = logging.getLogger(__name__)


@dataclass
class _Slot:
    """One user's place in the registry: the lock its workspace opens and closes under, the
    callers holding or waiting for it, and the workspace when open."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    leases: int = 0
    workspace: Workspace | None = None


class Registry:
    """Workspaces by user id. ``opener(user_id)`` opens one (replaying its journal)."""

    def __init__(self, opener: Callable[[str], Workspace], max_open: int) -> None:
        self._opener = opener
        self._max_open = max_open
        self._lock = threading.Lock()  # guards _slots and _open
        self._slots: dict[str, _Slot] = {}
        self._open: OrderedDict[str, Workspace] = OrderedDict()  # least recently used first

    @contextmanager
    def lease(self, user_id: str) -> Iterator[Workspace]:
        """The user's workspace, opened if needed, kept open while the lease is held."""
        with self._lock:
            slot = self._slots.setdefault(user_id, _Slot())
            slot.leases += 1
        try:
            with slot.lock:
                if slot.workspace is None:
                    slot.workspace = self._opener(user_id)
                    log.info("opened user %s", user_id)
                ws = slot.workspace
                with self._lock:
                    self._open[user_id] = ws
                    self._open.move_to_end(user_id)
            yield ws
        finally:
            self._release(user_id, slot)
            self._evict()

    def _release(self, user_id: str, slot: _Slot) -> None:
        with self._lock:
            slot.leases -= 1
            if slot.leases == 0 and slot.workspace is None:
                del self._slots[user_id]  # closed, or it never opened: nothing to keep

    def _evict(self) -> None:
        """Close least-recently-used idle workspaces beyond ``max_open``."""
        with self._lock:
            excess = len(self._open) - self._max_open
            idle = [u for u in self._open if self._slots[u].leases == 0][: max(0, excess)]
        for user_id in idle:
            self._close_idle(user_id)

    def _close_idle(self, user_id: str) -> None:
        """Close the user's workspace unless somebody leased it meanwhile. The slot stays until
        the workspace is closed: a lease taken meanwhile waits for its lock, then reopens."""
        with self._lock:
            slot = self._slots.get(user_id)
            if slot is None:
                return
            slot.leases += 1
        try:
            with slot.lock:
                with self._lock:
                    if slot.leases > 1 or slot.workspace is None:
                        return
                    ws, slot.workspace = slot.workspace, None
                    self._open.pop(user_id, None)
                ws.close()
                log.info("closed idle user %s", user_id)
        finally:
            self._release(user_id, slot)

    @contextmanager
    def closed(self, user_id: str) -> Iterator[None]:
        """Run the block with the user's workspace closed and nobody able to open it (deleting
        the user's files). Callers must not hold a lease on the user."""
        with self._lock:
            slot = self._slots.setdefault(user_id, _Slot())
            slot.leases += 1
        try:
            with slot.lock:
                ws = slot.workspace
                slot.workspace = None
                with self._lock:
                    self._open.pop(user_id, None)
                if ws is not None:
                    ws.close()
                yield
        finally:
            self._release(user_id, slot)

    def open_users(self) -> list[str]:
        """The users whose workspaces are open now, least recently used first."""
        with self._lock:
            return list(self._open)

    def open_workspaces(self) -> list[Workspace]:
        with self._lock:
            return list(self._open.values())

    def close(self) -> None:
        """Close every open workspace (at shut-down, when no request runs)."""
        with self._lock:
            workspaces = list(self._open.items())
            self._open.clear()
            self._slots.clear()
        for user_id, ws in workspaces:
            try:
                ws.close()
            except Exception:
                log.exception("closing user %s failed", user_id)
