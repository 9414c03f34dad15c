"""LLM backends for background work (labelling deferred turns, ...) and the prompts they get.

``make_llm(config)`` builds the configured backend: None for ``llm.backend = "none"`` (no LLM:
every LLM step falls back), :class:`LlamaCppLLM` for a local GGUF file, :class:`OpenAICompatLLM`
for an OpenAI-compatible server. Nothing here imports from memoryd above ``memoryd.errors``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memoryd.errors import ConfigError
from memoryd.llm.base import LLM, Prompt
from memoryd.llm.llamacpp import LlamaCppLLM
from memoryd.llm.openai import OpenAICompatLLM

if TYPE_CHECKING:
    from memoryd.config import Config

__all__ = ["LLM", "LlamaCppLLM", "OpenAICompatLLM", "Prompt", "make_llm"]


def make_llm(config: Config) -> LLM | None:
    """The LLM that ``config`` asks for, or None when ``llm.backend`` is "none".

    Nothing is loaded or contacted here: a missing model file or a server that is down shows as
    LLMUnavailableError on the first call.
    """
    backend = config.llm_backend
    if backend == "none":
        return None
    if backend == "llamacpp":
        if not config.llm_model_path:
            raise ConfigError(
                "llm.model_path", config.llm_model_path, "the llamacpp backend needs a GGUF file"
            )
        return LlamaCppLLM(
            Path(config.llm_model_path).expanduser(),
            threads=config.llm_threads,
            context=config.llm_context,
            max_tokens=config.llm_max_tokens,
            idle_release=config.llm_idle_release,
            timeout=config.llm_timeout,
        )
    if backend == "openai":
        if not config.llm_url:
            raise ConfigError("llm.url", config.llm_url, "the openai backend needs a server URL")
        return OpenAICompatLLM(
            config.llm_url,
            model=config.llm_model,
            api_key=config.llm_api_key,
            max_tokens=config.llm_max_tokens,
            timeout=config.llm_timeout,
        )
    raise ConfigError("llm.backend", backend, "allowed: none, llamacpp, openai")
