"""`memoryd eval typed`: scenario loading, the three scores, and the CLI table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.errors import InvalidInputError
from memoryd.eval.typed import load_scenarios, run_typed
from memoryd.service import MemoryService
from support.config import REPO

SCENARIO = {
    "id": "kayak-club",
    "domain": "hobbies",
    "turns": [
        {"session": "s1", "ts": "2026-05-04T18:00:00Z", "role": "user",
         "text": "I'm a member of the Tideway kayak club, we paddle on Wednesday nights."},
        {"session": "s1", "ts": "2026-05-04T18:01:00Z", "role": "user",
         "text": "Whenever the river is above 2 metres, remind me to check the safety page."},
        {"session": "s1", "ts": "2026-05-04T18:02:00Z", "role": "user",
         "text": "Don't let me forget to renew my paddling licence on Friday."},
        {"session": "s2", "ts": "2026-05-20T09:00:00Z", "role": "user",
         "text": "I've left the Tideway kayak club and joined the Putney kayak club instead."},
    ],
    "queries": [
        {"ts": "2026-05-21T08:00:00Z", "text": "The river looks high, should I paddle tonight?",
         "expect": {"procedural": [["safety page"]]}},
    ],
    "structure": {
        "facts": [{"words": ["putney"], "negated": False}],
        "rules": [{"trigger": ["2 metres"], "action": ["safety page"]}],
        "tasks": [{"words": ["licence"], "status": "pending", "due": "2026-05-08"}],
    },
    "stale": [["tideway"]],
}  # fmt: skip


def _write(tmp_path: Path, *scenarios: dict) -> Path:
    path = tmp_path / "scenarios.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in scenarios))
    return path


def test_a_scenario_is_scored_on_surfaced_structure_and_stale(
    service: MemoryService, tmp_path: Path
) -> None:
    report = run_typed(service, _write(tmp_path, SCENARIO))
    (result,) = report.results
    assert result.surfaced.overall() == (1, 1), result.misses
    assert result.structure.overall() == (3, 3), result.misses
    assert result.stale.overall() == (1, 1), result.misses
    table = report.format()
    assert "hobbies" in table and "1.00 (3/3)" in table


def test_a_check_that_is_not_met_is_listed_as_a_miss(
    service: MemoryService, tmp_path: Path
) -> None:
    wrong = {
        **SCENARIO,
        "id": "wrong",
        "structure": {"tasks": [{"words": ["licence"], "status": "done"}]},
    }
    report = run_typed(service, _write(tmp_path, wrong))
    (result,) = report.results
    assert result.structure.overall() == (0, 1)
    assert any("licence" in m for m in result.misses)
    assert "wrong: structure tasks" in report.format()
    # --show 0 keeps a set's misses unread (the dev set must not be developed on)
    assert "structure tasks" not in report.format(show=0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"turns": []}, "no turns"),
        ({"queries": [{"text": "x", "ts": "2026-01-01T00:00:00Z", "expect": {"tasks": [["a"]]}}]},
         "unknown memory type"),
        ({"turns": [{"text": "hi", "ts": "2026-01-01T00:00:00"}]}, "no time zone"),
        ({"structure": {"goals": []}}, "unknown structure kinds"),
    ],
)  # fmt: skip
def test_bad_scenarios_name_the_line(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as raised:
        load_scenarios(_write(tmp_path, SCENARIO, {**SCENARIO, **change}))
    assert ":2" in str(raised.value)


def test_the_dev_and_tuning_sets_load() -> None:
    dev = load_scenarios(REPO / "evals" / "typed" / "dev.jsonl")
    tune = load_scenarios(REPO / "evals" / "typed" / "tune.jsonl")
    assert len(dev) >= 40 and len({s.domain for s in dev}) >= 10
    assert not {s.id for s in dev} & {s.id for s in tune}
