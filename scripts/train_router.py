"""Train the router head (round S0) on the seed set, with the runtime encoder.

Run in the runtime venv after ``scripts/export_models.py``:

    .venv/bin/python scripts/train_router.py

1. Embed every seed line with ``memoryd.encoder.Encoder`` (the built int8 model, one text per
   call), so the head learns from exactly the vectors the daemon will give it.
2. Split 80/20 by template group, stratified by label set: a held-out template contributes no
   line to training, so the test score is on sentence shapes the head never saw.
3. Pick hidden width and weight decay by 4-fold grouped cross-validation on the training part
   (macro-F1 of the router's decisions), train on the whole training part, score on the
   held-out part: that score measures the head on templates it never saw.
4. Calibrate it: fit the temperature on the held-out part (:mod:`memoryd.router.calibrate`);
   the confidence gate of the self-enhancement loop compares calibrated confidences with τ_t.
5. Ship that head (``router_head.npz``) and the embedded seed set with its split and recipe
   (``router_seed.npz``): every training round of a user retrains on the seed's training
   part plus the user's pool and validates on the seed's held-out part plus the pool's, so the
   round-0 head must not have seen the held-out templates either. Record the seed checksum,
   sizes, temperature and F1s in the manifest's ``router`` section.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from memoryd.encoder import MANIFEST_FILE, Encoder, sha256_file
from memoryd.models import LABELS, Label
from memoryd.router import RouterHead
from memoryd.router.calibrate import fit_temperature
from memoryd.router.head import f1_scores
from memoryd.router.router import confidence, decide
from memoryd.router.trainer import SEED_FILE as SEED_ARRAYS
from memoryd.router.trainer import SeedSet

REPO = Path(__file__).resolve().parents[1]
HEAD_FILE = "router_head.npz"
SEED_FILE = "router_seed.jsonl"
TEST_SHARE = 0.2
FOLDS = 4
CANDIDATES = tuple((hidden, decay) for hidden in (0, 32) for decay in (1e-4, 1e-3))
"""(hidden width, weight decay); width 0 is logistic regression, others one-hidden-layer MLPs."""


def load_seed(path: Path) -> list[dict[str, Any]]:
    """Seed records; a line without ``group`` is its own group."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for index, record in enumerate(records):
        record.setdefault("group", f"line-{index}")
    return records


def targets(records: list[dict[str, Any]]) -> np.ndarray:
    """``(n, 5)`` 0/1 matrix, columns in ``LABELS`` order."""
    return np.array(
        [[label in {Label(v) for v in r["labels"]} for label in LABELS] for r in records],
        dtype=np.float32,
    )


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def strata(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Groups by label set, each list in a fixed pseudo-random order (by hash of the name)."""
    by_labels: dict[str, set[str]] = defaultdict(set)
    for record in records:
        by_labels["+".join(sorted(record["labels"]))].add(record["group"])
    return {key: sorted(groups, key=_hash) for key, groups in sorted(by_labels.items())}


def split_groups(records: list[dict[str, Any]]) -> set[str]:
    """The held-out groups: the first ``TEST_SHARE`` of every stratum (at least one)."""
    held_out: set[str] = set()
    for groups in strata(records).values():
        held_out.update(groups[: max(1, round(TEST_SHARE * len(groups)))])
    return held_out


def fold_of(records: list[dict[str, Any]]) -> dict[str, int]:
    """Cross-validation fold of each group, dealt round-robin within each stratum."""
    return {
        group: i % FOLDS for groups in strata(records).values() for i, group in enumerate(groups)
    }


def embed_all(encoder: Encoder, records: list[dict[str, Any]]) -> np.ndarray:
    texts = [r["text"] for r in records]
    return np.stack([encoder.embed(text) for text in tqdm(texts, desc="embedding", unit="line")])


def cross_validate(
    x: np.ndarray, y: np.ndarray, texts: list[str], folds: np.ndarray
) -> tuple[int, float]:
    """Mean macro-F1 of each candidate over the folds; returns the best (hidden, decay)."""
    best, best_score = CANDIDATES[0], -1.0
    for hidden, decay in CANDIDATES:
        scores = []
        for fold in range(FOLDS):
            fit, val = folds != fold, folds == fold
            head = RouterHead.train(x[fit], y[fit], hidden=hidden, weight_decay=decay)
            val_texts = [t for t, keep in zip(texts, val, strict=True) if keep]
            scores.append(f1_scores(y[val], decide(head, x[val], val_texts))["macro"])
        mean = float(np.mean(scores))
        print(f"  hidden={hidden:<4d} weight_decay={decay:<6g} cv macro-F1 {mean:.3f}")
        if mean > best_score:
            best, best_score = (hidden, decay), mean
    return best


def print_scores(title: str, scores: dict[str, float]) -> None:
    print(title)
    for key, value in scores.items():
        print(f"  {key:<11s} F1 {value:.3f}")


def update_manifest(model_dir: Path, section: dict[str, Any]) -> None:
    path = model_dir / MANIFEST_FILE
    manifest = json.loads(path.read_text())
    manifest["router"] = section
    path.write_text(json.dumps(manifest, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    default_dir = Path(os.environ.get("MEMORYD_MODEL_DIR", REPO / "models"))
    parser = argparse.ArgumentParser(description="Train the router head on the seed set.")
    parser.add_argument("--models", type=Path, default=default_dir, help="model directory")
    parser.add_argument("--seed-file", type=Path, default=REPO / "models" / SEED_FILE)
    args = parser.parse_args(argv)

    records = load_seed(args.seed_file)
    texts = [r["text"] for r in records]
    encoder = Encoder(args.models)
    x = embed_all(encoder, records)
    encoder.close()
    y = targets(records)

    held_out = split_groups(records)
    test = np.array([r["group"] in held_out for r in records])
    train = ~test
    n_groups = len({r["group"] for r in records})
    print(f"{len(records)} lines in {n_groups} groups: {train.sum()} train, {test.sum()} test")

    folds = np.array([fold_of(records)[r["group"]] for r in records])[train]
    train_texts = [t for t, keep in zip(texts, train, strict=True) if keep]
    print(f"choosing hidden width and weight decay by {FOLDS}-fold grouped cross-validation")
    hidden, decay = cross_validate(x[train], y[train], train_texts, folds)

    head = RouterHead.train(x[train], y[train], hidden=hidden, weight_decay=decay)
    raw_confidence = float(np.mean([confidence(p) for p in head.predict_proba(x[test])]))
    head = head.with_temperature(fit_temperature(head.logits(x[test]), y[test]))
    mean_confidence = float(np.mean([confidence(p) for p in head.predict_proba(x[test])]))
    test_texts = [t for t, keep in zip(texts, test, strict=True) if keep]
    scores = f1_scores(y[test], decide(head, x[test], test_texts))
    print_scores(
        f"held-out F1 (hidden={hidden}, weight_decay={decay:g}, {test.sum()} lines, "
        "unseen templates):",
        scores,
    )
    print(
        f"temperature {head.temperature:.3f}: mean held-out confidence "
        f"{raw_confidence:.3f} -> {mean_confidence:.3f}"
    )
    head_path = args.models / HEAD_FILE
    head.save(head_path)
    seed_path = args.models / SEED_ARRAYS
    SeedSet(x, y, tuple(texts), test, hidden, decay).save(seed_path)
    update_manifest(
        args.models,
        {
            "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "seed": {
                "file": SEED_FILE,
                "sha256": sha256_file(args.seed_file),
                "lines": len(records),
                "groups": n_groups,
                "embedded": {"file": SEED_ARRAYS, "sha256": sha256_file(seed_path)},
            },
            "split": {"by": "template group", "train": int(train.sum()), "test": int(test.sum())},
            "head": {
                "file": HEAD_FILE,
                "sha256": sha256_file(head_path),
                "hidden": hidden,
                "weight_decay": decay,
                "selected_by": f"{FOLDS}-fold grouped CV macro-F1 over {list(CANDIDATES)}",
                "trained_on": "the train split (held-out templates validate every later round)",
                "temperature": round(head.temperature, 4),
                "calibration": "temperature scaling fitted on the held-out split (BCE)",
            },
            "held_out_f1": {k: round(v, 4) for k, v in scores.items()},
            "held_out_mean_confidence": {
                "uncalibrated": round(raw_confidence, 4),
                "calibrated": round(mean_confidence, 4),
            },
        },
    )
    print(f"wrote {head_path}, {seed_path} and the router section of {args.models / MANIFEST_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
