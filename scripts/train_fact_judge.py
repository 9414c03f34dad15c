"""Train the fact judge over the built fact reader and store it for the daemon.

Run in the runtime venv after ``scripts/train_fact_reader.py`` (it reads that head):

    .venv/bin/python scripts/train_fact_judge.py --out models

1. Examples from the corpus's training side (``models/fact_corpus/train``; the dev split is
   never read). Change pairs: each fact of the first trace that states something, whose value
   the second trace names, is *over* when the pair lists it as stale, else not. Single lines:
   each annotated value is *over* when its kind is ``end``, else not (a state, a change, an
   addition, or a question, plan or past period about it).
2. Features: :func:`memoryd.reader.judge.judge_features` over the reader head's states of the
   text, the int8 path the daemon reads with, at the value's first whole-word occurrence.
3. A logistic layer with an L2 penalty on standardised features (Newton steps), the
   standardisation folded into the stored weights.
4. The threshold: each training pass (the file's writer, ``family``, ``work``, ...) is held out
   in turn, the layer trained on the others scores that pass's pair examples, and the threshold
   is the least of :data:`GRID` at which those held-out examples reach :data:`PRECISION`: a
   wrong closure is worse than none. The reader's head was trained on these same lines, so the
   held-out figure is optimistic; the update eval's scenarios (written apart) are the check.
5. ``fact_judge.npz``, and the manifest's ``fact_judge`` section: the file's and the reader
   head's sha256, the threshold and the held-out table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from memoryd.encoder import MANIFEST_FILE, Encoder, sha256_file
from memoryd.eval.judge import JudgeExample, judge_examples, judge_inputs
from memoryd.fact_corpus import CORPUS_DIR, INVENTORY_FILE, load_inventory
from memoryd.reader.head import ReaderHead
from memoryd.reader.judge import JUDGE_FILE, JUDGE_FORMAT, FactJudge
from memoryd.reader.reader import HEAD_FILE
from memoryd.routing_corpus import corpus_sha256

REPO = Path(__file__).resolve().parents[1]
PENALTY = 100.0
"""The L2 penalty on the standardised weights (sklearn's C = 0.01)."""
NEWTON_STEPS = 25
PRECISION = 0.95
"""The least precision of held-out passes' pair examples at the chosen threshold."""
GRID = tuple(round(0.3 + 0.05 * i, 2) for i in range(14))
"""Thresholds tried, 0.30 … 0.95."""


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Weights and bias of the penalised logistic layer, on the raw features."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))]).astype(np.float64)
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], PENALTY)
    penalty[-1] = 0.0  # the bias is not penalised
    for _ in range(NEWTON_STEPS):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        gradient = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    weights = w[:-1] / scale
    return weights.astype(np.float32), float(w[-1] - (mean / scale) @ w[:-1])


def held_out(x: np.ndarray, items: list[JudgeExample]) -> tuple[np.ndarray, np.ndarray]:
    """Each pair example's probability from a layer trained without its pass, and its label."""
    y = np.array([e.over for e in items], dtype=np.float64)
    groups = np.array([e.group for e in items])
    pairs = np.array([e.pair for e in items])
    scores, labels = [], []
    for group in sorted(set(groups[pairs])):
        weights, bias = fit(x[groups != group], y[groups != group])
        mask = (groups == group) & pairs
        scores.append(1.0 / (1.0 + np.exp(-(x[mask] @ weights + bias))))
        labels.append(y[mask])
    return np.concatenate(scores), np.concatenate(labels)


def threshold_table(scores: np.ndarray, labels: np.ndarray) -> list[dict[str, float]]:
    table = []
    for t in GRID:
        chosen = scores >= t
        precision = float(labels[chosen].mean()) if chosen.any() else 1.0
        recall = float(chosen[labels == 1].mean())
        table.append({"threshold": t, "precision": round(precision, 4), "recall": round(recall, 4)})
    return table


def training_files(out: Path) -> list[Path]:
    """The corpus's training side: ``train/``, and ``judge/`` (pairs written for the judge)."""
    corpus = out / CORPUS_DIR
    return sorted([*(corpus / "train").glob("*.jsonl"), *(corpus / "judge").glob("*.jsonl")])


def build(out: Path) -> int:
    items = judge_examples(training_files(out), load_inventory(out / INVENTORY_FILE))
    pairs = sum(e.pair for e in items)
    print(f"{len(items)} examples ({pairs} from change pairs), {sum(e.over for e in items)} over")
    head = ReaderHead.load(out / HEAD_FILE)
    encoder = Encoder(out, verify=False)
    try:
        x, items = judge_inputs(encoder, head, items)
    finally:
        encoder.close()
    table = threshold_table(*held_out(x, items))
    for row in table:
        print(f"  held-out passes, pair examples: {row}")
    reaching = [r["threshold"] for r in table if r["precision"] >= PRECISION]
    if not reaching:
        print(f"REFUSED: no threshold reaches precision {PRECISION} on held-out passes")
        return 1
    weights, bias = fit(x, np.array([e.over for e in items], dtype=np.float64))
    meta: dict[str, Any] = {
        "format": JUDGE_FORMAT,
        "threshold": reaching[0],
        "reader_sha256": sha256_file(out / HEAD_FILE),
    }
    FactJudge(head, weights, bias, meta).save(out / JUDGE_FILE)
    section = {
        "file": {"name": JUDGE_FILE, "sha256": sha256_file(out / JUDGE_FILE)},
        "reader_sha256": meta["reader_sha256"],
        "recipe_sha256": sha256_file(Path(__file__)),
        "corpus_sha256": corpus_sha256(training_files(out)),
        "threshold": meta["threshold"],
        "examples": {"all": len(items), "pairs": pairs},
        "held_out": table,
    }
    manifest_path = out / MANIFEST_FILE
    manifest = json.loads(manifest_path.read_text())
    manifest["fact_judge"] = section
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {out / JUDGE_FILE} (threshold {meta['threshold']}) and its manifest section")
    return 0


def is_up_to_date(out: Path) -> bool:
    """Whether the manifest's judge was trained by this recipe on these lines over this head."""
    path = out / MANIFEST_FILE
    section = (json.loads(path.read_text()) if path.is_file() else {}).get("fact_judge")
    if section is None or not (out / JUDGE_FILE).is_file():
        return False
    return (
        section["file"]["sha256"] == sha256_file(out / JUDGE_FILE)
        and section.get("reader_sha256") == sha256_file(out / HEAD_FILE)
        and section.get("recipe_sha256") == sha256_file(Path(__file__))
        and section.get("corpus_sha256") == corpus_sha256(training_files(out))
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "models", help="model directory")
    parser.add_argument("--force", action="store_true", help="retrain even if up to date")
    args = parser.parse_args(argv)
    if not args.force and is_up_to_date(args.out):
        print(f"{args.out}: the fact judge is up to date")
        return 0
    return build(args.out)


if __name__ == "__main__":
    sys.exit(main())
