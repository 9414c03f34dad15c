"""LoCoMo scoring on a small file in the LoCoMo format, with hand-computed expectations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memoryd.eval.locomo import load_locomo, normalise_dia_id, parse_evidence, recall, run_locomo
from memoryd.service import MemoryService

SAMPLE = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel."},
                {
                    "speaker": "Ben",
                    "dia_id": "D1:2",
                    "text": "I am training for a marathon, my first one.",
                },
                {
                    "speaker": "Ana",
                    "dia_id": "D1:3",
                    "text": "haha cool",
                    "blip_caption": "a photo of a cat on a sofa",
                },
            ],
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": [
                {"speaker": "Ben", "dia_id": "D2:1", "text": "I ran the Berlin marathon in 3:40."},
                {"speaker": "Ana", "dia_id": "D2:2", "text": "Pixel knocked my tea over today."},
            ],
        },
        "qa": [
            {
                "question": "What is the name of Ana's cat?",
                "answer": "Pixel",
                "category": 4,
                "evidence": ["D1:1"],
            },
            {
                "question": "Which marathon did Ben run?",
                "answer": "Berlin",
                "category": 1,
                "evidence": ["D1:2; D2:1"],
            },
            {
                "question": "What colour is the cat?",
                "answer": "grey",
                "category": 3,
                "evidence": [],
            },
            {
                "question": "When did Ben run?",
                "answer": "June 2023",
                "category": 2,
                "evidence": ["D2:01", "D:9:9"],
            },
            {
                "question": "Is Ben a chef?",
                "adversarial_answer": "yes",
                "category": 5,
                "evidence": ["D1:2"],
            },
        ],
    }
]


@pytest.fixture
def locomo_file(tmp_path: Path) -> Path:
    path = tmp_path / "mini-locomo.json"
    path.write_text(json.dumps(SAMPLE))
    return path


def test_evidence_normalisation() -> None:
    assert normalise_dia_id("D30:05") == "D30:5"
    assert normalise_dia_id("D:11:26") is None
    assert parse_evidence(["D8:6; D9:17", "D8:6"]) == (["D8:6", "D9:17"], [])
    assert parse_evidence(["D:11:26", "D2:3"]) == (["D2:3"], ["D:11:26"])


def test_recall_definition() -> None:
    assert recall(["D1:1", "D1:2"], ["D1:2", "D2:1"], 2) == 0.5
    assert recall(["D1:1", "D1:2"], ["D1:2", "D2:1"], 1) == 0.0
    assert recall(["x"], [], 5) == 1.0


def test_load_turns_questions_and_dates(locomo_file: Path) -> None:
    (conv,) = load_locomo(locomo_file)
    assert [t.turn_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert conv.turns[0].ts.isoformat() == "2023-05-08T13:56:00+00:00"
    assert conv.turns[1].ts.isoformat() == "2023-05-08T13:56:01+00:00"
    assert conv.turns[3].session_id == "session_2" and conv.turns[3].speaker == "Ben"
    assert "a photo of a cat" in conv.turns[2].text
    assert [q.category for q in conv.questions] == [4, 1, 3, 2]  # category 5 excluded
    assert conv.questions[3].evidence == ("D2:1",)
    assert conv.dropped_evidence == ["D:9:9"]


def test_run_scores_three_retrievers(service: MemoryService, locomo_file: Path) -> None:
    report = run_locomo(service, locomo_file, [1, 5])
    text = report.format()
    assert "category 5 excluded" in text and "['D:9:9']" in text
    for name in ("bm25", "dense", "memoryd"):
        assert report.mean(name, 5, 3) == 1.0  # empty evidence counts as recalled
        assert len(report.scores[name][5][4]) == 1
        assert f"{name:10}   5" in text
    # dense ranks all 5 turns, so at k=5 it finds every evidence id; BM25 misses "ran" for
    # "run" (no stemming between the two) on the temporal question
    assert report.mean("dense", 5) == 1.0 and report.mean("memoryd", 5) == 1.0
    assert report.mean("bm25", 5, 2) == 0.0
    assert report.mean("memoryd", 1, 4) == 1.0  # "Ana's cat" → D1:1 first
