"""Fuzz the daemon's own OpenAPI with schemathesis against a real `memoryd serve` (`make fuzz`).

1. Start a daemon on a fresh data directory and fill a sentinel user (a conversation, a task,
   a deleted memory); keep its export, which also seeds the import route's bodies
   (tests/support/fuzz_hooks.py).
2. Run `schemathesis run` over every operation of /openapi.json with the bearer token, all its
   phases (examples, coverage, fuzzing, stateful) and the checks of tests/support/
   schemathesis.toml: no 5xx, every status and body as documented, schema-valid input
   accepted, schema-invalid input refused, auth not ignored, a deleted resource gone.
3. Afterwards the daemon must still answer, its log must hold no traceback and no ERROR line,
   and the sentinel user must export exactly as before: fuzzing other users lost nothing.

Exit status 0 only if all of that holds. `--max-time` bounds a long run (`make fuzz`: FUZZ_S,
default 600 s); `--max-examples` bounds the cases per operation instead (the suite's short run).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from support.server import ServerProcess  # noqa: E402  (the e2e tests' real-server helper)

SENTINEL = "fuzz-sentinel-3c9e1a"
CONFIG = REPO / "tests" / "support" / "schemathesis.toml"  # the checks, and why
SENTINEL_TURNS = [
    "I'm allergic to penicillin.",
    "I moved to Lisbon last spring.",
    "Actually I moved to Porto, not Lisbon.",
    "Remind me to renew my passport before March.",
    "When I travel, always book an aisle seat, then check in online.",
    "We hiked the Rota Vicentina with Marta last weekend.",
]


def fill_sentinel(c: httpx.Client) -> None:
    """A user with facts (one superseded), a task, a rule, an episode and a deleted memory."""
    turns = [
        {"session_id": "s1", "role": "user", "text": text, "turn_id": f"t{n}"}
        for n, text in enumerate(SENTINEL_TURNS)
    ]
    c.post(f"/v1/users/{SENTINEL}/turns", json={"turns": turns}).raise_for_status()
    c.post(f"/v1/users/{SENTINEL}/tasks", json={"title": "water the plants"}).raise_for_status()
    doomed = c.post(f"/v1/users/{SENTINEL}/tasks", json={"title": "call the bank"})
    doomed.raise_for_status()
    c.delete(f"/v1/users/{SENTINEL}/memories/{doomed.json()['id']}").raise_for_status()


def export_of(c: httpx.Client) -> list[dict[str, Any]]:
    """The sentinel's export without the header's timestamp (it differs between exports)."""
    r = c.get(f"/v1/users/{SENTINEL}/export")
    r.raise_for_status()
    records = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    records[0].pop("exported_at", None)
    return records


# A training round retrains the router head: about a minute of CPU here. The short run
# (--max-examples) sends the route only its coverage-phase cases.
SHORT_RUN = """
[[operations]]
include-path = "/v1/users/{user_id}/router/rounds"
phases.fuzzing.enabled = false
phases.stateful.enabled = false
"""


def run_config(work: Path, max_examples: int) -> Path:
    """CONFIG, with the short run's budget: ``max_examples`` cases per operation (as a
    setting, not the flag, which would override the operations' own settings)."""
    path = work / "schemathesis.toml"
    if max_examples:
        path.write_text(
            f"generation.max-examples = {max_examples}\n\n{CONFIG.read_text()}{SHORT_RUN}"
        )
    else:
        path.write_text(CONFIG.read_text())
    return path


def schemathesis_command(url: str, token: str, args: argparse.Namespace, work: Path) -> list[str]:
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(run_config(work, args.max_examples)),
        "run",
        f"{url}/openapi.json",
        "--header",
        f"Authorization: Bearer {token}",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--workers",
        str(args.workers),
        "--request-timeout",
        "120",
        "--generation-database",
        "none",
        "--report",
        "ndjson",
        "--report-dir",
        str(work / "report"),
        "--no-color",
    ]
    if args.max_time:
        command += ["--max-time", str(args.max_time)]
    if args.seed is not None:
        command += ["--seed", str(args.seed)]
    return command


def daemon_errors(log: list[str]) -> list[str]:
    """Log lines that show the daemon failed on a request (tracebacks, ERROR records)."""
    return [line for line in log if "Traceback" in line or re.search(r"\bERROR\b", line)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-time", type=int, default=0, help="seconds for the whole run")
    parser.add_argument("--max-examples", type=int, default=0, help="cases per operation")
    parser.add_argument("--seed", type=int, help="schemathesis seed (printed when random)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, help="keep the data directory and reports here")
    args = parser.parse_args()
    if not args.max_time and not args.max_examples:
        parser.error("give --max-time or --max-examples")

    work = args.out or Path(tempfile.mkdtemp(prefix="memoryd-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    server = ServerProcess(work / "data", REPO / "models")
    try:
        with server.client() as c:
            fill_sentinel(c)
            before = export_of(c)
        export_file = work / "sentinel.jsonl"
        export_file.write_text("".join(json.dumps(r) + "\n" for r in before))
        token = server.token
        env = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": "fuzz_hooks",
            "PYTHONPATH": str(REPO / "tests" / "support"),
            "MEMORYD_FUZZ_EXPORT": str(export_file),
        }
        command = schemathesis_command(server.url, token, args, work)
        print("running:", " ".join(c if "Bearer" not in c else "Authorization: …" for c in command))
        fuzz = subprocess.run(command, env=env, text=True, capture_output=True)
        print(fuzz.stdout[-20000:], fuzz.stderr[-5000:], sep="\n")
        with server.client() as c:
            alive = c.get("/healthz").status_code == 200
            after = export_of(c)
    finally:
        if server.proc.poll() is None:
            server.stop()
    (work / "daemon.log").write_text("".join(server.log))
    problems = []
    if fuzz.returncode != 0:
        problems.append(f"schemathesis found failures (exit {fuzz.returncode})")
    if not alive:
        problems.append("the daemon stopped answering /healthz")
    if after != before:
        problems.append(f"the sentinel user {SENTINEL} changed during the fuzz")
    problems += [f"daemon log: {line.rstrip()}" for line in daemon_errors(server.log)[:20]]
    cases = re.search(r"(\d+) generated", fuzz.stdout)
    print(
        f"fuzz: {cases.group(1) if cases else '?'} cases; sentinel user "
        f"{'intact' if after == before else 'CHANGED'} ({len(before)} records); "
        f"daemon log {len(server.log)} lines, {len(daemon_errors(server.log))} errors "
        f"({work / 'daemon.log'})"
    )
    for problem in problems:
        print("FAIL:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
