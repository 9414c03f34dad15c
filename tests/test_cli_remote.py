"""The CLI while a daemon runs: the commands it can answer go to it over HTTP (found through the
data directory it holds, or --url), and print what they print in-process once it is stopped."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memoryd.cli import main
from support.config import MODEL_DIR
from support.server import ServerProcess

LINES = [
    {"session_id": "s1", "role": "user", "text": "I live in Lisbon."},
    {"session_id": "s2", "role": "user", "text": "I moved to Porto."},
    {"session_id": "s2", "role": "user", "text": "Remind me to call the notary on Monday."},
    {"session_id": "s2", "role": "user", "text": "I went surfing in Ericeira with Marta."},
]
READS = ["memory facts", "memory tasks", "tiers status", "router status"]

Run = Callable[..., Result]


def runner_for(data_dir: Path, monkeypatch: pytest.MonkeyPatch, port: int | None = None) -> Run:
    if port is not None:  # the configured daemon is the one running
        monkeypatch.setenv("MEMORYD_PORT", str(port))
    base = ["--data-dir", str(data_dir), "--model-dir", str(MODEL_DIR)]

    def run(command: str, *rest: str, ok: bool = True) -> Result:
        result = CliRunner().invoke(main, [*command.split(), *base, *rest])
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return run


def test_commands_go_to_the_running_daemon_and_print_as_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps(line) + "\n" for line in LINES))
    server = ServerProcess(data, MODEL_DIR)
    run = runner_for(data, monkeypatch, server.port)
    try:
        assert "ana: 4 turns added" in run("ingest", str(turns), "--user", "ana").output
        with server.client() as http:  # the daemon wrote them: the CLI did not open the store
            assert http.get("/v1/users/ana").json()["counts"]["turns"] == 4
        remote = {command: run(command, "--user", "ana").output for command in READS}
        exported = run("export", "--user", "ana").output.splitlines()
        moved = run("import", "-", "--user", "x", ok=False)  # click: PATH must exist
        assert moved.exit_code == 2
        out = tmp_path / "ana.jsonl"
        out.write_text("\n".join(exported) + "\n")
        imported = json.loads(run("import", str(out), "--user", "ana2").output)
        asked = run("query", "where do I live?", "--user", "ana").output
        busy = run("rebuild", "--user", "ana", ok=False)  # needs the store itself
    finally:
        server.stop()
    assert "Porto" in asked and imported["user_id"] == "ana2"
    assert imported["counts"]["turns"] == 4
    assert busy.exit_code == 1 and "in use by another memoryd process" in busy.output
    local = {command: run(command, "--user", "ana").output for command in READS}
    assert local == remote
    # the journal's entries (the header line has the time, the last line the headers: the
    # query since counted recalls)
    assert run("export", "--user", "ana").output.splitlines()[1:-1] == exported[1:-1]
    assert run("query", "where do I live?", "--user", "ana").output == asked


def test_url_names_the_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = ServerProcess(tmp_path / "daemon", MODEL_DIR)
    try:
        with server.client() as http:
            http.post("/v1/users/bo/turns", json={"turns": LINES[:1]}).raise_for_status()
        monkeypatch.setenv("MEMORYD_TOKEN", server.token)
        run = runner_for(tmp_path / "elsewhere", monkeypatch)
        facts = json.loads(run("memory facts", "--user", "bo", "--url", server.url).output)
        monkeypatch.setenv("MEMORYD_URL", server.url)
        status = json.loads(run("tiers status", "--user", "bo").output)
    finally:
        server.stop()
    assert ["Lisbon" in f["text"] for f in facts["facts"]] == [True]
    assert status["user_id"] == "bo"
    assert not (tmp_path / "elsewhere" / "users").exists()  # nothing opened here


def test_a_held_data_directory_without_an_answering_daemon_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ServerProcess(tmp_path / "data", MODEL_DIR)
    try:
        run = runner_for(tmp_path / "data", monkeypatch, port=9)  # not where it listens
        result = run("memory facts", "--user", "ana", ok=False)
    finally:
        server.stop()
    assert result.exit_code == 1
    assert "holds" in result.output and "no daemon answers at http://127.0.0.1:9" in result.output
    assert "--url" in result.output and "Traceback" not in result.output
