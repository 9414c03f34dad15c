"""`memoryd` command line: serve the daemon, or work on the data directory in-process.

Every command builds the same :class:`MemoryService` the daemon uses, so `memoryd ingest` or
`memoryd query` answer without a socket. They take the data directory's lock: stop the daemon
first (or talk to it over HTTP) — a clear error says so. The commands live in
:mod:`~memoryd.cli.commands` and :mod:`~memoryd.cli.evals`, what they share in
:mod:`~memoryd.cli.base`.
"""

from __future__ import annotations

import click

from memoryd import __version__
from memoryd.cli.bridge import context_cmd, mcp_cmd
from memoryd.cli.commands import (
    doctor,
    export_cmd,
    import_cmd,
    ingest,
    memory,
    query,
    rebuild,
    router,
    serve,
    tiers,
)
from memoryd.cli.evals import eval_group

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memoryd")
def main() -> None:
    """memoryd — on-device memory for personal LLM agents.

    Turns go in (POST /v1/users/{user}/turns), typed memories come out
    (POST /v1/users/{user}/query). Start the daemon with `memoryd serve`; the other commands work
    on the data directory directly and need the daemon stopped.

    Settings come from config/memoryd.toml < MEMORYD_* environment variables < flags;
    `memoryd doctor` shows them all with what each is for.
    """


for command in (serve, ingest, query, rebuild, router, memory, tiers, export_cmd, import_cmd):
    main.add_command(command)
main.add_command(doctor)
main.add_command(mcp_cmd)
main.add_command(context_cmd)
main.add_command(eval_group)
