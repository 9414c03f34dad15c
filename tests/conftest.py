"""Shared fixtures: real encoder and router from models/, fresh data directories per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.config import Config
from memoryd.encoder import Encoder
from memoryd.reader import FactReader
from memoryd.router import Router, RouterHead
from memoryd.service import MemoryService
from support.config import MODEL_DIR, make_config


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's MEMORYD_* settings; nothing may reach a model hub."""
    for key in list(os.environ):
        if key.startswith("MEMORYD_") and key not in ("MEMORYD_KUZU_PYTHON", "MEMORYD_MODEL_DIR"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def encoder() -> Iterator[Encoder]:
    enc = Encoder(MODEL_DIR)
    yield enc
    enc.close()


@pytest.fixture(scope="session")
def reader() -> FactReader:
    return FactReader.load(MODEL_DIR)


@pytest.fixture(scope="session")
def router() -> Router:
    return Router(RouterHead.load(MODEL_DIR / "router_head.npz"))


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path / "data")


@pytest.fixture
def service(config: Config, encoder: Encoder, router: Router) -> Iterator[MemoryService]:
    svc = MemoryService(config, encoder, router)
    yield svc
    svc.close()


@pytest.fixture
def service_factory(encoder: Encoder, router: Router) -> Iterator:
    """Open (and later close) services on given configs, sharing the loaded encoder."""
    opened: list[MemoryService] = []

    def factory(config: Config) -> MemoryService:
        svc = MemoryService(config, encoder, router)
        opened.append(svc)
        return svc

    yield factory
    for svc in opened:
        svc.close()
