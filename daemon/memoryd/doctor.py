"""Checks behind `memoryd doctor`: what is configured, what is missing, and why it matters;
with ``--deep``, every user's journal and the privacy of every file in the data directory."""

from __future__ import annotations

import importlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from memoryd.config import Config
from memoryd.encoder import MANIFEST_FILE, MODEL_FILE, TOKENIZER_FILE, sha256_file
from memoryd.errors import JournalDamagedError
from memoryd.store import integrity_problems
from memoryd.workspace import JOURNAL_FILE

ROUTER_HEAD_FILE = "router_head.npz"
ROUTER_SEED_FILE = "router_seed.npz"

Check = tuple[bool, str, str]


def _model_checks(model_dir: Path) -> Iterator[Check]:
    for name, why in (
        (MODEL_FILE, "the encoder: every ingest and query embeds text with it"),
        (TOKENIZER_FILE, "the encoder's tokenizer"),
        (ROUTER_HEAD_FILE, "the router head that types each turn"),
        (ROUTER_SEED_FILE, "the embedded seed set every training round of the router starts from"),
        (MANIFEST_FILE, "records source, sha256 and measured fp32 agreement"),
    ):
        path = model_dir / name
        yield path.is_file(), f"model file {path}", f"{why}; build it with `make models`"
    manifest = model_dir / MANIFEST_FILE
    if manifest.is_file() and (model_dir / MODEL_FILE).is_file():
        recorded = json.loads(manifest.read_text()).get("files", {}).get(MODEL_FILE, {})
        expected = recorded.get("sha256") if isinstance(recorded, dict) else None
        ok = expected == sha256_file(model_dir / MODEL_FILE)
        yield ok, "encoder sha256 matches the manifest", "the model file changed after the build"


def _import_check(module: str, what: str, package: str) -> Check:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        return False, f"{what} {module!r} importable", f"{exc}; pip install {package}"
    return True, f"{what} {module!r} importable", ""


def _llm_checks(config: Config) -> Iterator[Check]:
    """The LLM that labels deferred turns, if one is configured (none is fine: no deferral)."""
    if config.llm.backend == "llamacpp":
        path = Path(config.llm.model_path).expanduser()
        yield (
            bool(config.llm.model_path) and path.is_file(),
            f"llamacpp model file {path}",
            "set llm.model_path to a GGUF file",
        )
        yield _import_check("llama_cpp", "LLM runtime", "'memoryd[llm]'")
    elif config.llm.backend == "openai":
        yield bool(config.llm.url), f"OpenAI-compatible server {config.llm.url}", "set llm.url"


def _data_dir_checks(data_dir: Path) -> Iterator[Check]:
    target = data_dir if data_dir.exists() else data_dir.parent
    writable = os.access(target, os.W_OK)
    yield writable, f"data directory {data_dir} writable", "the journal and graphs are stored here"
    token = data_dir / "token"
    if token.exists():
        mode = stat.S_IMODE(token.stat().st_mode)
        yield mode == 0o600, f"token file {token} is mode 0600", f"it is {oct(mode)}: chmod 600"


def run_checks(config: Config) -> list[Check]:
    """Every check as (ok, what, why-it-matters)."""
    checks = list(_model_checks(config.model_dir))
    checks.append(_import_check(config.graph.engine, "graph engine", config.graph.engine))
    checks.append(_import_check("hnswlib", "vector index", "hnswlib"))
    checks += list(_llm_checks(config))
    checks += list(_data_dir_checks(config.data_dir))
    return checks


def deep_checks(config: Config) -> Iterator[Check]:
    """SQLite's integrity check on every user's journal (a damaged one is refused by the
    daemon), and every file and directory of the data directory private (0600 / 0700)."""
    users = config.data_dir / "users"
    for journal in sorted(users.glob(f"*/{JOURNAL_FILE}")) if users.is_dir() else []:
        user = journal.parent.name
        problems = integrity_problems(journal)
        why = str(JournalDamagedError(user, "; ".join(problems)[:300])) if problems else ""
        yield not problems, f"journal of user {user!r} passes integrity_check", why
    loose = [
        f"{path} is {oct(stat.S_IMODE(path.stat().st_mode))}"
        for path in [config.data_dir, *config.data_dir.rglob("*")]
        if config.data_dir.exists() and stat.S_IMODE(path.stat().st_mode) & 0o077
    ]
    yield (
        not loose,
        f"every file in {config.data_dir} is private to its owner",
        f"{len(loose)} are not ({', '.join(loose[:3])}): chmod -R go-rwx {config.data_dir}",
    )
