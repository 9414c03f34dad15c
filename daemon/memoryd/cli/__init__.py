"""`memoryd` command line: serve the daemon, and work on its data through it or in-process.

When a daemon holds the data directory (or ``--url`` names one), `memoryd query`, `ingest`,
`export`, `import` and the router / memory / facts / tiers commands it can answer go to it over
HTTP
(:mod:`memoryd.client`); when none runs they build the same :class:`MemoryService` the daemon
uses, in-process. Both print the same reply models (:mod:`~memoryd.cli.target`). Rebuild, the
LLM commands (label, abstract, importance) and the evaluations open the data directory
themselves and need the daemon stopped — a clear error says so. The commands live in
:mod:`~memoryd.cli.commands`, :mod:`~memoryd.cli.bridge` (MCP over stdio, the session-start
context) and :mod:`~memoryd.cli.evals`, what they share in :mod:`~memoryd.cli.base`.
"""

from __future__ import annotations

import os

import click

from memoryd import __version__
from memoryd.cli.admin import backup_cmd, restore_cmd, token, verify_cmd
from memoryd.cli.bridge import context_cmd, mcp_cmd
from memoryd.cli.commands import (
    doctor,
    export_cmd,
    facts,
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
    (POST /v1/users/{user}/query); agents connect over MCP at /mcp/. Start the daemon with
    `memoryd serve`. While it runs, query, ingest, export, import and the router / memory /
    tiers commands go to it (--url or MEMORYD_URL for another one); with no daemon they open the
    data directory themselves. rebuild and the LLM commands need the daemon stopped.

    Settings come from config/memoryd.toml < MEMORYD_* environment variables < flags;
    `memoryd doctor` shows them all with what each is for.
    """
    os.umask(0o077)  # every file memoryd makes (journals, graphs, indexes, exports) is private


for command in (
    serve,
    ingest,
    query,
    rebuild,
    router,
    memory,
    facts,
    tiers,
    export_cmd,
    import_cmd,
):
    main.add_command(command)
main.add_command(doctor)
main.add_command(mcp_cmd)
main.add_command(context_cmd)
main.add_command(eval_group)
for command in (backup_cmd, verify_cmd, restore_cmd, token):
    main.add_command(command)
