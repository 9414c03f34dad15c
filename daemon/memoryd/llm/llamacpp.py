"""A local GGUF model run in-process by llama.cpp (the optional ``llama-cpp-python`` package).

One model instance serves every caller, one call at a time (llama.cpp contexts are not
thread-safe). The model is loaded on the first call, not at construction, and unloaded after
``idle_release`` seconds without a call, so a daemon that rarely defers pays for the memory only
while it labels. ``llama_cpp`` itself is imported on first use: the daemon runs without it when no
local model is configured.

Decoding is greedy and constrained by a grammar derived from the JSON schema. llama.cpp's schema
converter does not enforce every keyword (``uniqueItems``, for one), so answers are validated
afterwards all the same.
"""

from __future__ import annotations

import gc
import json
import math
import threading
import time
from pathlib import Path
from typing import Any

from memoryd.errors import (
    ClosedError,
    LLMError,
    LLMOutputError,
    LLMTimeoutError,
    LLMUnavailableError,
)
from memoryd.llm.base import Prompt, parse_answer, schema_key

ANSWER_CUE = "Answer (JSON):"


def render(prompt: Prompt) -> str:
    """Plain-text completion prompt: base models need no chat template."""
    return f"{prompt.system}\n\n{prompt.user}\n\n{ANSWER_CUE} "


class LlamaCppLLM:
    """llama.cpp backend. ``timeout`` is the default for :meth:`generate_json` (None: no limit)."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        threads: int,
        context: int,
        max_tokens: int,
        idle_release: float,
        timeout: float | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.name = f"llamacpp:{self.model_path.name}"
        self.threads, self.context, self.max_tokens = threads, context, max_tokens
        self.idle_release, self.timeout = idle_release, timeout
        self._lock = threading.Lock()
        self._llama: Any = None  # llama_cpp.Llama while loaded
        self._grammars: dict[str, Any] = {}  # schema key -> llama_cpp.LlamaGrammar
        self._timer: threading.Timer | None = None
        self._last_call = 0.0
        self._closed = False

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory now."""
        return self._llama is not None

    def generate_json(
        self, prompt: Prompt, schema: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]:
        limit = timeout if timeout is not None else self.timeout
        limit = math.inf if limit is None else limit
        deadline = time.monotonic() + limit
        # Waiting for another caller's turn counts against this call's time.
        if not self._lock.acquire(timeout=-1 if limit == math.inf else limit):
            raise LLMTimeoutError(self.name, limit)
        try:
            if self._closed:
                raise ClosedError(self.name)
            text = self._complete(render(prompt), schema, deadline, limit)
        finally:
            self._last_call = time.monotonic()
            self._lock.release()
        return parse_answer(self.name, text, schema)

    def close(self) -> None:
        """Cancel the idle timer and unload the model; later calls raise ClosedError."""
        with self._lock:
            self._closed = True
            timer = self._timer
            self._unload()
        if timer is not None and timer is not threading.current_thread():
            timer.cancel()
            timer.join()

    # ------------------------------------------------------------------ under self._lock

    def _complete(self, text: str, schema: dict[str, Any], deadline: float, limit: float) -> str:
        llama = self._model()
        grammar = self._grammar(schema)
        if time.monotonic() >= deadline:  # the load took the whole budget
            raise LLMTimeoutError(self.name, limit)
        timed_out = False

        def past_deadline(_ids: Any, _logits: Any) -> bool:
            # Checked after each sampled token: the prompt's evaluation cannot be interrupted.
            nonlocal timed_out
            timed_out = time.monotonic() >= deadline
            return timed_out

        from llama_cpp import StoppingCriteriaList

        try:
            out = llama.create_completion(
                prompt=text,
                max_tokens=self.max_tokens,
                temperature=0.0,
                grammar=grammar,
                stopping_criteria=StoppingCriteriaList([past_deadline]),
            )
        except (ValueError, RuntimeError) as exc:  # prompt too long for the context, decode error
            raise LLMError(self.name, str(exc)) from exc
        if timed_out:
            raise LLMTimeoutError(self.name, limit)
        choice = out["choices"][0]
        if choice["finish_reason"] == "length":
            raise LLMOutputError(
                self.name, f"cut off at max_tokens={self.max_tokens}", choice["text"]
            )
        return str(choice["text"])

    def _model(self) -> Any:
        if self._llama is not None:
            return self._llama
        if not self.model_path.is_file():
            raise LLMUnavailableError(self.name, f"model file {self.model_path} not found")
        try:
            import llama_cpp
        except ImportError as exc:
            raise LLMUnavailableError(
                self.name, "llama-cpp-python is not installed (pip install 'memoryd[llm]')"
            ) from exc
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self.context,
                n_threads=self.threads,
                n_threads_batch=self.threads,
                verbose=False,
            )
        except ValueError as exc:  # not a loadable GGUF
            raise LLMUnavailableError(self.name, f"cannot load {self.model_path}: {exc}") from exc
        self._arm_timer(self.idle_release)
        return self._llama

    def _grammar(self, schema: dict[str, Any]) -> Any:
        key = schema_key(schema)
        if key not in self._grammars:
            from llama_cpp.llama_grammar import LlamaGrammar

            try:
                self._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(schema), False)
            except Exception as exc:  # the converter raises bare Exceptions
                raise LLMError(self.name, f"schema has no grammar: {exc}") from exc
        return self._grammars[key]

    def _arm_timer(self, delay: float) -> None:
        self._timer = threading.Timer(delay, self._on_timer)
        self._timer.daemon = True
        self._timer.start()

    def _on_timer(self) -> None:
        with self._lock:
            if self._llama is None:
                return
            idle = time.monotonic() - self._last_call
            if idle >= self.idle_release:
                self._unload()
            else:
                self._arm_timer(self.idle_release - idle)

    def _unload(self) -> None:
        self._timer = None
        if self._llama is not None:
            self._llama.close()  # frees model, context and batch now, not at some later GC
            self._llama = None
            gc.collect()
