"""End to end through a real server process: concurrency, kill -9 durability, restart replay."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from support.config import MODEL_DIR
from support.server import ServerProcess

pytestmark = pytest.mark.slow


def turn(writer: int, n: int) -> dict:
    return {
        "turn_id": f"w{writer}-{n}",
        "session_id": f"s{writer}-{n // 10}",
        "role": "user",
        "text": f"Note {n} from writer {writer}: we visited marker zq{writer}x{n} at the lake.",
    }


@pytest.fixture
def server(tmp_path: Path):
    proc = ServerProcess(tmp_path / "data", MODEL_DIR)
    yield proc
    if proc.proc.poll() is None:
        proc.stop()


def test_concurrent_ingest_and_query(server: ServerProcess) -> None:
    acked: list[str] = []
    errors: list[str] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        with server.client() as c:
            for batch in range(10):
                body = {"turns": [turn(w, batch * 3 + i) for i in range(3)]}
                r = c.post("/v1/users/u1/turns", json=body)
                if r.status_code != 201:
                    errors.append(r.text)
                    return
                acked.extend(t["turn_id"] for t in r.json()["turns"])

    def reader() -> None:
        with server.client() as c:
            while not stop.is_set():
                r = c.post("/v1/users/u1/query", json={"query": "what did we visit at the lake?"})
                if r.status_code != 200:
                    errors.append(r.text)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert errors == []
    assert len(acked) == 120
    with server.client() as c:
        counts = c.get("/v1/users/u1").json()["counts"]
        assert counts["turns"] == 120 and counts["graph_Turn"] == 120
        for turn_id in acked[::7]:
            w, n = turn_id[1:].split("-")
            r = c.post("/v1/users/u1/query", json={"query": f"zq{w}x{n}", "k": 3})
            assert turn_id in r.json()["turn_ids"][:3], turn_id


def test_kill_9_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, MODEL_DIR)
    acked: list[str] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        with server.client() as c:
            for n in range(10_000):
                try:
                    r = c.post("/v1/users/k/turns", json={"turns": [turn(w, n)]})
                except httpx.HTTPError:
                    return
                if r.status_code == 201:
                    with lock:
                        acked.append(r.json()["turns"][0]["turn_id"])

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked) < 150 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()
    for t in threads:
        t.join()
    assert len(acked) >= 150

    again = ServerProcess(data, MODEL_DIR)
    try:
        with again.client() as c:
            deadline = time.monotonic() + 120
            while c.get("/readyz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert any("start-up recovery: 1 users checked" in line for line in again.log)
            counts = c.get("/v1/users/k").json()["counts"]
            for turn_id in acked:
                assert c.get(f"/v1/users/k/turns/{turn_id}").status_code == 200, turn_id
            # every journaled turn (acked or not) is in the graph and the vectors, once
            assert counts["graph_Turn"] == counts["turns"] >= len(acked)
            memories = sum(v for k, v in counts.items() if k.startswith("memories_"))
            vectors = sum(v for k, v in counts.items() if k.startswith("vectors_"))
            assert vectors == memories
            listed = c.get("/v1/users/k/turns", params={"limit": 500}).json()["turns"]
            ids = [t["turn_id"] for t in listed]
            assert len(ids) == len(set(ids))
            for turn_id in acked[:: max(1, len(acked) // 25)]:
                w, n = turn_id[1:].split("-")
                r = c.post("/v1/users/k/query", json={"query": f"zq{w}x{n}", "k": 3})
                assert turn_id in r.json()["turn_ids"][:3], turn_id
    finally:
        again.stop()


def test_graceful_stop_saves_vectors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, MODEL_DIR)
    with server.client() as c:
        assert c.post("/v1/users/g/turns", json={"turns": [turn(0, 1)]}).status_code == 201
    # uvicorn re-raises the SIGTERM it handled, after a complete shutdown
    assert server.stop() == -15
    assert any("memoryd stopped" in line for line in server.log), "".join(server.log)
    state = data / "users" / "g" / "vectors" / "state.json"
    assert state.exists() and '"applied_seq": 1' in state.read_text()


def test_non_loopback_bind_without_auth_is_refused(tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "memoryd",
            "serve",
            "--host",
            "0.0.0.0",
            "--data-dir",
            str(tmp_path),
        ],
        env={"MEMORYD_AUTH_ENABLED": "false", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "non-loopback" in r.stderr
