"""Exact search over a tier's pool against hnswlib's filtered search, by the pool's share.

The figures behind ``memoryd.retrieve.fusion.EXACT_POOL`` and ``EXACT_SHARE``
(docs/decisions.md, "HNSW for the archive and exact search for tier pools"): on an index of
random unit vectors built as the daemon builds its own (M 16, ef_construction 100, ef = the
hits asked), p50 of a filtered top-100 for pools of several shares of the index, beside a bare
unfiltered search. The exact path's cost per pool vector is the journal read measured in the
daemon (see the decision).

    .venv/bin/python scripts/bench_pool_search.py --size 13000
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

import hnswlib
import numpy as np

DIM = 384
SHARES = (0.9, 0.3, 0.05, 0.02, 0.01, 0.005)


def p50_ms(fn: Callable[[], object], runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=13_000, help="Vectors in the index.")
    parser.add_argument("--k", type=int, default=100, help="Hits asked for.")
    parser.add_argument("--runs", type=int, default=50, help="Timed searches per figure.")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.size, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = hnswlib.Index(space="ip", dim=DIM)
    index.init_index(max_elements=args.size, M=16, ef_construction=100)
    index.add_items(vectors, np.arange(args.size))
    index.set_ef(args.k)
    query = vectors[5] + 0.1 * rng.standard_normal(DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    bare = p50_ms(lambda: index.knn_query(query, k=args.k), args.runs)
    found, _ = index.knn_query(query, k=args.k)
    exact = np.argsort(-(vectors @ query))[: args.k]
    recall = len(set(found[0].tolist()) & set(exact.tolist())) / args.k
    print(f"index of {args.size} vectors, top-{args.k}; unfiltered p50 {bare:.2f} ms,", end=" ")
    print(f"recall {recall:.2f} (random vectors: ranks past the first are near ties)")
    print(f"{'pool share':>10} {'pool':>7} {'filtered p50 ms':>16} {'recall':>7}")
    for share in SHARES:
        pool = set(range(int(args.size * share)))
        k = min(args.k, len(pool))
        allowed = pool.__contains__
        ms = p50_ms(partial(index.knn_query, query, k=k, filter=allowed), args.runs)
        found, _ = index.knn_query(query, k=k, filter=allowed)
        members = np.fromiter(pool, dtype=np.int64)
        exact = members[np.argsort(-(vectors[members] @ query))[:k]]
        recall = len(set(found[0].tolist()) & set(exact.tolist())) / k
        print(f"{share:>10.3f} {len(pool):>7} {ms:>16.2f} {recall:>7.2f}")


if __name__ == "__main__":
    main()
