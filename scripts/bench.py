"""`make bench`: ingest and query latency of memoryd against bare baselines, measured in one run.

At each size (default 1k and 10k ingested turns) it prints p50/p95 of
  (a) one durable single-turn ingest through the service façade,
  (b) one query through the façade (as a client sends it: tiered, recalls counted), and the
      same queries tiered and exhaustive (``search: all``) without counting recalls,
      alternating one by one: their ratio compares the two searches alone,
  (c) the bare encoder call,
  (d) a bare fsync'd SQLite insert (WAL, synchronous=FULL, one row with a 1.5 KB blob),
  (e) a bare graph transaction writing the same nodes and edges as one ingest (scratch database),
and (a), (b) again over HTTP against a real `memoryd serve` process, then the ratios
  ingest p50 / (c + d + e p50s)   target <= 1.5
  query p50 / encoder p50         target <= 4 (at 10k)
  tiered p50 / exhaustive p50     target <= 1
and, at the largest size, both query figures again after a reshuffle (before one, every record
is in tier 1, as after a bulk import), and over HTTP on the daemon, whose fill to that size had
a reshuffle halfway (as the daemon's job runs one during a long import: the import's second
half is then in tier 1),
plus batch ingest throughput (turns/s at batch 128, over HTTP), the daemon's RSS (target
<= 350 MB at 10k turns and <= 500 MB at 100k, no LLM) right after the last request and again
once its minute's save job has run (it checkpoints the graph), its data directory's bytes per
turn, its cold start to ``/readyz`` (the process restarted on its data) and a rebuild of the
user's graph and vectors from the journal (façade). The figures per size are drawn against store
size in
``bench-results/scale.png`` (``make bench-scale`` adds 100k turns, about half an hour).

Before the sizes, batch ingest throughput through the façade (batch 128, into a fresh user) against
the bare encoder's on the same texts with as many threads as the daemon's encoder workers
(``encoder.workers``), for short chat turns and for long ones (assistant replies of
``make_lme_synth.py --reply-sentences``, over 200 tokens each): target ingest >= 0.8 x the bare
encoder. Turn texts come from LoCoMo (read in place, never copied) when the file is present, else
from a synthetic generator. Settings come from the environment as for the daemon:
``MEMORYD_GRAPH_BUFFER_POOL_SIZE=134217728 make bench`` benchmarks a 128 MiB pool.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import numpy as np

from memoryd.config import load_config
from memoryd.ingest import NewTurn
from memoryd.jobs import SAVE_INTERVAL_S
from memoryd.memory.build import build_memories
from memoryd.memory.extract import extract
from memoryd.models import GraphEngine, Label, Role, SearchMode, Turn
from memoryd.retrieve import QueryParams
from memoryd.service import MemoryService
from memoryd.store.graph import GraphStore

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from make_lme_synth import generate  # noqa: E402  (this directory's LongMemEval-format maker)
from support.server import ServerProcess  # noqa: E402  (the e2e tests' real-server helper)

LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
QUERIES = [
    "When did Caroline go to the support group?",
    "What does Melanie like to paint?",
    "Where did they go camping?",
    "what medication am I allergic to",
    "what did we talk about last week?",
    "Which books has she read recently?",
]


def texts(n: int) -> list[str]:
    base: list[str] = []
    if LOCOMO.exists():
        for sample in json.loads(LOCOMO.read_text()):
            conv = sample["conversation"]
            for key in sorted(k for k in conv if re.fullmatch(r"session_\d+", k)):
                base += [t["text"] for t in conv[key]]
    else:
        rng = np.random.default_rng(0)
        words = "run dinner anna oslo knee doctor paint hike book pasta bus rain dog".split()
        base = [" ".join(rng.choice(words, 12)) for _ in range(2000)]
    return [base[i % len(base)] for i in range(n)]


def turns(n: int, offset: int = 0) -> list[NewTurn]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        NewTurn(
            session_id=f"s{(offset + i) // 20}",
            role=Role.USER,
            text=text,
            ts=start + timedelta(minutes=offset + i),
            turn_id=f"b{offset + i}",
        )
        for i, text in enumerate(texts(offset + n)[offset:])
    ]


SETTLED_RSS = "daemon RSS MB, after its save job"
LONG_SENTENCES = 14  # sentences per long assistant reply: about 230 tokens


def long_texts(n: int) -> list[str]:
    """``n`` assistant replies of a LongMemEval-format haystack, each over 200 tokens."""
    data = generate(1, sessions=n // 5 + 1, turns=10, reply_sentences=LONG_SENTENCES)
    replies = [
        t["content"] for s in data[0]["haystack_sessions"] for t in s if t["role"] == "assistant"
    ]
    return replies[:n]


def as_turns(sample: list[str], prefix: str) -> list[NewTurn]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return [
        NewTurn(
            f"{prefix}-s{i // 20}", Role.USER, text, start + timedelta(minutes=i), f"{prefix}{i}"
        )
        for i, text in enumerate(sample)
    ]


def bare_throughput(embed: Callable[[str], object], sample: list[str], threads: int) -> float:
    """Texts/s of ``embed`` over ``sample`` on ``threads`` threads, one text per call."""
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(embed, sample[: threads * 4]))  # warm each thread's first call
        t = time.perf_counter()
        list(pool.map(embed, sample))
        return len(sample) / (time.perf_counter() - t)


def ingest_throughput(service: MemoryService, user: str, sample: list[str]) -> float:
    """Turns/s of batch-128 façade ingest of ``sample`` into the fresh user ``user``."""
    pending = as_turns(sample, user)
    t = time.perf_counter()
    for i in range(0, len(pending), 128):
        service.ingest(user, pending[i : i + 128])
    return len(pending) / (time.perf_counter() - t)


def throughput_rows(service: MemoryService) -> Iterator[tuple[str, float, float, str]]:
    """Batch ingest against the bare encoder on the same texts and threads, short and long."""
    threads = service.config.encoder.pool_size
    for kind, sample in (("short", texts(2000)), ("long", long_texts(400))):
        tokens = sorted(service.encoder.token_count(t) for t in sample)[len(sample) // 2]
        encoder = bare_throughput(service.encoder.embed, sample, threads)
        routed = bare_throughput(service.encoder.embed_routed, sample, threads)
        ingest = ingest_throughput(service, f"throughput-{kind}", sample)
        note = f"{len(sample)} turns, p50 {tokens} tokens, {threads} threads"
        yield (f"{kind}: bare encoder texts/s", encoder, float("nan"), note)
        yield (f"{kind}: bare encoder + router top texts/s", routed, float("nan"), "")
        yield (f"{kind}: batch-128 ingest turns/s, façade", ingest, float("nan"), "")
        yield (f"{kind}: ratio ingest/encoder", ingest / encoder, float("nan"), "target >= 0.8")
        yield (f"{kind}: ratio ingest/(encoder + top)", ingest / routed, float("nan"), "")


def print_rows(rows: Iterator[tuple[str, float, float, str]]) -> dict[str, tuple[float, float]]:
    """Print each row as it is measured; returns name → (p50, p95)."""
    print(f"{'figure':44} {'p50':>9} {'p95':>9}  note")
    printed = {}
    for name, p50, p95, note in rows:
        p95s = "" if p95 != p95 else f"{p95:9.3f}"
        print(f"{name:44} {p50:9.3f} {p95s:>9}  {note}", flush=True)
        printed[name] = (p50, p95)
    return printed


def plot_scale(figures: dict[int, dict[str, tuple[float, float]]], path: Path) -> None:
    """Latency (as a multiple of the encoder) and RSS against store size, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(figures)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for name, label, style in [
        ("(b) query, façade", "query", "o-"),
        ("(b) query, façade, search: all, no recall", "query, search: all", "s--"),
        ("(a) ingest, façade", "single ingest", "^-"),
        ("(b) query, HTTP", "query over HTTP", "d:"),
    ]:
        color = None
        for stat, suffix, alpha in ((0, "p50", 1.0), (1, "p95", 0.35)):
            ratios = [figures[n][name][stat] / figures[n]["(c) encoder"][0] for n in sizes]
            (line,) = left.plot(
                sizes, ratios, style, color=color, alpha=alpha, label=f"{label} {suffix}"
            )
            color = line.get_color()
    left.axhline(4, color="grey", lw=0.8, ls=":", label="query target (4x)")
    left.set(xscale="log", yscale="log", xlabel="turns in the user", ylabel="x encoder p50")
    left.set_title("latency / bare encoder call")
    left.legend(fontsize=7)
    for name, label in (("daemon RSS MB", "daemon RSS"), (SETTLED_RSS, "after its save job")):
        right.plot(sizes, [figures[n][name][0] for n in sizes], "o-", label=label)
    right.plot([10_000, 100_000], [350, 500], "x", color="red", label="targets")
    right.set(xscale="log", xlabel="turns in the user", ylabel="MB", title="daemon RSS")
    right.legend(fontsize=7)
    for ax in (left, right):
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    plt.close(fig)


def pct(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def timed(fn: Callable[[int], object], n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


def bare_sqlite(directory: Path, n: int) -> list[float]:
    conn = sqlite3.connect(directory / "bare.sqlite", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t(id TEXT PRIMARY KEY, payload TEXT, embedding BLOB)")
    blob = np.zeros(384, np.float32).tobytes()

    def insert(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?, ?)", (f"x{i}", "y" * 400, blob))
        conn.execute("COMMIT")

    out = timed(insert, n)
    conn.close()
    return out


def bare_graph(directory: Path, service: MemoryService, sample: list[NewTurn]) -> list[float]:
    """The same nodes and edges one ingest writes, in one graph transaction per turn."""
    store = GraphStore(
        directory / "bare-graph",
        GraphEngine.LADYBUG,
        max_db_size=1 << 32,
        buffer_pool_size=64 << 20,
    )
    prepared = []
    for i, new in enumerate(sample):
        turn = Turn(
            f"g{i}",
            new.session_id,
            new.role,
            new.text,
            new.ts or datetime.now(UTC),
            labels=(Label.EPISODIC,),
        )
        slots = service.shared.reader.slots  # an episodic turn: no fact read
        prepared.append((turn, build_memories(turn, extract(turn.text, turn.ts), [], slots)))
    out = timed(lambda i: store.apply_turn(i + 1, *prepared[i]), len(prepared))
    store.close()
    return out


def payload(batch: list[NewTurn]) -> dict:
    return {
        "turns": [
            {
                "turn_id": t.turn_id,
                "session_id": t.session_id,
                "role": t.role.value,
                "text": t.text,
                "ts": t.ts.isoformat() if t.ts else None,
            }
            for t in batch
        ]
    }


def fill_http(client: httpx.Client, start: int, stop: int) -> float:
    """Batch-128 ingest over HTTP from ``start`` to ``stop``; returns turns/s."""
    pending = turns(stop - start, offset=start)
    t = time.perf_counter()
    for i in range(0, len(pending), 128):
        client.post("/v1/users/bench/turns", json=payload(pending[i : i + 128])).raise_for_status()
    return len(pending) / (time.perf_counter() - t)


def fill_service(service: MemoryService, start: int, stop: int) -> None:
    pending = turns(stop - start, offset=start)
    for i in range(0, len(pending), 128):
        service.ingest("bench", pending[i : i + 128])


Search = Callable[[str, SearchMode], object]


def facade_search(service: MemoryService) -> Search:
    """A query through the façade in a given mode, recalls not counted."""
    return lambda text, mode: service.query("bench", QueryParams(text, search=mode, recall=False))


def http_search(client: httpx.Client) -> Search:
    """The same over HTTP."""
    body = {"recall": False}
    return lambda text, mode: client.post(
        "/v1/users/bench/query", json={**body, "query": text, "search": mode.value}
    ).raise_for_status()


def query_modes(search: Search, n: int) -> tuple[list[float], list[float]]:
    """``n`` queries searched tiered and ``n`` searched exhaustively, each query in both modes
    one after the other, the mode that goes first taking turns: drift on a shared machine, and
    the head start of a query run just before, fall on both alike."""
    out: dict[SearchMode, list[float]] = {SearchMode.TIERED: [], SearchMode.ALL: []}
    for i in range(n):
        for mode in (SearchMode.TIERED, SearchMode.ALL)[:: 1 if i % 2 else -1]:
            t = time.perf_counter()
            search(QUERIES[i % len(QUERIES)], mode)
            out[mode].append((time.perf_counter() - t) * 1000)
    return out[SearchMode.TIERED], out[SearchMode.ALL]


def fill_http_across_reshuffle(client: httpx.Client, start: int, stop: int) -> float:
    """:func:`fill_http` with a reshuffle halfway, as the daemon's job runs one during a long
    import: the records that come after it stay in tier 1 until the next. Returns turns/s of
    the ingest alone."""
    middle = (start + stop) // 2
    seconds = (middle - start) / fill_http(client, start, middle)
    client.post("/v1/users/bench/tiers/reshuffle").raise_for_status()
    seconds += (stop - middle) / fill_http(client, middle, stop)
    return (stop - start) / seconds


def imported_rows(rig: Rig, n: int) -> Iterator[tuple[str, float, float, str]]:
    """HTTP query figures on the daemon filled across a reshuffle (tier 1: the import's
    second half). The client is read when the rows are: the rows before restart the daemon."""
    client = rig.client
    tiers = client.get("/v1/users/bench/tiers").raise_for_status().json()["sizes"]
    note = f"tier 1 holds {tiers['tier1']} records"
    tiered, exhaustive = query_modes(http_search(client), n)
    yield ("(b) HTTP, import past a reshuffle, tiered", *pct(tiered), note)
    yield ("(b) HTTP, import past a reshuffle, all", *pct(exhaustive), "")
    ratio = pct(tiered)[0] / pct(exhaustive)[0]
    yield ("ratio tiered/all, imported over HTTP", ratio, float("nan"), "target <= 1")


def reshuffled_rows(service: MemoryService, n: int) -> Iterator[tuple[str, float, float, str]]:
    """Query figures once the tiers are reshuffled (before it, every record is in tier 1)."""
    service.reshuffle("bench")
    tiered, exhaustive = query_modes(facade_search(service), n)
    yield ("(b) query after reshuffle, tiered", *pct(tiered), "")
    yield ("(b) query after reshuffle, all", *pct(exhaustive), "")
    ratio = pct(tiered)[0] / pct(exhaustive)[0]
    yield ("ratio tiered/exhaustive, reshuffled", ratio, float("nan"), "target <= 1")


@dataclass
class Rig:
    """What one benchmark run measures: the in-process façade and a real server process."""

    service: MemoryService
    server: ServerProcess
    client: httpx.Client

    def restart(self) -> float:
        """Stop the daemon, start it on the same data; seconds until ``/readyz`` answers 200."""
        self.client.close()
        self.server.stop()
        t = time.perf_counter()
        self.server = ServerProcess(self.server.data_dir, REPO / "models")
        self.client = self.server.client(timeout=120)
        while self.client.get("/readyz").status_code != 200:
            time.sleep(0.05)
        return time.perf_counter() - t


def rows_for_size(
    rig: Rig, size: int, scratch: Path, n: int, throughput: float
) -> Iterator[tuple[str, float, float, str]]:
    service, client = rig.service, rig.client
    single = turns(n, offset=10_000_000 + size)
    ingest = timed(lambda i: service.ingest("bench", [single[i]]), n)
    query = timed(lambda i: service.query("bench", QueryParams(QUERIES[i % len(QUERIES)])), n)
    tiered, exhaustive = query_modes(facade_search(service), n)
    encoder = timed(lambda i: service.encoder.embed(single[i].text), n)
    sqlite_ms = bare_sqlite(scratch, n)
    graph_ms = bare_graph(scratch, service, turns(n, offset=20_000_000 + size))
    http_single = turns(n, offset=30_000_000 + size)
    http_ingest = timed(
        lambda i: client.post(
            "/v1/users/bench/turns", json=payload([http_single[i]])
        ).raise_for_status(),
        n,
    )
    http_query = timed(
        lambda i: client.post(
            "/v1/users/bench/query", json={"query": QUERIES[i % 6]}
        ).raise_for_status(),
        n,
    )
    necessary = pct(encoder)[0] + pct(sqlite_ms)[0] + pct(graph_ms)[0]
    for name, values in [
        ("(a) ingest, façade", ingest),
        ("(b) query, façade", query),
        ("(b) query, façade, tiered, no recall", tiered),
        ("(b) query, façade, search: all, no recall", exhaustive),
        ("(c) encoder", encoder),
        ("(d) sqlite fsync insert", sqlite_ms),
        ("(e) graph txn", graph_ms),
        ("(a) ingest, HTTP", http_ingest),
        ("(b) query, HTTP", http_query),
    ]:
        yield (name, *pct(values), "")
    ingest_ratio = pct(ingest)[0] / necessary
    query_ratio = pct(query)[0] / pct(encoder)[0]
    yield ("ratio ingest/(c+d+e)", ingest_ratio, float("nan"), "target <= 1.5")
    yield ("ratio query/encoder", query_ratio, float("nan"), "target <= 4 at 10k")
    tiered_ratio = pct(tiered)[0] / pct(exhaustive)[0]
    yield ("ratio tiered/exhaustive query", tiered_ratio, float("nan"), "target <= 1")
    yield ("batch-128 ingest turns/s (HTTP)", throughput, float("nan"), "")
    yield ("daemon RSS MB", rig.server.rss_mb(), float("nan"), "target <= 350 at 10k, 500 at 100k")
    time.sleep(SAVE_INTERVAL_S + 2)  # the daemon's save job has run since the last write
    yield (SETTLED_RSS, rig.server.rss_mb(), float("nan"), "")
    disk = sum(f.stat().st_size for f in rig.server.data_dir.rglob("*") if f.is_file())
    yield ("daemon data bytes per turn", disk / size, float("nan"), f"{disk / 2**20:.0f} MiB")
    yield ("cold start to /readyz, s", rig.restart(), float("nan"), "daemon restarted on its data")
    t = time.perf_counter()
    rebuilt = service.rebuild("bench")
    note = ", ".join(f"{k} {v}" for k, v in rebuilt.items())
    yield ("rebuild graph + vectors, s (façade)", time.perf_counter() - t, float("nan"), note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="Comma-separated turn counts.")
    parser.add_argument("--samples", type=int, default=200, help="Timed calls per figure.")
    parser.add_argument(
        "--png", type=Path, default=REPO / "bench-results" / "scale.png", help="Scale curve."
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="memoryd-bench-") as tmp:
        root = Path(tmp)
        overrides = {"data_dir": root / "svc", "model_dir": REPO / "models"}
        config = load_config(None, os.environ, overrides)  # MEMORYD_* as for the daemon
        service = MemoryService.from_config(config)
        server = ServerProcess(root / "http", REPO / "models")
        rig = Rig(service, server, server.client(timeout=120))
        figures: dict[int, dict[str, tuple[float, float]]] = {}
        try:
            print(f"\n## batch ingest throughput ({service.config.encoder.pool_size} threads)")
            print_rows(throughput_rows(service))
            filled = 0
            for size in sizes:
                print(f"filling to {size} turns …", file=sys.stderr)
                last = size == sizes[-1]
                fill_service(service, filled, size)
                fill = fill_http_across_reshuffle if last else fill_http
                throughput = fill(rig.client, filled, size)
                filled = size
                scratch = root / f"scratch-{size}"
                scratch.mkdir()
                print(f"\n## {size} turns ingested ({args.samples} samples per figure, ms)")
                rows = rows_for_size(rig, size, scratch, args.samples, throughput)
                if last:  # a reshuffle changes what the next size would measure
                    more = reshuffled_rows(service, args.samples)
                    rows = itertools.chain(rows, more, imported_rows(rig, args.samples))
                figures[size] = print_rows(rows)
            plot_scale(figures, args.png)
            print(f"\nscale curve: {args.png}")
        finally:
            rig.client.close()
            rig.server.stop()
            service.close()


if __name__ == "__main__":
    main()
