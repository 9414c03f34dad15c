"""A single writer thread: callables run one at a time, in submission order.

Kùzu-family engines allow one write transaction per database and SQLite one writer per file, so
each user's writes go through one :class:`SerialWriter`. Callers get a ``Future``; async callers
await it with ``asyncio.wrap_future``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from memoryd.errors import ClosedError

log = logging.getLogger(__name__)

T = TypeVar("T")
_STOP = object()


class SerialWriter:
    """Runs submitted callables on one thread. ``close()`` drains what was queued, then stops."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"writer-{name}", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise ClosedError(f"writer {self.name}")
            self._queue.put((fn, future))
        return future

    def call(self, fn: Callable[[], T]) -> T:
        """Submit and wait. From the writer thread itself, run inline (no deadlock)."""
        if threading.current_thread() is self._thread:
            return fn()
        return self.submit(fn).result()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:
                future.set_exception(exc)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:
            self._thread.join()
