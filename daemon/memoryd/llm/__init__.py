"""LLM backends for background work (labelling deferred turns, ...) and the prompts they get.

``make_llm(config)`` builds the configured backend: None for ``llm.backend = "none"`` (no LLM:
every LLM step falls back), :class:`LlamaCppLLM` for a local GGUF file, :class:`OpenAICompatLLM`
for an OpenAI-compatible server. Nothing here imports from memoryd above its base layer
(models, errors, config).
"""

from __future__ import annotations

from pathlib import Path

from memoryd.config import Config
from memoryd.errors import ConfigError
from memoryd.llm.base import LLM, Prompt, schema_problem
from memoryd.llm.llamacpp import LlamaCppLLM
from memoryd.llm.openai import OpenAICompatLLM
from memoryd.llm.prompts import (
    IMPORTANCE_BATCH,
    LABEL_SCHEMA,
    SUFFICIENT,
    importance_prompt,
    importance_schema,
    label_prompt,
    parse_importance,
    parse_labels,
    sufficiency_prompt,
    sufficiency_schema,
)
from memoryd.models import LLMBackend

__all__ = [
    "IMPORTANCE_BATCH",
    "LABEL_SCHEMA",
    "LLM",
    "SUFFICIENT",
    "Prompt",
    "importance_prompt",
    "importance_schema",
    "label_prompt",
    "make_llm",
    "parse_importance",
    "parse_labels",
    "schema_problem",
    "sufficiency_prompt",
    "sufficiency_schema",
]


def make_llm(config: Config) -> LLM | None:
    """The LLM that ``config`` asks for, or None when ``llm.backend`` is "none".

    Nothing is loaded or contacted here: a missing model file or a server that is down shows as
    LLMUnavailableError on the first call.
    """
    llm = config.llm
    if llm.backend is LLMBackend.NONE:
        return None
    if llm.backend is LLMBackend.LLAMACPP:
        if not llm.model_path:
            raise ConfigError(
                "llm.model_path", llm.model_path, "the llamacpp backend needs a GGUF file"
            )
        return LlamaCppLLM(
            Path(llm.model_path).expanduser(),
            threads=llm.threads,
            context=llm.context,
            max_tokens=llm.max_tokens,
            idle_release=llm.idle_release,
            timeout=llm.timeout,
        )
    if llm.backend is LLMBackend.OPENAI:
        if not llm.url:
            raise ConfigError("llm.url", llm.url, "the openai backend needs a server URL")
        return OpenAICompatLLM(
            llm.url,
            model=llm.model,
            api_key=llm.api_key,
            max_tokens=llm.max_tokens,
            timeout=llm.timeout,
        )
    raise ConfigError("llm.backend", llm.backend, "allowed: " + ", ".join(LLMBackend))
