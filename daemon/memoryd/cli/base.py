"""What every `memoryd` command shares: the settings options, loading the config, the service
opened on the data directory, logging, and turning memoryd's errors into a one-line message."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from memoryd.config import Config, default_config_path, load_config
from memoryd.errors import MemorydError
from memoryd.models import SearchMode
from memoryd.service import MemoryService

F = TypeVar("F", bound=Callable[..., Any])


def config_options(fn: F) -> F:
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


def load(config_path: Path | None, **overrides: Any) -> Config:
    return load_config(config_path or default_config_path(), os.environ, overrides)


def domain_errors(fn: F) -> F:
    """Turn memoryd's errors, and a request the API's models refuse, into a one-line message
    and exit code 1."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MemorydError as exc:
            raise click.ClickException(str(exc)) from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise click.ClickException(f"{where}: {first['msg']}") from exc

    return wrapper  # type: ignore[return-value]


@contextmanager
def open_service(config: Config) -> Iterator[MemoryService]:
    service = MemoryService.from_config(config)
    try:
        yield service
    finally:
        service.close()


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


search_option = click.option(
    "--search",
    type=click.Choice([m.value for m in SearchMode]),
    help="Tiers to search: tiered (1, then 1+2, then all, until sufficient), all (exhaustive),"
    " tier1, tier2. Default: the tiers.search setting.",
)


@contextmanager
def scratch_service(
    config_path: Path | None, data_dir: Path | None, model_dir: Path | None
) -> Iterator[MemoryService]:
    """A service on ``data_dir``, or on a temporary data directory removed afterwards (evals)."""
    with tempfile.TemporaryDirectory(prefix="memoryd-eval-") as tmp:
        config = load(config_path, data_dir=data_dir or Path(tmp), model_dir=model_dir)
        with open_service(config) as service:
            yield service
