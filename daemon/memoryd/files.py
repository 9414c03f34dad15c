"""Durable, private file writes: what survives a crash survives whole.

The process's umask (0077, set by the CLI) keeps every file memoryd makes private; these
helpers add the fsyncs that make a rename durable and the mode for files made by hand.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_file(path: Path) -> None:
    """Flush ``path``'s data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Flush ``path``'s directory entries (a rename or a new file in it) to the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: Path, path: Path) -> None:
    """Rename the written ``tmp`` over ``path``: after a crash ``path`` is the old file or the
    whole new one."""
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a 0600 file, atomically and durably."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        replace_durably(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
