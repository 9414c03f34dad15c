"""`memoryd` command line: serve the daemon, or work on the data directory in-process.

Every command builds the same :class:`MemoryService` the daemon uses, so `memoryd ingest` or
`memoryd query` answer without a socket. They take the data directory's lock: stop the daemon
first (or talk to it over HTTP) — a clear error says so.
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import BaseModel
from tqdm import tqdm

from memoryd import __version__
from memoryd.config import SETTINGS, Config, default_config_path, load_config
from memoryd.errors import ConfigError, MemorydError
from memoryd.ingest import NewTurn
from memoryd.models import LogLevel, SearchMode
from memoryd.retrieve import QueryParams, render_context
from memoryd.schemas import FactList, QueryReply, TaskList, TurnIn, dump
from memoryd.service import MemoryService

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def _config_options(fn: F) -> F:
    """--config, --data-dir and --model-dir, shared by every command."""
    fn = click.option(
        "--model-dir", type=click.Path(path_type=Path), help="Built model artifacts."
    )(fn)
    fn = click.option(
        "--data-dir", type=click.Path(path_type=Path), help="Where users' stores live."
    )(fn)
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, exists=True, dir_okay=False),
        help="TOML settings file (default: config/memoryd.toml of the checkout, if present).",
    )(fn)


def _load(config_path: Path | None, **overrides: Any) -> Config:
    return load_config(config_path or default_config_path(), os.environ, overrides)


def _domain_errors(fn: F) -> F:
    """Turn memoryd's errors into a one-line message and exit code 1."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemorydError as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper  # type: ignore[return-value]


@contextmanager
def _service(config: Config) -> Iterator[MemoryService]:
    service = MemoryService.from_config(config)
    try:
        yield service
    finally:
        service.close()


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


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


# -- serve ---------------------------------------------------------------------------------


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas (as MALLOC_ARENA_MAX does) unless the environment sets them.

    glibc gives busy threads arenas of their own (up to 8 per core) and keeps what they freed:
    with the request thread pool, the graph readers and onnxruntime that is tens of MB of RSS
    on a board with little memory to spare.
    """
    if "MALLOC_ARENA_MAX" in os.environ:
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return  # not glibc: nothing to cap
    m_arena_max = -8
    libc.mallopt(m_arena_max, arenas)


@main.command()
@_config_options
@click.option("--host", help="Address to bind (default 127.0.0.1).")
@click.option("--port", type=int, help="Port (default 8765; 0 picks a free one).")
@click.option("--log-level", type=click.Choice([level.value for level in LogLevel]))
@_domain_errors
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

    config = _load(
        config_path,
        data_dir=data_dir,
        model_dir=model_dir,
        host=host,
        port=port,
        log_level=log_level,
    )
    if not config.auth.enabled and not _is_loopback(config.host):
        raise ConfigError("host", config.host, "a non-loopback bind needs auth.enabled = true")
    _setup_logging(config.log_level)
    _limit_malloc_arenas()
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


def _turn_from_line(path: Path, number: int, data: dict[str, Any]) -> NewTurn:
    try:
        return TurnIn.model_validate(data).to_new_turn()
    except ValueError as exc:
        first = str(exc).splitlines()[1:3]
        raise click.ClickException(f"{path}:{number}: {' '.join(first)}") from exc


def _ingest_batches(
    service: MemoryService, user_id: str, turns: list[NewTurn], batch: int, label: str
) -> tuple[int, int]:
    added = duplicates = 0
    with tqdm(total=len(turns), desc=label, unit="turn", file=sys.stderr) as bar:
        for start in range(0, len(turns), batch):
            receipts = service.ingest(user_id, turns[start : start + batch])
            dup = sum(r.duplicate for r in receipts)
            added, duplicates = added + len(receipts) - dup, duplicates + dup
            bar.update(len(receipts))
    return added, duplicates


@main.command()
@_config_options
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
@_domain_errors
def ingest(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    user_id: str | None,
    fmt: str,
    batch: int,
) -> None:
    """Ingest turns from PATH.

    \b
    jsonl:  {"session_id": "s1", "role": "user", "text": "...", "ts": "2024-05-08T13:56:00Z"}
            (also turn_id, speaker, metadata; --user is required)
    locomo: turn_id = dia_id, session dates parsed; users are named <prefix>-<sample_id>
            (prefix = --user, default "locomo")
    """
    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    with _service(config) as service:
        if fmt == "locomo":
            from memoryd.eval.locomo import load_locomo

            for conv in load_locomo(path):
                uid = f"{user_id or 'locomo'}-{conv.sample_id}"
                added, dup = _ingest_batches(service, uid, conv.turns, batch, uid)
                click.echo(f"{uid}: {added} turns added, {dup} already present")
            return
        if not user_id:
            raise click.UsageError("--user is required for jsonl input")
        turns = [_turn_from_line(path, n, d) for n, d in _jsonl(path)]
        added, dup = _ingest_batches(service, user_id, turns, batch, user_id)
        click.echo(f"{user_id}: {added} turns added, {dup} already present")


_search_option = click.option(
    "--search",
    type=click.Choice([m.value for m in SearchMode]),
    help="Tiers to search: tiered (1, then 1+2, then all, until sufficient), all (exhaustive),"
    " tier1, tier2. Default: the tiers.search setting.",
)


@main.command()
@_config_options
@click.argument("text")
@click.option("--user", "user_id", required=True)
@click.option("-k", "--k", type=click.IntRange(1, 200), default=10, show_default=True)
@click.option("--entity", "entities", multiple=True, help="Only memories about this name.")
@click.option("--person", "people", multiple=True, help="Only memories about this person.")
@click.option("--when", help="Only episodes in this time: 'last Friday', 'two weeks ago'.")
@click.option("--before", help="Episodes before this event (text or episode id).")
@click.option("--after", help="Episodes after this event (text or episode id).")
@_search_option
@click.option("--json", "as_json", is_flag=True, help="Print the full JSON reply.")
@_domain_errors
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
) -> None:
    """Ask USER's memory TEXT; print the rendered context (or --json, with the tier trace)."""
    params = QueryParams(
        query=text,
        k=k,
        entities=entities,
        people=people,
        when=when,
        before=before,
        after=after,
        search=SearchMode(search) if search else None,
    )
    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    with _service(config) as service:
        result = service.query(user_id, params)
        if as_json:
            click.echo(dump(QueryReply.of(text, result)))
        else:
            click.echo(render_context(result) or "(nothing recalled)")


# -- maintenance ---------------------------------------------------------------------------


@main.command()
@_config_options
@click.option("--user", "user_id", required=True)
@_domain_errors
def rebuild(
    config_path: Path | None, data_dir: Path | None, model_dir: Path | None, user_id: str
) -> None:
    """Recreate USER's graph and vector index from the journal."""
    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    with _service(config) as service:
        counts = service.rebuild(user_id)
    click.echo(json.dumps(counts, indent=2))


@main.group()
def router() -> None:
    """Inspect and steer a user's self-enhancing router (the daemon must be stopped).

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
    group: click.Group, name: str, summary: str, call: Callable[[Any, str], Any]
) -> None:
    """A ``group`` subcommand that opens the data directory and prints ``call(service, user)``."""

    @group.command(name, help=summary)
    @_config_options
    @click.option("--user", "user_id", required=True)
    @_domain_errors
    def command(
        config_path: Path | None, data_dir: Path | None, model_dir: Path | None, user_id: str
    ) -> None:
        config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
        with _service(config) as service:
            _echo(call(service, user_id))


_user_command(
    router,
    "status",
    "Show USER's router: round, tau_t, pool, queue, LLM share per round, last validation.",
    lambda service, user: service.router_status(user),
)
_user_command(
    router,
    "label",
    "Label USER's queued turns now with the configured LLM (waits out retry backoffs).",
    lambda service, user: service.label_now(user),
)
_user_command(
    router,
    "train",
    "Run a training round for USER now (its head is used only if validation accepts it).",
    lambda service, user: service.train_router(user),
)
_user_command(
    router,
    "rollback",
    "Route USER with the previous accepted head again.",
    lambda service, user: service.rollback_router(user),
)


@main.group()
def memory() -> None:
    """Read a user's typed memory structures (the daemon must be stopped).

    \b
    memoryd memory facts --user alice      facts, current and superseded (with validity)
    memoryd memory tasks --user alice      tasks with their state trajectories
    memoryd memory abstract --user alice   run the LLM abstraction over new episodes now
    """


_user_command(
    memory,
    "facts",
    "Print USER's facts: current ones and those a later fact superseded (current: false).",
    lambda service, user: FactList.of(service.list_facts(user, history=True)),
)
_user_command(
    memory,
    "tasks",
    "Print USER's tasks with their trajectories (pending, done, cancelled, expired).",
    lambda service, user: TaskList.of(service.list_tasks(user, ())),
)
_user_command(
    memory,
    "abstract",
    "Derive facts and rules from USER's new episodes with the configured LLM now.",
    lambda service, user: service.abstract_now(user),
)


@main.group()
def tiers() -> None:
    """Inspect and run a user's memory tiers (the daemon must be stopped).

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
    lambda service, user: service.tiers_status(user),
)
_user_command(
    tiers,
    "reshuffle",
    "Re-score USER's active records and place them in tiers 1-3 now.",
    lambda service, user: service.reshuffle(user),
)
_user_command(
    tiers,
    "importance",
    "Replace the heuristic importance of a batch of USER's records with the LLM's rating.",
    lambda service, user: {"scored": service.score_importance(user)},
)


@main.command("export")
@_config_options
@click.option("--user", "user_id", required=True)
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Default: stdout.")
@_domain_errors
def export_cmd(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    user_id: str,
    out: Path | None,
) -> None:
    """Write USER's journal as versioned JSONL (header line, then every entry)."""
    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    with _service(config) as service:
        stream = out.open("w") if out else sys.stdout
        try:
            for record in service.export_user(user_id):
                stream.write(json.dumps(record) + "\n")
        finally:
            if out:
                stream.close()


@main.command("import")
@_config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--user", "user_id", help="Target user (default: the user named in the export).")
@_domain_errors
def import_cmd(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    user_id: str | None,
) -> None:
    """Load an export made by `memoryd export` into a user with no data."""
    records = (d for _, d in _jsonl(path))
    header = next(records, None)
    if header is None:
        raise click.ClickException(f"{path} is empty")
    target = user_id or header.get("user_id")
    if not target:
        raise click.UsageError("the export names no user: pass --user")
    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    with _service(config) as service:
        counts = service.import_user(target, _with_first(header, records))
    click.echo(json.dumps({"user_id": target, **counts}, indent=2))


def _with_first(first: dict[str, Any], rest: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    yield first
    yield from rest


@main.command()
@_config_options
@_domain_errors
def doctor(config_path: Path | None, data_dir: Path | None, model_dir: Path | None) -> None:
    """Print every setting (value, source, meaning) and check what the daemon needs."""
    from memoryd.doctor import run_checks

    path = config_path or default_config_path()
    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    click.echo(f"memoryd {__version__}; config file: {path or '(none)'}\n")
    for setting in SETTINGS:
        value = config.value(setting.name)
        if setting.name == "auth.token" and value:
            value = "***"
        source = "env" if setting.env in os.environ else "default/file"
        click.echo(f"  {setting.name:32} = {value!s:24} [{source}] {setting.help}")
    click.echo("")
    problems = 0
    for ok, what, why in run_checks(config):
        problems += not ok
        click.echo(f"  [{'ok' if ok else 'MISSING'}] {what}" + ("" if ok else f" — {why}"))
    if problems:
        raise click.ClickException(f"{problems} problem(s) found")


@main.group("eval")
def eval_group() -> None:
    """Measure retrieval quality."""


_locomo_path = click.argument(
    "path",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo10.json",
)
"""LoCoMo's JSON, read in place (its licence is non-commercial: never copied into the repo)."""


@eval_group.command("locomo")
@_config_options
@_locomo_path
@click.option("--k", "ks", default="5,10,25,50", show_default=True, help="Comma-separated k.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@click.option("--conversations", type=int, help="Only the first N conversations.")
@_search_option
@_domain_errors
def eval_locomo(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    ks: str,
    out: Path | None,
    conversations: int | None,
    search: str | None,
) -> None:
    """LoCoMo evidence recall@k: BM25 alone, dense alone and the daemon's query path.

    Each conversation goes into a fresh user in a temporary data directory (or --data-dir).
    """
    import tempfile

    from memoryd.eval.locomo import run_locomo

    k_values = _parse_ks(ks)
    with tempfile.TemporaryDirectory(prefix="memoryd-eval-") as tmp:
        config = _load(config_path, data_dir=data_dir or Path(tmp), model_dir=model_dir)
        with _service(config) as service:
            mode = SearchMode(search) if search else None
            report = run_locomo(service, path, k_values, limit=conversations, search=mode)
    _write_out(report.format(), out)


def _parse_ks(ks: str) -> list[int]:
    """``"1,3,5"`` → ``[1, 3, 5]`` (sorted, unique, each >= 1)."""
    try:
        values = sorted({int(k) for k in ks.split(",") if k.strip()})
    except ValueError as exc:
        raise click.BadParameter(f"--k must be integers, got {ks!r}") from exc
    if not values or values[0] < 1:
        raise click.BadParameter(f"--k must be integers >= 1, got {ks!r}")
    return values


@eval_group.command("longmemeval")
@_config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--k", "ks", default="1,3,5,10", show_default=True, help="Comma-separated k.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@click.option("--limit", type=click.IntRange(1), help="Only the first N instances of PATH.")
@_search_option
@_domain_errors
def eval_longmemeval(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    ks: str,
    out: Path | None,
    limit: int | None,
    search: str | None,
) -> None:
    """LongMemEval retrieval metrics @k on the daemon's query path, as the official scripts.

    \b
    PATH: the official LongMemEval JSON (longmemeval_s, _m or _oracle).
    Each question's haystack goes into a fresh user in a temporary data directory (or
    --data-dir), deleted after scoring; the question is asked at its question_date with
    k = the largest --k. Only USER turns are indexed, as the official retrieval does: a turn is
    relevant when it holds the answer (has_answer) in an answer session.
    \b
      recall_any@k  1 if at least one relevant item is in the top k, else 0
      recall_all@k  1 if every relevant item is in the top k, else 0
      ndcg_any@k    how high the relevant items rank (1 = all of them first)
    Turn level scores the ranked turns; session level maps them to their sessions and reads the
    first k distinct sessions. Means are printed overall and per question_type.
    \b
    Skipped (counted in the report, not ingested): abstention questions (question_id with
    "_abs") and questions whose answer is in no user turn (e.g. single-session-assistant).
    """
    import tempfile

    from memoryd.eval.longmemeval import run_longmemeval

    k_values = _parse_ks(ks)
    with tempfile.TemporaryDirectory(prefix="memoryd-eval-") as tmp:
        config = _load(config_path, data_dir=data_dir or Path(tmp), model_dir=model_dir)
        with _service(config) as service:
            options = {"search": SearchMode(search)} if search else None
            report = run_longmemeval(service, path, k_values, limit=limit, query_options=options)
    _write_out(report.format(), out)


@eval_group.command("facts")
@_config_options
@_locomo_path
@click.option("--conversations", type=click.IntRange(1), help="Only the first N conversations.")
@click.option(
    "--threshold",
    type=click.FloatRange(-1, 1),
    default=0.70,
    show_default=True,
    help="Least cosine between fact and observation sentences for a match.",
)
@click.option(
    "--show",
    type=click.IntRange(0),
    default=0,
    help="Also print the N matched and N unmatched facts closest to the threshold.",
)
@click.option("--llm", "with_llm", is_flag=True, help="Run the LLM abstraction after ingest.")
@click.option(
    "--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), help="Write results."
)
@_domain_errors
def eval_facts(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    conversations: int | None,
    threshold: float,
    show: int,
    with_llm: bool,
    json_out: Path | None,
) -> None:
    """Precision/recall of semantic facts against LoCoMo's `observation` sentences.

    \b
    Each conversation goes into user locomo-<sample_id> in a temporary data directory (or
    --data-dir); with --llm the configured LLM abstracts that user's turns afterwards. Every fact
    becomes a sentence ("Melanie has a sister Anna", "Jon does not live in Paris").
    A fact matches an observation when
      the observation's speaker is the fact's subject, AND
      the observation's turn is one of the fact's source turns or in the same session, AND
      cosine(fact sentence, observation sentence) >= --threshold.
    precision = matched facts / facts; recall = observations matched by some fact /
    observations; also recall on fact-like observations (likes, dislikes, loves, hates, enjoys,
    fan of, passionate about, favourite, prefers, allergic, lives in, works as/at/for, is a,
    has a, owns, married), counts per relation and a threshold sweep.
    0.70: pairs just above it read mostly right, near 0.67 half are topical neighbours
    (how it was chosen: memoryd/eval/facts.py).
    """
    import tempfile

    from memoryd.eval.facts import run_facts

    with tempfile.TemporaryDirectory(prefix="memoryd-eval-") as tmp:
        config = _load(config_path, data_dir=data_dir or Path(tmp), model_dir=model_dir)
        with _service(config) as service:
            report = run_facts(service, path, threshold, conversations, with_llm)
    click.echo(report.format(show))
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report.to_json(), indent=2) + "\n")
        click.echo(f"written to {json_out}")


def _router_head_path(config: Config, head: Path | None) -> Path:
    return head or config.model_dir / "router_head.npz"


def _load_router_head(path: Path) -> Any:
    """The head at ``path``; a file that is not one is a one-line error (missing: ModelMissing)."""
    import zipfile

    from memoryd.router import RouterHead

    try:
        return RouterHead.load(path)
    except (ValueError, KeyError, OSError, zipfile.BadZipFile) as exc:
        raise click.ClickException(f"{path}: not a router head ({exc})") from exc


def _write_out(text: str, out: Path | None) -> None:
    click.echo(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
        click.echo(f"written to {out}")


_HEAD_OPTION = click.option(
    "--head",
    "head_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Router head .npz to evaluate (default: router_head.npz of the model directory).",
)


@eval_group.command("router")
@_config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@_HEAD_OPTION
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@_domain_errors
def eval_router(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    head_path: Path | None,
    out: Path | None,
) -> None:
    """Router F1 (per label, micro, macro) and routing latency p50/p95 on labelled PATH.

    \b
    PATH: JSONL, one {"text": "...", "labels": ["working", ...]} per line (other keys ignored).
    Latency: encoder + head (one embed + route per text, as the daemon does) and the head alone
    (route on a precomputed vector), each over every line after 20 warm-up calls.
    """
    from memoryd.encoder import Encoder
    from memoryd.eval.router import evaluate_router, load_examples
    from memoryd.router import Router

    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    examples = load_examples(path)
    head_file = _router_head_path(config, head_path)
    router = Router(_load_router_head(head_file), config.router.threshold)
    encoder = Encoder(config.model_dir, threads=config.encoder.threads)
    try:
        report = evaluate_router(
            encoder, router, examples, path=path, head_path=head_file, tau0=config.router.tau0
        )
    finally:
        encoder.close()
    _write_out(report.format(), out)


@eval_group.command("router-loop")
@_config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@_HEAD_OPTION
@click.option("--rounds", type=click.IntRange(1), default=5, show_default=True)
@click.option(
    "--test-size", type=click.IntRange(1), default=200, show_default=True, help="Lines per round."
)
@click.option(
    "--split",
    "split_mode",
    type=click.Choice(["line", "group"]),
    help="Test lines: random lines, or whole template groups never streamed "
    "[default: group when every line has a group].",
)
@click.option("--seed", "rng_seed", type=int, default=0, show_default=True, help="Split RNG seed.")
@click.option("--retrain-every", type=click.IntRange(1), help="Labels per round [default: config].")
@click.option("--tau0", type=click.FloatRange(0, 1), help="[default: config router.tau0]")
@click.option("--beta", type=click.FloatRange(0), help="[default: config router.beta]")
@click.option("--tau-min", type=click.FloatRange(0, 1), help="[default: config router.tau_min]")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@click.option(
    "--plot",
    type=click.Path(path_type=Path, dir_okay=False),
    help="PNG of F1, labeller share and tau per round "
    "[default: --out with .png, else eval-results/router_loop.png].",
)
@_domain_errors
def eval_router_loop(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    head_path: Path | None,
    rounds: int,
    test_size: int,
    split_mode: str | None,
    rng_seed: int,
    retrain_every: int | None,
    tau0: float | None,
    beta: float | None,
    tau_min: float | None,
    out: Path | None,
    plot: Path | None,
) -> None:
    """Simulate the router's self-enhancement loop (HGP Table 6 / Fig. 3) on labelled PATH.

    Splits PATH into a training stream and ROUNDS+1 disjoint test subsets; starts from the
    shipped head and seed set; streams the lines through the router, sends those with
    confidence s(x) < tau_t to an oracle labeller (the gold labels: it measures the mechanism,
    not an LLM), trains a round every --retrain-every labels and swaps the head in when the
    round accepts it (t = completed rounds). Prints F1 per round on that round's test subset,
    the labeller share, and the final head's F1 on every held-out line.
    """
    from memoryd.encoder import Encoder
    from memoryd.eval.router import embed_examples, load_examples
    from memoryd.eval.router_loop import plot_loop, run_loop, seed_heldout_groups, split_examples
    from memoryd.router import SeedSet

    config = _load(config_path, data_dir=data_dir, model_dir=model_dir)
    examples = load_examples(path)
    mode = split_mode or ("group" if all(e.group for e in examples) else "line")
    split = split_examples(examples, rounds, test_size, mode, rng_seed)  # type: ignore[arg-type]
    head_file = _router_head_path(config, head_path)
    head = _load_router_head(head_file)
    seed = SeedSet.load(config.model_dir)
    encoder = Encoder(config.model_dir, threads=config.encoder.threads)
    try:
        vectors = embed_examples(encoder, examples)
    finally:
        encoder.close()
    report = run_loop(
        examples,
        vectors,
        seed,
        head,
        split,
        path=path,
        head_path=head_file,
        retrain_every=retrain_every or config.router.retrain_every,
        tau0=config.router.tau0 if tau0 is None else tau0,
        beta=config.router.beta if beta is None else beta,
        tau_min=config.router.tau_min if tau_min is None else tau_min,
        threshold=config.router.threshold,
        rng_seed=rng_seed,
        seed_heldout_groups=seed_heldout_groups(seed, config.model_dir / "router_seed.jsonl"),
    )
    plot_path = plot or (out.with_suffix(".png") if out else Path("eval-results/router_loop.png"))
    plot_loop(report, plot_path)
    _write_out(report.format(), out)
    click.echo(f"plot written to {plot_path}")
