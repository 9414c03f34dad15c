"""Typed-memory eval: does each stated fact, rule and task become that kind of memory, surface
in its section of a later query, and leave stale values behind?

Scenarios are JSON lines in the format of ``evals/typed/FORMAT.md``: a user's turns, later
queries with the words each typed section must show, the facts, rules and tasks that must exist
after ingest, and superseded values that must not be current. Each scenario goes into a fresh
user (all its turns in one request, as a client syncing a history would send them); its queries
are asked at their own time. Matching is by case-insensitive substring, each expected item a
list of words that must all appear in one line:

- **surfaced**: an ``expect`` item is found when one line of its type's section of the reply
  (rendered as the context block renders it) holds all its words;
- **structure**: a fact check is met by a current fact whose line (subject, relation, value and
  source sentence) holds all its words, with the polarity asked for; a rule check by a rule
  whose conditions hold the trigger words and whose actions (any branch) the action words; a
  task check by a task whose title holds the words, in the status and with the due date asked;
- **stale-clean**: a ``stale`` item is clean when no current, affirmative fact's value holds
  all its words.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memoryd.errors import InvalidInputError
from memoryd.eval.facts import all_memories
from memoryd.ingest import NewTurn
from memoryd.models import Fact, MemoryType, Role, Rule, Task
from memoryd.retrieve import QueryParams, render_line
from memoryd.service import MemoryService

__all__ = [
    "Scenario",
    "TypedReport",
    "cell",
    "holds",
    "load_scenarios",
    "run_typed",
    "scenario_lines",
    "stale_clean",
    "time_of",
    "turn_of",
    "words_of",
]

QUERY_K = 10
_TYPES = {t.value: t for t in MemoryType}
_KINDS = ("facts", "rules", "tasks")


@dataclass(frozen=True)
class Query:
    text: str
    ts: datetime
    expect: dict[MemoryType, list[list[str]]]


@dataclass(frozen=True)
class Scenario:
    """One scenario of the file; ``line`` is its 1-based line number."""

    id: str
    domain: str
    turns: list[NewTurn]
    queries: list[Query]
    structure: dict[str, list[dict[str, Any]]]
    stale: list[list[str]]
    line: int


# -- input -------------------------------------------------------------------------------------


def words_of(raw: object, where: str) -> list[str]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(w, str) and w for w in raw):
        raise InvalidInputError(f"{where}: expected a non-empty list of words")
    return [w.lower() for w in raw]


def time_of(raw: object, where: str) -> datetime:
    if not isinstance(raw, str):
        raise InvalidInputError(f"{where}: 'ts' must be an ISO 8601 string")
    try:
        ts = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInputError(f"{where}: bad ts {raw!r}") from exc
    if ts.tzinfo is None:
        raise InvalidInputError(f"{where}: ts {raw!r} has no time zone")
    return ts


def turn_of(raw: Any, where: str, turn_id: str | None = None) -> NewTurn:
    if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
        raise InvalidInputError(f"{where}: a turn needs 'text'")
    try:
        role = Role(raw.get("role", "user"))
    except ValueError:
        raise InvalidInputError(f"{where}: unknown role {raw.get('role')!r}") from None
    session = str(raw.get("session", "s1"))
    ts = time_of(raw.get("ts"), where)
    return NewTurn(session, role, raw["text"], ts, turn_id=turn_id)


def _query(raw: Any, where: str) -> Query:
    if not isinstance(raw, dict) or not isinstance(raw.get("text"), str):
        raise InvalidInputError(f"{where}: a query needs 'text'")
    expect: dict[MemoryType, list[list[str]]] = {}
    for name, items in (raw.get("expect") or {}).items():
        if name not in _TYPES:
            raise InvalidInputError(f"{where}: unknown memory type {name!r} in 'expect'")
        expect[_TYPES[name]] = [words_of(i, f"{where} expect.{name}") for i in items]
    return Query(raw["text"], time_of(raw.get("ts"), where).astimezone(UTC), expect)


def _scenario(data: Any, where: str, line: int) -> Scenario:
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        raise InvalidInputError(f"{where}: expected a JSON object with an 'id'")
    turns = [turn_of(t, f"{where} turns[{i}]") for i, t in enumerate(data.get("turns") or [])]
    if not turns:
        raise InvalidInputError(f"{where}: no turns")
    queries = [_query(q, f"{where} queries[{i}]") for i, q in enumerate(data.get("queries") or [])]
    structure = data.get("structure") or {}
    unknown = set(structure) - set(_KINDS)
    if unknown:
        raise InvalidInputError(f"{where}: unknown structure kinds {sorted(unknown)}")
    stale = [words_of(s, f"{where} stale") for s in data.get("stale") or []]
    return Scenario(
        data["id"],
        str(data.get("domain", "other")),
        turns,
        queries,
        {k: list(structure.get(k) or []) for k in _KINDS},
        stale,
        line,
    )


def scenario_lines(path: Path) -> Iterator[tuple[str, int, Any]]:
    """``(where, line number, JSON value)`` of each non-blank line of a scenario file; a missing
    file, a line that is not JSON or a file with none is an :class:`InvalidInputError`."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file")
    found = False
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.strip():
            where = f"{path}:{number}"
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{where}: not JSON ({exc.msg})") from exc
            found = True
            yield where, number, data
    if not found:
        raise InvalidInputError(f"{path}: no scenarios")


def load_scenarios(path: Path) -> list[Scenario]:
    """Read a scenario file (blank lines skipped); a bad line raises an
    :class:`InvalidInputError` naming it."""
    return [_scenario(data, where, number) for where, number, data in scenario_lines(path)]


# -- checks ------------------------------------------------------------------------------------


def _norm(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").lower().split())


def holds(line: str, words: Sequence[str]) -> bool:
    line = _norm(line)
    return all(_norm(w) in line for w in words)


def fact_line(fact: Fact) -> str:
    """What a fact check reads: subject, attribute and value (the reply's words), the
    attribute's name and the source sentence."""
    return f"{fact.subject} {fact.statement} {fact.relation.replace('_', ' ')} {fact.text}"


def _fact_check(check: dict[str, Any], facts: list[Fact]) -> bool:
    words = check.get("words") or []
    negated = check.get("negated")
    return any(
        f.valid_to is None
        and (negated is None or f.negated == bool(negated))
        and holds(fact_line(f), words)
        for f in facts
    )


def _rule_check(check: dict[str, Any], rules: list[Rule]) -> bool:
    trigger, action = check.get("trigger") or [], check.get("action") or []
    for rule in rules:
        actions = [a for acts in rule.branches.values() for a in acts] + rule.actions
        conditions = " ; ".join(rule.conditions) or rule.title
        if holds(conditions, trigger) and holds(" ; ".join(actions) or rule.text, action):
            return True
    return False


def _task_check(check: dict[str, Any], tasks: list[Task]) -> bool:
    words, status, due = check.get("words") or [], check.get("status"), check.get("due")
    return any(
        holds(t.title, words)
        and (status is None or t.status.value == status)
        and (due is None or (t.due is not None and t.due.date().isoformat() == due))
        for t in tasks
    )


def stale_clean(words: Sequence[str], facts: list[Fact]) -> bool:
    return not any(
        f.valid_to is None and not f.negated and holds(f.object.name, words) for f in facts
    )


# -- running -----------------------------------------------------------------------------------


@dataclass
class Tally:
    """Hits over totals, per key."""

    hits: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    totals: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, key: str, ok: bool) -> None:
        self.totals[key] += 1
        self.hits[key] += int(ok)

    def share(self, key: str) -> float | None:
        total = self.totals.get(key, 0)
        return self.hits.get(key, 0) / total if total else None

    def overall(self) -> tuple[int, int]:
        return sum(self.hits.values()), sum(self.totals.values())


@dataclass
class ScenarioResult:
    scenario: Scenario
    surfaced: Tally
    structure: Tally
    stale: Tally
    misses: list[str]


def score_scenario(service: MemoryService, scenario: Scenario) -> ScenarioResult:
    """Ingest ``scenario`` into a fresh user, ask its queries and run its checks."""
    user = f"typed-{re.sub(r'[^A-Za-z0-9_.-]', '-', scenario.id)}"
    service.ingest(user, scenario.turns)
    surfaced, structure, stale, misses = Tally(), Tally(), Tally(), []
    for query in scenario.queries:
        result = service.query(user, QueryParams(query=query.text, k=QUERY_K, now=query.ts))
        for mtype, items in query.expect.items():
            lines = [render_line(i) for i in result.section(mtype)]
            for words in items:
                ok = any(holds(line, words) for line in lines)
                surfaced.add(mtype.value, ok)
                if not ok:
                    misses.append(f"surfaced {mtype.value} {words} for {query.text!r}")
    memories = all_memories(service, user)
    facts = [m for m in memories if isinstance(m, Fact)]
    rules = [m for m in memories if isinstance(m, Rule)]
    tasks = [m for m in memories if isinstance(m, Task)]
    for kind, checks in scenario.structure.items():
        for check in checks:
            if kind == "facts":
                ok = _fact_check(check, facts)
            elif kind == "rules":
                ok = _rule_check(check, rules)
            else:
                ok = _task_check(check, tasks)
            structure.add(kind, ok)
            if not ok:
                misses.append(f"structure {kind} {json.dumps(check)}")
    for words in scenario.stale:
        ok = stale_clean(words, facts)
        stale.add("facts", ok)
        if not ok:
            misses.append(f"stale {words} is still a current fact")
    return ScenarioResult(scenario, surfaced, structure, stale, misses)


@dataclass
class TypedReport:
    path: Path
    results: list[ScenarioResult]

    def _merged(self, pick: str, keep: Iterable[ScenarioResult]) -> Tally:
        out = Tally()
        for r in keep:
            tally: Tally = getattr(r, pick)
            for key, total in tally.totals.items():
                out.totals[key] += total
                out.hits[key] += tally.hits.get(key, 0)
        return out

    def format(self, show: int | None = None) -> str:
        """The tables, then the first ``show`` misses (all of them when ``show`` is None)."""
        domains = sorted({r.scenario.domain for r in self.results})
        lines = [
            f"Typed-memory eval: {self.path} ({len(self.results)} scenarios, "
            f"{len(domains)} domains)",
            "",
            f"{'domain':24} {'scen':>4} {'surfaced':>14} {'structure':>14} {'stale-clean':>14}",
        ]
        for domain in [*domains, None]:
            keep = [r for r in self.results if domain is None or r.scenario.domain == domain]
            cells = [
                cell(self._merged(p, keep).overall()) for p in ("surfaced", "structure", "stale")
            ]
            name = domain or "ALL"
            lines.append(f"{name[:24]:24} {len(keep):4d} " + " ".join(f"{c:>14}" for c in cells))
        lines += ["", f"{'by type':24} {'surfaced':>14} {'structure':>14}"]
        surfaced, structure = (
            self._merged("surfaced", self.results),
            self._merged("structure", self.results),
        )
        for mtype, kind in zip(
            ("semantic", "procedural", "working", "episodic"),
            ("facts", "rules", "tasks", ""),
            strict=True,
        ):
            s = cell((surfaced.hits.get(mtype, 0), surfaced.totals.get(mtype, 0)))
            t = cell((structure.hits.get(kind, 0), structure.totals.get(kind, 0)))
            lines.append(f"{mtype + (f' ({kind})' if kind else ''):24} {s:>14} {t:>14}")
        misses = [(r.scenario.id, m) for r in self.results for m in r.misses]
        if misses:
            listed = misses if show is None else misses[:show]
            lines += ["", f"misses ({len(misses)}, {len(listed)} listed):"]
            lines += [f"  {sid}: {m}" for sid, m in listed]
        return "\n".join(lines)


def cell(counts: tuple[int, int]) -> str:
    """``0.75 (3/4)``; ``-`` for nothing counted."""
    hits, total = counts
    return f"{hits / total:.2f} ({hits}/{total})" if total else "-"


def run_typed(service: MemoryService, path: Path) -> TypedReport:
    """Score every scenario of ``path`` (see the module docstring)."""
    scenarios = load_scenarios(path)
    results = [
        score_scenario(service, s)
        for s in tqdm(scenarios, desc="scenarios", unit="scenario", file=sys.stderr)
    ]
    return TypedReport(Path(path), results)
