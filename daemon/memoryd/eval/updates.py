"""Update eval: when a fact changes, does the reply carry the new value and leave the old one
behind; when a second value comes, does it sit beside the first?

Scenarios are JSON lines in the format of ``evals/updates/FORMAT.md``. Each goes into a fresh
user (all its turns in one request, each with its index as turn id), and its query is asked at
its own time; the reply's semantic section is rendered as the context block renders it. Words
match as case-insensitive substrings:

- **replaced** (``replace``): every ``current`` item is in one line of the semantic section, and
  no line that comes from a turn before ``change_turn`` holds a ``stale`` item (a line from the
  changing turn itself may name the old value: "finally ditched Octopus, EDF …");
- **stale-clean** (``replace``): no current, affirmative fact's value holds a ``stale`` item;
- **kept** (``keep``): every ``current`` item is in one line of the semantic section.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memoryd.errors import InvalidInputError
from memoryd.eval.facts import all_memories
from memoryd.eval.typed import (
    cell,
    holds,
    scenario_lines,
    stale_clean,
    time_of,
    turn_of,
    words_of,
)
from memoryd.ingest import NewTurn
from memoryd.models import Fact, MemoryType
from memoryd.retrieve import QueryParams, render_line
from memoryd.service import MemoryService

__all__ = ["UpdateReport", "UpdateScenario", "load_updates", "run_updates"]

QUERY_K = 10
KINDS = ("replace", "keep")
SCORES = ("replaced", "stale-clean", "kept")


@dataclass(frozen=True)
class UpdateScenario:
    id: str
    domain: str
    kind: str
    turns: list[NewTurn]
    change_turn: int
    query: str
    query_ts: datetime
    current: list[list[str]]
    stale: list[list[str]]


def _scenario(data: Any, where: str) -> UpdateScenario:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise InvalidInputError(f"{where}: expected a JSON object with an 'id'")
    sid = data["id"]
    raw_turns = data.get("turns") or []
    turns = [turn_of(t, f"{where} turns[{i}]", f"{sid}-t{i}") for i, t in enumerate(raw_turns)]
    kind = data.get("kind")
    change = data.get("change_turn")
    if kind not in KINDS:
        raise InvalidInputError(f"{where}: 'kind' must be one of {KINDS}")
    if not isinstance(change, int) or not 0 < change < len(turns):
        raise InvalidInputError(f"{where}: 'change_turn' must index a turn after the first")
    query = data.get("query")
    if not isinstance(query, dict) or not isinstance(query.get("text"), str):
        raise InvalidInputError(f"{where}: 'query' needs 'text' and 'ts'")
    current = [words_of(w, f"{where} current") for w in data.get("current") or []]
    stale = [words_of(w, f"{where} stale") for w in data.get("stale") or []]
    if not current or (kind == "replace" and not stale):
        raise InvalidInputError(f"{where}: 'current' (and for replace 'stale') must list values")
    return UpdateScenario(
        sid,
        str(data.get("domain", "other")),
        kind,
        turns,
        change,
        query["text"],
        time_of(query.get("ts"), f"{where} query").astimezone(UTC),
        current,
        stale,
    )


def load_updates(path: Path) -> list[UpdateScenario]:
    """Read a scenario file (blank lines skipped); a bad line raises an
    :class:`InvalidInputError` naming it."""
    return [_scenario(data, where) for where, _, data in scenario_lines(path)]


@dataclass(frozen=True)
class UpdateResult:
    scenario: UpdateScenario
    scores: dict[str, bool]
    misses: list[str]


def _before_change(turn_ids: list[str], scenario: UpdateScenario) -> bool:
    prefix = f"{scenario.id}-t"
    indices = [int(t[len(prefix) :]) for t in turn_ids if t.startswith(prefix)]
    return bool(indices) and max(indices) < scenario.change_turn


def score_update(service: MemoryService, scenario: UpdateScenario) -> UpdateResult:
    """Ingest ``scenario`` into a fresh user, ask its query and score the reply."""
    user = f"upd-{re.sub(r'[^A-Za-z0-9_-]', '-', scenario.id)}"[:64]
    service.ingest(user, scenario.turns)
    params = QueryParams(query=scenario.query, k=QUERY_K, now=scenario.query_ts)
    items = service.query(user, params).section(MemoryType.SEMANTIC)
    lines = [(render_line(i), _before_change(i.turn_ids, scenario)) for i in items]
    present = [any(holds(line, w) for line, _ in lines) for w in scenario.current]
    misses = [
        f"current {w} not in the semantic section"
        for w, ok in zip(scenario.current, present, strict=True)
        if not ok
    ]
    scores: dict[str, bool] = {}
    if scenario.kind == "keep":
        scores["kept"] = all(present)
    else:
        carried = [w for w in scenario.stale if any(old and holds(line, w) for line, old in lines)]
        misses += [f"stale {w} in a line from before the change" for w in carried]
        scores["replaced"] = all(present) and not carried
        facts = [m for m in all_memories(service, user) if isinstance(m, Fact)]
        still = [w for w in scenario.stale if not stale_clean(w, facts)]
        misses += [f"stale {w} is still a current fact" for w in still]
        scores["stale-clean"] = not still
    if misses:
        misses.append("semantic section: " + " | ".join(line for line, _ in lines))
    return UpdateResult(scenario, scores, misses)


@dataclass
class UpdateReport:
    path: Path
    results: list[UpdateResult]

    def share(self, score: str, domain: str | None = None) -> tuple[int, int]:
        keep = [
            r.scores[score]
            for r in self.results
            if score in r.scores and (domain is None or r.scenario.domain == domain)
        ]
        return sum(keep), len(keep)

    def format(self, show: int | None = None) -> str:
        """The table per domain, then the first ``show`` misses (all when None)."""
        domains = sorted({r.scenario.domain for r in self.results})
        lines = [
            f"Update eval: {self.path} ({len(self.results)} scenarios, {len(domains)} domains)",
            "",
            f"{'domain':20} {'scen':>4} " + " ".join(f"{s:>14}" for s in SCORES),
        ]
        for domain in [*domains, None]:
            count = sum(1 for r in self.results if domain is None or r.scenario.domain == domain)
            cells = [cell(self.share(s, domain)) for s in SCORES]
            lines.append(
                f"{(domain or 'ALL')[:20]:20} {count:4d} " + " ".join(f"{c:>14}" for c in cells)
            )
        misses = [(r.scenario.id, m) for r in self.results for m in r.misses]
        if misses:
            listed = misses if show is None else misses[:show]
            lines += ["", f"misses ({len(misses)} lines, {len(listed)} listed):"]
            lines += [f"  {sid}: {m}" for sid, m in listed]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "scenarios": len(self.results),
            "scores": {s: dict(zip(("hits", "total"), self.share(s), strict=True)) for s in SCORES},
            "misses": {r.scenario.id: r.misses for r in self.results if r.misses},
        }


def run_updates(service: MemoryService, path: Path) -> UpdateReport:
    """Score every scenario of ``path`` (see the module docstring)."""
    scenarios = load_updates(path)
    results = [
        score_update(service, s)
        for s in tqdm(scenarios, desc="scenarios", unit="scenario", file=sys.stderr)
    ]
    return UpdateReport(Path(path), results)
