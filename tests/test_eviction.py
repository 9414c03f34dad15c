"""Per-user state lives on the user's workspace: opening and evicting many users leaves nothing
of them behind in the service (registry slots, router heads, pending recalls, threads, files)."""

from __future__ import annotations

import gc
import os
import threading
from collections import OrderedDict, deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memoryd.ingest import NewTurn
from memoryd.models import Role
from memoryd.retrieve import QueryParams
from memoryd.workspace import Workspace
from support.config import make_config

MAX_OPEN = 2
CONTAINERS = (dict, OrderedDict, list, set, frozenset, tuple, deque)


def container_sizes(root: object) -> dict[str, int]:
    """The length of every container reachable from ``root`` through memoryd's objects, by the
    attribute path that reaches it."""
    seen: set[int] = set()
    sizes: dict[str, int] = {}

    def walk(obj: Any, path: str, depth: int) -> None:
        if id(obj) in seen or depth > 8:
            return
        seen.add(id(obj))
        if isinstance(obj, CONTAINERS):
            sizes[path] = len(obj)
            items = obj.items() if isinstance(obj, dict) else enumerate(obj)
            for key, value in list(items)[:64]:
                walk(value, f"{path}[{key!r}]", depth + 1)
        elif type(obj).__module__.startswith("memoryd") and hasattr(obj, "__dict__"):
            for name, value in vars(obj).items():
                walk(value, f"{path}.{name}", depth + 1)

    walk(root, "service", 0)
    return sizes


def use(service, user: str) -> None:
    ts = datetime(2024, 5, 8, tzinfo=UTC)
    turns = [
        NewTurn("s1", Role.USER, "I live in Oslo and I'm allergic to ibuprofen.", ts=ts),
        NewTurn("s1", Role.USER, "Remind me to call the dentist tomorrow.", ts=ts + timedelta(1)),
    ]
    service.ingest(user, turns)
    service.query(user, QueryParams("where do I live?"))  # recalls counted after the reply
    service.router_status(user)  # loads the user's router head
    service.tiers_status(user)


def open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_evicted_users_leave_nothing_behind(tmp_path: Path, service_factory) -> None:
    service = service_factory(make_config(tmp_path / "d", **{"limits.max_open_users": MAX_OPEN}))
    for i in range(10):
        use(service, f"u{i}")
    before, threads, files = container_sizes(service), threading.active_count(), open_files()
    for i in range(10, 40):
        use(service, f"u{i}")
    after = container_sizes(service)
    grown = {p: (before[p], n) for p, n in after.items() if p in before and n > before[p]}
    assert not grown, f"containers that grow with the users opened: {grown}"
    assert len(service.users.open_users()) == MAX_OPEN
    assert threading.active_count() == threads
    assert open_files() == files
    gc.collect()
    assert len([o for o in gc.get_objects() if isinstance(o, Workspace)]) == MAX_OPEN
