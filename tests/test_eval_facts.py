"""Fact precision/recall against LoCoMo-style observations, on a hand-written two-session file.

Expected numbers at the default threshold (0.70), worked out by hand from the rule:

    facts (one per fact-bearing turn)       allowed observations (speaker, same session)
    D1:1 Ana likes hiking in the mountains  O1 loves hiking ✓, O2 sister
    D1:2 Ben is allergic to peanuts         O3 allergic ✓, O4 asked about her day
    D1:3 Ana sibling: Lena                  O1, O2 sister ✓
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
from memoryd.models import Entity, Fact
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
                    ("Ana", "D1:3", "My sister Lena is coming to visit."),
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
    ("relation", "label", "obj", "negated", "sentence"),
    [
        ("likes", "likes", "painting", False, "Caroline likes: painting"),
        ("likes", "does not like", "olives", True, "Caroline does not like: olives"),
        ("sibling", "sibling", "Anna", False, "Caroline sibling: Anna"),
        ("other", "", "Thursdays", False, 'Caroline Thursdays: "the sentence"'),
        ("lives_in", "", "Paris", True, "Caroline not lives in: Paris"),  # a fact of old
    ],
)
def test_render_fact(relation: str, label: str, obj: str, negated: bool, sentence: str) -> None:
    fact = Fact("f", "t", relation, Entity("e", obj), "the sentence", "Caroline", negated=negated)
    fact.label = label
    assert render_fact(fact) == sentence


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
    sentences = [f.sentence for f in result.facts]
    assert "Ben allergic to: peanuts" in sentences
    assert "Ana sibling: Lena" in sentences
    assert not [s for s in sentences if "what did you do" in s.lower()]  # a question
    t = report.totals()
    assert (t.facts, t.observations) == (len(result.facts), 7)
    assert t.precision == pytest.approx(t.matched_facts / t.facts)
    assert t.recall == pytest.approx(t.matched_observations / t.observations)
    assert t.matched_observations >= 2  # the allergy and the sister at least
    assert set(report.by_key("base_relation")) <= {"allergy", "sibling", "likes", "hobby",
        "favourite", "diet", "other"}  # fmt: skip
    everything = report.totals(-1.0)  # every fact shares a session with an observation
    assert everything.matched_facts == t.facts
    above, below = report.near_threshold(1)
    assert len(above) + len(below) >= 1
    assert all(p.score >= DEFAULT_THRESHOLD for p in above)


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
    assert "precision " in result.output and "recall " in result.output
    data = json.loads(out.read_text())
    assert data["threshold"] == DEFAULT_THRESHOLD
    assert data["totals"]["observations"] == 7
    assert data["totals"]["matched_facts"] == sum(f["matched"] for f in data["facts"])
    assert data["conversations"][0]["sample_id"] == "conv-y"
    assert data["relations"]["allergy"] == {"facts": 1, "matched": 1}


def test_cli_llm_flag_without_llm_fails_clearly(tmp_path: Path, facts_file: Path) -> None:
    argv = ["eval", "facts", str(facts_file), "--model-dir", str(MODEL_DIR), "--llm"]
    result = CliRunner().invoke(main, [*argv, "--data-dir", str(tmp_path / "d")])
    assert result.exit_code == 1
    assert "--llm needs an LLM: set llm.backend" in result.output
