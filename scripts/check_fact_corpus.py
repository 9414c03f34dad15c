"""Check fact-corpus files and update scenarios against models/fact_corpus/LABELS.md and
evals/updates/FORMAT.md, and print their counts:

    python3 scripts/check_fact_corpus.py models/fact_corpus/train/*.jsonl

A file of turns has ``text`` on each line, a file of pairs ``first`` and ``second``, a file of
scenarios ``turns``. Exit status 1 names the first problem of each bad file.
"""

from __future__ import annotations

import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "daemon"))

from memoryd.fact_corpus import (  # noqa: E402
    INVENTORY_FILE,
    ROLES,
    CorpusError,
    Inventory,
    load_inventory,
    read_jsonl,
    read_pairs,
    read_turns,
)


def check_scenarios(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for number, data in read_jsonl(path):
        where = f"{path}:{number}"
        turns = data.get("turns")
        if not isinstance(turns, list) or len(turns) < 2:
            raise CorpusError(f"{where}: 'turns' must list at least two turns")
        last = None
        for i, turn in enumerate(turns):
            if turn.get("role") not in ROLES or not str(turn.get("text", "")).strip():
                raise CorpusError(f"{where}: turn {i} needs a role in {ROLES} and text")
            ts = datetime.fromisoformat(str(turn.get("ts")).replace("Z", "+00:00"))
            if ts.tzinfo is None or (last is not None and ts < last):
                raise CorpusError(f"{where}: turn {i}: times need a zone and go forward")
            last = ts
        kind = data.get("kind")
        change = data.get("change_turn")
        if kind not in ("replace", "keep") or not isinstance(change, int):
            raise CorpusError(f"{where}: kind replace|keep and an integer change_turn")
        if not 0 < change < len(turns):
            raise CorpusError(f"{where}: change_turn {change} is not a later turn")
        text = " ".join(t["text"] for t in turns).lower()
        for key in ("current", "stale"):
            for item in data.get(key, []):
                if not item or any(w.lower() not in text for w in item):
                    raise CorpusError(f"{where}: {key} item {item} is not in the turns")
        if kind == "replace" and not data.get("stale"):
            raise CorpusError(f"{where}: a replace scenario names its stale values")
        query = data.get("query", {})
        datetime.fromisoformat(str(query.get("ts")).replace("Z", "+00:00"))
        if not str(query.get("text", "")).strip():
            raise CorpusError(f"{where}: the query needs text")
        counts[f"scenario {kind}"] += 1
        counts["scenario turns"] += len(turns)
    return counts


def check(path: Path, inventory: Inventory) -> Counter[str]:
    first = next(read_jsonl(path), (0, {}))[1]
    if "turns" in first:
        return check_scenarios(path)
    counts: Counter[str] = Counter()
    if "first" in first:
        for pair in read_pairs(path, inventory):
            counts[f"pair {pair.outcome}"] += 1
            for turn in (pair.first, pair.second):
                counts["turns"] += 1
                counts.update(f"kind {f.kind}" for f in turn.facts)
        return counts
    for turn in read_turns(path, inventory):
        counts["turns"] += 1
        counts[f"role {turn.role}"] += 1
        counts.update(f"kind {f.kind}" for f in turn.facts)
        if not turn.facts:
            counts["no fact"] += 1
    return counts


def main(argv: list[str]) -> int:
    inventory = load_inventory(ROOT / "models" / INVENTORY_FILE)
    total: Counter[str] = Counter()
    bad = 0
    for name in argv:
        try:
            counts = check(Path(name), inventory)
        except (CorpusError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"BAD {exc}")
            bad += 1
            continue
        total.update(counts)
        print(f"ok  {name}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print("total: " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
