"""Kill the daemon at random moments under load and check that nothing acknowledged is lost
(`make soak`; `make test` runs 3 rounds).

Each round starts `memoryd serve` on the same data directory, runs for a random 2-8 s with
  2 writers     ingesting turns (unique ids) in batches of 1-4
  1 reader      querying
  1 editor      creating tasks (with ids), completing them, stating facts that supersede
                each other and undoing a supersession
  1 job         reshuffling the tiers (the background job's work, asked for over and over)
then sends SIGKILL. The next start must report ready, and then every write that was answered
2xx must be there exactly once: each turn in the journal (listed once) and in the graph, one
vector per live memory, each task with every acknowledged move, and the journal must pass
SQLite's integrity check. The LLM labelling job is not part of it: no LLM runs here at soak
speed (the queue it drains is journaled and covered by the recovery tests).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from memoryd.store import integrity_problems  # noqa: E402
from support.server import ServerProcess  # noqa: E402  (the e2e tests' real-server helper)

USER = "soak"
PLACES = ["Porto", "Lisbon", "Braga", "Faro", "Évora", "Coimbra"]


@dataclass
class Acked:
    """Every write the daemon answered 2xx, over all rounds."""

    turns: set[str] = field(default_factory=set)
    moves: dict[str, list[str]] = field(default_factory=dict)  # task id -> statuses, in order
    lock: threading.Lock = field(default_factory=threading.Lock)


def _post(c: httpx.Client, path: str, body: dict | None = None) -> httpx.Response | None:
    try:
        return c.post(path, json=body)
    except httpx.HTTPError:
        return None  # the daemon was killed


class Load:
    """The round's clients; each stops at its first failed connection."""

    def __init__(self, server: ServerProcess, acked: Acked, rng: random.Random, round_: int):
        self.server, self.acked, self.rng, self.round = server, acked, rng, round_
        self.stop = threading.Event()
        self.errors: list[str] = []

    def _check(self, r: httpx.Response | None, *ok: int) -> bool:
        if r is None:
            return False
        if r.status_code not in ok:
            self.errors.append(
                f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text[:200]}"
            )
            return False
        return True

    def writer(self, w: int) -> None:
        n = 0
        with self.server.client() as c:
            while not self.stop.is_set():
                size = self.rng.randint(1, 4)
                turns = [
                    {
                        "turn_id": f"r{self.round}-w{w}-{n + i}",
                        "session_id": f"r{self.round}-s{(n + i) // 20}",
                        "role": "user",
                        "text": f"Note {n + i}: marker zq{self.round}x{w}x{n + i}.",
                    }
                    for i in range(size)
                ]
                r = _post(c, f"/v1/users/{USER}/turns", {"turns": turns})
                if not self._check(r, 201):
                    return
                with self.acked.lock:
                    self.acked.turns.update(t["turn_id"] for t in turns)
                n += size

    def reader(self) -> None:
        with self.server.client() as c:
            while not self.stop.is_set():
                r = _post(c, f"/v1/users/{USER}/query", {"query": "where do I live?", "k": 5})
                if r is None or (r.status_code != 404 and not self._check(r, 200)):
                    return

    def editor(self) -> None:
        n = 0
        with self.server.client() as c:
            while not self.stop.is_set():
                task = f"r{self.round}-task{n}"
                r = _post(c, f"/v1/users/{USER}/tasks", {"title": f"call {task}", "task_id": task})
                if not self._check(r, 201):
                    return
                with self.acked.lock:
                    self.acked.moves[task] = ["pending"]
                try:
                    r = c.patch(f"/v1/users/{USER}/tasks/{task}", json={"status": "done"})
                except httpx.HTTPError:
                    return
                if not self._check(r, 200):
                    return
                with self.acked.lock:
                    self.acked.moves[task].append("done")
                place = PLACES[n % len(PLACES)]
                body = {
                    "turns": [
                        {
                            "turn_id": f"{task}-fact",
                            "session_id": "facts",
                            "role": "user",
                            "text": f"I live in {place} now.",
                        }
                    ]
                }
                r = _post(c, f"/v1/users/{USER}/turns", body)
                if not self._check(r, 201):
                    return
                with self.acked.lock:
                    self.acked.turns.add(f"{task}-fact")
                n += 1

    def job(self) -> None:
        with self.server.client() as c:
            while not self.stop.is_set():
                r = _post(c, f"/v1/users/{USER}/tiers/reshuffle")
                if r is None or (r.status_code != 404 and not self._check(r, 200)):
                    return

    def run(self, seconds: float) -> None:
        threads = [threading.Thread(target=self.writer, args=(w,)) for w in range(2)]
        threads += [threading.Thread(target=f) for f in (self.reader, self.editor, self.job)]
        for t in threads:
            t.start()
        time.sleep(seconds)
        self.server.kill()
        self.stop.set()
        for t in threads:
            t.join()


def check(server: ServerProcess, acked: Acked, data: Path) -> list[str]:
    """What of the acknowledged writes the restarted daemon does not hold exactly once."""
    problems: list[str] = []
    with server.client() as c:
        r = c.get(f"/v1/users/{USER}")
        if r.status_code == 404 and not acked.turns and not acked.moves:
            return []
        counts = r.json()["counts"]
        listed: list[str] = []
        cursor = 0
        while True:
            page = c.get(f"/v1/users/{USER}/turns", params={"limit": 500, "cursor": cursor}).json()
            listed += [t["turn_id"] for t in page["turns"]]
            if page["next_cursor"] is None:
                break
            cursor = page["next_cursor"]
        if len(listed) != len(set(listed)):
            problems.append(f"{len(listed) - len(set(listed))} turns listed twice")
        missing = acked.turns - set(listed)
        if missing:
            problems.append(
                f"{len(missing)} acknowledged turns missing, e.g. {sorted(missing)[:3]}"
            )
        if counts["graph_Turn"] != counts["turns"]:
            problems.append(f"graph holds {counts['graph_Turn']} of {counts['turns']} turns")
        for kind in ("episodic", "semantic", "procedural", "working"):
            memories, vectors = (counts.get(f"{k}_{kind}", 0) for k in ("memories", "vectors"))
            if memories != vectors:
                problems.append(f"{kind}: {memories} memories, {vectors} vectors")
        tasks = {t["id"]: t for t in c.get(f"/v1/users/{USER}/tasks").json()["tasks"]}
        for task, moves in acked.moves.items():
            if task not in tasks:
                problems.append(f"task {task} missing")
                continue
            states = [s["status"] for s in tasks[task]["record"]["states"]]
            if states[: len(moves)] != moves:
                problems.append(f"task {task}: states {states}, acknowledged {moves}")
    found = integrity_problems(data / "users" / USER / "journal.sqlite")
    if found:
        problems.append(f"integrity_check: {found[:2]}")
    return problems


def wait_ready(server: ServerProcess) -> float:
    start = time.monotonic()
    with server.client() as c:
        while c.get("/readyz").status_code != 200:
            if time.monotonic() - start > 120:
                raise RuntimeError("not ready after 120 s")
            time.sleep(0.05)
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="random by default (printed)")
    parser.add_argument("--out", type=Path, help="keep the data directory here")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    rng = random.Random(seed)
    work = args.out or Path(tempfile.mkdtemp(prefix="memoryd-soak-"))
    data = work / "data"
    acked = Acked()
    ready_s: list[float] = []
    failures: list[str] = []
    print(f"soak: {args.rounds} rounds, seed {seed}, data in {data}")
    for round_ in range(1, args.rounds + 1):
        server = ServerProcess(data, REPO / "models")
        ready_s.append(wait_ready(server))
        problems = check(server, acked, data)
        load = Load(server, acked, rng, round_)
        seconds = rng.uniform(2, 8)
        load.run(seconds)  # ends with SIGKILL
        failures += [f"round {round_}: {p}" for p in problems + load.errors]
        print(
            f"round {round_:2d}: ready in {ready_s[-1]:.2f} s, every earlier acknowledged write "
            f"{'there once' if not problems else 'NOT there'}; load for {seconds:.1f} s, killed "
            f"({len(acked.turns)} turns, {len(acked.moves)} tasks acknowledged so far)"
        )
    server = ServerProcess(data, REPO / "models")
    try:
        ready_s.append(wait_ready(server))
        failures += [f"after the last round: {p}" for p in check(server, acked, data)]
    finally:
        server.stop()
    print(
        f"soak: {args.rounds} kill -9 rounds, {len(acked.turns)} acknowledged turns and "
        f"{len(acked.moves)} tasks ({sum(len(m) for m in acked.moves.values())} moves), restart to "
        f"ready p50 {statistics.median(ready_s):.2f} s, max {max(ready_s):.2f} s: "
        f"{'nothing lost' if not failures else f'{len(failures)} problems'}"
    )
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
