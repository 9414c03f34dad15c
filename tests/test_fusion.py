"""Score fusion: the session lift counts turns, not records; the turns beside a hit are lifted."""

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memoryd.config import Config, RetrievalConfig
from memoryd.ingest import NewTurn
from memoryd.models import Episode, Fact, Role
from memoryd.retrieve import Item, QueryParams
from memoryd.retrieve.fusion import _boost_sessions
from memoryd.service import MemoryService
from support.config import make_config

# num → (turn_id, session_id, ts)
META = {
    1: ("t1", "s1", "2026-01-01T10:00:00+00:00"),
    2: ("t1", "s1", "2026-01-01T10:00:00+00:00"),  # t1 kept as an episode and a fact
    3: ("t2", "s2", "2026-01-02T10:00:00+00:00"),
    4: ("t3", "s2", "2026-01-02T10:01:00+00:00"),
    5: ("t4", "s3", "2026-01-03T10:00:00+00:00"),
}


def test_a_session_is_lifted_by_its_turns_not_by_its_records() -> None:
    # s1 holds one turn stored twice; s2 two different turns, slightly weaker each
    fused = {1: 1.0, 2: 1.0, 3: 0.9, 4: 0.8}
    why = dict.fromkeys(fused, "")
    _boost_sessions(fused, why, META, RetrievalConfig.defaults(session_weight=1.0))
    assert fused[3] > fused[1]  # s2 (0.9 + 0.8) outweighs s1 (1.0 once)
    assert "session 1.00" in why[3]


# -- neighbour lift ----------------------------------------------------------------------------

T0 = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
MATCH = "We spent the whole weekend painting the nursery for the baby."
ANSWER = "Sage green, with a white ceiling."
CHAT = [
    ("s1", "My dad drove down on Friday night to help out."),
    ("s1", MATCH),
    ("s1", ANSWER),
    ("s1", "We also put up the shelves my dad made."),
    ("s2", "Sage green sounds lovely for a bedroom, I read somewhere."),
]


def _chat() -> list[NewTurn]:
    return [
        NewTurn(session_id=s, role=Role.USER, text=t, ts=T0 + timedelta(minutes=i))
        for i, (s, t) in enumerate(CHAT)
    ]


def _by_text(service: MemoryService, query: str, **params: Any) -> dict[str, Item]:
    result = service.query("ann", QueryParams(query, k=10, **params))
    return {
        i.memory.text: i for i in result.items if isinstance(i.memory, Episode | Fact) and i.hit
    }


def test_the_turns_beside_a_hit_are_lifted_by_a_share_of_its_score(
    service_factory: Callable[[Config], MemoryService], tmp_path: Path
) -> None:
    lifted = service_factory(make_config(tmp_path / "a", **{"retrieval.neighbour_weight": 0.1}))
    plain = service_factory(make_config(tmp_path / "b", **{"retrieval.neighbour_weight": 0.0}))
    for svc in (lifted, plain):
        svc.ingest("ann", _chat())
    with_lift = _by_text(lifted, "which paint colour for the nursery")
    without = _by_text(plain, "which paint colour for the nursery")
    top = without[MATCH].score  # the hit's score before any lift
    # the answer shares no word with the query: the turn before it lends it 0.1 of its score
    assert "beside a hit" in with_lift[ANSWER].why
    assert with_lift[ANSWER].score == pytest.approx(without[ANSWER].score + 0.1 * top, abs=1e-6)
    assert "beside a hit" not in without[ANSWER].why
    # a turn of another session is no neighbour, however alike its words
    assert "beside a hit" not in with_lift[CHAT[4][1]].why


def test_a_neighbour_outside_the_querys_window_is_not_brought_in(service: MemoryService) -> None:
    service.ingest("ann", _chat())
    until = T0 + timedelta(minutes=1)  # the matching turn's time; the answer came a minute later
    found = _by_text(service, "which paint colour for the nursery", until=until)
    assert MATCH in found
    assert ANSWER not in found
