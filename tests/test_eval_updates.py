"""The update eval (memoryd eval updates): scenarios in, replaced / stale-clean / kept out,
per domain, with the misses; a bad file is an error that names the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memoryd.cli import main
from memoryd.errors import InvalidInputError
from memoryd.eval.updates import load_updates, run_updates
from memoryd.service import MemoryService
from support.config import MODEL_DIR

REPLACE = {
    "id": "home-move",
    "domain": "home",
    "kind": "replace",
    "turns": [
        {"session": "s1", "ts": "2026-01-10T09:00:00Z", "role": "user", "text": "I live in Oslo"},
        {
            "session": "s2",
            "ts": "2026-03-02T09:00:00Z",
            "role": "user",
            "text": "I moved to Berlin",
        },
    ],
    "change_turn": 1,
    "query": {"ts": "2026-03-20T09:00:00Z", "text": "which city should the weather report be for?"},
    "current": [["Berlin"]],
    "stale": [["Oslo"]],
}
KEEP = {
    "id": "allergies",
    "domain": "health",
    "kind": "keep",
    "turns": [
        {"session": "s1", "ts": "2026-01-10T09:00:00Z", "text": "I'm allergic to peanuts"},
        {"session": "s2", "ts": "2026-02-10T09:00:00Z", "text": "I'm allergic to penicillin too"},
    ],
    "change_turn": 1,
    "query": {"ts": "2026-03-01T09:00:00Z", "text": "anything to watch out for at the pharmacy?"},
    "current": [["peanuts"], ["penicillin"]],
}


def write(path: Path, *scenarios: dict) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in scenarios))
    return path


def test_a_change_and_a_second_value_are_scored(service: MemoryService, tmp_path: Path) -> None:
    report = run_updates(service, write(tmp_path / "s.jsonl", REPLACE, KEEP))
    by_id = {r.scenario.id: r for r in report.results}
    assert by_id["home-move"].scores == {"replaced": True, "stale-clean": True}
    assert by_id["allergies"].scores == {"kept": True}
    assert report.share("replaced") == (1, 1) and report.share("kept", "health") == (1, 1)
    table = report.format()
    assert "ALL" in table and "home" in table and "misses" not in table


def test_a_stale_value_still_current_is_a_miss(service: MemoryService, tmp_path: Path) -> None:
    unchanged = {**REPLACE, "id": "no-move"}
    unchanged["turns"] = [REPLACE["turns"][0], {**REPLACE["turns"][1], "text": "Berlin was fun"}]
    unchanged["current"] = [["Oslo"]]
    unchanged["stale"] = [["Oslo"]]  # claims the value changed: it did not
    (result,) = run_updates(service, write(tmp_path / "s.jsonl", unchanged)).results
    assert result.scores == {"replaced": False, "stale-clean": False}
    assert any("still a current fact" in m for m in result.misses)
    assert any(m.startswith("semantic section:") for m in result.misses)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"kind": "update"}, "'kind'"),
        ({"change_turn": 0}, "change_turn"),
        ({"stale": []}, "'current'"),
        ({"query": {"text": "x"}}, "ts"),
    ],
)
def test_a_bad_scenario_names_its_line(tmp_path: Path, change: dict, problem: str) -> None:
    path = write(tmp_path / "bad.jsonl", KEEP, {**REPLACE, **change})
    with pytest.raises(InvalidInputError, match=f"bad.jsonl:2.*{problem}"):
        load_updates(path)


def test_the_cli_prints_the_table_and_bounds_the_misses(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", REPLACE)
    out = tmp_path / "report.txt"
    argv = ["eval", "updates", str(path), "--model-dir", str(MODEL_DIR)]
    result = CliRunner().invoke(main, [*argv, "--data-dir", str(tmp_path / "d"), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "replaced" in out.read_text() and "1.00 (1/1)" in out.read_text()
