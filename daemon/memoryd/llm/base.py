"""What every LLM backend offers: a prompt in, a JSON object that fits a schema out.

Backends constrain decoding to the schema where they can, but never trust it: every answer is
parsed and validated here (JSON Schema draft 2020-12) before a caller sees it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

from jsonschema import Draft202012Validator

from memoryd.errors import LLMOutputError


@dataclass(frozen=True)
class Prompt:
    """One request to an LLM: instructions (``system``) and the material to work on (``user``)."""

    system: str
    user: str


class LLM(Protocol):
    """A model that answers prompts with JSON objects.

    Implementations are thread-safe. ``generate_json`` raises :class:`memoryd.errors.LLMError`
    subclasses on failure: ``LLMUnavailableError`` (no model file, server unreachable),
    ``LLMTimeoutError`` (no answer within ``timeout`` seconds, else the backend's default) and
    ``LLMOutputError`` (the answer is not JSON or does not fit ``schema``).
    """

    name: str

    def generate_json(
        self, prompt: Prompt, schema: dict[str, Any], *, timeout: float | None = None
    ) -> dict[str, Any]: ...

    def close(self) -> None: ...


@lru_cache(maxsize=64)
def _validator(schema_json: str) -> Draft202012Validator:
    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_key(schema: dict[str, Any]) -> str:
    """A canonical text of ``schema``, usable as a cache key."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def schema_problem(obj: Any, schema: dict[str, Any]) -> str | None:
    """Why ``obj`` does not fit ``schema``, or None if it does.

    Raises ``jsonschema.SchemaError`` if ``schema`` itself is not a valid schema.
    """
    error = next(iter(_validator(schema_key(schema)).iter_errors(obj)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "top level"
    return f"at {where}: {error.message}"


def parse_answer(backend: str, text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The JSON object in ``text``, checked against ``schema``; else :class:`LLMOutputError`."""
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise LLMOutputError(backend, f"not JSON: {exc}", text) from None
    problem = schema_problem(obj, schema)
    if problem is not None:
        raise LLMOutputError(backend, f"does not fit the schema {problem}", text)
    if not isinstance(obj, dict):
        raise LLMOutputError(backend, "not a JSON object", text)
    return obj
