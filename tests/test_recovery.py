"""Damaged files found at start, through real `memoryd serve` processes: a graph or vector index
damaged while the daemon was stopped is rebuilt from the journal on its own, and the same
queries get the same answers; a damaged journal is refused, reported and still deletable."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from memoryd.store import integrity_problems
from support.config import MODEL_DIR
from support.server import ServerProcess

pytestmark = pytest.mark.slow

USER = "u1"
QUERIES = ["where did we see the heron?", "zq3", "who came to the lake?", "what is my allergy?"]


def fill(c: httpx.Client) -> None:
    texts = [f"Note {n}: we visited marker zq{n} at the lake with Marta." for n in range(40)]
    texts += ["I'm allergic to penicillin.", "We saw a grey heron by the old mill."]
    turns = [{"session_id": f"s{n // 10}", "role": "user", "text": t} for n, t in enumerate(texts)]
    assert c.post(f"/v1/users/{USER}/turns", json={"turns": turns}).status_code == 201
    task = {"title": "buy bird seed", "task_id": "seed"}
    assert c.post(f"/v1/users/{USER}/tasks", json=task).status_code == 201


def answers(c: httpx.Client) -> list[list[str]]:
    out = []
    for q in QUERIES:
        r = c.post(f"/v1/users/{USER}/query", json={"query": q, "k": 5, "recall": False})
        assert r.status_code == 200, r.text
        reply = r.json()
        out.append([item["id"] for items in reply["sections"].values() for item in items])
    return out


def wait_ready(c: httpx.Client) -> None:
    deadline = time.monotonic() + 120
    while c.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "not ready after 120 s"
        time.sleep(0.1)


def scribble(path: Path, seed: int) -> None:
    rng = random.Random(seed)
    size = path.stat().st_size
    with path.open("r+b") as f:
        for _ in range(40):
            f.seek(rng.randrange(size))
            f.write(rng.randbytes(64))


@pytest.mark.parametrize(
    "damage",
    ["graph truncated", "graph scribbled", "vectors deleted", "vectors truncated", "all"],
)
def test_damaged_projections_are_rebuilt_at_start(tmp_path: Path, damage: str) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, MODEL_DIR)
    try:
        with server.client() as c:
            fill(c)
            before = answers(c)
            counts = c.get(f"/v1/users/{USER}").json()["counts"]
    finally:
        server.stop()
    user = data / "users" / USER
    graph, episodic = user / "graph", user / "vectors" / "episodic.bin"
    if damage in ("graph truncated", "all"):
        os.truncate(graph, graph.stat().st_size // 2)
    if damage == "graph scribbled":
        scribble(graph, 7)
    if damage in ("vectors deleted", "all"):
        episodic.unlink()
    if damage == "vectors truncated":
        os.truncate(episodic, 1000)
    again = ServerProcess(data, MODEL_DIR)
    try:
        with again.client() as c:
            wait_ready(c)
            assert c.get(f"/v1/users/{USER}").json()["counts"] == counts
            assert answers(c) == before
        log = "".join(again.log)
        assert "rebuild" in log, log
        assert "start-up recovery: 1 users checked" in log
    finally:
        again.stop()


def test_a_damaged_journal_is_refused_and_reported(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, MODEL_DIR)
    try:
        with server.client() as c:
            fill(c)
            body = {"turns": [{"session_id": "s", "role": "user", "text": "I live in Porto."}]}
            assert c.post("/v1/users/u2/turns", json=body).status_code == 201
    finally:
        server.stop()
    journal = data / "users" / USER / "journal.sqlite"
    rng = random.Random(3)
    with journal.open("r+b") as f:  # past the header page: SQLite still opens the file
        for _ in range(40):
            f.seek(rng.randrange(8192, journal.stat().st_size))
            f.write(rng.randbytes(64))
    assert integrity_problems(journal)
    again = ServerProcess(data, MODEL_DIR)
    try:
        with again.client() as c:
            wait_ready(c)
            r = c.get(f"/v1/users/{USER}")
            assert r.status_code == 503, r.text
            error = r.json()["error"]
            assert error["type"] == "JournalDamagedError"
            assert f"memoryd restore BACKUP --user {USER}" in error["message"]
            assert c.post(f"/v1/users/{USER}/query", json={"query": "heron"}).status_code == 503
            assert c.get("/v1/users/u2").status_code == 200  # the others are served
            doctor = subprocess.run(
                [sys.executable, "-m", "memoryd", "doctor", "--deep", "--data-dir", str(data)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert doctor.returncode == 1
            assert f"journal of user '{USER}' passes integrity_check — " in doctor.stdout
            assert "[ok] journal of user 'u2' passes integrity_check" in doctor.stdout
            assert "memoryd restore" in doctor.stdout
            # a damaged user can still be forgotten
            assert c.delete(f"/v1/users/{USER}").status_code == 200
            assert c.get(f"/v1/users/{USER}").status_code == 404
        assert any("is damaged" in line and "ERROR" in line for line in again.log)
    finally:
        again.stop()
