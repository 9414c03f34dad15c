"""Child process of the graph crash test: apply turns until killed.

Usage: ``python tests/graph_crash_writer.py GRAPH_PATH FIRST_SEQ``. After each ``apply_turn``
returns (its transaction is committed) the sequence number is printed on its own line, so every
line the parent reads is an acknowledged write.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path

from memoryd.models import Entity, EntityType, Episode, Fact, GraphEngine, Mention, Role, Turn
from memoryd.store.graph import GraphStore

T0 = datetime(2024, 5, 1, tzinfo=UTC)
PEOPLE = [Entity(f"ent-{name}", name, EntityType.PERSON) for name in ("ann", "bob", "cy", "dee")]


def memories_for(seq: int, turn: Turn) -> list[Episode | Fact]:
    mentions = [Mention(PEOPLE[(seq + k) % len(PEOPLE)]) for k in range(3)]
    episode = Episode(
        f"ep-{seq}", turn.turn_id, turn.session_id, turn.text, turn.ts, None, mentions
    )
    fact = Fact(f"fact-{seq}", turn.turn_id, "knows", mentions[0].entity, f"I know {seq}")
    return [episode, fact]


def main(path: Path, first_seq: int) -> None:
    # A small checkpoint threshold makes checkpoints frequent, so kills also land inside them.
    with GraphStore(
        path,
        GraphEngine.LADYBUG,
        max_db_size=1 << 30,
        buffer_pool_size=128 << 20,
        checkpoint_threshold=256 << 10,
    ) as store:
        for seq in count(first_seq):
            ts = T0 + timedelta(seconds=seq)
            turn = Turn(f"turn-{seq}", f"s{seq // 10}", Role.USER, f"turn {seq} " * 20, ts)
            store.apply_turn(seq, turn, memories_for(seq, turn))
            print(seq, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
