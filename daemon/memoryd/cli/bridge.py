"""`memoryd mcp`, the stdio MCP bridge to the running daemon (:mod:`memoryd.bridge`), and
`memoryd context`, its session-start resource for hooks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import anyio
import click

from memoryd.cli.base import config_options, domain_errors, load, setup_logging
from memoryd.client import Client, daemon_url, token_for
from memoryd.errors import InvalidUserIdError, UserNotFoundError
from memoryd.models import USER_ID

__all__ = ["context_cmd", "mcp_cmd"]


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
            if not USER_ID.fullmatch(user_id):
                raise InvalidUserIdError(user_id)
            config = load(config_path, data_dir=data_dir, model_dir=model_dir)
            setup_logging("warning")
            url = url or daemon_url(config)
            token = token_for(config)
            # "" when there is no token: send none, and read no config again
            with Client(url, token or "") as client, contextlib.suppress(UserNotFoundError):
                client.get_user(user_id)  # the daemon answers and takes the token
            fn(url, {"Authorization": f"Bearer {token}"} if token else {}, user_id)

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
    from memoryd.bridge import serve_stdio  # the MCP SDK: only for the commands that use it

    anyio.run(serve_stdio, url, headers, user_id)


@daemon_command("context")
def context_cmd(url: str, headers: dict[str, str], user_id: str) -> None:
    """Print what an agent should know at the start of a conversation: open tasks, tasks
    finished this week and the user's profile (the daemon's memoryd://session-start MCP
    resource). Made for session-start hooks, e.g. Claude Code's SessionStart."""
    from memoryd.bridge import read_resource

    click.echo(anyio.run(read_resource, url, headers, user_id, "memoryd://session-start"))
