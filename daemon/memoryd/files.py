"""Durable, private files: what survives a crash survives whole, and one process per data
directory.

The process's umask (0077, set by the CLI) keeps every file memoryd makes private; these
helpers add the fsyncs that make a rename durable, the mode for files made by hand, and the
data directory's lock (an exclusive ``flock`` on its ``.lock`` file, held by the service).
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
from pathlib import Path

from memoryd.errors import DataDirBusyError

log = logging.getLogger(__name__)


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


LOCK_FILE = ".lock"


def data_dir_in_use(data_dir: Path) -> bool:
    """Whether a memoryd process (the daemon) holds ``data_dir``'s lock now."""
    path = data_dir / LOCK_FILE
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing the descriptor releases a lock taken here
    return False


def lock_data_dir(data_dir: Path) -> int:
    """Take ``data_dir``'s lock for this process (the descriptor; closing it releases the
    lock), making the directory private first. DataDirBusyError when another holds it."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = stat.S_IMODE(data_dir.stat().st_mode)
    if mode & 0o077:
        data_dir.chmod(mode & 0o700)
        log.warning(
            "data directory %s was mode %s: made it private (%s)",
            data_dir,
            oct(mode),
            oct(mode & 0o700),
        )
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as exc:
        os.close(fd)
        raise DataDirBusyError(str(data_dir)) from exc
    return fd
