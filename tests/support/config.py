"""Where the tests find the repository, the built models and LoCoMo, and a config for a fresh
data directory."""

from __future__ import annotations

import os
from pathlib import Path

from memoryd.config import Config, load_config

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = Path(os.environ.get("MEMORYD_MODEL_DIR", REPO / "models"))
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"


def make_config(data_dir: Path, **overrides: object) -> Config:
    """Settings at their defaults, with ``data_dir``, the built models and ``overrides``
    (setting names as keys: ``{"limits.max_open_users": 2}``)."""
    return load_config(None, {}, {"data_dir": data_dir, "model_dir": MODEL_DIR, **overrides})
