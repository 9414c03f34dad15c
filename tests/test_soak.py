"""The kill -9 soak, short: scripts/soak.py for 3 rounds with a fixed seed (`make soak` runs 20).
Every turn, task and task move the daemon acknowledged before each SIGKILL must be there exactly
once after the restart, in the journal, the graph and the vectors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.config import REPO

pytestmark = pytest.mark.slow


def test_three_kill_rounds_lose_nothing(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "soak.py"), "--rounds", "3", "--seed", "15"],
        capture_output=True,
        text=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "TMPDIR": str(tmp_path)},
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-3000:]
    assert "nothing lost" in run.stdout
