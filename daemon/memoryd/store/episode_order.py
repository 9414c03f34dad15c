"""The (ts, id) order of one user's episodes, kept in memory beside the graph's chains.

The graph links episodes in two chains ordered by (ts, id): ``PRECEDES`` over all of them and
``NEXT`` within a session. The engine has no index on ``Episode.ts``: in the graph, finding where
an episode goes is a scan of every episode; here it is a binary search::

    order = EpisodeOrder((ts, episode_id, session_id) for ... in graph rows)
    timeline, sessions = order.insert([(ts, "ep_1", "s1")])
    timeline.removed, timeline.added  # (src id, dst id) edges to delete and to create

Each episode is one bytes key shared by its two lists: 2.2 MB at 30k episodes in 1,500 sessions
with 8-character ids, 11 bytes an episode more with the daemon's 19-character ids
(docs/decisions.md, "Episode order kept in memory"). Timestamps are naive UTC.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

__all__ = ["EpisodeOrder", "Relink"]

_MICROSECOND = timedelta(microseconds=1)
_TS_BYTES = 8


def _key(ts: datetime, episode_id: str) -> bytes:
    """``(ts, episode_id)`` as bytes that sort alike: the microseconds since 0001-01-01 in 8
    big-endian bytes, then the id in UTF-8 (which sorts as its code points do)."""
    return ((ts - datetime.min) // _MICROSECOND).to_bytes(_TS_BYTES, "big") + episode_id.encode()


def _episode_id(key: bytes) -> str:
    return key[_TS_BYTES:].decode()


@dataclass
class Relink:
    """What an insert changes in one chain: the edges to delete and to create, as (src id, dst
    id) pairs. A deleted edge joined two episodes that now have new ones between them."""

    removed: list[tuple[str, str]] = field(default_factory=list)
    added: list[tuple[str, str]] = field(default_factory=list)

    def extend(self, other: Relink) -> None:
        self.removed += other.removed
        self.added += other.added


class EpisodeOrder:
    """Episodes ``(ts, id, session_id)`` in (ts, id) order: the timeline and each session's.

    Holds exactly the episodes linked into the graph's chains; the caller inserts an episode
    as it links it and removes one as it unlinks it.
    """

    def __init__(self, episodes: Iterable[tuple[datetime, str, str]] = ()) -> None:
        self._timeline: list[bytes] = []
        self._sessions: dict[str, list[bytes]] = {}
        for ts, episode_id, session_id in episodes:
            key = _key(ts, episode_id)
            self._timeline.append(key)
            self._sessions.setdefault(session_id, []).append(key)
        self._timeline.sort()
        for keys in self._sessions.values():
            keys.sort()

    def insert(self, episodes: Sequence[tuple[datetime, str, str]]) -> tuple[Relink, Relink]:
        """Add episodes not in the order; return how the timeline and the session chains (all
        sessions together) change."""
        keys = [(_key(ts, episode_id), session_id) for ts, episode_id, session_id in episodes]
        timeline = _insert(self._timeline, [key for key, _ in keys])
        sessions = Relink()
        for session_id in dict.fromkeys(session_id for _, session_id in keys):
            chain = self._sessions.setdefault(session_id, [])
            sessions.extend(_insert(chain, [key for key, s in keys if s == session_id]))
        return timeline, sessions

    def remove(self, ts: datetime, episode_id: str, session_id: str) -> None:
        """Take an episode out (nothing if it is not in)."""
        key = _key(ts, episode_id)
        _discard(self._timeline, key)
        chain = self._sessions.get(session_id)
        if chain is not None:
            _discard(chain, key)
            if not chain:
                del self._sessions[session_id]


def _neighbours(chain: Sequence[bytes], key: bytes) -> tuple[bytes | None, bytes | None]:
    """The keys of ``chain`` just before and just after ``key`` (not itself)."""
    i = bisect_left(chain, key)
    j = i + 1 if i < len(chain) and chain[i] == key else i
    return (chain[i - 1] if i else None), (chain[j] if j < len(chain) else None)


def _insert(chain: list[bytes], keys: Sequence[bytes]) -> Relink:
    """Insert ``keys`` into the sorted ``chain``: the edges between old neighbours that now
    have a new key between them go, the edges to and from each new key come."""
    removed: dict[tuple[bytes, bytes], None] = {}
    for key in keys:
        before, after = _neighbours(chain, key)
        if before is not None and after is not None:
            removed[before, after] = None
    for key in keys:
        insort(chain, key)
    added: dict[tuple[bytes, bytes], None] = {}
    for key in keys:
        before, after = _neighbours(chain, key)
        if before is not None:
            added[before, key] = None
        if after is not None:
            added[key, after] = None
    return Relink(_ids(removed), _ids(added))


def _ids(edges: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(_episode_id(a), _episode_id(b)) for a, b in edges]


def _discard(chain: list[bytes], key: bytes) -> None:
    i = bisect_left(chain, key)
    if i < len(chain) and chain[i] == key:
        del chain[i]
