"""The process's native heap (glibc malloc): fewer arenas, and freed memory handed back.

Most of the daemon's memory is native (onnxruntime, the graph engine, hnswlib, SQLite), and
glibc keeps what a thread freed in that thread's arena for reuse. A bulk import, or closing a
user, leaves tens of MB free but resident: ``release_free_memory`` returns it to the kernel
(``malloc_trim``).
Both calls do nothing where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["limit_malloc_arenas", "release_free_memory"]

M_ARENA_MAX = -8


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas (as MALLOC_ARENA_MAX does) unless the environment sets them.

    glibc gives busy threads arenas of their own (up to 8 per core) and keeps what they freed:
    with the request thread pool, the graph readers and onnxruntime that is tens of MB of RSS
    on a board with little memory to spare.
    """
    libc = _glibc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(M_ARENA_MAX, arenas)


def release_free_memory() -> None:
    """Hand the heap's free pages back to the kernel (every arena; a few ms)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
