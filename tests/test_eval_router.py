"""`memoryd eval router` and `eval router-loop` on the real encoder, head and seed set."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import random
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from click.testing import CliRunner

from memoryd.cli import main
from memoryd.encoder import Encoder
from memoryd.errors import InvalidInputError
from memoryd.eval.router import Example, embed_examples, evaluate_router, load_examples
from memoryd.eval.router_loop import OracleLabeller, plot_loop, run_loop, split_examples
from memoryd.models import LABELS
from memoryd.router import Router, RouterHead
from memoryd.router.router import deferral_threshold
from memoryd.router.trainer import SeedSet
from support.config import MODEL_DIR, REPO

SEED_JSONL = REPO / "models" / "router_seed.jsonl"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "make_router_seed", REPO / "scripts" / "make_router_seed.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _seed_records() -> list[dict]:
    return [json.loads(line) for line in SEED_JSONL.read_text().splitlines()]


@pytest.fixture(scope="module")
def stream_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 generated lines that are not in the seed set (another RNG seed, --exclude)."""
    gen = _generator()
    records = gen.generate(11, 6, gen.read_texts(SEED_JSONL))
    records = random.Random(3).sample(records, 300)
    return _write_jsonl(tmp_path_factory.mktemp("router") / "stream.jsonl", records)


@pytest.fixture(scope="module")
def stream(stream_file: Path, encoder: Encoder) -> tuple[list[Example], np.ndarray]:
    examples = load_examples(stream_file)
    return examples, embed_examples(encoder, examples)


@pytest.fixture(scope="module")
def seed_set() -> SeedSet:
    """Every other line of the shipped seed set (same split and recipe): rounds train twice as
    fast, and the loop's mechanics do not depend on the seed's size."""
    seed = SeedSet.load(MODEL_DIR)
    return dataclasses.replace(
        seed, x=seed.x[::2], y=seed.y[::2], texts=seed.texts[::2], holdout=seed.holdout[::2]
    )


# -- data generator --------------------------------------------------------------------------


def test_generator_default_is_the_committed_seed(tmp_path: Path) -> None:
    gen = _generator()
    out = tmp_path / "seed.jsonl"
    assert gen.main(["--out", str(out)]) == 0
    assert out.read_bytes() == SEED_JSONL.read_bytes()


def test_generator_exclude_drops_seed_texts(tmp_path: Path) -> None:
    gen = _generator()
    out = tmp_path / "stream.jsonl"
    gen.main(["--out", str(out), "--rng-seed", "5", "--fills", "8", "--exclude", str(SEED_JSONL)])
    seed_keys = {gen.normalise(r["text"]) for r in _seed_records()}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) > len(seed_keys)
    assert not {gen.normalise(r["text"]) for r in lines} & seed_keys


# -- eval router -----------------------------------------------------------------------------


def test_eval_router_scores_and_times(tmp_path: Path, encoder: Encoder, router: Router) -> None:
    path = _write_jsonl(tmp_path / "small.jsonl", _seed_records()[::45])
    examples = load_examples(path)
    report = evaluate_router(
        encoder, router, examples, path=path, head_path=MODEL_DIR / "router_head.npz", tau0=0.9
    )
    assert set(report.f1) == {str(label) for label in LABELS} | {"micro", "macro"}
    assert all(0.0 <= v <= 1.0 for v in report.f1.values())
    assert report.f1["macro"] > 0.5
    for latency in (report.encoder_and_head, report.head_alone):
        assert len(latency.samples_ns) == len(examples)
        assert 0 < latency.p50 <= latency.p95
    assert report.head_alone.p50 < report.encoder_and_head.p50
    assert "macro" in report.format()


def test_eval_router_cli_writes_the_table(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "small.jsonl", _seed_records()[::60])
    out = tmp_path / "results" / "router.txt"
    head = tmp_path / "other_head.npz"
    RouterHead.load(MODEL_DIR / "router_head.npz").with_temperature(2.5).save(head)
    args = ["eval", "router", str(path), "--model-dir", str(MODEL_DIR), "--out", str(out)]
    result = CliRunner().invoke(main, [*args, "--head", str(head)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "encoder + head" in text and "head alone" in text and "macro" in text
    assert f"head {head} (hidden=" in text and "temperature=2.500)" in text
    head.write_bytes(b"not an npz")
    result = CliRunner().invoke(main, [*args, "--head", str(head)])
    assert result.exit_code == 1 and "not a router head" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"text": "ok", "labels": ["fragmented"]}\nnot json\n', ":2: not JSON"),
        ('{"text": "ok", "labels": ["noise"]}\n', ":1: unknown label 'noise'"),
        ('{"labels": ["working"]}\n', ":1: 'text' must be a string"),
        ('{"text": "hi", "labels": []}\n', ":1: 'labels' must be a non-empty list"),
        ("\n", "no labelled lines"),
    ],
)
def test_bad_input_names_the_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(InvalidInputError, match=message):
        load_examples(path)
    for command in ("router", "router-loop"):
        result = CliRunner().invoke(
            main, ["eval", command, str(path), "--model-dir", str(MODEL_DIR)]
        )
        assert result.exit_code == 1
        assert message in result.output


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["eval", "router", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "does not exist" in result.output
    with pytest.raises(InvalidInputError, match="no such file"):
        load_examples(tmp_path / "nope.jsonl")


# -- eval router-loop ------------------------------------------------------------------------


def test_split_modes_keep_test_lines_out_of_the_stream(
    stream: tuple[list[Example], np.ndarray],
) -> None:
    examples, _ = stream
    for mode in ("line", "group"):
        split = split_examples(examples, rounds=2, test_size=30, mode=mode, rng_seed=1)
        tests = np.concatenate(split.tests)
        assert len(split.tests) == 3 and all(len(t) == 30 for t in split.tests)
        assert len(set(tests.tolist())) == 90
        assert not set(split.stream.tolist()) & set(split.heldout.tolist())
        assert len(split.stream) + len(split.heldout) == len(examples)
        if mode == "group":
            stream_groups = {examples[i].group for i in split.stream}
            assert not stream_groups & {examples[i].group for i in split.heldout}
    again = split_examples(examples, rounds=2, test_size=30, mode="group", rng_seed=1)
    assert np.array_equal(again.stream, split.stream)


def _loop(stream, seed_set, **kwargs):
    examples, vectors = stream
    split = split_examples(examples, rounds=kwargs.pop("rounds", 2), test_size=30, mode="line")
    options = {"retrain_every": 20, "tau0": 0.9, "beta": 0.1, "tau_min": 0.5, **kwargs}
    head = RouterHead.load(MODEL_DIR / "router_head.npz")
    report = run_loop(
        examples,
        vectors,
        seed_set,
        head,
        split,
        path=Path("stream.jsonl"),
        head_path=MODEL_DIR / "router_head.npz",
        threshold=0.5,
        **options,
    )
    return report, split


def test_loop_runs_rounds_and_plots(
    tmp_path: Path, stream: tuple[list[Example], np.ndarray], seed_set: SeedSet
) -> None:
    labeller = OracleLabeller()
    report, _ = _loop(stream, seed_set, labeller=labeller)
    assert [row.round for row in report.rows] == [0, 1, 2]
    assert report.stopped == "stopped after 2 rounds"
    for row in report.rows[1:]:
        assert row.accepted is not None
        assert row.sent == 20 and row.decisions >= 20
        assert row.tau == pytest.approx(deferral_threshold(row.round - 1, 0.9, 0.1, 0.5))
        assert 0.0 <= row.macro <= 1.0 and 0.0 <= row.heldout_macro <= 1.0
        assert row.stored_macro is not None and 0.0 <= row.stored_macro <= 1.0
        assert 0 <= row.kept_wrong <= row.decisions - row.sent
    assert report.rows[1].tau > report.rows[2].tau
    assert labeller.calls == report.rows[-1].calls == report.rows[-1].pool == 40
    text = report.format()
    assert "final head on the whole held-out split" in text
    png = tmp_path / "loop.png"
    plot_loop(report, png)
    assert png.read_bytes()[:8] == PNG_MAGIC


class SpyLabeller(OracleLabeller):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[int] = []

    def label(self, example: Example):
        self.lines.append(example.line)
        return super().label(example)


@pytest.mark.parametrize("tau0", [0.0, 0.85, 1.0])
def test_oracle_sees_only_low_confidence_lines(
    stream: tuple[list[Example], np.ndarray], seed_set: SeedSet, router: Router, tau0: float
) -> None:
    """No round happens (retrain_every > stream): every line is routed by the shipped head."""
    examples, vectors = stream
    spy = SpyLabeller()
    report, split = _loop(
        stream, seed_set, tau0=tau0, beta=0.0, tau_min=0.0, retrain_every=10**6, labeller=spy
    )
    assert "stream exhausted" in report.stopped and len(report.rows) == 1
    confidences = {
        examples[i].line: router.route(vectors[i], examples[i].text).confidence
        for i in split.stream
    }
    expected = sorted(line for line, conf in confidences.items() if conf < tau0)
    assert sorted(spy.lines) == expected
    if tau0 == 0.0:
        assert spy.calls == 0
    elif tau0 == 1.0:
        assert spy.calls == len(split.stream)
    else:
        assert 0 < spy.calls < len(split.stream)


def test_loop_cli_writes_table_and_png(tmp_path: Path, stream_file: Path) -> None:
    out, png = tmp_path / "loop.txt", tmp_path / "loop.png"
    args = ["eval", "router-loop", str(stream_file), "--model-dir", str(MODEL_DIR)]
    args += ["--rounds", "1", "--test-size", "40", "--tau0", "0", "--out", str(out)]
    args += ["--plot", str(png), "--split", "group"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "split=group" in out.read_text() and "stream exhausted" in out.read_text()
    assert png.read_bytes()[:8] == PNG_MAGIC
