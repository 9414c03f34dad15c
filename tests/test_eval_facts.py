"""Fact precision/recall against LoCoMo-style observations, on a hand-written two-session file.

Expected numbers at the default threshold (0.70), worked out by hand from the rule:

    facts (one per fact-bearing turn)       allowed observations (speaker, same session)
    D1:1 Ana likes hiking in the mountains  O1 loves hiking ✓, O2 sister
    D1:2 Ben is allergic to peanuts         O3 allergic ✓, O4 asked about her day
    D1:3 Ana has a sister Lena              O1, O2 sister ✓
    D2:1 Ben dislikes coffee                O5 dislikes coffee ✓, O6 sushi
    D2:2 Ana likes rainy days               O7 market (unrelated: below the threshold)
    D2:3 Ben's favourite food is sushi      O5, O6 sushi ✓

precision 5/6; recall 5/7 (O4 and O7 unmatched); fact-like observations O1, O3, O5, O6 (O2 has no
cue), all matched. With threshold -1 only speaker and session decide: every fact and every
observation matches.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from memoryd.cli import main
from memoryd.cli.evals import eval_facts
from memoryd.encoder import Encoder
from memoryd.errors import ConflictError
from memoryd.eval.facts import (
    DEFAULT_THRESHOLD,
    Observation,
    RenderedFact,
    eligible,
    load_observations,
    render_fact,
    run_facts,
)
from memoryd.service import MemoryService
from support.config import MODEL_DIR


def _turns(rows: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    return [{"speaker": s, "dia_id": d, "text": t} for s, d, t in rows]


SAMPLE = [
    {
        "sample_id": "conv-y",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": _turns(
                [
                    ("Ana", "D1:1", "I love hiking in the mountains."),
                    ("Ben", "D1:2", "I'm allergic to peanuts."),
                    ("Ana", "D1:3", "I have a sister named Lena."),
                    ("Ben", "D1:4", "Nice, what did you do today?"),
                ]
            ),
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": _turns(
                [
                    ("Ben", "D2:1", "I hate coffee."),
                    ("Ana", "D2:2", "I love rainy days."),
                    ("Ben", "D2:3", "My favourite food is sushi."),
                ]
            ),
        },
        "qa": [],
        "observation": {
            "session_1_observation": {
                "Ana": [
                    ["Ana loves hiking in the mountains.", "D1:1"],
                    ["Ana's sister Lena is coming to visit.", "D1:3"],
                ],
                "Ben": [
                    ["Ben is allergic to peanuts.", "D1:2"],
                    ["Ben asked Ana about her day.", "D1:4"],
                ],
            },
            "session_2_observation": {
                "Ben": [
                    ["Ben dislikes coffee.", "D2:1"],
                    ["Ben's favourite food is sushi.", ["D2:3"]],
                ],
                "Ana": [["Ana went to the market.", "D2:2, D2:9"]],
            },
        },
    }
]


@pytest.fixture
def facts_file(tmp_path: Path) -> Path:
    path = tmp_path / "mini-locomo.json"
    path.write_text(json.dumps(SAMPLE))
    return path


@pytest.mark.parametrize(
    ("relation", "obj", "negated", "sentence"),
    [
        ("likes", "painting", False, "Caroline likes painting"),
        ("likes", "olives", True, "Caroline does not like olives"),
        ("relationship:sister", "Anna", False, "Caroline has a sister Anna"),
        ("relationship:aunt", "Jo", True, "Caroline does not have an aunt Jo"),
        ("owns:dog", "Max", False, "Caroline has a dog Max"),
        ("prefers:food", "pizza", False, "Caroline's favourite food is pizza"),
        ("prefers:colour", "red", True, "Caroline's favourite colour is not red"),
        ("allergic_to", "cats", True, "Caroline is not allergic to cats"),
        ("lives_in", "Paris", True, "Caroline does not live in Paris"),
        ("works_as", "engineer", False, "Caroline works as an engineer"),
        ("works_as", "nurse", True, "Caroline does not work as a nurse"),
        ("has_condition", "asthma", False, "Caroline has asthma"),
        ("has_skill", "chess", False, "Caroline is good at chess"),
        ("is", "vegan", True, "Caroline is not vegan"),
        ("takes_medication", "ibuprofen", False, "Caroline takes ibuprofen"),
        ("volunteers_at", "a shelter", True, "Caroline does not volunteer at a shelter"),
    ],
)
def test_render_fact(relation: str, obj: str, negated: bool, sentence: str) -> None:
    assert render_fact("Caroline", relation, obj, negated) == sentence


def test_observations_parse_every_id_shape(facts_file: Path) -> None:
    obs = load_observations(facts_file)["conv-y"]
    assert len(obs) == 7
    assert obs[5] == Observation("Ben", "Ben's favourite food is sushi.", ("D2:3",))
    assert obs[6].dia_ids == ("D2:2", "D2:9") and obs[6].sessions == {2}
    assert [o.fact_like for o in obs] == [True, False, True, False, True, True, False]


def _fact(subject: str, *sources: str) -> RenderedFact:
    return RenderedFact("f", subject, "likes", f"{subject} likes tea", sources, "llm", "pattern")


def test_eligible_needs_speaker_and_source_or_session() -> None:
    obs = Observation("Ana", "Ana loves tea.", ("D2:5",))
    assert eligible(_fact("Ana", "D2:5"), obs)
    assert eligible(_fact("Ana", "D2:1"), obs)  # same session
    assert eligible(_fact("Ana", "D1:1", "D2:9"), obs)  # one of several sources
    assert not eligible(_fact("Ana", "D1:1"), obs)  # other session
    assert not eligible(_fact("Ben", "D2:5"), obs)  # other speaker
    assert not eligible(_fact("Ana", "t_0123"), obs)  # not a LoCoMo turn


def test_encoder_vectors_are_unit_norm(encoder: Encoder) -> None:
    vec = encoder.embed("Ana likes tea")
    assert vec.dtype == np.float32 and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-5


def test_precision_recall_by_hand(service: MemoryService, facts_file: Path) -> None:
    report = run_facts(service, facts_file)
    (result,) = report.results
    assert [f.sentence for f in result.facts] == [
        "Ana likes hiking in the mountains",
        "Ben is allergic to peanuts",
        "Ana has a sister Lena",
        "Ben dislikes coffee",
        "Ana likes rainy days",
        "Ben's favourite food is sushi",
    ]
    t = report.totals()
    assert (t.facts, t.matched_facts, t.observations, t.matched_observations) == (6, 5, 7, 5)
    assert (t.fact_like, t.matched_fact_like) == (4, 4)
    assert t.precision == pytest.approx(5 / 6) and t.recall == pytest.approx(5 / 7)
    assert t.f1 == pytest.approx(2 * (5 / 6) * (5 / 7) / (5 / 6 + 5 / 7))
    assert report.by_key("base_relation") == {
        "likes": (2, 1),
        "allergic_to": (1, 1),
        "relationship": (1, 1),
        "dislikes": (1, 1),
        "prefers": (1, 1),
    }
    everything = report.totals(-1.0)
    assert (everything.matched_facts, everything.matched_observations) == (6, 7)
    above, below = report.near_threshold(1)
    assert [p.fact.sentence for p in below] == ["Ana likes rainy days"]
    assert below[0].observation is not None and below[0].observation.text.startswith("Ana went")
    assert len(above) == 1 and above[0].score >= DEFAULT_THRESHOLD


def test_llm_mode_without_llm_is_an_error(service: MemoryService, facts_file: Path) -> None:
    with pytest.raises(ConflictError, match="--llm needs an LLM"):
        run_facts(service, facts_file, with_llm=True)


def test_cli_default_threshold_is_the_module_default() -> None:
    threshold = next(p for p in eval_facts.params if p.name == "threshold")
    assert threshold.default == DEFAULT_THRESHOLD


def test_cli_writes_json(tmp_path: Path, facts_file: Path) -> None:
    out = tmp_path / "res" / "facts.json"
    argv = ["eval", "facts", str(facts_file), "--model-dir", str(MODEL_DIR)]
    result = CliRunner().invoke(
        main, [*argv, "--data-dir", str(tmp_path / "d"), "--json", str(out), "--show", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "precision 0.8333 (5/6)" in result.output and "recall 0.7143 (5/7)" in result.output
    assert "unmatched facts closest to 0.70" in result.output
    data = json.loads(out.read_text())
    assert data["threshold"] == DEFAULT_THRESHOLD
    assert data["totals"]["matched_facts"] == 5 and data["totals"]["observations"] == 7
    assert data["conversations"][0]["sample_id"] == "conv-y"
    assert data["relations"]["likes"] == {"facts": 2, "matched": 1}
    unmatched = [f["sentence"] for f in data["facts"] if not f["matched"]]
    assert unmatched == ["Ana likes rainy days"]


def test_cli_llm_flag_without_llm_fails_clearly(tmp_path: Path, facts_file: Path) -> None:
    argv = ["eval", "facts", str(facts_file), "--model-dir", str(MODEL_DIR), "--llm"]
    result = CliRunner().invoke(main, [*argv, "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 1
    assert "--llm needs an LLM: set llm.backend" in result.output
