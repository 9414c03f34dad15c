"""The router head's input (memoryd.router.features) and the routing corpus it is trained on."""

from __future__ import annotations

import json

import numpy as np

from memoryd.eval.router import load_examples
from memoryd.models import LABELS
from memoryd.router.features import CUES, NGRAM_DIM, cue_vector, features, ngram_vector
from support.config import REPO

CORPUS = REPO / "models" / "router_corpus"
DIM = 384


def _cue(text: str, name: str) -> float:
    return float(cue_vector(text)[[n for n, _ in CUES].index(name)])


def test_cues_mark_forms_not_topics() -> None:
    assert _cue("whenever the dog barks at night, shut the window", "conditional") > 0
    assert _cue("don't let me forget the gas bill", "reminder") > 0
    assert _cue("I no longer eat meat", "change") > 0
    assert _cue("steps_today=8412", "log_form") > 0
    assert _cue("the dog barks at night", "conditional") == 0


def test_ngrams_are_unit_length_and_order_aware() -> None:
    a, b = ngram_vector("no longer vegan"), ngram_vector("vegan no longer")
    assert a.shape == (NGRAM_DIM,) and abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
    assert not np.array_equal(a, b)  # word pairs and the first word differ


def test_features_fit_the_width_each_head_was_trained_with() -> None:
    vec = np.ones(DIM, dtype=np.float32) / np.sqrt(DIM)
    full = features(vec, "remind me at 5")
    assert full.shape == (DIM + len(CUES) + NGRAM_DIM,)
    assert np.allclose(features(vec, "remind me at 5", DIM), vec)  # a head from before cues
    assert features(np.stack([vec, vec]), ["a", "b"], DIM + len(CUES)).shape == (2, DIM + len(CUES))


def test_corpus_files_are_well_formed_and_dev_is_apart_from_train() -> None:
    lines = {
        split: [
            json.loads(x)
            for f in sorted((CORPUS / split).glob("*.jsonl"))
            for x in f.read_text(encoding="utf-8").splitlines()
            if x.strip()
        ]
        for split in ("train", "dev")
    }
    assert len(lines["train"]) >= 3000 and len(lines["dev"]) >= 500
    for split, records in lines.items():
        assert len({r["id"] for r in records}) == len(records), split
        for r in records:
            assert r["role"] in ("user", "assistant", "log") and r["labels"], r
            assert set(r["labels"]) <= {str(label) for label in LABELS}, r
            assert "fragmented" not in r["labels"] or len(r["labels"]) == 1, r

    def key(r: dict) -> str:
        return " ".join(r["text"].lower().split())

    assert not {key(r) for r in lines["train"]} & {key(r) for r in lines["dev"]}
    dev_only = {r["domain"] for r in lines["dev"]} - {r["domain"] for r in lines["train"]}
    assert len(dev_only) >= 3  # whole domains the head never trains on


def test_a_directory_of_labelled_files_loads_with_domains_as_groups() -> None:
    examples = load_examples(CORPUS / "dev")
    assert len(examples) >= 500
    assert {"cars", "garden"} <= {e.group for e in examples}
