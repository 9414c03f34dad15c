"""What the daemon keeps private, through real `memoryd serve` processes: the mode of every file
it makes, nothing written outside its data directory, logs without tokens or what users said,
and a token rotated without a restart."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support.config import MODEL_DIR
from support.server import ServerProcess

pytestmark = pytest.mark.slow

MARKER = "Zanzibarine"  # a word no log line has any reason to contain
TURNS = [
    f"My bank PIN is 4471 and my cat is called {MARKER}.",
    f"Remind me to take {MARKER} to the vet on Friday.",
    "When I travel, always book an aisle seat.",
]


def memoryd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memoryd", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
        timeout=300,
    )


def test_files_are_private_and_logs_hold_no_token_or_text(tmp_path: Path) -> None:
    data, home = tmp_path / "data", tmp_path / "home"
    home.mkdir()
    # A home of its own: onnxruntime's telemetry wrote a device id under ~/.cache/Microsoft.
    away = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    server = ServerProcess(data, MODEL_DIR, "--log-level", "info", env=away)
    token = server.token
    with server.client() as c:
        turns = [{"session_id": "s1", "role": "user", "text": t} for t in TURNS]
        assert c.post("/v1/users/u1/turns", json={"turns": turns}).status_code == 201
        assert c.post("/v1/users/u1/query", json={"query": f"{MARKER} vet"}).status_code == 200
        assert c.get("/v1/users/u1/facts", params={"subject": MARKER}).status_code == 200
        r = c.post("/v1/users/u1/tasks", json={"title": f"brush {MARKER}"})
        assert r.status_code == 201
        assert c.post("/v1/users/u1/turns", json={"turns": [{"text": MARKER}]}).status_code == 422
        assert c.get("/v1/users/u1/export").status_code == 200
        assert c.post("/v1/users/u1/tiers/reshuffle").status_code == 200
    assert server.stop() == -15
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
    made = [data, *data.rglob("*")]
    assert len(made) > 10
    loose = {
        str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode))
        for p in made
        if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)
    }
    assert loose == {}
    log = "".join(server.log)
    assert "POST /v1/users/u1/query" in log and "GET /v1/users/u1/facts " in log  # INFO is on
    for secret in (token, MARKER, "4471", "aisle seat"):
        assert secret not in log, secret


def test_a_rotated_token_is_refused_at_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ServerProcess(data, MODEL_DIR)
    try:
        with server.client() as c:
            body = {"turns": [{"session_id": "s1", "role": "user", "text": "I live in Porto."}]}
            assert c.post("/v1/users/u1/turns", json=body).status_code == 201
        rotated = memoryd("token", "rotate", "--data-dir", str(data))
        assert rotated.returncode == 0, rotated.stderr
        assert str(data / "token") in rotated.stdout
        new = (data / "token").read_text().strip()
        assert stat.S_IMODE((data / "token").stat().st_mode) == 0o600
        assert f"Bearer {new}" != server.headers["Authorization"]
        with server.client() as old:
            assert old.get("/v1/users/u1").status_code == 401
            assert old.post("/mcp/", json={}).status_code == 401
            fresh = {"Authorization": f"Bearer {new}"}
            assert old.get("/v1/users/u1", headers=fresh).status_code == 200
        # the CLI reads the token file, so it follows the rotation
        url = f"--url={server.url}"
        answered = memoryd(
            "query", "--user", "u1", "where do I live?", url, "--data-dir", str(data)
        )
        assert answered.returncode == 0 and "Porto" in answered.stdout, answered.stderr
        assert any("token" in line and "changed" in line for line in server.log)
        configured = memoryd(
            "token", "rotate", "--data-dir", str(data), env={"MEMORYD_AUTH_TOKEN": "fixed"}
        )
        assert configured.returncode == 1 and "auth.token" in configured.stderr
        assert (data / "token").read_text().strip() == new
    finally:
        server.stop()
