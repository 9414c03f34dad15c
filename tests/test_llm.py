"""LLM layer: prompts, the factory, and both backends on a real model (Gemma 3 270M from PyPI).

The llamacpp backend runs the GGUF in-process; the openai backend talks to llama-cpp-python's own
OpenAI-compatible server, started here. Only the failure cases that no real server produces on
demand (broken answers, HTTP 500) use the scripted FakeChatServer.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memoryd.config import load_config
from memoryd.errors import (
    ClosedError,
    ConfigError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from memoryd.llm import LlamaCppLLM, OpenAICompatLLM, Prompt, make_llm
from memoryd.llm.prompts import (
    LABEL_NAMES,
    LABEL_SCHEMA,
    MAX_TURN_CHARS,
    label_prompt,
    parse_labels,
)
from memoryd.models import LABELS
from support.llm_fixtures import FakeChatServer, LlamaServer, chat_completion, free_port, gemma_gguf

REPO = Path(__file__).resolve().parents[1]

TURNS = (
    "Yesterday I went hiking with my brother Tom in the Alps.",
    "I'm vegetarian and I hate cilantro.",
    "To reset the router, hold the button for ten seconds, then wait for the blue light.",
    "Remind me to call the dentist tomorrow at 9.",
    "ok thanks!",
    "I finished the quarterly report and sent it to Maria.",
)

# The grammar forces this 50-word constant: 64 tokens cannot hold it (the answer is cut off), and
# writing them takes longer than a short timeout.
LONG_TEXT = " ".join(f"word{i}" for i in range(50))
LONG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"const": LONG_TEXT}},
    "required": ["text"],
    "additionalProperties": False,
}
LONG_PROMPT = Prompt(system="Write a list of words.", user="Go.")
# A small question for tests about the backend's machinery rather than about labelling.
YES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
YES_PROMPT = Prompt(system="Answer the question.", user="Is water wet?")


def assert_labels(obj: dict[str, Any]) -> None:
    assert list(Draft202012Validator(LABEL_SCHEMA).iter_errors(obj)) == [], obj
    assert parse_labels(obj)


# ------------------------------------------------------------------------------------ prompts


def test_label_names_are_the_router_labels():
    assert tuple(str(label) for label in LABELS) == LABEL_NAMES


def test_label_schema_is_a_strict_valid_schema():
    Draft202012Validator.check_schema(LABEL_SCHEMA)
    valid = Draft202012Validator(LABEL_SCHEMA)
    assert valid.is_valid({"labels": ["semantic", "working"]})
    for bad in (
        {},
        {"labels": []},
        {"labels": ["semantic", "semantic"]},
        {"labels": ["gossip"]},
        {"labels": list(LABEL_NAMES)},  # five: more than maxItems
        {"labels": ["working"], "why": "extra key"},
        ["working"],
    ):
        assert not valid.is_valid(bad), bad


def test_parse_labels_orders_labels_and_content_beats_fragmented():
    assert parse_labels({"labels": ["working", "episodic"]}) == ("episodic", "working")
    assert parse_labels({"labels": ["fragmented"]}) == ("fragmented",)
    assert parse_labels({"labels": ["fragmented", "semantic"]}) == ("semantic",)
    assert parse_labels({"labels": ["procedural", "fragmented", "working"]}) == (
        "procedural",
        "working",
    )
    for bad in ({"labels": []}, {"labels": ["nonsense"]}, {"label": "semantic"}):
        with pytest.raises(ValueError, match="not a labelling answer"):
            parse_labels(bad)


def test_label_prompt_defines_every_label_and_cuts_long_turns():
    prompt = label_prompt("My   cat is\ncalled Miso.")
    assert isinstance(prompt, Prompt)
    for name in LABEL_NAMES:
        assert f"- {name}:" in prompt.system
    assert prompt.user == "Turn: My cat is called Miso."

    long = label_prompt("word " * 5000)
    assert len(long.user) < MAX_TURN_CHARS + 20
    assert long.user.endswith("[...]")


# ------------------------------------------------------------------------------------ factory


def llm_config(tmp_path: Path, **llm: object):
    return load_config(None, {}, {"data_dir": tmp_path, **{f"llm.{k}": v for k, v in llm.items()}})


def test_make_llm_follows_the_backend_setting(tmp_path):
    assert make_llm(llm_config(tmp_path)) is None  # the default: no LLM, deferral off

    llm = make_llm(llm_config(tmp_path, backend="llamacpp", model_path="~/m.gguf", threads=1))
    assert isinstance(llm, LlamaCppLLM)
    assert llm.model_path == Path.home() / "m.gguf" and llm.threads == 1
    assert llm.name == "llamacpp:m.gguf" and not llm.loaded  # nothing loaded yet
    llm.close()

    llm = make_llm(
        llm_config(tmp_path, backend="openai", url="http://127.0.0.1:9/v1/", model="qwen")
    )
    assert isinstance(llm, OpenAICompatLLM)
    assert llm.url == "http://127.0.0.1:9/v1" and llm.name == "openai:qwen"
    llm.close()


def test_make_llm_rejects_incomplete_settings(tmp_path):
    with pytest.raises(ConfigError, match=r"llm\.model_path"):
        make_llm(llm_config(tmp_path, backend="llamacpp"))
    with pytest.raises(ConfigError, match=r"llm\.url"):
        make_llm(llm_config(tmp_path, backend="openai", url=""))
    with pytest.raises(ConfigError, match=r"llm\.backend"):
        config = llm_config(tmp_path)
        make_llm(dataclasses.replace(config, llm=dataclasses.replace(config.llm, backend="gpt")))
    with pytest.raises(ConfigError, match=r"llm\.backend"):
        llm_config(tmp_path, backend="gpt")


def test_makefile_builds_the_llama_cpp_python_that_pyproject_pins():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    made = re.search(r"^LLAMA_CPP_PYTHON := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert made is not None
    assert extras["llm"] == [made.group(1)]
    assert (
        made.group(1).replace("llama-cpp-python", "llama-cpp-python[server]") in (extras["llmtest"])
    )


def test_llm_package_imports_only_errors_and_the_config_type():
    for module in sorted((REPO / "daemon" / "memoryd" / "llm").glob("*.py")):
        allowed = {"memoryd.errors", "memoryd.llm", "memoryd.models"} | (
            {"memoryd.config"} if module.stem == "__init__" else set()  # the factory's Config
        )
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "memoryd":
                    assert ".".join(name.split(".")[:2]) in allowed, f"{module.name}: {name}"


def test_llama_cpp_is_imported_only_when_a_local_model_is_used():
    code = "import sys, memoryd.llm; print('llama_cpp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------- llamacpp


@pytest.fixture(scope="session")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = gemma_gguf(tmp_path_factory.mktemp("gguf"))
    yield path
    path.unlink()  # 253 MB: pytest keeps the last three base temp dirs


def gemma(path: Path, **kwargs: Any) -> LlamaCppLLM:
    """One thread: llama.cpp's threads wait for each other by spinning, and while other work
    shares the 2 cores, a 2-thread model answered 20x slower (20 s instead of 1 s a call)."""
    settings: dict[str, Any] = {
        "threads": 1,
        "context": 2048,
        "max_tokens": 64,
        "idle_release": 600.0,
        **kwargs,
    }
    return LlamaCppLLM(path, **settings)


@pytest.fixture(scope="module")
def local_llm(gguf: Path) -> Iterator[LlamaCppLLM]:
    llm = gemma(gguf)
    yield llm
    llm.close()


def test_llamacpp_answers_fit_the_schema(local_llm):
    for text in TURNS:
        assert_labels(local_llm.generate_json(label_prompt(text), LABEL_SCHEMA))


def test_llamacpp_serialises_concurrent_callers(local_llm):
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(lambda t: local_llm.generate_json(label_prompt(t), LABEL_SCHEMA), TURNS[:4])
        )
    for answer in answers:
        assert_labels(answer)


def test_llamacpp_timeouts_and_the_model_stays_usable(local_llm):
    with pytest.raises(LLMTimeoutError, match=r"no answer within 0\.001 s"):
        local_llm.generate_json(YES_PROMPT, YES_SCHEMA, timeout=0.001)
    # Time to start, not to finish: the stopping criterion ends the generation.
    with pytest.raises(LLMTimeoutError, match=r"no answer within 0\.2 s"):
        local_llm.generate_json(LONG_PROMPT, LONG_SCHEMA, timeout=0.2)
    assert local_llm.generate_json(YES_PROMPT, YES_SCHEMA)["ok"] in (True, False)


def test_llamacpp_cut_off_answer_is_an_output_error(local_llm):
    with pytest.raises(LLMOutputError, match="cut off at max_tokens=64") as err:
        local_llm.generate_json(LONG_PROMPT, LONG_SCHEMA)
    assert err.value.raw.startswith('{"text": "word0 word1')


def test_llamacpp_loads_lazily_and_unloads_when_idle(gguf):
    llm = gemma(gguf, idle_release=0.5)
    try:
        assert not llm.loaded
        assert llm.generate_json(YES_PROMPT, YES_SCHEMA)["ok"] in (True, False)
        assert llm.loaded
        deadline = time.monotonic() + 10
        while llm.loaded and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not llm.loaded, "the model was not released after idle_release"
        assert llm.generate_json(YES_PROMPT, YES_SCHEMA)["ok"] in (True, False)  # reloads
        assert llm.loaded
    finally:
        llm.close()
    assert not llm.loaded
    with pytest.raises(ClosedError):
        llm.generate_json(YES_PROMPT, YES_SCHEMA)


def test_llamacpp_missing_or_broken_model_is_unavailable(tmp_path):
    missing = tmp_path / "absent.gguf"
    with pytest.raises(LLMUnavailableError, match=re.escape(str(missing))):
        gemma(missing).generate_json(label_prompt("hi"), LABEL_SCHEMA)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file" * 100)
    with pytest.raises(LLMUnavailableError, match="cannot load"):
        gemma(junk).generate_json(label_prompt("hi"), LABEL_SCHEMA)


# ------------------------------------------------------------------------------- openai


@pytest.fixture(scope="module")
def llama_server(gguf: Path) -> Iterator[LlamaServer]:
    server = LlamaServer(gguf)
    yield server
    server.stop()


@pytest.fixture
def remote_llm(llama_server: LlamaServer) -> Iterator[OpenAICompatLLM]:
    llm = OpenAICompatLLM(llama_server.url, model="gemma", max_tokens=64, timeout=60)
    yield llm
    llm.close()


def test_openai_answers_from_a_real_server_fit_the_schema(remote_llm):
    for text in TURNS[:4]:
        assert_labels(remote_llm.generate_json(label_prompt(text), LABEL_SCHEMA))
    # llama-cpp-python's server refuses {"type": "json_schema"}: the backend switched once.
    assert remote_llm._format == "json_object"


def test_openai_tiny_timeout(remote_llm):
    with pytest.raises(LLMTimeoutError):
        remote_llm.generate_json(label_prompt(TURNS[0]), LABEL_SCHEMA, timeout=0.001)


def test_openai_unreachable_server_is_unavailable():
    llm = OpenAICompatLLM(f"http://127.0.0.1:{free_port()}/v1", model="", max_tokens=8, timeout=5)
    with pytest.raises(LLMUnavailableError, match="cannot reach"):
        llm.generate_json(label_prompt("hi"), LABEL_SCHEMA)
    llm.close()


@pytest.fixture
def fake() -> Iterator[Any]:
    servers: list[FakeChatServer] = []

    def start(answer, **kwargs: Any) -> tuple[FakeChatServer, OpenAICompatLLM]:
        server = FakeChatServer(answer)
        servers.append(server)
        settings: dict[str, Any] = {"model": "m", "max_tokens": 16, "timeout": 10, **kwargs}
        return server, OpenAICompatLLM(server.url, **settings)

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ((200, chat_completion("Sure! The labels are semantic.")), "not JSON"),
        ((200, chat_completion('{"labels": ["gossip"]}')), "does not fit the schema at labels/0"),
        ((200, chat_completion('{"labels": []}')), "does not fit the schema at labels"),
        ((200, chat_completion('["semantic"]')), "does not fit the schema at top level"),
        ((200, chat_completion('{"labels": ["sem', "length")), "cut off at max_tokens=16"),
        ((200, chat_completion(None)), "no text content"),
        ((200, {"error": "nope"}), "not a chat completion"),
        ((200, "<html>proxy page</html>"), "not a chat completion"),
    ],
)
def test_openai_garbage_answers_are_output_errors(fake, reply, problem):
    _, llm = fake(lambda body: reply)
    with pytest.raises(LLMOutputError, match=re.escape(problem)) as err:
        llm.generate_json(label_prompt("hi"), LABEL_SCHEMA)
    assert err.value.backend == "openai:m"


def test_openai_http_error_is_an_llm_error(fake):
    _, llm = fake(lambda body: (500, {"error": {"message": "CUDA out of memory"}}))
    with pytest.raises(LLMError, match=r"HTTP 500: .*CUDA out of memory") as err:
        llm.generate_json(label_prompt("hi"), LABEL_SCHEMA)
    assert type(err.value) is LLMError


def test_openai_request_shape_and_format_fallback(fake):
    def answer(body: dict[str, Any]) -> tuple[int, Any]:
        if body["response_format"]["type"] == "json_schema":
            return 422, {"detail": [{"loc": ["body", "response_format", "type"]}]}
        return 200, chat_completion('{"labels": ["working"]}')

    server, llm = fake(answer, api_key="sekrit")
    prompt = label_prompt("Remind me to water the plants.")
    assert llm.generate_json(prompt, LABEL_SCHEMA) == {"labels": ["working"]}
    assert llm.generate_json(prompt, LABEL_SCHEMA) == {"labels": ["working"]}
    first, fallback, second = server.requests
    assert first["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": LABEL_SCHEMA, "strict": True},
    }
    assert fallback["response_format"] == {"type": "json_object", "schema": LABEL_SCHEMA}
    assert second["response_format"]["type"] == "json_object"  # the choice is remembered
    assert first["messages"] == [
        {"role": "system", "content": prompt.system},
        {"role": "user", "content": prompt.user},
    ]
    assert first["model"] == "m" and first["temperature"] == 0 and first["max_tokens"] == 16
    assert server.headers[0]["Authorization"] == "Bearer sekrit"
