"""JSON lines: one JSON object a line, blank lines skipped, the first bad line named."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any


def json_objects(
    lines: Iterable[str], error: Callable[[str], Exception], where: Callable[[int], str]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line; a line that is not a JSON object raises
    ``error("<where(number)>: not JSON (…)")`` or ``error("<where>: not a JSON object")``."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise error(f"{where(number)}: not JSON ({exc.msg})") from exc
        if not isinstance(data, dict):
            raise error(f"{where(number)}: not a JSON object")
        yield number, data
