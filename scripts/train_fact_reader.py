"""Train the fact reader's head on the written fact corpus and store it for the daemon.

Run inside the build venv after ``scripts/export_models.py`` and ``tune_router_layers.py``:

    .build-venv/bin/python scripts/train_fact_reader.py --out models
    .build-venv/bin/python scripts/train_fact_reader.py --select     # the candidates' CV table

1. Read the corpus's training lines (``models/fact_corpus/train``: single lines, and both traces
   of every change pair) with the inventory (``models/fact_inventory.json``). The dev split is
   never read here.
2. Run the built int8 encoder over every text, one unpadded text per call as the daemon does,
   and keep the token states the head reads (``INPUT``: the encoder's last layer, the same
   states the embedding is pooled from) with the pieces' character offsets.
3. Targets: per piece, BIO tags of values, subjects and old values (every occurrence of the
   annotated span); per annotated value, its attribute, kind and polarity, and which candidate
   subjects (the speaker and each annotated subject span) it is about.
4. Train the torch twin of :class:`memoryd.reader.ReaderHead` (AdamW, seeded), copy its weights
   into the numpy head, check that both give the same tags and classes on the agreement texts,
   and save ``fact_reader.npz`` with the recipe in the manifest's ``fact_reader`` section.

``--select`` instead scores the candidate inputs and sizes by 4-fold cross-validation in which
each fold holds out whole domains, reading each held-out fold with the numpy head exactly as the
daemon would (``memoryd.reader.ReaderScore``); the recorded choice is ``CHOICE``.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
import onnxruntime
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

import build_cache
from build_cache import entry_key
from export_models import MIN_COSINE, OPSET
from memoryd.encoder import (
    FACT_TOP_FILE,
    MANIFEST_FILE,
    MODEL_FILE,
    READING_OUTPUT,
    TRUNK_OUTPUT,
    Encoder,
    sha256_file,
)
from memoryd.fact_corpus import (
    CORPUS_DIR,
    INVENTORY_FILE,
    OTHER,
    USER,
    LabelledTurn,
    load_inventory,
    read_pairs,
    read_turns,
)
from memoryd.reader import FactReader, ReaderScore, Slots
from memoryd.reader.head import HEAD_FORMAT, KINDS, PAIR_FEATURES, ReaderHead, pair_features
from memoryd.reader.reader import HEAD_FILE
from memoryd.reader.spans import (
    IGNORE,
    LAYERS,
    SHAPE_FEATURES,
    Span,
    find_spans,
    piece_shapes,
    piece_tags,
)
from memoryd.routing_corpus import corpus_sha256

REPO = Path(__file__).resolve().parents[1]
SEED = 0
BATCH = 16
WEIGHT_DECAY = 0.01


TUNED = "tuned"
"""The input of a head that reads its own tuned copy of the encoder's top layers."""
TOP_RATE = 1e-4
"""AdamW rate of the tuned top layers (the head's is the recipe's)."""


@dataclass(frozen=True)
class Recipe:
    input: str  # "last" (last_hidden_state), "routing" (the router's tuned top) or "both"
    hidden: int
    span: int
    epochs: int
    rate: float
    dropout: float = 0.0
    attention: bool = False


CHOICE = Recipe(TUNED, 256, 256, 30, 2e-3, 0.3)
CANDIDATES = (
    Recipe("last", 256, 256, 30, 2e-3, 0.0),
    Recipe("last", 256, 256, 30, 2e-3, 0.3),
    Recipe("last", 256, 256, 20, 1e-3, 0.3, attention=True),
    Recipe("both", 256, 256, 30, 2e-3, 0.3),
    Recipe(TUNED, 256, 256, 20, 2e-3, 0.3),
    Recipe(TUNED, 256, 256, 30, 2e-3, 0.3),
)
CHECKPOINTS = (10, 20, 30)
"""Epochs after which ``--select`` scores the held-out folds (one training run, three rows)."""
LEAST_CONFIDENCES = (0.0, 0.4, 0.5, 0.6)
"""The least confidences of a kept fact that ``--select`` scores (filtering, no retraining)."""
SECOND_SUBJECTS = (0.5, 0.8, 1.01)
"""The least scores of a value's second subject that ``--select`` scores (1.01: never)."""
SECOND_SUBJECT = 0.5
"""The recorded least score of a second subject (the head's meta ``second_subject``)."""
MIN_CONFIDENCE = 0.5
"""The recorded least confidence of a kept fact (the head's meta ``min_confidence``): the
best fact-level F1 of ``--select`` on the tuned head (docs/decisions.md)."""
CACHE_KIND = "fact_reader"
"""The build cache's folder for readers (scripts/build_cache.py)."""


# -- the corpus as training examples -------------------------------------------------------


@dataclass
class Example:
    turn: LabelledTurn
    states: np.ndarray  # (pieces, D)
    offsets: list[tuple[int, int]]
    tags: np.ndarray  # (layers, pieces)
    shapes: np.ndarray  # (pieces, SHAPE_FEATURES)
    values: list[dict[str, Any]]  # first, last, attribute, kind, negated, subjects (0/1 each)
    subjects: list[tuple[int, int]]  # the annotated subject spans' first and last pieces


def training_turns(corpus: Path, inventory: Any) -> list[LabelledTurn]:
    turns: list[LabelledTurn] = []
    for path in sorted((corpus / "train").glob("*.jsonl")):
        first = path.read_text(encoding="utf-8").lstrip()[:200]
        if '"first"' in first:
            for pair in read_pairs(path, inventory):
                for n, turn in enumerate((pair.first, pair.second), 1):
                    turns.append(
                        LabelledTurn(
                            f"{pair.id}/{n}", turn.role, pair.domain, turn.text, turn.facts
                        )
                    )
        else:
            turns.extend(read_turns(path, inventory))
    return turns


def _pieces(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    inside = [i for i, (a, b) in enumerate(offsets) if b > a and a < end and b > start]
    return (inside[0], inside[-1]) if inside else None


def _nearest(spans: list[tuple[int, int]], anchor: tuple[int, int] | None) -> tuple[int, int]:
    if anchor is None:
        return spans[0]
    return min(spans, key=lambda s: abs(s[0] - anchor[0]))


def make_example(
    turn: LabelledTurn,
    states: np.ndarray,
    offsets: list[tuple[int, int]],
    attributes: Sequence[str],
) -> Example:
    text = turn.text
    layer_spans: dict[str, list[tuple[int, int]]] = {name: [] for name in LAYERS}
    for fact in turn.facts:
        layer_spans["value"] += find_spans(text, fact.value)
        if fact.subject != USER:
            layer_spans["subject"] += find_spans(text, fact.subject)
        if fact.old:
            layer_spans["old"] += find_spans(text, fact.old)
    tags = np.stack([piece_tags(text, offsets, layer_spans[name]) for name in LAYERS])
    subjects = sorted(
        {p for s in set(layer_spans["subject"]) if (p := _pieces(offsets, *s)) is not None}
    )
    values: dict[tuple[int, int], dict[str, Any]] = {}
    for fact in turn.facts:
        anchor = find_spans(text, fact.subject)[0] if fact.subject != USER else None
        chars = _nearest(find_spans(text, fact.value), anchor)
        pieces = _pieces(offsets, *chars)
        if pieces is None:
            continue
        item = values.setdefault(
            pieces,
            {
                "first": pieces[0],
                "last": pieces[1],
                "attribute": attributes.index(fact.attribute),
                "kind": KINDS.index(fact.kind),
                "negated": float(fact.negated),
                "subjects": [],
                "names": set(),
            },
        )
        item["names"].add(fact.subject)
    for item in values.values():
        labels = [1.0 if USER in item["names"] else 0.0]
        for first, last in subjects:
            name = text[offsets[first][0] : offsets[last][1]]
            labels.append(1.0 if any(name in n or n in name for n in item["names"]) else 0.0)
        item["subjects"] = labels
        del item["names"]
    shapes = piece_shapes(text, offsets)
    return Example(turn, states, offsets, tags, shapes, list(values.values()), subjects)


def featurize(
    encoder: Encoder, turns: list[LabelledTurn], source: str
) -> list[tuple[np.ndarray, list[tuple[int, int]]]]:
    out = []
    for turn in tqdm(turns, desc=f"states ({source})", unit="line"):
        out.append(token_states(encoder, turn.text, source))
    return out


def token_states(
    encoder: Encoder, text: str, source: str
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    states, offsets = encoder.last_layer(text)
    if source == "routing":
        states = encoder.routing_states(text)
    elif source == "both":
        states = np.concatenate([states, encoder.routing_states(text)], axis=1)
    elif source == TUNED:
        states = encoder.trunk(text)[0]
    return states, offsets


# -- the torch twin of ReaderHead ----------------------------------------------------------


def top_layers() -> torch.nn.Module:
    """A fresh copy of the encoder's layers above the trunk (the fp32 weights it was exported
    from), as the router's tuning takes them."""
    from transformers import AutoModel

    from export_models import SOURCE_PACKAGE, TRUNK_LAYERS, locate_weights
    from tune_router_layers import _Top

    model_dir, _ = locate_weights(SOURCE_PACKAGE)
    bert = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    return _Top(copy.deepcopy(bert.encoder.layer[TRUNK_LAYERS:]))


class TorchHead(torch.nn.Module):
    """The head; with ``top`` (input ``tuned``), a copy of the encoder's layers above the trunk
    runs first, tuned with it: the states the numpy head reads are then ``top``'s output."""

    def __init__(
        self,
        dim: int,
        hidden: int,
        span: int,
        attributes: int,
        dropout: float,
        top: torch.nn.Module | None = None,
        attention: bool = False,
    ) -> None:
        super().__init__()
        self.top = top
        self.drop = torch.nn.Dropout(dropout)
        dim += SHAPE_FEATURES
        self.att = (
            torch.nn.ModuleList(torch.nn.Linear(hidden, hidden, bias=False) for _ in range(4))
            if attention
            else None
        )
        self.inp = torch.nn.Linear(dim, hidden)
        self.conv = torch.nn.Conv1d(hidden, hidden, 3, padding=1)
        self.tag = torch.nn.Linear(hidden, 3 * len(LAYERS))
        self.span = torch.nn.Linear(6 * hidden, span)
        self.attr = torch.nn.Linear(span, attributes)
        self.kind = torch.nn.Linear(span, len(KINDS))
        self.neg = torch.nn.Linear(span, 1)
        self.subj = torch.nn.Linear(3 * hidden, span)
        self.user = torch.nn.Parameter(torch.zeros(span).normal_(0, 0.1))
        self.pair1 = torch.nn.Linear(3 * span + PAIR_FEATURES, 64)
        self.pair2 = torch.nn.Linear(64, 1)

    @staticmethod
    def gelu(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x, approximate="tanh")

    def head_input(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """What the numpy head reads: ``x`` itself, or the tuned top's output over it."""
        if self.top is None:
            return x
        mask = (1.0 - keep[:, None, None, :]) * torch.finfo(torch.float32).min
        out: torch.Tensor = self.top(x, mask)
        return out

    def states(self, x: torch.Tensor, keep: torch.Tensor, shapes: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.head_input(x, keep), shapes], dim=-1)
        h = self.drop(self.gelu(self.inp(self.drop(x)))) * keep[..., None]
        c = self.gelu(self.conv(h.transpose(1, 2)).transpose(1, 2)) * keep[..., None]
        if self.att is None:
            return c
        q, k, v, o = self.att
        scores = q(c) @ k(c).transpose(1, 2) / float(np.sqrt(c.shape[2]))
        scores = scores.masked_fill(keep[:, None, :] == 0, torch.finfo(torch.float32).min)
        mixed = o(torch.softmax(scores, dim=-1) @ v(c))
        return self.gelu(c + self.drop(mixed)) * keep[..., None]

    def numpy_weights(self) -> dict[str, np.ndarray]:
        def n(t: torch.Tensor) -> np.ndarray:
            return t.detach().numpy().astype(np.float32)

        conv = n(self.conv.weight)  # (out, in, 3) → (3, in, out)
        return {
            "in_w": n(self.inp.weight).T, "in_b": n(self.inp.bias),
            "conv_w": conv.transpose(2, 1, 0).copy(), "conv_b": n(self.conv.bias),
            "tag_w": n(self.tag.weight).T, "tag_b": n(self.tag.bias),
            "span_w": n(self.span.weight).T, "span_b": n(self.span.bias),
            "attr_w": n(self.attr.weight).T, "attr_b": n(self.attr.bias),
            "kind_w": n(self.kind.weight).T, "kind_b": n(self.kind.bias),
            "neg_w": n(self.neg.weight).T, "neg_b": n(self.neg.bias),
            "subj_w": n(self.subj.weight).T, "subj_b": n(self.subj.bias),
            "user_vec": n(self.user),
            "pair_w1": n(self.pair1.weight).T, "pair_b1": n(self.pair1.bias),
            "pair_w2": n(self.pair2.weight).T, "pair_b2": n(self.pair2.bias),
            **self._attention_weights(),
        }  # fmt: skip

    def _attention_weights(self) -> dict[str, np.ndarray]:
        if self.att is None:
            return {}
        pairs = zip("qkvo", self.att, strict=True)
        return {f"att_{name}": layer.weight.detach().numpy().T.copy() for name, layer in pairs}


@dataclass
class SpanBatch:
    """The value spans, subject spans and (value, candidate subject) pairs of a batch, as index
    tensors into its rows and pieces."""

    rows: torch.Tensor
    first: torch.Tensor
    last: torch.Tensor
    attribute: torch.Tensor
    kind: torch.Tensor
    negated: torch.Tensor
    s_rows: torch.Tensor
    s_first: torch.Tensor
    s_last: torch.Tensor
    p_value: torch.Tensor
    p_subject: torch.Tensor  # -1: the speaker
    p_where: torch.Tensor
    p_target: torch.Tensor


def span_batch(rows: list[Example]) -> SpanBatch:
    v: list[tuple[int, int, int, int, int, float]] = []
    subj: list[tuple[int, int, int]] = []
    pairs: list[tuple[int, int, np.ndarray, float]] = []
    for j, e in enumerate(rows):
        base = len(subj)
        subj += [(j, a, b) for a, b in e.subjects]
        for item in e.values:
            index = len(v)
            v.append(
                (j, item["first"], item["last"], item["attribute"], item["kind"], item["negated"])
            )
            value = Span(0, 0, item["first"], item["last"], "v")
            pairs.append((index, -1, pair_features(value, None), item["subjects"][0]))
            for k, (a, b) in enumerate(e.subjects):
                where = pair_features(value, Span(0, 0, a, b, "s"))
                pairs.append((index, base + k, where, item["subjects"][k + 1]))

    def col(items: list[Any], i: int, dtype: torch.dtype = torch.long) -> torch.Tensor:
        return torch.tensor([x[i] for x in items], dtype=dtype)

    where = np.stack([p[2] for p in pairs]) if pairs else np.zeros((0, PAIR_FEATURES), np.float32)
    return SpanBatch(
        col(v, 0), col(v, 1), col(v, 2), col(v, 3), col(v, 4), col(v, 5, torch.float32),
        col(subj, 0), col(subj, 1), col(subj, 2),
        col(pairs, 0), col(pairs, 1), torch.from_numpy(where), col(pairs, 3, torch.float32),
    )  # fmt: skip


def _span_parts(
    c: torch.Tensor, rows: torch.Tensor, first: torch.Tensor, last: torch.Tensor
) -> list[torch.Tensor]:
    """Mean, first and last piece state of each span (rows index the batch)."""
    sums = torch.cat([torch.zeros_like(c[:, :1]), torch.cumsum(c, dim=1)], dim=1)
    count = (last - first + 1).unsqueeze(1).to(c.dtype)
    mean = (sums[rows, last + 1] - sums[rows, first]) / count
    return [mean, c[rows, first], c[rows, last]]


def span_loss(model: TorchHead, c: torch.Tensor, keep: torch.Tensor, b: SpanBatch) -> torch.Tensor:
    if len(b.rows) == 0:
        return torch.zeros(())
    lengths = keep.sum(dim=1).long()
    everything = (c * keep[..., None]).sum(dim=1) / keep.sum(dim=1, keepdim=True)
    zero = torch.zeros_like(c[b.rows, 0])
    before = torch.where((b.first > 0)[:, None], c[b.rows, (b.first - 1).clamp(min=0)], zero)
    after_index = (b.last + 1).clamp(max=c.shape[1] - 1)
    after = torch.where((b.last + 1 < lengths[b.rows])[:, None], c[b.rows, after_index], zero)
    parts = [*_span_parts(c, b.rows, b.first, b.last), everything[b.rows], before, after]
    z = model.drop(model.gelu(model.span(torch.cat(parts, dim=1))))
    f = torch.nn.functional
    loss = f.cross_entropy(model.attr(z), b.attribute, reduction="sum")
    loss = loss + f.cross_entropy(model.kind(z), b.kind, reduction="sum")
    loss = loss + f.binary_cross_entropy_with_logits(model.neg(z)[:, 0], b.negated, reduction="sum")
    if len(b.s_rows):
        u_spans = model.subj(torch.cat(_span_parts(c, b.s_rows, b.s_first, b.s_last), dim=1))
    else:
        u_spans = torch.zeros((0, z.shape[1]))
    u_all = torch.cat([model.user[None], u_spans])
    u = u_all[b.p_subject + 1]
    zp = z[b.p_value]
    logits = model.pair2(model.gelu(model.pair1(torch.cat([zp, u, zp * u, b.p_where], dim=1))))
    return loss + f.binary_cross_entropy_with_logits(logits[:, 0], b.p_target, reduction="sum")


def train(
    examples: list[Example],
    recipe: Recipe,
    attributes: Sequence[str],
    checkpoint: Callable[[int, TorchHead], None] | None = None,
) -> TorchHead:
    """Train the torch head; ``checkpoint(epoch, model)`` is called (in eval mode) after each
    epoch of :data:`CHECKPOINTS`."""
    torch.manual_seed(SEED)
    dim = examples[0].states.shape[1]
    top = top_layers() if recipe.input == TUNED else None
    model = TorchHead(
        dim, recipe.hidden, recipe.span, len(attributes), recipe.dropout, top, recipe.attention
    )
    head = [p for name, p in model.named_parameters() if not name.startswith("top.")]
    groups = [{"params": head, "lr": recipe.rate}]
    if top is not None:
        groups.append({"params": list(top.parameters()), "lr": TOP_RATE})
    optimiser = torch.optim.AdamW(groups, weight_decay=WEIGHT_DECAY)
    rng = np.random.default_rng(SEED)
    model.train()
    for epoch in range(recipe.epochs):
        order, total = rng.permutation(len(examples)), 0.0
        for start in range(0, len(order), BATCH):
            rows = [examples[i] for i in order[start : start + BATCH]]
            length = max(len(e.offsets) for e in rows)
            x = torch.zeros((len(rows), length, dim))
            keep = torch.zeros((len(rows), length))
            shapes = torch.zeros((len(rows), length, SHAPE_FEATURES))
            tags = torch.full((len(rows), len(LAYERS), length), IGNORE, dtype=torch.long)
            for j, e in enumerate(rows):
                n = len(e.offsets)
                x[j, :n] = torch.from_numpy(e.states)
                keep[j, :n] = 1.0
                shapes[j, :n] = torch.from_numpy(e.shapes)
                tags[j, :, :n] = torch.from_numpy(e.tags)
            c = model.states(x, keep, shapes)
            logits = model.tag(c).reshape(len(rows), length, len(LAYERS), 3)
            loss = torch.nn.functional.cross_entropy(
                logits.permute(0, 3, 2, 1), tags, ignore_index=IGNORE, reduction="sum"
            )
            loss = (loss + span_loss(model, c, keep, span_batch(rows))) / len(rows)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(rows)
        if epoch % 5 == 4 or epoch == recipe.epochs - 1:
            print(f"  epoch {epoch + 1}: loss {total / len(order):.4f}")
        if checkpoint is not None and (epoch + 1 in CHECKPOINTS or epoch + 1 == recipe.epochs):
            model.eval()
            checkpoint(epoch + 1, model)
            model.train()
    model.eval()
    return model


def to_numpy(
    model: TorchHead, recipe: Recipe, attributes: Sequence[str], extra: dict[str, Any]
) -> ReaderHead:
    meta = {
        "format": HEAD_FORMAT,
        "input": recipe.input,
        "attributes": list(attributes),
        "kinds": list(KINDS),
        "recipe": recipe.__dict__,
        "shapes": True,
        **extra,
    }
    return ReaderHead(model.numpy_weights(), meta)


def head_states(model: TorchHead, e: Example) -> np.ndarray:
    """The states the numpy head reads for ``e`` (through the fp32 tuned top, if any)."""
    if model.top is None:
        return e.states
    with torch.no_grad():
        x = torch.from_numpy(e.states)[None]
        out: np.ndarray = model.head_input(x, torch.ones((1, x.shape[1])))[0].numpy()
        return out


def score(
    head: ReaderHead,
    slots: Slots,
    examples: list[Example],
    states: Callable[[Example], np.ndarray],
    least: float | None = None,
) -> ReaderScore:
    """The reader's score on ``examples``; ``least``: keep facts of this confidence (default:
    the head's own)."""
    reader = FactReader(head, slots)
    least = reader.min_confidence if least is None else least
    result = ReaderScore()
    for e in examples:
        read = reader.read_all(e.turn.text, states(e), e.offsets)
        result.add([f for f in read if f.confidence >= least], e.turn.facts)
    return result


def check_twin(model: TorchHead, head: ReaderHead, examples: list[Example]) -> None:
    """The numpy head must give the torch module's piece states and attribute probabilities
    (on the annotated value spans of the first lines)."""
    sample = [e for e in examples if e.values][:50]
    with torch.no_grad():
        for e in sample:
            n = len(e.offsets)
            keep = torch.ones((1, n))
            c = model.states(
                torch.from_numpy(e.states)[None], keep, torch.from_numpy(e.shapes)[None]
            )
            batch = span_batch([e])
            ours = head.states(np.concatenate([head_states(model, e), e.shapes], axis=1))
            if not np.allclose(c[0].numpy(), ours, atol=1e-3):
                raise SystemExit("the numpy head's piece states differ from the torch module's")
            everything = c.mean(dim=1)[0]
            for i, item in enumerate(e.values):
                span = Span(0, 0, item["first"], item["last"], "v")
                z_np = head.span_vector(ours, span)
                got = z_np @ head.w["attr_w"] + head.w["attr_b"]
                first, last = batch.first[i : i + 1], batch.last[i : i + 1]
                parts = _span_parts(c, batch.rows[i : i + 1], first, last)
                before, after = c[0, first - 1], c[0, last + 1]
                z = model.gelu(model.span(torch.cat([*parts, everything[None], before, after], 1)))
                if not np.allclose(model.attr(z)[0].numpy(), got, atol=1e-3):
                    raise SystemExit("the numpy head's attributes differ from the torch module's")


FOLDS = 2


def writer(e: Example) -> str:
    """The writer pass a line comes from: its id's prefix ("fam-12", "fam-p3/1" → "fam")."""
    return e.turn.id.split("-", 1)[0]


def folds(examples: list[Example]) -> list[list[int]]:
    """Held-out folds of whole writer passes: a fold's lines were written by passes none of
    the training lines come from (the dev split's own condition)."""
    writers = sorted({writer(e) for e in examples})
    return [
        [i for i, e in enumerate(examples) if writers.index(writer(e)) % FOLDS == k]
        for k in range(FOLDS)
    ]


def report(name: str, s: ReaderScore, precision: bool = False) -> str:
    cells = " | ".join(f"{s.prf(level)[2]:.3f}" for level in ("value", "fact", "full"))
    if precision:
        p, r, _ = s.prf("fact")
        cells += f" | {p:.3f} | {r:.3f}"
    return f"| {name} | {cells} |"


def _score_into(
    totals: dict[tuple[int, float, float], ReaderScore],
    recipe: Recipe,
    attributes: Sequence[str],
    slots: Slots,
    test: list[Example],
    epochs: int,
    model: TorchHead,
) -> None:
    """Add the held-out ``test`` lines' scores after ``epochs`` (at each least confidence of
    :data:`LEAST_CONFIDENCES`) to ``totals``."""
    states = {id(e): head_states(model, e) for e in test}
    for second in SECOND_SUBJECTS:
        head = to_numpy(model, recipe, attributes, {"second_subject": second})
        for least in LEAST_CONFIDENCES:
            fold = score(head, slots, test, lambda e: states[id(e)], least)
            totals[(epochs, least, second)].merge(fold)


def select(
    encoder: Encoder,
    turns: list[LabelledTurn],
    slots: Slots,
    only: str | None,
    numbers: set[int] | None = None,
) -> int:
    attributes = [*slots.inventory.names, OTHER]
    cache: dict[str, list[Example]] = {}
    rows: list[str] = []
    for number, recipe in enumerate(CANDIDATES):
        if (only is not None and recipe.input != only) or (numbers and number not in numbers):
            continue
        if recipe.input not in cache:
            feats = featurize(encoder, turns, recipe.input)
            cache[recipe.input] = [
                make_example(t, s, o, attributes) for t, (s, o) in zip(turns, feats, strict=True)
            ]
        examples = cache[recipe.input]
        ends = sorted({e for e in CHECKPOINTS if e < recipe.epochs} | {recipe.epochs})
        totals = {
            (epochs, least, second): ReaderScore()
            for epochs in ends
            for least in LEAST_CONFIDENCES
            for second in SECOND_SUBJECTS
        }
        for held in folds(examples):
            held_set = set(held)
            kept = [e for i, e in enumerate(examples) if i not in held_set]
            test = [examples[i] for i in held]

            scored = functools.partial(_score_into, totals, recipe, attributes, slots, test)
            train(kept, recipe, attributes, scored)
        for (epochs, least, second), total in totals.items():
            name = f"{recipe.input}{' +att' if recipe.attention else ''} h{recipe.hidden}"
            label = f"{name} drop {recipe.dropout} epochs {epochs} least {least} second {second}"
            rows.append(report(label, total, precision=True))
            print(rows[-1], flush=True)
            print("   kind confusion (gold, read):", dict(total.kinds.most_common()), flush=True)
    print("| recipe | value F1 | fact F1 | full F1 | fact P | fact R |\n|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


def export_top(top: torch.nn.Module, staged: Path) -> Path:
    """Export the tuned top (no mask: one unpadded text per call) and quantize it int8."""
    fp32 = staged / "fact-top-fp32.onnx"
    with torch.no_grad():
        torch.onnx.export(
            top,
            (torch.zeros((1, 8, 384)),),
            str(fp32),
            input_names=[TRUNK_OUTPUT],
            output_names=[READING_OUTPUT],
            dynamic_axes={n: {0: "batch", 1: "sequence"} for n in (TRUNK_OUTPUT, READING_OUTPUT)},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    target = staged / FACT_TOP_FILE
    quantize_dynamic(str(fp32), str(target), per_channel=True, weight_type=QuantType.QInt8)
    return target


def top_agreement(top: torch.nn.Module, path: Path, examples: list[Example]) -> float:
    """The least cosine of the int8 top's mean-pooled states to the fp32 top's."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    least = 1.0
    for e in examples:
        with torch.no_grad():
            expected = top(torch.from_numpy(e.states)[None], None)[0].mean(dim=0).numpy()
        (got,) = session.run([READING_OUTPUT], {TRUNK_OUTPUT: e.states[None]})
        pooled = got[0].mean(axis=0)
        cosine = float(pooled @ expected / (np.linalg.norm(pooled) * np.linalg.norm(expected)))
        least = min(least, cosine)
    return least


def build(out: Path, encoder: Encoder, turns: list[LabelledTurn], slots: Slots) -> int:
    attributes = [*slots.inventory.names, OTHER]
    recipe = CHOICE
    feats = featurize(encoder, turns, recipe.input)
    examples = [make_example(t, s, o, attributes) for t, (s, o) in zip(turns, feats, strict=True)]
    model = train(examples, recipe, attributes)
    head = to_numpy(
        model, recipe, attributes, {"lines": len(examples), "min_confidence": MIN_CONFIDENCE}
    )
    check_twin(model, head, examples)
    section: dict[str, Any] = {
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **build_inputs(out),
        "recipe": recipe.__dict__,
        "lines": len(examples),
    }
    (out / FACT_TOP_FILE).unlink(missing_ok=True)
    if model.top is not None:
        with tempfile.TemporaryDirectory(prefix="memoryd-fact-top-") as tmp:
            staged = export_top(model.top, Path(tmp))
            least = top_agreement(model.top, staged, examples[:64])
            print(f"  int8 vs fp32 reader states: cosine min {least:.4f}")
            if least < MIN_COSINE:
                print(f"REFUSED: cosine {least:.4f} < {MIN_COSINE}; {out} has no fact reader")
                return 1
            shutil.move(staged, out / FACT_TOP_FILE)
        section["top"] = {"name": FACT_TOP_FILE, "sha256": sha256_file(out / FACT_TOP_FILE)}
        section["agreement"] = {"cosine_min": round(least, 5), "threshold": MIN_COSINE}
    head.save(out / HEAD_FILE)
    section["file"] = {"name": HEAD_FILE, "sha256": sha256_file(out / HEAD_FILE)}
    runtime = Encoder(out, verify=False)  # the int8 path the daemon reads with
    try:
        fit = score(head, slots, examples, lambda e: runtime.reading(e.turn.text)[0])
    finally:
        runtime.close()
    print(report("training lines, as the daemon reads them (fit)", fit))
    section["fit_f1"] = {level: round(fit.prf(level)[2], 4) for level in ("value", "fact", "full")}
    write_section(out, section)
    build_cache.store(out, CACHE_KIND, entry_key(build_inputs(out)), section, built_files(section))
    print(f"wrote {out / HEAD_FILE} and the fact_reader section of {out / MANIFEST_FILE}")
    return 0


def build_inputs(out: Path) -> dict[str, str]:
    """The hashes of what the reader is built from: recipe, training lines, inventory, encoder."""
    return {
        "recipe_sha256": sha256_file(Path(__file__)),
        "corpus_sha256": corpus_sha256(sorted((out / CORPUS_DIR / "train").glob("*.jsonl"))),
        "inventory_sha256": sha256_file(out / INVENTORY_FILE),
        "encoder_sha256": sha256_file(out / MODEL_FILE),
    }


def built_files(section: dict[str, Any]) -> list[str]:
    return [section["file"]["name"], *([section["top"]["name"]] if "top" in section else [])]


def write_section(out: Path, section: dict[str, Any]) -> None:
    manifest_path = out / MANIFEST_FILE
    manifest = json.loads(manifest_path.read_text())
    manifest["fact_reader"] = section
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")


def restore_cached(out: Path) -> bool:
    """Take a reader built before from these same inputs out of the build cache."""
    section = build_cache.restore(out, CACHE_KIND, entry_key(build_inputs(out)))
    if section is None:
        return False
    if "top" not in section:
        (out / FACT_TOP_FILE).unlink(missing_ok=True)
    write_section(out, section)
    return is_up_to_date(out)


def is_up_to_date(out: Path) -> bool:
    """Whether the manifest names this recipe, these training lines, this inventory and
    encoder, and the files are intact."""
    manifest = (
        json.loads((out / MANIFEST_FILE).read_text()) if (out / MANIFEST_FILE).is_file() else {}
    )
    section = manifest.get("fact_reader")
    if section is None or not (out / HEAD_FILE).is_file():
        return False
    top = section.get("top")
    return (
        section.get("recipe_sha256") == sha256_file(Path(__file__))
        and section.get("corpus_sha256")
        == corpus_sha256(sorted((out / CORPUS_DIR / "train").glob("*.jsonl")))
        and section.get("inventory_sha256") == sha256_file(out / INVENTORY_FILE)
        and section.get("encoder_sha256") == sha256_file(out / MODEL_FILE)
        and section["file"]["sha256"] == sha256_file(out / HEAD_FILE)
        and (
            top is None
            or (
                (out / FACT_TOP_FILE).is_file()
                and top["sha256"] == sha256_file(out / FACT_TOP_FILE)
            )
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "models", help="model directory")
    parser.add_argument("--select", action="store_true", help="print the candidates' CV table")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    parser.add_argument("--only", help="with --select: only the candidates of this input")
    parser.add_argument(
        "--candidates", help="with --select: the candidates' numbers (from 0), comma-separated"
    )
    parser.add_argument("--force", action="store_true", help="retrain even if up to date")
    args = parser.parse_args(argv)
    if not (args.select or args.force) and is_up_to_date(args.out):
        print(f"{args.out}: the fact reader is up to date")
        return 0
    if not (args.select or args.force) and restore_cached(args.out):
        return 0
    torch.set_num_threads(args.threads)
    inventory = load_inventory(args.out / INVENTORY_FILE)
    slots = Slots(inventory)
    turns = training_turns(args.out / CORPUS_DIR, inventory)
    print(f"{len(turns)} training lines, {sum(len(t.facts) for t in turns)} facts")
    encoder = Encoder(args.out, verify=False)
    try:
        if args.select:
            numbers = {int(n) for n in args.candidates.split(",")} if args.candidates else None
            return select(encoder, turns, slots, args.only, numbers)
        return build(args.out, encoder, turns, slots)
    finally:
        encoder.close()


if __name__ == "__main__":
    sys.exit(main())
