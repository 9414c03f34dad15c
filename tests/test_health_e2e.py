"""The personal-health scenario of the HGP paper, end to end through a real `memoryd serve`.

Turns over two weeks establish an allergy, a condition, an injury, a night run with an
over-exertion alert, a drug-interaction rule, a medication taken this morning and a standing
instruction. The evening-planning query must bring each back in its typed section, and the
rendered context must name them. Then the stateful parts move: the reported omeprazole completes
its task, a move supersedes a fact (and is undone), a restart with a rebuild reproduces it all.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.config import MODEL_DIR
from support.server import ServerProcess

pytestmark = pytest.mark.slow

USER = "/v1/users/pat"
STORY = [
    ("2026-11-02T08:00:00Z", "s1", "I'm allergic to ibuprofen."),
    ("2026-11-02T08:05:00Z", "s1", "I was diagnosed with hypertension last year."),
    ("2026-11-09T19:30:00Z", "s2", "I injured my knee playing football."),
    (
        "2026-11-12T22:40:00Z",
        "s3",
        "Went for a night run, my heart rate peaked at 160 bpm and my watch gave me an "
        "over-exertion alert.",
    ),
    ("2026-11-13T09:00:00Z", "s4", "If I take an NSAID with aspirin, check the bleeding risk."),
    ("2026-11-16T07:30:00Z", "s5", "Take omeprazole 30 min before dinner."),
    ("2026-11-16T08:10:00Z", "s5", "I took aspirin and my blood-pressure pill this morning."),
]
EVENING = "2026-11-16T18:00:00Z"
QUESTION = (
    "my knee hurts tonight, I want a painkiller after dinner and some exercise — plan my evening"
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "data", MODEL_DIR)
    yield proc
    if proc.proc.poll() is None:
        proc.stop()


def tell(client: httpx.Client, ts: str, session: str, text: str) -> dict:
    turn = {"session_id": session, "role": "user", "text": text, "ts": ts}
    r = client.post(f"{USER}/turns", json={"turns": [turn]})
    assert r.status_code == 201, r.text
    return r.json()["turns"][0]


def ask(client: httpx.Client, query: str = QUESTION, now: str = EVENING) -> dict:
    r = client.post(f"{USER}/query", json={"query": query, "now": now, "k": 10})
    assert r.status_code == 200, r.text
    return r.json()


def texts(reply: dict, section: str) -> list[str]:
    return [i["text"] for i in reply["sections"][section]]


def facts(reply: dict) -> set[tuple[str, str]]:
    return {
        (i["record"]["relation"], i["record"]["object"]["name"])
        for i in reply["sections"]["semantic"]
    }


def tasks(reply: dict) -> dict[str, str]:
    return {
        i["record"]["title"].lower(): i["record"]["states"][-1]["status"]
        for i in reply["sections"]["working"]
    }


def test_plan_my_evening(server: ServerProcess) -> None:
    with server.client() as c:
        for ts, session, text in STORY:
            tell(c, ts, session, text)
        reply = ask(c)

        assert any("160 bpm" in t for t in texts(reply, "episodic"))
        assert {("allergy", "ibuprofen"), ("condition", "hypertension")} <= facts(reply)
        assert any("bleeding risk" in t for t in texts(reply, "procedural"))
        assert tasks(reply) == {
            "take omeprazole 30 min before dinner": "pending",
            "take aspirin": "done",
            "take blood-pressure pill": "done",
        }
        context = reply["context"]
        for named in ("160 bpm", "ibuprofen", "hypertension", "bleeding risk"):
            assert named in context, named
        assert "[pending] Take omeprazole 30 min before dinner" in context
        assert "[done 2026-11-16 08:10] take aspirin" in context
        why = {t["id"]: t["why"] for t in reply["trace"]}
        working_ids = [i["id"] for i in reply["sections"]["working"]]
        assert any("within" in why[i] for i in working_ids)

        done = tell(c, "2026-11-16T18:20:00Z", "s5", "I took my omeprazole.")
        assert "completed" in [e["effect"] for e in done["effects"]]
        later = ask(c, now="2026-11-16T18:30:00Z")
        assert tasks(later)["take omeprazole 30 min before dinner"] == "done"


def test_facts_tasks_and_feedback_api(server: ServerProcess) -> None:
    with server.client() as c:
        tell(c, "2026-11-01T10:00:00Z", "s1", "I live in Oslo.")
        moved = tell(c, "2026-11-20T10:00:00Z", "s2", "I've moved to Berlin.")
        (effect,) = moved["effects"]
        assert effect["effect"] == "superseded"

        current = c.get(f"{USER}/facts").json()["facts"]
        assert [f["record"]["object"]["name"] for f in current] == ["Berlin"]
        history = c.get(f"{USER}/facts", params={"history": "true"}).json()["facts"]
        assert [(f["record"]["object"]["name"], f["current"]) for f in history] == [
            ("Oslo", False),
            ("Berlin", True),
        ]
        assert c.post(f"{USER}/facts/{current[0]['id']}/undo").status_code == 409
        undone = c.post(f"{USER}/facts/{effect['id']}/undo")
        assert undone.status_code == 200 and undone.json()["was_superseded_by"] == effect["by"]
        assert len(c.get(f"{USER}/facts").json()["facts"]) == 2

        r = c.post(f"{USER}/tasks", json={"title": "book the physio", "task_id": "physio"})
        assert r.status_code == 201
        bad = c.patch(f"{USER}/tasks/physio", json={"status": "finished"})
        assert bad.status_code == 422 and "status" in bad.text
        assert c.patch(f"{USER}/tasks/physio", json={"status": "done"}).status_code == 200
        again = c.patch(f"{USER}/tasks/physio", json={"status": "done"})
        assert again.status_code == 409 and "already done" in again.json()["error"]["message"]
        assert c.patch(f"{USER}/tasks/nope", json={"status": "done"}).status_code == 404
        listed = c.get(f"{USER}/tasks", params={"status": "done"}).json()["tasks"]
        assert [t["id"] for t in listed] == ["physio"]

        vote = c.post(f"{USER}/memories/{current[0]['id']}/feedback", json={"value": "positive"})
        assert vote.status_code == 409 and "feedback applies" in vote.text
        assert c.post(f"{USER}/memories/x/feedback", json={"value": "meh"}).status_code == 422
        before = c.get(f"{USER}/facts", params={"history": "true"}).json()
        tasks_before = c.get(f"{USER}/tasks").json()
    server.stop()

    data_dir = server.data_dir
    cmd = [sys.executable, "-m", "memoryd", "rebuild", "--user", "pat"]
    cmd += ["--data-dir", str(data_dir), "--model-dir", str(MODEL_DIR)]
    subprocess.run(cmd, check=True, capture_output=True)
    restarted = ServerProcess(data_dir, MODEL_DIR)
    try:
        with restarted.client() as c:
            assert c.get(f"{USER}/facts", params={"history": "true"}).json() == before
            assert c.get(f"{USER}/tasks").json() == tasks_before
    finally:
        restarted.stop()
