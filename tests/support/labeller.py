"""A fake LLM for the self-enhancement tests: an OpenAI-compatible chat-completions server that
answers labelling prompts from a table of gold labels (an oracle).

It is a fake on purpose. The router tests check the *mechanism* (deferral, journaling,
re-routing, pooling, rounds, retries) and need labels they can predict; a real model's labels
are not predictable. Real models are tested in tests/test_llm.py (llama.cpp in-process and
llama-cpp-python's own OpenAI-compatible server) and tests/test_router_e2e.py (the daemon with
the real GGUF). The daemon talks to this server with its real ``openai`` backend over HTTP.

Modes: ``oracle`` (the table's labels; ``default`` for texts not in it), ``shifted`` (wrong on
purpose: each label replaced by the next in LABEL_NAMES order), ``garbage`` (content that is not
JSON), ``slow`` (answers after ``delay`` seconds), ``down`` (HTTP 503).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memoryd.llm.prompts import LABEL_NAMES
from support.llm_fixtures import FakeChatServer, chat_completion

TURN_PREFIX = "Turn: "


def shifted(labels: list[str]) -> list[str]:
    """Each label replaced by the next one in LABEL_NAMES order (wrapping)."""
    names = list(LABEL_NAMES)
    return [names[(names.index(label) + 1) % len(names)] for label in labels]


class OracleLabeller:
    """The server's state; tests change ``mode`` and ``answers`` while it runs."""

    def __init__(self, answers: dict[str, list[str]], default: list[str] | None = None) -> None:
        self.answers = {" ".join(k.split()): v for k, v in answers.items()}
        self.default = default or ["episodic"]
        self.mode = "oracle"
        self.delay = 0.0
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def reply(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        text = body["messages"][-1]["content"].removeprefix(TURN_PREFIX)
        with self._lock:
            self.calls.append(text)
            mode = self.mode
        if mode == "down":
            return 503, {"error": {"message": "fake server is down"}}
        if mode == "slow":
            time.sleep(self.delay)
        labels = self.answers.get(text, self.default)
        if mode == "shifted":
            labels = shifted(labels)
        content = json.dumps({"labels": labels})
        if mode == "garbage":
            content = "I think this is episodic"
        return 200, chat_completion(content)


@contextmanager
def serve_oracle(oracle: OracleLabeller) -> Iterator[str]:
    """Run the fake server on a free port; yields its base URL (ending in /v1)."""
    server = FakeChatServer(oracle.reply)
    try:
        yield server.url
    finally:
        server.stop()
