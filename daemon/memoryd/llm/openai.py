"""An OpenAI-compatible chat-completions server (Ollama, llama-server, vLLM, llama-cpp-python).

Servers disagree on how to ask for schema-constrained output. OpenAI, vLLM, llama-server and
Ollama take ``{"type": "json_schema", "json_schema": {...}}``; llama-cpp-python's own server
(0.3.x) only knows ``{"type": "json_object", "schema": {...}}`` and rejects the former. This
backend sends the first, and if the server refuses it because of ``response_format``, switches to
the second for good. Answers are validated either way.
"""

from __future__ import annotations

from typing import Any

import httpx

from memoryd.errors import LLMError, LLMOutputError, LLMTimeoutError, LLMUnavailableError
from memoryd.llm.base import Prompt, parse_answer

JSON_SCHEMA, JSON_OBJECT = "json_schema", "json_object"


def _excerpt(text: str, size: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 3] + "..."


class OpenAICompatLLM:
    """Chat completions over HTTP. ``url`` is the base, e.g. ``http://127.0.0.1:8080/v1``."""

    def __init__(
        self, url: str, *, model: str, api_key: str = "", max_tokens: int, timeout: float
    ) -> None:
        self.url = url.rstrip("/")
        self.model, self.max_tokens, self.timeout = model, max_tokens, timeout
        self.name = f"openai:{model or self.url}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(headers=headers, timeout=timeout)
        self._format = JSON_SCHEMA  # becomes JSON_OBJECT once the server refuses JSON_SCHEMA

    def generate_json(
        self, prompt: Prompt, schema: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        seconds = self.timeout if timeout is None else timeout
        fmt = self._format
        response = self._post(prompt, schema, fmt, seconds)
        if fmt == JSON_SCHEMA and _refuses_format(response):
            self._format = JSON_OBJECT
            response = self._post(prompt, schema, JSON_OBJECT, seconds)
        if not response.is_success:
            raise LLMError(
                self.name, f"HTTP {response.status_code}: {_excerpt(response.text) or '(empty)'}"
            )
        return parse_answer(self.name, self._content(response), schema)

    def close(self) -> None:
        self._client.close()

    def _post(
        self, prompt: Prompt, schema: dict[str, Any], fmt: str, seconds: float
    ) -> httpx.Response:
        if fmt == JSON_SCHEMA:
            response_format: dict[str, Any] = {
                "type": JSON_SCHEMA,
                "json_schema": {"name": "answer", "schema": schema, "strict": True},
            }
        else:
            response_format = {"type": JSON_OBJECT, "schema": schema}
        body: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "response_format": response_format,
        }
        if self.model:
            body["model"] = self.model
        try:
            return self._client.post(f"{self.url}/chat/completions", json=body, timeout=seconds)
        except httpx.TimeoutException as exc:
            raise LLMTimeoutError(self.name, seconds) from exc
        except (httpx.ConnectError, httpx.RemoteProtocolError) as exc:
            raise LLMUnavailableError(self.name, f"cannot reach {self.url}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise LLMError(self.name, f"request to {self.url} failed: {exc}") from exc

    def _content(self, response: httpx.Response) -> str:
        try:
            choice = response.json()["choices"][0]
            content = choice["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise LLMOutputError(self.name, "not a chat completion", response.text) from None
        if not isinstance(content, str):
            raise LLMOutputError(self.name, "message has no text content", response.text)
        if choice.get("finish_reason") == "length":
            raise LLMOutputError(self.name, f"cut off at max_tokens={self.max_tokens}", content)
        return content


def _refuses_format(response: httpx.Response) -> bool:
    """Whether the server rejected the request because of its ``response_format``.

    llama-cpp-python's server answers 500 (not 422) when the body does not validate.
    """
    return response.status_code in (400, 422, 500) and "response_format" in response.text
