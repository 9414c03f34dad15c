"""The daemon and the commands about its data: serve, ingest, query, rebuild, the router /
memory / tiers groups, export, import and doctor. The commands a running daemon can answer go to
it (:mod:`memoryd.cli.target`); the others open the data directory in-process."""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from tqdm import tqdm

from memoryd import __version__
from memoryd.cli.base import (
    config_options,
    domain_errors,
    load,
    open_service,
    search_option,
    setup_logging,
)
from memoryd.cli.target import Memory, memory_for, url_option
from memoryd.config import default_config_path
from memoryd.errors import ConfigError
from memoryd.heap import limit_malloc_arenas
from memoryd.models import LogLevel
from memoryd.schemas import QueryRequest, TurnIn, dump
from memoryd.service import MemoryService
from memoryd.settings import SETTINGS

# -- serve ---------------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _without_query_string(record: logging.LogRecord) -> bool:
    """uvicorn's access-log line without the query string, which can hold names
    (``/facts?subject=...``); the path and status stay."""
    args = record.args
    if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
        record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
    return True


@click.command()
@config_options
@click.option("--host", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port (default 8765; 0 picks a free one).")
@click.option("--log-level", type=click.Choice([level.value for level in LogLevel]))
@domain_errors
def serve(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    host: str | None,
    port: int | None,
    log_level: str | None,
) -> None:
    """Run the HTTP daemon (bearer token in <data-dir>/token, created on first start)."""
    import uvicorn

    from memoryd.app import create_app

    config = load(
        config_path,
        data_dir=data_dir,
        model_dir=model_dir,
        host=host,
        port=port,
        log_level=log_level,
    )
    if not config.auth.enabled and not _is_loopback(config.host):
        raise ConfigError("host", config.host, "a non-loopback bind needs auth.enabled = true")
    setup_logging(config.log_level)
    logging.getLogger("uvicorn.access").addFilter(_without_query_string)
    limit_malloc_arenas()
    app = create_app(config)
    uvicorn.run(app, host=config.host, port=config.port, log_level=config.log_level)


# -- ingest / query ------------------------------------------------------------------------


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open() as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise click.ClickException(f"{path}:{number}: not JSON ({exc.msg})") from exc


def _turn_from_line(path: Path, number: int, data: dict[str, Any]) -> TurnIn:
    try:
        return TurnIn.model_validate(data)
    except ValueError as exc:
        first = str(exc).splitlines()[1:3]
        raise click.ClickException(f"{path}:{number}: {' '.join(first)}") from exc


def _ingest_batches(
    memory: Memory, user_id: str, turns: list[TurnIn], batch: int, label: str
) -> tuple[int, int]:
    added = duplicates = 0
    with tqdm(total=len(turns), desc=label, unit="turn", file=sys.stderr) as bar:
        for start in range(0, len(turns), batch):
            receipts = memory.ingest(user_id, turns[start : start + batch]).turns
            dup = sum(r.duplicate for r in receipts)
            added, duplicates = added + len(receipts) - dup, duplicates + dup
            bar.update(len(receipts))
    return added, duplicates


@click.command()
@config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--user", "user_id", help="User to ingest into (jsonl; prefix for locomo).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "locomo"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one turn object per line. locomo: the LoCoMo file, one user per conversation.",
)
@click.option("--batch", type=click.IntRange(1, 256), default=64, show_default=True)
@url_option
@domain_errors
def ingest(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    user_id: str | None,
    fmt: str,
    batch: int,
    url: str | None,
) -> None:
    """Ingest turns from PATH.

    \b
    jsonl:  {"session_id": "s1", "role": "user", "text": "...", "ts": "2024-05-08T13:56:00Z"}
            (also turn_id, speaker, metadata; --user is required)
    locomo: turn_id = dia_id, session dates parsed; users are named <prefix>-<sample_id>
            (prefix = --user, default "locomo")
    """
    if fmt == "jsonl" and not user_id:
        raise click.UsageError("--user is required for jsonl input")
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    with memory_for(config, url) as memory:
        if fmt == "locomo":
            from memoryd.eval import load_locomo

            for conv in load_locomo(path):
                uid = f"{user_id or 'locomo'}-{conv.sample_id}"
                turns = [TurnIn.of(t) for t in conv.turns]
                added, dup = _ingest_batches(memory, uid, turns, batch, uid)
                click.echo(f"{uid}: {added} turns added, {dup} already present")
            return
        assert user_id is not None
        turns = [_turn_from_line(path, n, d) for n, d in _jsonl(path)]
        added, dup = _ingest_batches(memory, user_id, turns, batch, user_id)
        click.echo(f"{user_id}: {added} turns added, {dup} already present")


@click.command()
@config_options
@click.argument("text")
@click.option("--user", "user_id", required=True)
@click.option("-k", "--k", type=click.IntRange(1, 200), default=10, show_default=True)
@click.option("--entity", "entities", multiple=True, help="Only memories about this name.")
@click.option("--person", "people", multiple=True, help="Only memories about this person.")
@click.option("--when", help="Only episodes in this time: 'last Friday', 'two weeks ago'.")
@click.option("--before", help="Episodes before this event (text or episode id).")
@click.option("--after", help="Episodes after this event (text or episode id).")
@search_option
@click.option("--json", "as_json", is_flag=True, help="Print the full JSON reply.")
@url_option
@domain_errors
def query(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    text: str,
    user_id: str,
    k: int,
    entities: tuple[str, ...],
    people: tuple[str, ...],
    when: str | None,
    before: str | None,
    after: str | None,
    search: str | None,
    as_json: bool,
    url: str | None,
) -> None:
    """Ask USER's memory TEXT; print the rendered context (or --json, with the tier trace)."""
    request = QueryRequest.model_validate(
        {
            "query": text,
            "k": k,
            "entities": list(entities),
            "people": list(people),
            "when": when,
            "before": before,
            "after": after,
            "search": search,
        }
    )
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    with memory_for(config, url) as memory:
        reply = memory.query(user_id, request)
    click.echo(dump(reply) if as_json else reply.context or "(nothing recalled)")


# -- maintenance ---------------------------------------------------------------------------


@click.command()
@config_options
@click.option("--user", "user_id", required=True)
@domain_errors
def rebuild(
    config_path: Path | None, data_dir: Path | None, model_dir: Path | None, user_id: str
) -> None:
    """Recreate USER's graph and vector index from the journal."""
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    with open_service(config) as service:
        counts = service.rebuild(user_id)
    click.echo(json.dumps(counts, indent=2))


@click.group()
def router() -> None:
    """Inspect and steer a user's self-enhancing router (label: with the daemon stopped).

    \b
    memoryd router status --user alice      round, tau_t, pool, queue, LLM share, validation
    memoryd router label --user alice       label the queued turns now with the configured LLM
    memoryd router train --user alice       run a training round now
    memoryd router rollback --user alice    route with the previous accepted head again
    """


def _echo(result: BaseModel | dict[str, Any]) -> None:
    """A reply model as the API sends it, or a report, as indented JSON."""
    click.echo(dump(result) if isinstance(result, BaseModel) else json.dumps(result, indent=2))


def _user_command(
    group: click.Group, name: str, summary: str, call: Callable[[Memory, str], BaseModel]
) -> None:
    """A ``group`` subcommand printing ``call(memory, user)``: the daemon's answer when one
    runs, else the data directory's (:func:`~memoryd.cli.target.memory_for`)."""

    @group.command(name, help=summary)
    @config_options
    @click.option("--user", "user_id", required=True)
    @url_option
    @domain_errors
    def command(
        config_path: Path | None,
        data_dir: Path | None,
        model_dir: Path | None,
        user_id: str,
        url: str | None,
    ) -> None:
        config = load(config_path, data_dir=data_dir, model_dir=model_dir)
        with memory_for(config, url) as memory:
            _echo(call(memory, user_id))


def _local_command(
    group: click.Group, name: str, summary: str, call: Callable[[MemoryService, str], Any]
) -> None:
    """A ``group`` subcommand that opens the data directory (the daemon must be stopped: it
    runs the same work in its background jobs) and prints ``call(service, user)``."""

    @group.command(name, help=summary)
    @config_options
    @click.option("--user", "user_id", required=True)
    @domain_errors
    def command(
        config_path: Path | None, data_dir: Path | None, model_dir: Path | None, user_id: str
    ) -> None:
        config = load(config_path, data_dir=data_dir, model_dir=model_dir)
        with open_service(config) as service:
            _echo(call(service, user_id))


_user_command(
    router,
    "status",
    "Show USER's router: round, tau_t, pool, queue, LLM share per round, last validation.",
    lambda memory, user: memory.router_status(user),
)
_local_command(
    router,
    "label",
    "Label USER's queued turns now with the configured LLM (waits out retry backoffs).",
    lambda service, user: service.label_now(user),
)
_user_command(
    router,
    "train",
    "Run a training round for USER now (its head is used only if validation accepts it).",
    lambda memory, user: memory.train_router(user),
)
_user_command(
    router,
    "rollback",
    "Route USER with the previous accepted head again.",
    lambda memory, user: memory.rollback_router(user),
)


@click.group()
def memory() -> None:
    """Read a user's typed memory structures (abstract: with the daemon stopped).

    \b
    memoryd memory facts --user alice      facts, current and superseded (with validity)
    memoryd memory tasks --user alice      tasks with their state trajectories
    memoryd memory abstract --user alice   run the LLM abstraction over new episodes now
    """


_user_command(
    memory,
    "facts",
    "Print USER's facts: current ones and those a later fact superseded (current: false).",
    lambda memory, user: memory.list_facts(user, history=True),
)
_user_command(
    memory,
    "tasks",
    "Print USER's tasks with their trajectories (pending, done, cancelled, expired).",
    lambda memory, user: memory.list_tasks(user),
)
_local_command(
    memory,
    "abstract",
    "Derive facts and rules from USER's new episodes with the configured LLM now.",
    lambda service, user: service.abstract_now(user),
)


@click.group()
def facts() -> None:
    """Work on a user's facts.

    \b
    memoryd facts list --user alice          current facts, and those a later one replaced
    memoryd facts reread --user alice        read every journaled turn again with the current
                                             fact reader and replace the facts read before
                                             (one change; the old facts stay in the history)
    memoryd facts reread --user alice --undo reverse the last reread (one change)
    """


_user_command(
    facts,
    "list",
    "Print USER's facts: current ones and those a later fact superseded (current: false).",
    lambda memory, user: memory.list_facts(user, history=True),
)


@facts.command("reread")
@config_options
@click.option("--user", "user_id", required=True)
@click.option("--undo", is_flag=True, help="Reverse the last reread instead.")
@url_option
@domain_errors
def facts_reread(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    user_id: str,
    undo: bool,
    url: str | None,
) -> None:
    """Read USER's journaled turns again with the current fact reader.

    The upgrade path for a store written by an older reader: the facts it read are closed
    (they stay in the history, `memoryd facts list` shows them) and the new reading's facts
    are made, in one journaled change; a kill in the middle leaves the old facts current.
    Facts an LLM derived or a client made are left alone. Prints what it did: turns read,
    facts closed and made, and how many of those are current.
    """
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    with memory_for(config, url) as memory:
        _echo(memory.undo_reread(user_id) if undo else memory.reread_facts(user_id))


@click.group()
def tiers() -> None:
    """Inspect and run a user's memory tiers (importance: with the daemon stopped).

    \b
    memoryd tiers status --user alice       tier sizes, persona and drift, recent moves
    memoryd tiers reshuffle --user alice    re-score and re-place the records now
    memoryd tiers importance --user alice   rate a batch of records' importance with the LLM

    Tier 1 holds the last tiers.recent_sessions sessions and the tiers.cache_size best scored
    records, tier 2 the next tiers.buffer_size, tier 3 everything (see memoryd.tiers).
    """


_user_command(
    tiers,
    "status",
    "Show USER's tier sizes, persona profile and drift, last reshuffle and recent moves.",
    lambda memory, user: memory.tiers(user),
)
_user_command(
    tiers,
    "reshuffle",
    "Re-score USER's active records and place them in tiers 1-3 now.",
    lambda memory, user: memory.reshuffle(user),
)
_local_command(
    tiers,
    "importance",
    "Replace the heuristic importance of a batch of USER's records with the LLM's rating.",
    lambda service, user: {"scored": service.score_importance(user)},
)


@click.command("export")
@config_options
@click.option("--user", "user_id", required=True)
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Default: stdout.")
@url_option
@domain_errors
def export_cmd(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    user_id: str,
    out: Path | None,
    url: str | None,
) -> None:
    """Write USER's journal as versioned JSONL (header line, then every entry)."""
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    with memory_for(config, url) as memory:
        stream = out.open("w") if out else sys.stdout
        try:
            for record in memory.export(user_id):
                stream.write(json.dumps(record) + "\n")
        finally:
            if out:
                stream.close()


@click.command("import")
@config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--user", "user_id", help="Target user (default: the user named in the export).")
@url_option
@domain_errors
def import_cmd(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    user_id: str | None,
    url: str | None,
) -> None:
    """Load an export made by `memoryd export` into a user with no data."""
    header = next((d for _, d in _jsonl(path)), None)
    if header is None:
        raise click.ClickException(f"{path} is empty")
    target = user_id or header.get("user_id")
    if not target:
        raise click.UsageError("the export names no user: pass --user")
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    with memory_for(config, url) as memory:
        _echo(memory.import_user(target, path))


@click.command()
@config_options
@click.option(
    "--deep",
    is_flag=True,
    help="Also run SQLite's integrity check on every user's journal and check that every file "
    "in the data directory is private (reads every journal: seconds per GB).",
)
@domain_errors
def doctor(
    config_path: Path | None, data_dir: Path | None, model_dir: Path | None, deep: bool
) -> None:
    """Print every setting (value, source, meaning) and check what the daemon needs."""
    from memoryd.doctor import deep_checks, run_checks

    path = config_path or default_config_path()
    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    click.echo(f"memoryd {__version__}; config file: {path or '(none)'}\n")
    for setting in SETTINGS:
        value = config.value(setting.name)
        if setting.name == "auth.token" and value:
            value = "***"
        source = "env" if setting.env in os.environ else "default/file"
        click.echo(f"  {setting.name:32} = {value!s:24} [{source}] {setting.help}")
    click.echo("")
    problems = 0
    checks = run_checks(config) + (list(deep_checks(config)) if deep else [])
    for ok, what, why in checks:
        problems += not ok
        click.echo(f"  [{'ok' if ok else 'MISSING'}] {what}" + ("" if ok else f" — {why}"))
    if problems:
        raise click.ClickException(f"{problems} problem(s) found")
