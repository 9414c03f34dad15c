"""The memory inspector: the page the daemon serves at ``/ui/`` for the person the memories are
about — see what the assistant remembers and correct it, through the same ``/v1`` API.

Static files only (``static/``: HTML, CSS and ES modules), in the package: no build step, no
CDN, nothing fetched from anywhere but the daemon. The page renders every stored string as text
(``static/dom.js``), never as HTML; the daemon's CSP (:mod:`memoryd.api.middleware`) holds it to
that.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

__all__ = ["ui_routes"]

STATIC_DIR = Path(__file__).parent / "static"
UI_PATH = "/ui"


class _PageFiles(StaticFiles):
    """The page's files, revalidated on every load so an upgraded daemon serves its own page."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


async def _to_page(_: Any) -> Response:
    return RedirectResponse(f"{UI_PATH}/", status_code=307)


def ui_routes() -> list[Route | Mount]:
    """``/ui/`` (the page and its files) and ``/``, which leads a browser there."""
    return [
        Mount(UI_PATH, app=_PageFiles(directory=STATIC_DIR, html=True), name="ui"),
        Route("/", _to_page, include_in_schema=False),
    ]
