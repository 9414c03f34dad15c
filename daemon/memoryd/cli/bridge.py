"""`memoryd mcp`, the stdio MCP bridge to the running daemon (:mod:`memoryd.bridge`), and
`memoryd context`, its session-start resource for hooks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import anyio
import click

from memoryd.bridge import check_daemon, read_resource, serve_stdio
from memoryd.cli.base import config_options, domain_errors, load, setup_logging
from memoryd.config import Config
from memoryd.errors import InvalidUserIdError
from memoryd.models import USER_ID

__all__ = ["context_cmd", "mcp_cmd"]

ANY_ADDRESS = ("0.0.0.0", "::", "")


def daemon_url(config: Config) -> str:
    """Where the configured daemon listens, as a client reaches it."""
    host = "127.0.0.1" if config.host in ANY_ADDRESS else config.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{config.port}"


def client_token(config: Config) -> str | None:
    """The token a client sends: MEMORYD_TOKEN, auth.token, or the data directory's file."""
    if token := os.environ.get("MEMORYD_TOKEN"):
        return token
    if config.auth.token:
        return config.auth.token
    path = config.data_dir / "token"
    return path.read_text().strip() if path.is_file() else None


def daemon_command(
    name: str,
) -> Callable[[Callable[[str, dict[str, str], str], None]], click.Command]:
    """A command about one user, run against the daemon: ``fn(url, headers, user_id)`` once it
    answers and takes the token (else one clear error)."""

    def make(fn: Callable[[str, dict[str, str], str], None]) -> click.Command:
        @click.command(name, help=fn.__doc__)
        @config_options
        @click.option("--user", "user_id", required=True, help="The user whose memory is used.")
        @click.option("--url", help="The daemon's URL (default: from host and port of the config).")
        @domain_errors
        def command(
            config_path: Path | None,
            data_dir: Path | None,
            model_dir: Path | None,
            user_id: str,
            url: str | None,
        ) -> None:
            if not USER_ID.match(user_id):
                raise InvalidUserIdError(user_id)
            config = load(config_path, data_dir=data_dir, model_dir=model_dir)
            setup_logging("warning")
            url = url or daemon_url(config)
            token = client_token(config)
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            check_daemon(url, headers, user_id)
            fn(url, headers, user_id)

        return command

    return make


@daemon_command("mcp")
def mcp_cmd(url: str, headers: dict[str, str], user_id: str) -> None:
    """Serve MCP on stdin/stdout for clients that launch a process (Claude Desktop).

    Every request goes to the running daemon over HTTP (its /mcp/users/USER/ endpoint) with
    the token of its data directory or MEMORYD_TOKEN; no store is opened here, so the daemon
    stays the only writer. Claude Desktop's config:

    \b
    {"mcpServers": {"memory": {"command": "memoryd", "args": ["mcp", "--user", "me"]}}}
    """
    anyio.run(serve_stdio, url, headers, user_id)


@daemon_command("context")
def context_cmd(url: str, headers: dict[str, str], user_id: str) -> None:
    """Print what an agent should know at the start of a conversation: open tasks, tasks
    finished this week and the user's profile (the daemon's memoryd://session-start MCP
    resource). Made for session-start hooks, e.g. Claude Code's SessionStart."""
    click.echo(anyio.run(read_resource, url, headers, user_id, "memoryd://session-start"))
