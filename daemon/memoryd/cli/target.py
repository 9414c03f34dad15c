"""Where a CLI command's calls go: the running daemon, through :mod:`memoryd.client`, when one
holds the data directory (or ``--url`` / ``MEMORYD_URL`` names one); else the data directory,
opened in-process. Both answer the API's reply models, so a command prints the same either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import click

from memoryd.cli.base import open_service
from memoryd.client import Client, daemon_url, token_for
from memoryd.config import Config
from memoryd.errors import DaemonUnavailableError, MemorydError
from memoryd.files import data_dir_in_use
from memoryd.models import TaskStatus
from memoryd.portability import read_records
from memoryd.schemas import (
    FactList,
    ImportReply,
    IngestReply,
    QueryReply,
    QueryRequest,
    RereadReply,
    ReshuffleReply,
    RollbackReply,
    RoundReply,
    RouterStatusReply,
    TaskList,
    TierStatusReply,
    TurnIn,
)
from memoryd.service import MemoryService

__all__ = ["LocalMemory", "Memory", "memory_for", "url_option"]

url_option = click.option(
    "--url",
    envvar="MEMORYD_URL",
    help="Talk to the daemon at this URL (default: the configured one, when it holds the data "
    "directory; else the data directory is opened here). Token: MEMORYD_TOKEN, auth.token or "
    "<data-dir>/token.",
)


class Memory(Protocol):
    """What the CLI asks of memoryd: :class:`~memoryd.client.Client` or :class:`LocalMemory`."""

    def ingest(self, user_id: str, turns: Sequence[TurnIn]) -> IngestReply: ...

    def query(self, user_id: str, query: QueryRequest) -> QueryReply: ...

    def list_facts(
        self, user_id: str, subject: str | None = None, history: bool = False
    ) -> FactList: ...

    def list_tasks(self, user_id: str, status: Sequence[TaskStatus] | None = None) -> TaskList: ...

    def reread_facts(self, user_id: str) -> RereadReply: ...

    def undo_reread(self, user_id: str) -> RereadReply: ...

    def tiers(self, user_id: str, moves: int = 20) -> TierStatusReply: ...

    def reshuffle(self, user_id: str) -> ReshuffleReply: ...

    def router_status(self, user_id: str) -> RouterStatusReply: ...

    def train_router(self, user_id: str) -> RoundReply: ...

    def rollback_router(self, user_id: str) -> RollbackReply: ...

    def export(self, user_id: str) -> Iterator[dict[str, Any]]: ...

    def import_user(self, user_id: str, export: Path) -> ImportReply: ...


class LocalMemory:
    """The façade in-process, answering what the daemon's routes answer."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def ingest(self, user_id: str, turns: Sequence[TurnIn]) -> IngestReply:
        return IngestReply.of(self.service.ingest(user_id, [t.to_new_turn() for t in turns]))

    def query(self, user_id: str, query: QueryRequest) -> QueryReply:
        return QueryReply.of(query.query, self.service.query(user_id, query.to_params()))

    def list_facts(
        self, user_id: str, subject: str | None = None, history: bool = False
    ) -> FactList:
        return FactList.of(self.service.list_facts(user_id, subject, history))

    def list_tasks(self, user_id: str, status: Sequence[TaskStatus] | None = None) -> TaskList:
        return TaskList.of(self.service.list_tasks(user_id, tuple(status or TaskStatus)))

    def reread_facts(self, user_id: str) -> RereadReply:
        return RereadReply.of(self.service.reread_facts(user_id))

    def undo_reread(self, user_id: str) -> RereadReply:
        return RereadReply.of(self.service.undo_reread(user_id))

    def tiers(self, user_id: str, moves: int = 20) -> TierStatusReply:
        return TierStatusReply.model_validate(self.service.tiers_status(user_id, moves))

    def reshuffle(self, user_id: str) -> ReshuffleReply:
        return ReshuffleReply.model_validate(self.service.reshuffle(user_id))

    def router_status(self, user_id: str) -> RouterStatusReply:
        return RouterStatusReply.model_validate(self.service.router_status(user_id))

    def train_router(self, user_id: str) -> RoundReply:
        return RoundReply.model_validate(self.service.train_router(user_id))

    def rollback_router(self, user_id: str) -> RollbackReply:
        return RollbackReply.model_validate(self.service.rollback_router(user_id))

    def export(self, user_id: str) -> Iterator[dict[str, Any]]:
        return self.service.export_user(user_id)

    def import_user(self, user_id: str, export: Path) -> ImportReply:
        with export.open() as lines:
            return ImportReply.of(user_id, self.service.import_user(user_id, read_records(lines)))


@contextmanager
def memory_for(config: Config, url: str | None) -> Iterator[Memory]:
    """The daemon at ``url``; else the configured daemon if it holds the data directory; else
    the data directory in-process."""
    held = url is None and data_dir_in_use(config.data_dir)
    if url is None and not held:
        with open_service(config) as service:
            yield LocalMemory(service)
        return
    url = url or daemon_url(config)
    with Client(url, token_for(config) or "") as client:  # "": no token, read no config again
        try:
            yield client
        except DaemonUnavailableError as exc:
            if not held:
                raise
            raise MemorydError(
                f"a memoryd process holds {config.data_dir}, but no daemon answers at {url}: "
                "pass --url (or MEMORYD_URL), or stop that process"
            ) from exc
