"""The CLI in-process (click's runner) on real stores; `serve` is covered in test_e2e."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memoryd.cli import main
from support.config import MODEL_DIR


@pytest.fixture
def run(tmp_path: Path):
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path / "data"), "--model-dir", str(MODEL_DIR)]

    def invoke(*args: str, ok: bool = True):
        command, rest = args[0], list(args[1:])
        if command == "eval":
            command, rest = f"eval {rest[0]}", rest[1:]
        argv = [*command.split(), *base, *rest]
        result = runner.invoke(main, argv, catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


def test_help_teaches() -> None:
    result = CliRunner().invoke(main, ["--help"])
    for command in [
        "serve",
        "ingest",
        "query",
        "eval",
        "rebuild",
        "export",
        "import",
        "doctor",
        "router",
        "tiers",
    ]:
        assert command in result.output
    assert "memoryd doctor" in result.output


def test_ingest_query_export_import_rebuild(run, tmp_path: Path) -> None:
    lines = [
        {"session_id": "s1", "role": "user", "text": "I live in Lisbon with my partner Joao."},
        {"session_id": "s1", "role": "user", "text": "When it is sunny, I cycle to work."},
        {"session_id": "s1", "role": "log", "text": "log: alarm set for 7:00 tomorrow"},
    ]
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    result = run("ingest", str(path), "--user", "ana")
    assert "ana: 3 turns added, 0 already present" in result.output
    assert "1 turns added" not in run("ingest", str(path), "--user", "ana").output
    result = run("query", "where do I live?", "--user", "ana")
    assert "Lisbon" in result.output
    payload = json.loads(run("query", "cycling", "--user", "ana", "--json").output)
    assert payload["trace"]
    out = tmp_path / "ana.jsonl"
    run("export", "--user", "ana", "--out", str(out))
    run("import", str(out), "--user", "ana2")
    assert "Lisbon" in run("query", "where do I live?", "--user", "ana2").output
    counts = json.loads(run("rebuild", "--user", "ana2").output)
    assert counts["turns"] == 3 and counts["replayed"] == 3


def test_bad_jsonl_names_the_line(run, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"session_id": "s", "role": "user", "text": "ok"}\n{"role": "robot"}\n')
    result = run("ingest", str(path), "--user", "x", ok=False)
    assert result.exit_code == 1 and "bad.jsonl:2" in result.output


def test_domain_errors_are_one_line(run) -> None:
    result = run("rebuild", "--user", "../etc", ok=False)
    assert result.exit_code == 1
    assert "not allowed" in result.output and "Traceback" not in result.output


def test_doctor_reports_settings_and_checks(run) -> None:
    result = run("doctor")
    assert "graph.engine" in result.output and "[ok] model file" in result.output
    assert "llm.backend" in result.output and "llamacpp model file" not in result.output


def test_doctor_checks_the_configured_llm(run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYD_LLM_BACKEND", "llamacpp")
    monkeypatch.setenv("MEMORYD_LLM_MODEL_PATH", "/nowhere/model.gguf")
    result = run("doctor", ok=False)
    assert "[MISSING] llamacpp model file /nowhere/model.gguf" in result.output
    assert "[ok] LLM runtime 'llama_cpp' importable" in result.output


def test_doctor_names_missing_models(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["doctor", "--data-dir", str(tmp_path), "--model-dir", str(tmp_path / "none")]
    )
    assert result.exit_code == 1
    assert "[MISSING] model file" in result.output and "make models" in result.output


def test_locomo_ingest(run, tmp_path: Path) -> None:
    from test_eval import SAMPLE

    path = tmp_path / "l.json"
    path.write_text(json.dumps(SAMPLE))
    result = run("ingest", str(path), "--format", "locomo")
    assert "locomo-conv-x: 5 turns added" in result.output
    assert "Pixel" in run("query", "cat name", "--user", "locomo-conv-x").output


def test_memory_facts_tasks_and_abstract(run, tmp_path: Path) -> None:
    lines = [
        {"session_id": "s1", "role": "user", "text": "I live in Lisbon."},
        {"session_id": "s2", "role": "user", "text": "I moved to Porto."},
        {
            "session_id": "s2",
            "role": "user",
            "text": "Remind me to take omeprazole 30 min before dinner.",
        },
    ]
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    run("ingest", str(path), "--user", "ana")
    found = json.loads(run("memory facts", "--user", "ana").output)["facts"]
    assert [(f["record"]["object"]["name"], f["current"]) for f in found] == [
        ("Lisbon", False),
        ("Porto", True),
    ]
    (task,) = json.loads(run("memory tasks", "--user", "ana").output)["tasks"]
    assert task["record"]["states"][-1]["status"] == "pending"
    result = run("memory abstract", "--user", "ana", ok=False)
    assert result.exit_code != 0 and "no LLM is configured" in result.output


def test_tiers_status_reshuffle_and_search(run, tmp_path: Path) -> None:
    lines = [
        {"session_id": f"s{i}", "role": "user", "text": f"Day {i}: I repaired clock number {i}."}
        for i in range(8)
    ]
    path = tmp_path / "turns.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    run("ingest", str(path), "--user", "ana")
    status = json.loads(run("tiers status", "--user", "ana").output)
    assert status["sizes"] == {"tier1": 8, "tier2": 0, "tier3": 0}
    done = json.loads(run("tiers reshuffle", "--user", "ana").output)
    assert done["scored"] == 8 and done["sizes"] == {"tier1": 8, "tier2": 0, "tier3": 0}
    payload = json.loads(run("query", "clock", "--user", "ana", "--search", "all", "--json").output)
    assert payload["search"]["mode"] == "all" and payload["candidates"] == 8
    bad = run("query", "clock", "--user", "ana", "--search", "tier9", ok=False)
    assert bad.exit_code == 2 and "tier9" in bad.output
    result = run("tiers importance", "--user", "ana", ok=False)
    assert result.exit_code != 0 and "no LLM is configured" in result.output


def test_eval_judge_and_reader_read_annotated_lines(run, tmp_path: Path) -> None:
    """Both evals take a corpus file: a bad line is a clear error, not a traceback."""
    pair = {
        "id": "t-p1",
        "domain": "partner",
        "outcome": "end",
        "first": {
            "role": "user",
            "text": "my boyfriend is called Dev",
            "facts": [{"subject": "user", "attribute": "partner", "value": "Dev", "kind": "state"}],
        },
        "second": {
            "role": "user",
            "text": "things ended with Dev after six years",
            "facts": [{"subject": "user", "attribute": "partner", "value": "Dev", "kind": "end"}],
        },
        "current": [],
        "stale": [{"subject": "user", "attribute": "partner", "value": "Dev"}],
    }
    path = tmp_path / "t_pairs.jsonl"
    path.write_text(json.dumps(pair) + "\n")
    judged = run("eval", "judge", str(path)).output
    assert "values named again (pairs)       1     1" in judged
    assert "(2 lines, 2 facts about now" in run("eval", "reader", str(path)).output
    path.write_text(json.dumps({**pair, "outcome": "sideways"}) + "\n")
    failed = run("eval", "judge", str(path), ok=False)
    assert failed.exit_code != 0 and "outcome 'sideways'" in failed.output
