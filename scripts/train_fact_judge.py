"""Train the fact judge over the built fact reader and store it for the daemon.

Run in the build venv after ``scripts/train_fact_reader.py`` (it reads that head):

    .build-venv/bin/python scripts/train_fact_judge.py --out models

1. Examples from the corpus's training side (``models/fact_corpus/train``, and the pairs
   written for the judge in ``models/fact_corpus/judge``; the dev split is never read), as
   :func:`memoryd.reader.judge_corpus.judge_examples` takes them: values a change pair's
   second trace names again (over when stale), values of single lines (over when ended), and
   names said in passing in single lines (never over).
2. Features: :func:`memoryd.reader.judge.judge_features` over the reader head's states of the
   text, the int8 path the daemon reads with, at the value's first whole-word occurrence.
3. Two layers (:data:`HIDDEN` ReLU units, then the probability of *over*) trained with AdamW
   on standardised features, the standardisation folded into the stored first layer. One
   logistic layer reached half the held-out recall at the same precision (docs/decisions.md).
4. The threshold: each training pass (the file's writer, ``family``, ``work``, ...) is held out
   in turn, the layer trained on the others scores that pass's examples, and the threshold is
   the least of :data:`GRID` at which those held-out examples reach :data:`PRECISION`: a wrong
   closure is worse than none. The reader's head was trained on these same lines, so the
   held-out figure is optimistic; the update eval's scenarios (written apart) are the check.
5. ``fact_judge.npz``, and the manifest's ``fact_judge`` section: the file's and the reader
   head's sha256, the threshold and the held-out table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from memoryd.encoder import MANIFEST_FILE, Encoder, sha256_file
from memoryd.fact_corpus import CORPUS_DIR, INVENTORY_FILE, load_inventory
from memoryd.reader.head import ReaderHead
from memoryd.reader.judge import JUDGE_FILE, JUDGE_FORMAT, FactJudge, Layers
from memoryd.reader.judge_corpus import PAIR, JudgeExample, judge_examples, judge_inputs
from memoryd.reader.reader import HEAD_FILE
from memoryd.routing_corpus import corpus_sha256

REPO = Path(__file__).resolve().parents[1]
SEED = 0
HIDDEN = 64
EPOCHS = 15
BATCH = 256
RATE = 1e-3
WEIGHT_DECAY = 1e-2
PRECISION = 0.95
"""The least precision of the held-out passes' examples at the chosen threshold."""
GRID = tuple(round(0.3 + 0.05 * i, 2) for i in range(14))
"""Thresholds tried, 0.30 … 0.95."""


def fit(x: np.ndarray, y: np.ndarray) -> Layers:
    """The judge's two layers (AdamW, seeded) on standardised features; the standardisation is
    folded into the first layer, so the stored layers read the raw features."""
    torch.manual_seed(SEED)
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    xt = torch.tensor((x - mean) / scale, dtype=torch.float32)
    yt = torch.tensor(y, dtype=torch.float32)
    net = torch.nn.Sequential(
        torch.nn.Linear(x.shape[1], HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, 1)
    )
    optimiser = torch.optim.AdamW(net.parameters(), lr=RATE, weight_decay=WEIGHT_DECAY)
    order = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS):
        for batch in torch.randperm(len(xt), generator=order).split(BATCH):
            logits = net(xt[batch]).squeeze(1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, yt[batch])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    first, second = net[0], net[2]
    w1 = first.weight.detach().numpy().T / scale[:, None]
    b1 = first.bias.detach().numpy() - (mean / scale) @ first.weight.detach().numpy().T
    w2 = second.weight.detach().numpy()[0]
    return Layers(w1.astype(np.float32), b1.astype(np.float32), w2, float(second.bias.item()))


def held_out(x: np.ndarray, items: list[JudgeExample]) -> tuple[np.ndarray, np.ndarray]:
    """Each example's probability from a layer trained without its writer pass, and its
    label."""
    y = np.array([e.over for e in items], dtype=np.float64)
    groups = np.array([e.group for e in items])
    scores, labels = np.zeros(len(items)), y
    for group in sorted(set(groups)):
        mask = groups == group
        scores[mask] = fit(x[~mask], y[~mask]).probabilities(x[mask])
    return scores, labels


def threshold_table(
    scores: np.ndarray, labels: np.ndarray, pairs: np.ndarray
) -> list[dict[str, float]]:
    """Precision and recall of *over* at each threshold of :data:`GRID`, over all held-out
    examples and over those from change pairs."""
    table = []
    for t in GRID:
        row: dict[str, float] = {"threshold": t}
        for name, mask in (("", np.ones(len(labels), dtype=bool)), ("pairs_", pairs)):
            p, r = _precision_recall(scores[mask] >= t, labels[mask] == 1)
            row[f"{name}precision"], row[f"{name}recall"] = round(p, 4), round(r, 4)
        table.append(row)
    return table


def _precision_recall(chosen: np.ndarray, over: np.ndarray) -> tuple[float, float]:
    precision = float(over[chosen].mean()) if chosen.any() else 1.0
    recall = float(chosen[over].mean()) if over.any() else 0.0
    return precision, recall


def training_files(out: Path) -> list[Path]:
    """The corpus's training side: ``train/``, and ``judge/`` (pairs written for the judge)."""
    corpus = out / CORPUS_DIR
    return sorted([*(corpus / "train").glob("*.jsonl"), *(corpus / "judge").glob("*.jsonl")])


def build(out: Path) -> int:
    items = judge_examples(training_files(out), load_inventory(out / INVENTORY_FILE))
    sources = Counter(e.source for e in items)
    print(f"{len(items)} examples {dict(sources)}, {sum(e.over for e in items)} over")
    head = ReaderHead.load(out / HEAD_FILE)
    encoder = Encoder(out, verify=False)
    try:
        x, items = judge_inputs(encoder, head, items)
    finally:
        encoder.close()
    pairs = np.array([e.source == PAIR for e in items])
    table = threshold_table(*held_out(x, items), pairs)
    for row in table:
        print(f"  held-out passes: {row}")
    reaching = [r["threshold"] for r in table if r["precision"] >= PRECISION]
    if not reaching:
        print(f"REFUSED: no threshold reaches precision {PRECISION} on held-out passes")
        return 1
    layers = fit(x, np.array([e.over for e in items], dtype=np.float64))
    meta: dict[str, Any] = {
        "format": JUDGE_FORMAT,
        "threshold": reaching[0],
        "reader_sha256": sha256_file(out / HEAD_FILE),
    }
    FactJudge(head, layers, meta).save(out / JUDGE_FILE)
    section = {
        "file": {"name": JUDGE_FILE, "sha256": sha256_file(out / JUDGE_FILE)},
        "reader_sha256": meta["reader_sha256"],
        "recipe_sha256": sha256_file(Path(__file__)),
        "corpus_sha256": corpus_sha256(training_files(out)),
        "threshold": meta["threshold"],
        "examples": dict(sources),
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
