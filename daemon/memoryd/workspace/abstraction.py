"""One user's background abstraction pass: run A_sem and A_proc over what is new, journal it.

- **A_sem** reads the episodes stored after its cursor (the last episode ``num`` it saw), in
  batches of ``memory.abstract_batch``, and turns each batch into facts. Episodes of assistant
  turns are skipped, as the extractors skip them: the assistant's "I" is not the user.
- **A_proc** reads the episodes that got positive feedback after its cursor (the log ``seq`` of
  the last feedback entry it saw) and turns them into rules.

Each batch's records go through the same canonicalisation and consolidation as a turn's (a
derived fact can supersede or reinforce a stated one, a derived rule raises a stored rule's
support), and are journaled as one ``memory_change`` entry together with the cursor's new
position: a crash repeats at most the batch in flight, and a rebuild replays the records without
calling the LLM. A batch whose answer is unusable (``LLMOutputError``) is journaled as empty and
skipped, so that one bad batch cannot stall the pass; a timeout or an unreachable LLM stops the
pass, and the next run retries from the same cursor.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from memoryd.config import Config
from memoryd.errors import LLMOutputError
from memoryd.ingest import fold
from memoryd.llm import LLM
from memoryd.memory import MAX_BATCH, BatchView, abstract_facts, abstract_rules
from memoryd.models import Episode, Memory, Role
from memoryd.store import MemoryChange, NewMemory, StoredMemory

if TYPE_CHECKING:
    from memoryd.workspace import Workspace

__all__ = ["A_PROC", "A_SEM", "abstract_user"]

log = logging.getLogger(__name__)

A_SEM = "a_sem"
A_PROC = "a_proc"
MAX_BATCHES_PER_RUN = 4

Operator = Callable[..., Sequence[Memory]]


def abstract_user(ws: Workspace, llm: LLM, config: Config) -> Counter[str]:
    """Run both operators over this user's new episodes (on the user's writer)."""
    counts: Counter[str] = Counter()
    size = min(config.memory.abstract_batch, MAX_BATCH)
    for _ in range(MAX_BATCHES_PER_RUN):
        batch = ws.journal.episodes_after(ws.journal.cursor(A_SEM), size)
        facts = functools.partial(abstract_facts, slots=ws.shared.reader.slots)
        if not batch or not _run(ws, llm, config, A_SEM, facts, batch, batch[-1].num):
            break
        counts["sem_batches"] += 1
    for _ in range(MAX_BATCHES_PER_RUN):
        liked = ws.journal.liked_episodes(ws.journal.cursor(A_PROC), size)
        if not liked:
            break
        episodes = [s for _, s in liked]
        if not _run(ws, llm, config, A_PROC, abstract_rules, episodes, liked[-1][0]):
            break
        counts["proc_batches"] += 1
    return counts


def _run(
    ws: Workspace,
    llm: LLM,
    config: Config,
    name: str,
    operator: Operator,
    batch: Sequence[StoredMemory],
    cursor: int,
) -> bool:
    """One batch through ``operator``, journaled with the cursor; False to stop the pass."""
    episodes = [s.memory for s in batch if _said_by_user(ws, s.memory)]
    records: list[Memory] = []
    try:
        if episodes:
            records = list(operator(llm, episodes, timeout=config.llm.timeout))
    except LLMOutputError as exc:
        log.warning("user %s: %s skipped a batch of %d: %s", ws.user_id, name, len(batch), exc)
    where = {s.memory.turn_id: s for s in batch}
    result = fold(None, records, BatchView(ws.journal), ws.entities, ws.shared.reader.slots)
    created = [
        NewMemory(m, where[m.turn_id].session_id, _ts(where[m.turn_id]))
        for m in result.memories
        if m.turn_id in where
    ]
    change = MemoryChange(
        name, ws.user_id, created=created, updates=result.updates, cursor=(name, cursor)
    )
    ws.writes.change(change)
    log.info(
        "user %s: %s read %d episode(s): %d new record(s), %d changed, %d alias(es)",
        ws.user_id,
        name,
        len(batch),
        len(created),
        len(result.updates),
        len(result.aliases),
    )
    return True


def _said_by_user(ws: Workspace, memory: Memory) -> bool:
    """An episode of a user or log turn: what the assistant says about itself is not the
    user's (as with the extractors)."""
    found = ws.journal.turn(memory.turn_id)
    return isinstance(memory, Episode) and found is not None and found[0].role is not Role.ASSISTANT


def _ts(stored: StoredMemory) -> datetime:
    return datetime.fromisoformat(stored.ts)
