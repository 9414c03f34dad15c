"""The API token: ``<data_dir>/token`` (mode 0600), made on first start, replaced by
`memoryd token rotate`, re-read by the daemon when the file changes (no restart).

A token set in the configuration (``auth.token``) is used as it is and never rotated here.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from pathlib import Path

from memoryd.errors import ConfigError
from memoryd.files import write_private

log = logging.getLogger(__name__)

TOKEN_FILE = "token"


class Secret:
    """A string whose repr hides it."""

    def __init__(self, value: str) -> None:
        self._value = value

    def __repr__(self) -> str:
        return "Secret('**********')"

    def __str__(self) -> str:
        return self._value

    def matches(self, candidate: str) -> bool:
        return hmac.compare_digest(self._value.encode(), candidate.encode())


def _new_token() -> str:
    return secrets.token_urlsafe(32)


class TokenFile:
    """The token in a file, read again whenever the file is replaced or changed: rotating it
    refuses the old token from the next request on. A file that goes missing keeps the last
    token (deleting it must not open the API)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._secret = Secret("")
        self._refresh()
        if self._stamp is None:
            raise ConfigError("auth.token", str(path), "the token file is missing or empty")

    def _refresh(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._stamp:
            return
        value = self.path.read_text().strip()
        if value:
            if self._stamp is not None:
                log.info(
                    "the API token in %s changed; the old one is refused from now on", self.path
                )
            self._secret, self._stamp = Secret(value), stamp

    def matches(self, candidate: str) -> bool:
        self._refresh()
        return self._secret.matches(candidate)

    def __repr__(self) -> str:
        return f"TokenFile({str(self.path)!r})"


def load_or_create_token(data_dir: Path, configured: str = "") -> Secret | TokenFile:
    """The configured token, else ``<data_dir>/token`` (made, with a new token, if missing)."""
    if configured:
        return Secret(configured)
    path = data_dir / TOKEN_FILE
    if not path.exists():
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(path, _new_token() + "\n")
        log.info("generated an API token in %s", path)
    return TokenFile(path)


def rotate_token(data_dir: Path) -> Path:
    """Replace ``<data_dir>/token`` with a new token; a running daemon refuses the old one from
    its next request on. Returns the file's path."""
    path = data_dir / TOKEN_FILE
    if not data_dir.is_dir():
        raise ConfigError("data_dir", str(data_dir), "no such directory: start the daemon once")
    write_private(path, _new_token() + "\n")
    log.info("rotated the API token in %s", path)
    return path


def read_token(data_dir: Path) -> str | None:
    """The token in ``<data_dir>/token`` (None when there is none); never creates it."""
    path = data_dir / TOKEN_FILE
    return path.read_text().strip() if path.is_file() else None
