"""A full disk under a real `memoryd serve`: the data directory on a small tmpfs, mounted by
the test (it needs root, which `make test` has on the machines it runs on); turns ingested
until the file system is full. The write that does not fit answers 507 and stores nothing;
every acknowledged turn stays; reads go on; once space is freed the same daemon accepts writes
again and its graph and vectors catch up; nothing is corrupt."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.store import integrity_problems
from support.config import MODEL_DIR
from support.server import ServerProcess

pytestmark = pytest.mark.slow

SIZE_MB = 48
LEFT_FREE = 3 * 2**20  # what the ballast leaves: a few hundred turns' worth


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "fs"
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m,mode=0700", "tmpfs", str(mount)],
        check=True,
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int) -> None:
    """Write ``path`` until ``leave`` bytes are free on its file system."""
    with path.open("wb") as f:
        while (room := free_bytes(path.parent) - leave) > 0:
            f.write(b"\0" * min(room, 2**20))
            f.flush()


def batch(start: int, n: int = 16) -> dict:
    filler = " ".join(f"word{i}" for i in range(150))
    return {
        "turns": [
            {
                "turn_id": f"t{i}",
                "session_id": f"s{i // 50}",
                "role": "user",
                "text": f"Note {i}: we met marker zq{i} at the harbour. {filler}",
            }
            for i in range(start, start + n)
        ]
    }


def test_a_full_disk_is_507_and_nothing_acknowledged_is_lost(small_fs: Path) -> None:
    data = small_fs / "data"
    server = ServerProcess(data, MODEL_DIR)
    acked: list[str] = []
    statuses: list[int] = []
    try:
        with server.client() as c:
            assert c.post("/v1/users/u1/turns", json=batch(0)).status_code == 201
            fill(small_fs / "ballast", LEFT_FREE)
            n = 16
            while len(statuses) < 5 and n < 20_000:
                r = c.post("/v1/users/u1/turns", json=batch(n))
                if r.status_code == 201:
                    acked += [t["turn_id"] for t in r.json()["turns"]]
                else:
                    statuses.append(r.status_code)
                    error = r.json()["error"]
                    assert r.status_code == 507, r.text
                    assert error["type"] == "DiskFullError" and "full" in error["message"]
                n += 16
            assert statuses == [507] * 5, statuses
            assert len(acked) > 16
            # reads go on while the disk is full
            assert c.get("/healthz").status_code == 200
            r = c.post("/v1/users/u1/query", json={"query": "zq20 harbour", "recall": False})
            assert r.status_code == 200
            # free the space: the same daemon takes writes again, and catches up
            (small_fs / "ballast").unlink()
            r = c.post("/v1/users/u1/turns", json=batch(50_000))
            assert r.status_code == 201, r.text
            acked += [t["turn_id"] for t in r.json()["turns"]]
            deadline = time.monotonic() + 60
            while True:
                counts = c.get("/v1/users/u1").json()["counts"]
                memories = sum(v for k, v in counts.items() if k.startswith("memories_"))
                vectors = sum(v for k, v in counts.items() if k.startswith("vectors_"))
                if counts["graph_Turn"] == counts["turns"] and vectors == memories:
                    break
                assert time.monotonic() < deadline, counts
                time.sleep(0.5)
            assert counts["turns"] == len(acked) + 16
            for turn_id in acked[:: max(1, len(acked) // 40)]:
                assert c.get(f"/v1/users/u1/turns/{turn_id}").status_code == 200, turn_id
    finally:
        server.stop()
    assert integrity_problems(data / "users" / "u1" / "journal.sqlite") == []
    assert not any("Traceback" in line for line in server.log), "".join(server.log)
    again = ServerProcess(data, MODEL_DIR)
    try:
        with again.client() as c:
            assert c.get("/v1/users/u1").json()["counts"]["turns"] == len(acked) + 16
    finally:
        again.stop()
