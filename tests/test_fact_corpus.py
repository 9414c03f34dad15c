"""The fact corpus (models/fact_corpus), its dev split and the update scenarios (evals/updates):
every line keeps the annotation rules, the sizes the reader was built on hold, and the dev split
stays apart from training."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from memoryd.fact_corpus import (
    CORPUS_DIR,
    INVENTORY_FILE,
    CorpusError,
    LabelledTurn,
    load_inventory,
    read_pairs,
    read_turns,
)
from memoryd.reader import Slots, subject_name
from support.config import REPO

MODELS = REPO / "models"
CORPUS = MODELS / CORPUS_DIR
UPDATES = REPO / "evals" / "updates"
INVENTORY = load_inventory(MODELS / INVENTORY_FILE)


def is_pairs(path: Path) -> bool:
    return '"first"' in path.read_text(encoding="utf-8")[:400]


def turns_of(split: str) -> list[LabelledTurn]:
    out: list[LabelledTurn] = []
    for path in sorted((CORPUS / split).glob("*.jsonl")):
        if is_pairs(path):
            out += [
                LabelledTurn(p.id, t.role, p.domain, t.text, t.facts)
                for p in read_pairs(path, INVENTORY)
                for t in (p.first, p.second)
            ]
        else:
            out += read_turns(path, INVENTORY)
    return out


def test_every_file_keeps_the_annotation_rules() -> None:
    files = sorted(CORPUS.glob("*/*.jsonl"))
    assert files
    for path in files:
        (read_pairs if is_pairs(path) else read_turns)(path, INVENTORY)  # raises on a bad line


def test_the_sizes_the_reader_was_built_on() -> None:
    train = turns_of("train")
    pairs = sum(
        len(read_pairs(p, INVENTORY)) for p in (CORPUS / "train").glob("*.jsonl") if is_pairs(p)
    )
    assert len(train) >= 4000 and pairs >= 1500
    domains = {t.domain for t in train}
    assert len(domains) >= 15
    assert {t.role for t in train} == {"user", "assistant", "log"}
    kinds = Counter(f.kind for t in train for f in t.facts)
    assert all(kinds[k] >= 200 for k in ("state", "change", "add", "end", "none")), kinds


def test_the_dev_split_is_written_apart_and_has_domains_training_lacks() -> None:
    train, dev = turns_of("train") + turns_of("judge"), turns_of("dev")
    assert len(dev) >= 600
    unseen = {t.domain for t in dev} - {t.domain for t in train}
    assert len(unseen) >= 4, unseen
    folded = {" ".join(t.text.lower().split()) for t in train}
    assert not [t.text for t in dev if " ".join(t.text.lower().split()) in folded]


def test_the_update_scenarios() -> None:
    scenarios = [
        json.loads(line)
        for path in sorted(UPDATES.glob("dev_*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    assert len(scenarios) >= 100
    assert {s["kind"] for s in scenarios} == {"replace", "keep"}
    assert len({s["id"] for s in scenarios}) == len(scenarios)


def test_ids_are_unique_in_each_split() -> None:
    for split in ("train", "judge", "dev"):
        ids: list[str] = []
        for path in sorted((CORPUS / split).glob("*.jsonl")):
            if is_pairs(path):
                ids += [p.id for p in read_pairs(path, INVENTORY)]
            else:
                ids += [t.id for t in read_turns(path, INVENTORY)]
        assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1][:5]


def test_the_inventory_is_data_the_code_reads() -> None:
    slots = Slots(INVENTORY)
    names = INVENTORY.names
    assert len(names) >= 40 and len(set(names)) == len(names)
    for name in ("home_city", "employer", "manager", "bank", "energy_supplier", "allergy"):
        assert name in names
    assert slots.label("likes", negated=True) == "does not like"
    assert slots.label("other") == ""
    assert slots.ending_with("medication") == ("dose",) and slots.ending_with("dose") == ()


def test_an_inventory_naming_an_unknown_attribute_to_end_with_is_refused(tmp_path: Path) -> None:
    data = json.loads((MODELS / INVENTORY_FILE).read_text())
    dose = next(a for a in data["attributes"] if a["name"] == "dose")
    dose["ends_with"] = "medicine"
    bad = tmp_path / INVENTORY_FILE
    bad.write_text(json.dumps(data))
    with pytest.raises(CorpusError, match="dose: ends_with 'medicine' is no attribute"):
        load_inventory(bad)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"text": "I live in Leeds", "facts": []}, "'role'"),
        (
            {"role": "user", "text": "I live in Leeds", "facts": [{"subject": "user",
             "attribute": "home_city", "value": "York", "kind": "state"}]},
            "not a span of the text",
        ),
        (
            {"role": "user", "text": "I live in Leeds", "facts": [{"subject": "user",
             "attribute": "city", "value": "Leeds", "kind": "state"}]},
            "not in the inventory",
        ),
        (
            {"role": "user", "text": "if I move to Leeds", "facts": [{"subject": "user",
             "attribute": "home_city", "value": "Leeds", "kind": "none"}]},
            "needs why",
        ),
    ],
)  # fmt: skip
def test_a_bad_line_is_refused_with_what_is_wrong(
    tmp_path: Path, raw: dict[str, object], problem: str
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps({"id": "x-1", "domain": "home", **raw}) + "\n")
    with pytest.raises(CorpusError, match=problem):
        read_turns(path, INVENTORY)


@pytest.mark.parametrize(
    ("span", "name"),
    [
        ("my sister Aoife's", "Aoife"),
        ("the dog", "Dog"),
        ("tom", "Tom"),
        ("our landlord", "Landlord"),
        ("my little brother Callum", "Callum"),
        ("dr patel", "Dr Patel"),
    ],
)
def test_a_subject_is_stored_by_its_name(span: str, name: str) -> None:
    assert subject_name(span) == name
