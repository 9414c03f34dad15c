"""Sentence encoder: all-MiniLM-L6-v2 exported to ONNX, int8, run with onnxruntime.

The model directory is what ``scripts/export_models.py`` and ``scripts/tune_router_layers.py``
build: the quantized ONNX graph, the router's tuned top layers (a second, small graph), the
tokenizer and a ``manifest.json`` with the files' sha256. The graphs output token states; mean
pooling and L2 normalisation happen here, matching sentence-transformers' pipeline for this model.

Two vectors come from one pass. The encoder's graph also outputs its trunk (the token states
after its first layers); ``embed`` pools the last layer, the untouched sentence embedding that
retrieval and entity resolution use; ``embed_routed`` also runs the trunk through the top
layers tuned for routing and pools those, the vector the router's head reads.

One text per call, always. With dynamic int8 quantisation the activations are quantised with a
scale computed over the whole input tensor, so a sentence embedded in a batch depends on its
batch-mates (and on their padding). Embedding texts alone keeps a vector reproducible from its
text, which is what lets ``memoryd rebuild`` recompute exactly the journaled vectors.

    encoder = Encoder(Path("models"))
    vec = encoder.embed("I'm allergic to ibuprofen")   # float32, shape (384,), unit norm
    vec, routing = encoder.embed_routed("Remind me at 5")  # the same vec, and the router's
    encoder.close()

Runtime dependencies are onnxruntime, tokenizers and numpy only: this module must never import
torch or transformers (a test checks it).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from memoryd.errors import ClosedError, ModelMissingError

__all__ = [
    "FACT_TOP_FILE",
    "MANIFEST_FILE",
    "MAX_TOKENS",
    "MODEL_FILE",
    "READING_OUTPUT",
    "ROUTER_TOP_FILE",
    "ROUTING_OUTPUT",
    "TOKENIZER_FILE",
    "TRUNK_OUTPUT",
    "Encoded",
    "Encoder",
    "load_tokenizer",
    "model_inputs",
    "sha256_file",
]

logger = logging.getLogger(__name__)

MODEL_FILE = "minilm-l6-v2-int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"
ROUTER_TOP_FILE = "router-top-int8.onnx"
TRUNK_OUTPUT = "trunk_state"
"""The encoder graph's second output and the router top's input."""
ROUTING_OUTPUT = "routing_state"
FACT_TOP_FILE = "fact-top-int8.onnx"
"""The fact reader's tuned copy of the top layers (``scripts/train_fact_reader.py``), when its
recipe reads one; absent when the reader reads the last layer."""
READING_OUTPUT = "reading_state"
MAX_TOKENS = 256
"""Longer texts are truncated, as sentence-transformers does for this model (max_seq_length)."""


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise ModelMissingError(str(path), what)
    return path


def _verify_models(model_path: Path, top_path: Path, manifest_path: Path) -> None:
    """Check both ONNX files against the sha256 the build recorded in the manifest."""
    manifest = json.loads(_require(manifest_path, "model manifest").read_text())
    layers = manifest.get("router_layers")
    if layers is None:
        raise ModelMissingError(
            str(manifest_path), "manifest with a router_layers section (run `make models`)"
        )
    for path, expected, what in (
        (model_path, manifest["files"][MODEL_FILE]["sha256"], "ONNX encoder"),
        (top_path, layers["file"]["sha256"], "ONNX router layers"),
    ):
        if sha256_file(path) != expected:
            raise ModelMissingError(
                str(path), f"{what} with the sha256 {expected} (from {MANIFEST_FILE})"
            )


def _verify_fact_top(path: Path, manifest_path: Path) -> None:
    """Check the fact reader's top layers against the sha256 its build recorded."""
    manifest = json.loads(_require(manifest_path, "model manifest").read_text())
    expected = (manifest.get("fact_reader") or {}).get("top", {}).get("sha256")
    if expected is None or sha256_file(path) != expected:
        raise ModelMissingError(str(path), f"fact reader layers recorded in {MANIFEST_FILE}")


def load_tokenizer(path: Path) -> Tokenizer:
    """Load the tokenizer set up for single texts: truncated to MAX_TOKENS, never padded."""
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return tokenizer


def model_inputs(tokenizer: Tokenizer, text: str) -> dict[str, np.ndarray]:
    """The encoder's inputs for one text, a batch of one (as the model build feeds it too)."""
    return _inputs(tokenizer.encode(text))


def _inputs(encoding: Encoding) -> dict[str, np.ndarray]:
    return {
        "input_ids": np.array([encoding.ids], dtype=np.int64),
        "attention_mask": np.array([encoding.attention_mask], dtype=np.int64),
        "token_type_ids": np.array([encoding.type_ids], dtype=np.int64),
    }


def _open_session(path: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class Encoded:
    """What one pass of the encoder gives for a text (:meth:`Encoder.encode`): the embedding,
    the last layer's and the trunk's token states ``(1, pieces, 384)`` (the router's and the
    fact reader's top layers read the trunk: :meth:`Encoder.routing`, :meth:`Encoder.read`)
    and each piece's characters."""

    embedding: np.ndarray
    states: np.ndarray
    trunk: np.ndarray
    offsets: list[tuple[int, int]]


class Encoder:
    """Embeds one text at a time into a unit-norm 384-d float32 vector.

    Concurrent ``embed`` calls from several threads are safe (onnxruntime sessions and
    tokenizers are); ``close`` must not race with them.
    """

    dim = 384

    def __init__(self, model_dir: Path, threads: int = 1, verify: bool = True) -> None:
        """Open the model built into ``model_dir``.

        Args:
            model_dir: directory holding ``minilm-l6-v2-int8.onnx``, ``router-top-int8.onnx``,
                ``tokenizer.json`` and (when ``verify``) ``manifest.json``.
            threads: onnxruntime intra-op threads for one ``embed`` call. 1 keeps latency
                steady under load and leaves the other cores to concurrent calls; more
                threads only pay off for long texts on an idle machine.
            verify: check the ONNX files' sha256 against the manifest (costs ~60 ms). Without
                it (the build's own checks) the router layers may be missing, and only
                ``embed_routed`` then raises ``ModelMissingError``.

        Raises:
            ModelMissingError: a file is missing (the message names it), or the ONNX file does
                not match the manifest.
        """
        model_dir = Path(model_dir)
        model_path = _require(model_dir / MODEL_FILE, "ONNX encoder")
        top_path = model_dir / ROUTER_TOP_FILE
        tokenizer_path = _require(model_dir / TOKENIZER_FILE, "encoder tokenizer")
        if verify:
            _verify_models(
                model_path, _require(top_path, "ONNX router layers"), model_dir / MANIFEST_FILE
            )
        self._tokenizer = load_tokenizer(tokenizer_path)
        self._top_path = top_path
        self._session: ort.InferenceSession | None = _open_session(model_path, threads)
        self._top: ort.InferenceSession | None = (
            _open_session(top_path, threads) if top_path.is_file() else None
        )
        fact_top = model_dir / FACT_TOP_FILE
        if verify and fact_top.is_file():
            _verify_fact_top(fact_top, model_dir / MANIFEST_FILE)
        self._fact_top: ort.InferenceSession | None = (
            _open_session(fact_top, threads) if fact_top.is_file() else None
        )
        logger.info("encoder loaded from %s (threads=%d)", model_path, threads)

    @property
    def reads_tuned(self) -> bool:
        """Whether the fact reader's states come from its own tuned top layers (else the
        encoder's last layer)."""
        return self._fact_top is not None

    def embed(self, text: str) -> np.ndarray:
        """Return the embedding of ``text``: float32, shape ``(384,)``, L2 norm 1."""
        (states,) = self._run(text, ["last_hidden_state"])
        return _pool(states)

    def embed_routed(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The embedding of ``text`` (as :meth:`embed` gives it) and its routing vector, the
        router's tuned top layers over the same trunk; both float32 ``(384,)``, unit norm."""
        states, trunk = self._run(text, ["last_hidden_state", TRUNK_OUTPUT])
        top = self._top
        if top is None:
            raise ModelMissingError(str(self._top_path), "ONNX router layers")
        (routing,) = top.run([ROUTING_OUTPUT], {TRUNK_OUTPUT: trunk})
        return _pool(states), _pool(routing)

    def trunk(self, text: str) -> np.ndarray:
        """The token states after the encoder's first layers, ``(1, tokens, 384)``: what the
        router's top layers read (``scripts/tune_router_layers.py`` trains them on these)."""
        (trunk,) = self._run(text, [TRUNK_OUTPUT])
        return trunk

    def encode(self, text: str) -> Encoded:
        """One pass of the encoder over ``text`` (what the router's and the fact reader's top
        layers then read)."""
        session = self._session
        if session is None:
            raise ClosedError("encoder")
        encoding = self._tokenizer.encode(text)
        states, trunk = session.run(["last_hidden_state", TRUNK_OUTPUT], _inputs(encoding))
        return Encoded(_pool(states), states, trunk, list(encoding.offsets))

    def routing(self, encoded: Encoded) -> np.ndarray:
        """The routing vector of an encoded text: the router's tuned top layers over its
        trunk, pooled; float32 ``(384,)``, unit norm."""
        top = self._top
        if top is None:
            raise ModelMissingError(str(self._top_path), "ONNX router layers")
        (routing,) = top.run([ROUTING_OUTPUT], {TRUNK_OUTPUT: encoded.trunk})
        return _pool(routing)

    def read(self, encoded: Encoded) -> np.ndarray:
        """The token states the fact reader reads of an encoded text, ``(pieces, 384)``: its
        own tuned top layers over the trunk (else the encoder's last layer)."""
        fact_top = self._fact_top
        if fact_top is None:
            out: np.ndarray = encoded.states[0]
            return out
        (reading,) = fact_top.run([READING_OUTPUT], {TRUNK_OUTPUT: encoded.trunk})
        tuned: np.ndarray = reading[0]
        return tuned

    def reading(self, text: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """What the fact reader reads of ``text`` (:meth:`read`) and the pieces' character
        offsets (special pieces: ``(0, 0)``)."""
        encoded = self.encode(text)
        return self.read(encoded), encoded.offsets

    def last_layer(self, text: str) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """The last layer's token states of ``text``, ``(pieces, 384)``, and the pieces'
        characters (what the fact reader's training reads when its recipe has no top layers
        of its own)."""
        session = self._session
        if session is None:
            raise ClosedError("encoder")
        encoding = self._tokenizer.encode(text)
        (states,) = session.run(["last_hidden_state"], _inputs(encoding))
        return states[0], list(encoding.offsets)

    def routing_states(self, text: str) -> np.ndarray:
        """The router top's token states of ``text``, ``(pieces, 384)``."""
        top = self._top
        if top is None:
            raise ModelMissingError(str(self._top_path), "ONNX router layers")
        (routing,) = top.run([ROUTING_OUTPUT], {TRUNK_OUTPUT: self.trunk(text)})
        states: np.ndarray = routing[0]
        return states

    def routing_vector(self, text: str) -> np.ndarray:
        """The routing vector of ``text`` alone (the second vector of :meth:`embed_routed`)."""
        return self.embed_routed(text)[1]

    def token_count(self, text: str) -> int:
        """Tokens the encoder reads of ``text`` (at most MAX_TOKENS: longer texts are cut)."""
        return len(self._tokenizer.encode(text).ids)

    def _run(self, text: str, outputs: list[str]) -> list[np.ndarray]:
        session = self._session
        if session is None:
            raise ClosedError("encoder")
        result: list[np.ndarray] = session.run(outputs, model_inputs(self._tokenizer, text))
        return result

    def close(self) -> None:
        """Release the onnxruntime sessions; later calls raise ``ClosedError``."""
        self._session = None
        self._top = None
        self._fact_top = None


def _pool(states: np.ndarray) -> np.ndarray:
    """Mean over the one text's tokens (no padding, so every token counts), L2-normalised."""
    pooled: np.ndarray = states[0].mean(axis=0, dtype=np.float32)
    return pooled / max(float(np.linalg.norm(pooled)), 1e-12)
