"""The routing corpus on disk (``models/router_corpus``): its lines, their labels and the fixed
held-out split that every build step shares.

    records = load_lines(split_files(CORPUS, "train"))
    y = targets(records)                                   # (n, 5), columns in LABELS order
    held = np.array([is_held_out(r["id"]) for r in records])

A leaf: it imports only the standard library, numpy and :mod:`memoryd.models`, so the build venv
(torch, no daemon dependencies) reads the corpus with the same code as the runtime venv.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.models import LABELS, Label

__all__ = [
    "HOLDOUT_SHARE",
    "corpus_sha256",
    "is_held_out",
    "load_lines",
    "share",
    "split_files",
    "targets",
]

HOLDOUT_SHARE = 0.2
"""Share of the training lines no build step trains on: the head's calibration and every later
training round validate on them."""


def split_files(corpus: Path, split: str) -> list[Path]:
    """The JSONL files of one split (``train`` or ``dev``) of the corpus at ``corpus``, sorted."""
    return sorted((corpus / split).glob("*.jsonl"))


def load_lines(paths: list[Path]) -> list[dict[str, Any]]:
    """Every non-blank line of the JSONL files, with ``id`` and ``domain`` defaulted from the
    file's name and line number."""
    records = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                record = json.loads(line)
                record.setdefault("id", f"{path.stem}-{number}")
                record.setdefault("domain", path.stem)
                records.append(record)
    return records


def targets(records: list[dict[str, Any]]) -> np.ndarray:
    """``(n, 5)`` 0/1 float32 matrix, columns in ``LABELS`` order."""
    return np.array(
        [[label in {Label(v) for v in r["labels"]} for label in LABELS] for r in records],
        dtype=np.float32,
    )


def share(key: str) -> float:
    """A stable pseudo-random number in [0, 1) for ``key`` (the first 4 bytes of its sha256)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big") / 2**32


def is_held_out(line_id: str) -> bool:
    """Whether the line ``line_id`` is in the held-out split."""
    return share(line_id) < HOLDOUT_SHARE


def corpus_sha256(paths: list[Path]) -> str:
    """One sha256 over the files' bytes, in the order given: what a build step was made from."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()
