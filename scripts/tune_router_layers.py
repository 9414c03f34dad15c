"""Fine-tune the encoder's top layers for routing and build them as a second, small ONNX model.

Run inside the build venv after ``scripts/export_models.py``:

    .build-venv/bin/python scripts/tune_router_layers.py --out models

The encoder built by ``export_models.py`` also outputs ``trunk_state``, the token states after
its first ``TRUNK_LAYERS`` layers. This script trains a copy of the layers above the trunk, so
that the mean-pooled, L2-normalised output separates the five routing labels, and exports that
copy as ``router-top-int8.onnx`` (input ``trunk_state``, output ``routing_state``). At run time
a turn's text goes through the encoder once: retrieval keeps the untouched embedding, and the
router reads the same trunk through the tuned top (``Encoder.embed_routed``), which costs
``6 - TRUNK_LAYERS`` more layers, not a second encoder.

1. Read the routing corpus's training files and drop the held-out lines
   (:func:`memoryd.routing_corpus.is_held_out`): the head's calibration and every user's
   training rounds validate on them, so nothing before the head may see them either. The
   corpus's dev split is not read.
2. Run the built int8 encoder once over every line (one unpadded text per call, as the daemon
   does) and keep its ``trunk_state``: the tuned layers learn from exactly the states they get
   at run time. Only the top layers are trained, so this is done once.
3. Train the top layers and a linear probe (mean pooling, L2 norm, sigmoid per label, binary
   cross-entropy) for ``EPOCHS`` epochs, seeded, in batches padded with an attention mask. The
   probe is thrown away: the shipped head is trained afterwards by ``train_router.py`` on the
   routing vectors the runtime path gives.
4. Export the top to ONNX (legacy exporter, no mask: the daemon embeds one unpadded text per
   call), quantize it int8 dynamic per channel, and refuse the build when the int8 routing
   vectors fall below ``MIN_COSINE`` of the fp32 ones on the agreement sentences.
5. Record the file, its checksum and the recipe in the manifest's ``router_layers`` section.

Up to date when the manifest's section names this recipe, the same training lines and the
encoder it was tuned under, and the file is intact (``--force`` retunes).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
import onnxruntime
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from tqdm import tqdm

import build_cache
from build_cache import entry_key
from export_models import (
    AGREEMENT_SENTENCES,
    OPSET,
    SOURCE_PACKAGE,
    TRUNK_LAYERS,
    file_entry,
    locate_weights,
    read_manifest,
)
from memoryd.encoder import (
    MANIFEST_FILE,
    MODEL_FILE,
    ROUTER_TOP_FILE,
    ROUTING_OUTPUT,
    TRUNK_OUTPUT,
    Encoder,
    sha256_file,
)
from memoryd.models import LABELS
from memoryd.routing_corpus import corpus_sha256, is_held_out, load_lines, split_files, targets

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "models" / "router_corpus"
EPOCHS = 4
LEARNING_RATE = 1e-4
"""AdamW rate of the tuned layers (the probe's is ``PROBE_RATE``). 4 epochs at 1e-4 on the top
two layers raised held-out macro-F1 of a linear probe from 0.835 (the shipped head on the
untouched embedding) to 0.867 (docs/decisions.md, "Router top layers tuned for routing"); the
dev split was not used to choose."""
PROBE_RATE = 1e-2
BATCH = 32
WEIGHT_DECAY = 0.01
LOGIT_SCALE = 10.0
"""The probe reads unit vectors; without a scale its logits stay near 0 and it learns slowly."""
SEED = 0
MIN_COSINE = 0.98
CACHE_KIND = "router_layers"
"""The build cache's folder for tuned routing layers (scripts/build_cache.py)."""


class _Top(torch.nn.Module):
    """The encoder's layers above the trunk; ``mask`` is additive ([b, 1, 1, s]) or None."""

    def __init__(self, layers: torch.nn.ModuleList) -> None:
        super().__init__()
        self.layers = layers

    def forward(self, states: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        for layer in self.layers:
            out = layer(states, mask)
            # transformers < 4.58 (the build venv's, for optimum) returns a tuple, 5.x the tensor.
            states = out[0] if isinstance(out, tuple) else out
        return states


def _pooled(states: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean over the unpadded tokens, L2-normalised: the runtime pooling."""
    summed = (states * keep[..., None]).sum(dim=1) / keep.sum(dim=1, keepdim=True)
    return torch.nn.functional.normalize(summed, dim=-1)


def trunk_states(encoder: Encoder, texts: list[str]) -> list[Any]:
    """The built int8 encoder's trunk states of each text (``Encoder.trunk``, one unpadded text
    per call): exactly what the router's top layers read at run time."""
    return [torch.from_numpy(encoder.trunk(text)[0]) for text in tqdm(texts, desc="trunk")]


def _batch(states: list[Any], rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad the rows' states to one length; the 0/1 keep matrix marks real tokens."""
    length = max(states[i].shape[0] for i in rows)
    padded = torch.zeros((len(rows), length, states[0].shape[1]))
    keep = torch.zeros((len(rows), length))
    for j, i in enumerate(rows):
        padded[j, : states[i].shape[0]] = states[i]
        keep[j, : states[i].shape[0]] = 1.0
    return padded, keep


def train_top(top: _Top, states: list[Any], y: np.ndarray) -> list[float]:
    """Train ``top`` in place with a linear probe; returns the mean loss of each epoch."""
    torch.manual_seed(SEED)
    probe = torch.nn.Linear(states[0].shape[1], y.shape[1])
    optimiser = torch.optim.AdamW(
        [
            {"params": top.parameters(), "lr": LEARNING_RATE},
            {"params": probe.parameters(), "lr": PROBE_RATE},
        ],
        weight_decay=WEIGHT_DECAY,
    )
    targets_t = torch.from_numpy(y)
    order_rng = np.random.default_rng(SEED)
    losses = []
    top.train()
    for epoch in range(EPOCHS):
        order, total = order_rng.permutation(len(states)), 0.0
        for start in tqdm(range(0, len(order), BATCH), desc=f"epoch {epoch + 1}", unit="batch"):
            rows = order[start : start + BATCH]
            padded, keep = _batch(states, rows)
            mask = (1.0 - keep[:, None, None, :]) * torch.finfo(torch.float32).min
            logits = probe(_pooled(top(padded, mask), keep) * LOGIT_SCALE)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets_t[rows])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(rows)
        losses.append(total / len(order))
        print(f"  epoch {epoch + 1}: loss {losses[-1]:.4f}")
    top.eval()
    return losses


def export_top(top: _Top, staged: Path) -> Path:
    """Export ``top`` (no mask, one unpadded text per call) and quantize it int8."""
    fp32 = staged / "router-top-fp32.onnx"
    sample = torch.zeros((1, 8, 384))
    with torch.no_grad():
        torch.onnx.export(
            top,
            (sample,),
            str(fp32),
            input_names=[TRUNK_OUTPUT],
            output_names=[ROUTING_OUTPUT],
            dynamic_axes={
                name: {0: "batch", 1: "sequence"} for name in (TRUNK_OUTPUT, ROUTING_OUTPUT)
            },
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    target = staged / ROUTER_TOP_FILE
    quantize_dynamic(str(fp32), str(target), per_channel=True, weight_type=QuantType.QInt8)
    return target


def agreement(top: _Top, model: Path, encoder: Encoder) -> list[float]:
    """Cosine of the int8 top's pooled output vs the fp32 top's, on the same int8 trunk."""
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    cosines = []
    for states in trunk_states(encoder, list(AGREEMENT_SENTENCES)):
        with torch.no_grad():
            expected = top(states[None]).mean(dim=1)[0].numpy()
        (got,) = session.run([ROUTING_OUTPUT], {TRUNK_OUTPUT: states[None].numpy()})
        pooled = got[0].mean(axis=0)
        cosines.append(
            float(pooled @ expected / (np.linalg.norm(pooled) * np.linalg.norm(expected)))
        )
    return cosines


def build_inputs(out: Path, corpus: Path) -> dict[str, str]:
    """The hashes of what the layers are tuned from: recipe, training lines, encoder."""
    return {
        "recipe_sha256": sha256_file(Path(__file__)),
        "corpus_sha256": corpus_sha256(split_files(corpus, "train")),
        "encoder_sha256": sha256_file(out / MODEL_FILE),
    }


def is_up_to_date(out: Path, corpus: Path) -> bool:
    manifest = read_manifest(out)
    if manifest is None or "router_layers" not in manifest or not (out / MODEL_FILE).is_file():
        return False
    section = manifest["router_layers"]
    return (
        all(section.get(name) == value for name, value in build_inputs(out, corpus).items())
        and (out / ROUTER_TOP_FILE).is_file()
        and file_entry(out / ROUTER_TOP_FILE) == section["file"]
    )


def build(out: Path, corpus: Path) -> int:
    manifest = read_manifest(out)
    if manifest is None:
        print(f"{out}: no encoder manifest; run scripts/export_models.py first")
        return 1
    from transformers import AutoModel

    model_dir, version = locate_weights(SOURCE_PACKAGE)
    files = split_files(corpus, "train")
    records = [r for r in load_lines(files) if not is_held_out(r["id"])]
    print(f"tuning encoder layers {TRUNK_LAYERS + 1}-6 for routing on {len(records)} lines "
          f"(held-out lines and the dev split left out)")  # fmt: skip
    torch.set_num_threads(os.cpu_count() or 1)
    bert = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    encoder = Encoder(out, verify=False)
    try:
        states = trunk_states(encoder, [r["text"] for r in records])
        top = _Top(copy.deepcopy(bert.encoder.layer[TRUNK_LAYERS:]))
        losses = train_top(top, states, targets(records))
        with tempfile.TemporaryDirectory(prefix="memoryd-router-top-") as tmp:
            staged = export_top(top, Path(tmp))
            cosines = agreement(top, staged, encoder)
            print(f"  int8 vs fp32 routing vectors: cosine min {min(cosines):.4f}")
            if min(cosines) < MIN_COSINE:
                print(f"REFUSED: cosine {min(cosines):.4f} < {MIN_COSINE}; {out} unchanged")
                return 1
            shutil.move(staged, out / ROUTER_TOP_FILE)
    finally:
        encoder.close()
    manifest["router_layers"] = {
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "recipe_sha256": sha256_file(Path(__file__)),
        "source": {"package": SOURCE_PACKAGE, "version": version},
        "encoder_sha256": sha256_file(out / MODEL_FILE),
        "trunk_layers": TRUNK_LAYERS,
        "tuned_layers": 6 - TRUNK_LAYERS,
        "labels": [str(label) for label in LABELS],
        "corpus_sha256": corpus_sha256(files),
        "lines": len(records),
        "training": {
            "trunk": "the int8 encoder's trunk_state, one unpadded text per call",
            "epochs": EPOCHS,
            "learning_rate": LEARNING_RATE,
            "probe_rate": PROBE_RATE,
            "batch": BATCH,
            "weight_decay": WEIGHT_DECAY,
            "seed": SEED,
            "loss_by_epoch": [round(x, 5) for x in losses],
        },
        "quantization": "onnxruntime quantize_dynamic, per-channel QInt8",
        "agreement": {"cosine_min": round(min(cosines), 5), "threshold": MIN_COSINE},
        "file": file_entry(out / ROUTER_TOP_FILE),
    }
    write_section(out, manifest, manifest["router_layers"])
    key = entry_key(build_inputs(out, corpus))
    build_cache.store(out, CACHE_KIND, key, manifest["router_layers"], [ROUTER_TOP_FILE])
    print(f"wrote {out / ROUTER_TOP_FILE} and the router_layers section of {out / MANIFEST_FILE}")
    return 0


def write_section(out: Path, manifest: dict[str, Any], section: dict[str, Any]) -> None:
    manifest["router_layers"] = section
    manifest.pop("router", None)  # the head was trained on other vectors: retrain it
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")


def restore_cached(out: Path, corpus: Path) -> bool:
    """Take layers tuned before from these same inputs out of the build cache."""
    manifest = read_manifest(out)
    if manifest is None:
        return False
    section = build_cache.restore(out, CACHE_KIND, entry_key(build_inputs(out, corpus)))
    if section is None:
        return False
    write_section(out, manifest, section)
    return is_up_to_date(out, corpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("models"), help="model directory")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="corpus directory")
    parser.add_argument("--force", action="store_true", help="retune even if up to date")
    args = parser.parse_args(argv)
    if not args.force and is_up_to_date(args.out, args.corpus):
        print(f"{args.out}: routing layers are up to date")
        return 0
    if not args.force and restore_cached(args.out, args.corpus):
        return 0
    return build(args.out, args.corpus)


if __name__ == "__main__":
    sys.exit(main())
