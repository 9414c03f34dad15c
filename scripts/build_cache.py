"""Built model files kept outside the checkout, keyed by the hashes of what they were built from.

Tuning the router's layers and training the fact reader take minutes to tens of minutes on two
cores; a clean clone (CI, a second checkout) whose inputs were built before restores them
instead. An entry is a directory named by the hash of the inputs (the recipe script, the
training lines, the encoder, ...) holding the built files and the manifest section that names
them; it is used only when every file still has the sha256 the section records.

The cache lives in `$MEMORYD_BUILD_CACHE` (default `~/.cache/memoryd/models`); set it to `off`
to build from scratch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from memoryd.encoder import sha256_file

CACHE_ENV = "MEMORYD_BUILD_CACHE"
SECTION_FILE = "section.json"


def cache_root() -> Path | None:
    """Where entries live, or None when the cache is turned off."""
    configured = os.environ.get(CACHE_ENV, "")
    if configured.lower() == "off":
        return None
    return Path(configured) if configured else Path.home() / ".cache" / "memoryd" / "models"


def entry_key(inputs: dict[str, str]) -> str:
    """One hash over the named input hashes."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:32]


def restore(out: Path, kind: str, key: str) -> dict[str, Any] | None:
    """Copy a cached build's files into `out` and return its manifest section, or None."""
    root = cache_root()
    entry = root / kind / key if root else None
    if entry is None or not (entry / SECTION_FILE).is_file():
        return None
    section: dict[str, Any] = json.loads((entry / SECTION_FILE).read_text())
    files: dict[str, str] = section.get("cached_files", {})
    intact = all((entry / n).is_file() and sha256_file(entry / n) == h for n, h in files.items())
    if not files or not intact:
        return None
    for name in files:
        staged = out / f".{name}.restoring"
        shutil.copyfile(entry / name, staged)
        os.replace(staged, out / name)
    print(f"restored {', '.join(files)} from the build cache ({entry})")
    return {k: v for k, v in section.items() if k != "cached_files"}


def store(out: Path, kind: str, key: str, section: dict[str, Any], names: list[str]) -> None:
    """Keep `names` (files in `out`) and their section under `key`; a failure only warns."""
    root = cache_root()
    if root is None:
        return
    try:
        (root / kind).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root / kind) as tmp:
            staged = Path(tmp) / key
            staged.mkdir()
            for name in names:
                shutil.copyfile(out / name, staged / name)
            cached = {**section, "cached_files": {n: sha256_file(staged / n) for n in names}}
            (staged / SECTION_FILE).write_text(json.dumps(cached, indent=2) + "\n")
            shutil.rmtree(root / kind / key, ignore_errors=True)
            os.replace(staged, root / kind / key)
    except OSError as exc:
        print(f"warning: could not keep the build in the cache {root}: {exc}")
