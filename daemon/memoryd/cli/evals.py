"""`memoryd eval`: retrieval, fact and router quality, measured on datasets read in place."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import click

from memoryd.cli.base import (
    config_options,
    domain_errors,
    load,
    scratch_service,
    search_option,
)
from memoryd.config import Config
from memoryd.models import SearchMode

if TYPE_CHECKING:
    from memoryd.encoder import Encoder
    from memoryd.reader import FactReader


@click.group("eval")
def eval_group() -> None:
    """Measure retrieval quality."""


_locomo_path = click.argument(
    "path",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    default=Path(__file__).resolve().parents[4] / "shared" / "data" / "locomo" / "locomo10.json",
)
"""LoCoMo's JSON, read in place (its licence is non-commercial: never copied into the repo)."""


@eval_group.command("locomo")
@config_options
@_locomo_path
@click.option("--k", "ks", default="5,10,25,50", show_default=True, help="Comma-separated k.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@click.option("--conversations", type=int, help="Only the first N conversations.")
@search_option
@domain_errors
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
    from memoryd.eval import run_locomo

    k_values = _parse_ks(ks)
    with scratch_service(config_path, data_dir, model_dir) as service:
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
@config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--k", "ks", default="1,3,5,10", show_default=True, help="Comma-separated k.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@click.option("--limit", type=click.IntRange(1), help="Only the first N instances of PATH.")
@search_option
@domain_errors
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
    from memoryd.eval import run_longmemeval

    k_values = _parse_ks(ks)
    with scratch_service(config_path, data_dir, model_dir) as service:
        options = {"search": SearchMode(search)} if search else None
        report = run_longmemeval(service, path, k_values, limit=limit, query_options=options)
    _write_out(report.format(), out)


@eval_group.command("facts")
@config_options
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
@domain_errors
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
    from memoryd.eval import run_facts

    with scratch_service(config_path, data_dir, model_dir) as service:
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


_EVALS = Path(__file__).resolve().parents[3] / "evals"


def _scenario_options(default: Path) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """PATH (a scenario file, ``default`` when left out), --out and --show of a scenario eval."""

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        for option in reversed(
            [
                click.argument(
                    "path",
                    type=click.Path(path_type=Path, exists=True, dir_okay=False),
                    default=default,
                ),
                click.option(
                    "--out",
                    type=click.Path(path_type=Path, dir_okay=False),
                    help="Also write here.",
                ),
                click.option(
                    "--show",
                    type=click.IntRange(0),
                    help="List only the first N misses (0: none, for a set that must stay "
                    "unread). Default: all.",
                ),
            ]
        ):
            command = option(command)
        return command

    return decorate


@eval_group.command("typed")
@config_options
@_scenario_options(_EVALS / "typed" / "dev.jsonl")
@domain_errors
def eval_typed(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    out: Path | None,
    show: int | None,
) -> None:
    """Typed memory on scenarios: surfaced, structure and stale-clean, per domain and type.

    \b
    PATH: scenarios as JSON lines (format: evals/typed/FORMAT.md; default: the dev set
    evals/typed/dev.jsonl). Each scenario goes into a fresh user in a temporary data directory
    (or --data-dir), then:
      surfaced     share of expected items found in their type's section of a later query
      structure    share of the facts, rules and tasks that must exist and do
      stale-clean  share of superseded values kept out of the current facts
    The misses are listed after the tables (--show bounds them).
    """
    from memoryd.eval import run_typed

    with scratch_service(config_path, data_dir, model_dir) as service:
        report = run_typed(service, path)
    _write_out(report.format(show), out)


@eval_group.command("updates")
@config_options
@_scenario_options(_EVALS / "updates" / "dev_mixed.jsonl")
@domain_errors
def eval_updates(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    out: Path | None,
    show: int | None,
) -> None:
    """Fact updates on scenarios: replaced, stale-clean and kept, per domain.

    \b
    PATH: scenarios as JSON lines (format: evals/updates/FORMAT.md; default: the dev split's
    evals/updates/dev_mixed.jsonl; evals/updates/dev_heldout.jsonl has domains absent from the
    reader's training). Each scenario goes into a fresh user in a temporary data directory (or
    --data-dir); its query is asked after its turns, then:
      replaced     the new value is in the reply's semantic section and no line from before
                   the change carries the old one (replace scenarios)
      stale-clean  the old value is no current fact's value (replace scenarios)
      kept         both values are in the semantic section (keep scenarios)
    The misses are listed after the table (--show bounds them).
    """
    from memoryd.eval import run_updates

    with scratch_service(config_path, data_dir, model_dir) as service:
        report = run_updates(service, path)
    _write_out(report.format(show), out)


_ANNOTATED_LINES = click.argument(
    "path",
    type=click.Path(path_type=Path, exists=True),
    default=Path(__file__).resolve().parents[3] / "models" / "fact_corpus" / "dev",
)


class _Report(Protocol):
    def format(self) -> str: ...


def _eval_on_annotated_lines(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    out: Path | None,
    run: Callable[[Encoder, FactReader, Path], _Report],
) -> None:
    """``run`` on ``path`` with the built encoder and fact reader (and its judge); its report
    printed (and written to ``out``)."""
    from memoryd.encoder import Encoder
    from memoryd.reader import FactReader

    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
    encoder = Encoder(config.model_dir, threads=config.encoder.threads)
    try:
        reader = FactReader.load(config.model_dir)
        reader.check_input(encoder.reads_tuned)
        text = run(encoder, reader, path).format()
    finally:
        encoder.close()
    _write_out(text, out)


@eval_group.command("reader")
@config_options
@_ANNOTATED_LINES
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@domain_errors
def eval_reader(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    out: Path | None,
) -> None:
    """The fact reader on annotated lines: precision, recall and F1 per level, domain, kind
    and attribute.

    \b
    PATH: a file of the fact corpus (single lines or change pairs) or a directory of them
    (default: the dev split, models/fact_corpus/dev). Levels:
      value  subject and value right
      fact   subject, attribute and value right
      full   subject, attribute, value and kind of statement right
    Only facts about now count (questions, plans and other no-change mentions are left out).
    """
    from memoryd.eval import run_reader

    _eval_on_annotated_lines(config_path, data_dir, model_dir, path, out, run_reader)


@eval_group.command("judge")
@config_options
@_ANNOTATED_LINES
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@domain_errors
def eval_judge(
    config_path: Path | None,
    data_dir: Path | None,
    model_dir: Path | None,
    path: Path,
    out: Path | None,
) -> None:
    """The fact judge on annotated lines: does it hear a value as over exactly when it is?

    \b
    PATH: a file of the fact corpus (single lines or change pairs) or a directory of them
    (default: the dev split, models/fact_corpus/dev). Examples:
      pairs    each value of a first trace that the second names again: over when stale
      lines    each annotated value: over when the line ends it (kind end)
      passing  names said in passing in single lines: never over
    Precision, recall and F1 of "over" at the judge's threshold.
    """
    from memoryd.eval import run_judge

    _eval_on_annotated_lines(config_path, data_dir, model_dir, path, out, run_judge)


_HEAD_OPTION = click.option(
    "--head",
    "head_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Router head .npz to evaluate (default: router_head.npz of the model directory).",
)


@eval_group.command("router")
@config_options
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@_HEAD_OPTION
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), help="Also write here.")
@domain_errors
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
    PATH: JSONL, one {"text": "...", "labels": ["working", ...]} per line (other keys ignored),
    or a directory of such files (the routing corpus's dev split: models/router_corpus/dev);
    with a "domain" per line, macro-F1 is also shown per domain.
    Latency: encoder + head (one embed + route per text, as the daemon does) and the head alone
    (route on a precomputed vector), each over every line after 20 warm-up calls.
    """
    from memoryd.encoder import Encoder
    from memoryd.eval import evaluate_router, load_examples
    from memoryd.router import Router

    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
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
@config_options
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
@domain_errors
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
    from memoryd.eval import (
        embed_examples,
        load_examples,
        plot_loop,
        run_loop,
        seed_heldout_groups,
        split_examples,
    )
    from memoryd.router import SeedSet

    config = load(config_path, data_dir=data_dir, model_dir=model_dir)
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
