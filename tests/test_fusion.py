"""Score fusion's session lift counts turns, not records."""

from memoryd.config import RetrievalConfig
from memoryd.retrieve.fusion import _boost_sessions

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
