"""Schemathesis hooks for `scripts/fuzz.py` (loaded through ``SCHEMATHESIS_HOOKS``).

The import route takes ``application/x-ndjson``, which schemathesis cannot generate on its own.
Its bodies are drawn from three kinds: random bytes; lines of random JSON values; and a real
export (``MEMORYD_FUZZ_EXPORT``, written by the driver from a user it filled) with one line
dropped, repeated or replaced, or one field of one record replaced by a random JSON value, so
that the fuzzer gets past the header check into the records.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import strategies as st

NDJSON = "application/x-ndjson"

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _export_lines() -> list[str]:
    path = os.environ.get("MEMORYD_FUZZ_EXPORT")
    if not path:
        return []
    return [line for line in Path(path).read_text().splitlines() if line.strip()]


def _ndjson(values: list[Any]) -> bytes:
    return "".join(json.dumps(v) + "\n" for v in values).encode()


@st.composite
def _mutated_export(draw: st.DrawFn, lines: list[str]) -> bytes:
    records: list[Any] = [json.loads(line) for line in lines]
    at = draw(st.integers(0, len(records) - 1))
    how = draw(st.sampled_from(["drop", "repeat", "replace", "field"]))
    if how == "drop":
        del records[at]
    elif how == "repeat":
        records.insert(at, records[at])
    elif how == "replace":
        records[at] = draw(JSON_VALUES)
    elif isinstance(records[at], dict) and records[at]:
        key = draw(st.sampled_from(sorted(records[at])))
        records[at] = {**records[at], key: draw(JSON_VALUES)}
    return _ndjson(records)


def _import_bodies() -> st.SearchStrategy[bytes]:
    kinds = [st.binary(max_size=512), st.lists(JSON_VALUES, max_size=6).map(_ndjson)]
    lines = _export_lines()
    if lines:
        kinds.append(_mutated_export(lines))
        kinds.append(st.just("\n".join(lines).encode()))
    return st.one_of(kinds)


schemathesis.openapi.media_type(NDJSON, _import_bodies())
