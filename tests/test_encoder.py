"""The ONNX int8 encoder, on the real built model (``make models`` first)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from memoryd.encoder import MANIFEST_FILE, MODEL_FILE, ROUTER_TOP_FILE, TOKENIZER_FILE, Encoder
from memoryd.errors import ClosedError, ModelMissingError

REPO = Path(__file__).resolve().parents[1]
MODEL_DIR = Path(os.environ.get("MEMORYD_MODEL_DIR", REPO / "models"))


def linked_model_dir(tmp_path: Path, names: tuple[str, ...]) -> Path:
    """A model directory holding symlinks to some of the real artifacts."""
    target = tmp_path / "model"
    target.mkdir()
    for name in names:
        (target / name).symlink_to((MODEL_DIR / name).resolve())
    return target


def test_embedding_is_a_unit_float32_vector(encoder: Encoder) -> None:
    vec = encoder.embed("I'm allergic to ibuprofen.")
    assert vec.shape == (Encoder.dim,) == (384,)
    assert vec.dtype == np.float32
    assert np.linalg.norm(vec) == pytest.approx(1.0, abs=1e-5)


def test_embedding_is_deterministic_across_calls_and_instances(encoder: Encoder) -> None:
    text = "We went hiking last weekend and it rained the whole time."
    first = encoder.embed(text)
    assert np.array_equal(first, encoder.embed(text))
    other = Encoder(MODEL_DIR)
    try:
        assert np.array_equal(first, other.embed(text))
    finally:
        other.close()


def test_similar_sentences_are_closer_than_unrelated_ones(encoder: Encoder) -> None:
    anchor = encoder.embed("My sister lives in Oslo.")
    similar = encoder.embed("My sister has an apartment in Oslo, Norway.")
    unrelated = encoder.embed("Preheat the oven to 200 degrees before baking the bread.")
    assert float(anchor @ similar) > float(anchor @ unrelated) + 0.3


def test_text_beyond_256_tokens_is_truncated(encoder: Encoder) -> None:
    head = "word " * 300
    assert np.array_equal(encoder.embed(head), encoder.embed(head + "a different ending"))


def test_concurrent_embeds_match_serial_ones(encoder: Encoder) -> None:
    texts = [f"Reminder number {i}: water the plants on day {i}." for i in range(24)]
    serial = [encoder.embed(t) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(encoder.embed, texts))
    assert all(np.array_equal(a, b) for a, b in zip(serial, parallel, strict=True))


def test_empty_text_still_embeds(encoder: Encoder) -> None:
    assert np.linalg.norm(encoder.embed("")) == pytest.approx(1.0, abs=1e-5)


def test_missing_model_dir_raises_model_missing(tmp_path: Path) -> None:
    with pytest.raises(ModelMissingError, match=MODEL_FILE) as info:
        Encoder(tmp_path / "nowhere")
    assert info.value.path == str(tmp_path / "nowhere" / MODEL_FILE)


def test_missing_tokenizer_is_named(tmp_path: Path) -> None:
    with pytest.raises(ModelMissingError, match=TOKENIZER_FILE):
        Encoder(linked_model_dir(tmp_path, (MODEL_FILE, MANIFEST_FILE)))


def test_missing_manifest_is_named_only_when_verifying(tmp_path: Path) -> None:
    model_dir = linked_model_dir(tmp_path, (MODEL_FILE, ROUTER_TOP_FILE, TOKENIZER_FILE))
    with pytest.raises(ModelMissingError, match=MANIFEST_FILE):
        Encoder(model_dir)
    Encoder(model_dir, verify=False).close()


@pytest.mark.parametrize(
    ("section", "file"), [("files", MODEL_FILE), ("router_layers", ROUTER_TOP_FILE)]
)
def test_model_not_matching_manifest_is_refused(tmp_path: Path, section: str, file: str) -> None:
    model_dir = linked_model_dir(tmp_path, (MODEL_FILE, ROUTER_TOP_FILE, TOKENIZER_FILE))
    manifest = json.loads((MODEL_DIR / MANIFEST_FILE).read_text())
    entry = manifest["files"][MODEL_FILE] if section == "files" else manifest[section]["file"]
    entry["sha256"] = "0" * 64
    (model_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(ModelMissingError, match=f"sha256.*{file}"):
        Encoder(model_dir)


def test_missing_router_layers_are_named_when_verifying(tmp_path: Path) -> None:
    model_dir = linked_model_dir(tmp_path, (MODEL_FILE, TOKENIZER_FILE, MANIFEST_FILE))
    with pytest.raises(ModelMissingError, match=ROUTER_TOP_FILE):
        Encoder(model_dir)
    # The build's own checks run without them: embedding works, routing names the file.
    encoder = Encoder(model_dir, verify=False)
    try:
        assert np.array_equal(encoder.embed("hello"), Encoder(MODEL_DIR).embed("hello"))
        with pytest.raises(ModelMissingError, match=ROUTER_TOP_FILE):
            encoder.embed_routed("hello")
    finally:
        encoder.close()


def test_manifest_without_router_layers_is_refused(tmp_path: Path) -> None:
    model_dir = linked_model_dir(tmp_path, (MODEL_FILE, ROUTER_TOP_FILE, TOKENIZER_FILE))
    manifest = json.loads((MODEL_DIR / MANIFEST_FILE).read_text())
    del manifest["router_layers"]
    (model_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(ModelMissingError, match="router_layers"):
        Encoder(model_dir)


def test_embed_routed_gives_the_embedding_and_a_routing_vector(encoder: Encoder) -> None:
    text = "Don't let me forget the parent-teacher meeting on Thursday at 6."
    vec, routing = encoder.embed_routed(text)
    assert np.array_equal(vec, encoder.embed(text))
    assert routing.shape == (384,) and routing.dtype == np.float32
    assert np.linalg.norm(routing) == pytest.approx(1.0, abs=1e-5)
    assert np.array_equal(routing, encoder.routing_vector(text))
    # The tuned top layers move the vector: it is not the embedding again.
    assert float(vec @ routing) < 0.99


def test_routing_vectors_weigh_the_kind_of_turn_more_than_embeddings_do(
    encoder: Encoder,
) -> None:
    """Two reminders about different things against a reminder and a statement about the same
    thing: the tuned top layers move the first pair closer, relative to the second, than the
    untouched embedding has them."""
    remind = "remind me to water the tomatoes tonight"
    other_reminder = "don't let me forget to renew my passport by friday"
    statement = "I grow tomatoes on my balcony"

    def margin(vec: Callable[[str], np.ndarray]) -> float:
        return float(vec(remind) @ vec(other_reminder) - vec(remind) @ vec(statement))

    assert margin(encoder.routing_vector) > margin(encoder.embed) + 0.1


def test_closed_encoder_refuses_to_embed() -> None:
    encoder = Encoder(MODEL_DIR, verify=False)
    encoder.close()
    with pytest.raises(ClosedError):
        encoder.embed("hello")
    with pytest.raises(ClosedError):
        encoder.embed_routed("hello")


def test_runtime_import_pulls_in_neither_torch_nor_transformers() -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from memoryd.encoder import Encoder\n"
        f"Encoder(Path({str(MODEL_DIR)!r})).embed('hello there')\n"
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers')"
        " if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert result.stdout.strip() == "[]"


def test_one_pass_gives_the_embedding_the_routing_vector_and_the_reading(
    encoder: Encoder,
) -> None:
    text = "My sister Lena moved to Leeds in May."
    encoded = encoder.encode(text)
    vec, routing = encoder.embed_routed(text)
    reading, offsets = encoder.reading(text)
    np.testing.assert_allclose(encoded.embedding, vec, atol=1e-6)
    np.testing.assert_allclose(encoder.routing(encoded), routing, atol=1e-6)
    np.testing.assert_allclose(encoder.read(encoded), reading, atol=1e-6)
    assert encoded.offsets == offsets
    assert reading.shape == (len(offsets), encoder.dim)


@pytest.mark.parametrize("first", ["numpy", "memoryd"])
def test_blas_keeps_one_thread_whichever_is_imported_first(first: str) -> None:
    """The reader's head multiplies small matrices on the encoder workers: OpenBLAS threads
    would only fight them for the cores (batch ingest ran at half speed)."""
    second = "memoryd" if first == "numpy" else "numpy"
    code = (
        f"import {first}, {second}\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "[1]"


def test_an_explicit_blas_setting_wins() -> None:
    code = (
        "import numpy, memoryd\n"
        "from threadpoolctl import threadpool_info\n"
        "print(sorted({p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'}))"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "[2]"
