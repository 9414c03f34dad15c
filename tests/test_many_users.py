"""200 users ingesting and querying at once through a real `memoryd serve` that may keep only 8
open: no error, at most 8 open, every evicted user's data there when it is opened again, and no
growth of open files or memory (the registry closes a user it evicts, every file, thread and
index of it).

An open user costs about 65 MB (the graph's hash indexes ~30 MB, the vector indexes ~30 MB), so
the RSS after 40 users is the cap's steady state. It went from 1.4 GB after 40 users to 2.8-3.3
GB after 200 until closing a user released its vector indexes at once rather than whenever the
garbage collector reached them, and handed the freed memory back (0.74 and 0.76 GB since,
measured 2026-12-05)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from support.config import MODEL_DIR
from support.server import ServerProcess

pytestmark = pytest.mark.slow

USERS = 200
CAP = 8
CLIENTS = 8
RSS_SLACK_MB = 250  # about four open users' worth; the leak this catches was +1.4 GB


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_200_users_with_a_cap_of_8(tmp_path: Path) -> None:
    server = ServerProcess(
        tmp_path / "data", MODEL_DIR, env={"MEMORYD_LIMITS_MAX_OPEN_USERS": str(CAP)}
    )
    errors: list[str] = []
    seen: dict[str, list[int]] = {}

    def work(users: list[str]) -> None:
        with server.client() as c:
            for user in users:
                turns = [
                    {"session_id": "s", "role": "user", "text": f"{user} keeps marker zq{user}."},
                    {"session_id": "s", "role": "user", "text": "I'm allergic to penicillin."},
                ]
                r = c.post(f"/v1/users/{user}/turns", json={"turns": turns})
                if r.status_code != 201:
                    errors.append(f"{user} ingest {r.status_code} {r.text}")
                    continue
                r = c.post(f"/v1/users/{user}/query", json={"query": f"zq{user}", "k": 3})
                if r.status_code != 200 or not r.json()["turn_ids"]:
                    errors.append(f"{user} query {r.status_code} {r.text[:200]}")

    def run(users: list[str]) -> None:
        shares = [users[i::CLIENTS] for i in range(CLIENTS)]
        threads = [threading.Thread(target=work, args=(share,)) for share in shares]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    try:
        names = [f"user{n:03d}" for n in range(USERS)]
        run(names[:40])  # past the cap: the steady state
        seen["after 40"] = [open_files(server.proc.pid), int(server.rss_mb())]
        run(names[40:])
        seen["after 200"] = [open_files(server.proc.pid), int(server.rss_mb())]
        assert errors == []
        with server.client() as c:
            ready = c.get("/readyz").json()
            assert ready["open_users"] <= CAP
            for user in names[::37]:  # evicted users answer from their reopened stores
                counts = c.get(f"/v1/users/{user}").json()["counts"]
                assert counts["turns"] == 2 and counts["graph_Turn"] == 2, (user, counts)
    finally:
        server.stop()
    assert errors == []
    (files_40, rss_40), (files_200, rss_200) = seen["after 40"], seen["after 200"]
    assert files_200 <= files_40 + 40, seen  # threads and connections vary; a leak is +160
    assert rss_200 <= rss_40 + RSS_SLACK_MB, seen
