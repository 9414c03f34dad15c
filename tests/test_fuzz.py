"""The schema fuzzer, short: scripts/fuzz.py over every operation of the daemon's OpenAPI, all
phases including the stateful one, with a fixed seed and a bounded number of cases. It fails on
any 5xx, any reply that breaks the document, schema-valid input refused, schema-invalid input
accepted, a traceback or ERROR in the daemon's log, or a change to a user the fuzz never named.
`make fuzz` runs the long version."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.config import REPO

pytestmark = pytest.mark.slow

CASES_PER_OPERATION = 10
SEED = 20261205


def test_schema_fuzz_finds_nothing(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "fuzz.py"),
            "--max-examples",
            str(CASES_PER_OPERATION),
            "--seed",
            str(SEED),
            "--out",
            str(tmp_path / "fuzz"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
        timeout=1800,
    )
    assert run.returncode == 0, run.stdout[-15000:] + run.stderr[-3000:]
    assert "sentinel user intact" in run.stdout
