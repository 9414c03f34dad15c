"""The full service on the kuzu engine, in its own interpreter (the engines cannot share one)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support.config import MODEL_DIR

HERE = Path(__file__).parent
pytestmark = pytest.mark.slow


def kuzu_python() -> str:
    python = os.environ.get("MEMORYD_KUZU_PYTHON")
    if not python:
        pytest.fail("MEMORYD_KUZU_PYTHON is not set: run the suite with `make test`")
    return python


def test_service_runs_on_kuzu(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            kuzu_python(),
            str(HERE / "support" / "kuzu_service_run.py"),
            str(tmp_path / "d"),
            str(MODEL_DIR),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["engine"] == "kuzu" and out["ladybug_loaded"] is False
    assert "ibuprofen" in out["top"]
    rebuilt = {k: v for k, v in out["rebuilt"].items() if k != "replayed"}
    assert rebuilt == out["before"] == out["reopened"]
    assert out["before"]["graph_Turn"] == 4
