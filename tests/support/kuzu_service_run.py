"""Run by test_kuzu_engine.py under the kuzu interpreter: the whole service on graph.engine=kuzu.

Prints one JSON line with what the parent checks. Exits non-zero on any failure.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memoryd.config import load_config
from memoryd.ingest import NewTurn
from memoryd.models import Role
from memoryd.retrieve import QueryParams
from memoryd.service import MemoryService

TEXTS = [
    "I'm allergic to ibuprofen.",
    "Last weekend we went hiking in the Alps with my sister Anna.",
    "If it rains, take the bus instead of biking.",
    "Remind me to call the dentist tomorrow at 9am.",
]


def main(data_dir: str, model_dir: str) -> None:
    config = load_config(
        None, {}, {"data_dir": Path(data_dir), "model_dir": Path(model_dir), "graph.engine": "kuzu"}
    )
    t0 = datetime(2024, 5, 8, tzinfo=UTC)
    turns = [
        NewTurn(session_id="s1", role=Role.USER, text=t, ts=t0 + timedelta(minutes=i))
        for i, t in enumerate(TEXTS)
    ]
    service = MemoryService.from_config(config)
    try:
        service.ingest("k", turns)
        top = service.query("k", QueryParams("what am I allergic to", k=1)).items[0].memory.text
        before = service.counts("k")
        rebuilt = service.rebuild("k")
    finally:
        service.close()
    service = MemoryService.from_config(config)
    try:
        reopened = service.counts("k")
        neighbours = service.query("k", QueryParams("hiking Alps", k=1)).items
    finally:
        service.close()
    print(
        json.dumps(
            {
                "engine": sys.modules["kuzu"].__name__ if "kuzu" in sys.modules else None,
                "ladybug_loaded": "ladybug" in sys.modules,
                "top": top,
                "before": before,
                "rebuilt": rebuilt,
                "reopened": reopened,
                "expanded": [i.why for i in neighbours if not i.hit],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
