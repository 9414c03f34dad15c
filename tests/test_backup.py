"""`memoryd backup`, `verify` and `restore` against a real daemon: a backup taken while writers
keep writing is consistent and verifies; restored into a stopped daemon's data directory it
answers as the original did; a damaged backup is caught by verify and refused by restore."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from support.config import MODEL_DIR
from support.server import ServerProcess

pytestmark = pytest.mark.slow


def memoryd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args, "--model-dir", str(MODEL_DIR)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=600,
    )


def turn(n: int) -> dict:
    return {"session_id": f"s{n // 10}", "role": "user", "text": f"Note {n}: marker zq{n}."}


def test_backup_while_serving_verifies_and_restores(tmp_path: Path) -> None:
    data, dest = tmp_path / "data", tmp_path / "backup"
    server = ServerProcess(data, MODEL_DIR)
    stop = threading.Event()
    acked: list[int] = []

    def writer() -> None:
        with server.client() as c:
            n = 100
            while not stop.is_set():
                r = c.post("/v1/users/busy/turns", json={"turns": [turn(n)]})
                assert r.status_code == 201
                acked.append(n)
                n += 1

    try:
        with server.client() as c:
            body = {"turns": [turn(n) for n in range(30)]}
            assert c.post("/v1/users/busy/turns", json=body).status_code == 201
            facts = {"turns": [{"session_id": "s", "role": "user", "text": "I live in Porto."}]}
            assert c.post("/v1/users/quiet/turns", json=facts).status_code == 201
            thread = threading.Thread(target=writer)
            thread.start()
            made = memoryd("backup", str(dest), "--data-dir", str(data))
            stop.set()
            thread.join()
            assert made.returncode == 0, made.stderr
            quiet = c.post("/v1/users/quiet/query", json={"query": "where do I live?"}).json()
        assert acked, "the writer wrote nothing during the backup"
    finally:
        server.stop()
    manifest = json.loads((dest / "manifest.json").read_text())
    busy = manifest["users"]["busy"]["counts"]["turns"]
    assert 30 <= busy <= 30 + len(acked)  # a snapshot somewhere inside the writes
    assert set(manifest["users"]) == {"busy", "quiet"}
    assert all(
        (dest / "users" / u / f).is_file()
        for u in ("busy", "quiet")
        for f in ("journal.sqlite", "export.jsonl")
    )

    checked = memoryd("verify", str(dest), "--data-dir", str(tmp_path / "unused"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "2 users verified" in checked.stdout

    restored_dir = tmp_path / "restored"
    restored = memoryd("restore", str(dest), "--data-dir", str(restored_dir))
    assert restored.returncode == 0, restored.stderr
    again = memoryd("restore", str(dest), "--data-dir", str(restored_dir), "--user", "quiet")
    assert again.returncode == 1 and "--replace" in again.stderr
    server = ServerProcess(restored_dir, MODEL_DIR)
    try:
        with server.client() as c:
            counts = c.get("/v1/users/busy").json()["counts"]
            assert counts["turns"] == busy and counts["graph_Turn"] == busy
            r = c.post("/v1/users/quiet/query", json={"query": "where do I live?"})
            assert r.json()["turn_ids"] == quiet["turn_ids"]
        busy_restore = memoryd("restore", str(dest), "--data-dir", str(restored_dir))
        assert busy_restore.returncode == 1 and "in use" in busy_restore.stderr
    finally:
        server.stop()


def test_a_damaged_backup_fails_verify_and_restore(tmp_path: Path) -> None:
    data, dest = tmp_path / "data", tmp_path / "backup"
    server = ServerProcess(data, MODEL_DIR)
    try:
        with server.client() as c:
            body = {"turns": [turn(n) for n in range(40)]}
            assert c.post("/v1/users/u1/turns", json=body).status_code == 201
        assert memoryd("backup", str(dest), "--data-dir", str(data)).returncode == 0
        assert memoryd("backup", str(dest), "--data-dir", str(data)).returncode == 1  # not empty
    finally:
        server.stop()
    copy = dest / "users" / "u1" / "journal.sqlite"
    os.truncate(copy, copy.stat().st_size // 2)
    checked = memoryd("verify", str(dest), "--data-dir", str(tmp_path / "unused"))
    assert checked.returncode == 1 and "u1:" in checked.stdout
    restored = memoryd("restore", str(dest), "--data-dir", str(tmp_path / "restored"))
    assert restored.returncode == 1 and "damaged" in restored.stderr
    empty = memoryd("backup", str(tmp_path / "b2"), "--data-dir", str(tmp_path / "restored"))
    assert empty.returncode == 1 and "holds no user" in empty.stderr
    assert not (tmp_path / "restored" / "users" / "u1").exists()
