"""Settings: one table of name, default and help feeds the TOML file, the env and the CLI.

Precedence: ``config/memoryd.toml`` (or ``--config PATH``) < environment ``MEMORYD_*`` < CLI flags.
A setting ``graph.engine`` lives in the TOML table ``[graph]`` as ``engine`` and in the environment
as ``MEMORYD_GRAPH_ENGINE``. Everything is validated once, in :func:`load_config`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from memoryd.errors import ConfigError

MIB = 1024 * 1024


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], bool] | None = None
    rule: str = ""

    @property
    def env(self) -> str:
        return "MEMORYD_" + self.name.upper().replace(".", "_")

    @property
    def field(self) -> str:
        return self.name.replace(".", "_")


def _positive(v: Any) -> bool:
    return v > 0


def _fraction(v: Any) -> bool:
    return 0.0 <= v <= 1.0


SETTINGS: tuple[Setting, ...] = (
    Setting("host", "127.0.0.1", "Address to bind. A non-loopback address requires the token."),
    Setting(
        "port",
        8765,
        "TCP port to listen on (0 picks a free port).",
        check=lambda v: 0 <= v <= 65535,
        rule="must be 0-65535",
    ),
    Setting("data_dir", "./var", "Directory holding the token and one folder per user."),
    Setting("model_dir", "./models", "Directory with the built encoder and router artifacts."),
    Setting(
        "log_level",
        "info",
        "Log level of the daemon.",
        choices=("debug", "info", "warning", "error"),
    ),
    Setting("auth.token", "", "Bearer token; empty = read or create <data_dir>/token (mode 0600)."),
    Setting(
        "auth.enabled",
        True,
        "Require the bearer token on /v1 routes (loopback binds only may turn it off).",
    ),
    Setting(
        "limits.max_turn_bytes",
        32 * 1024,
        "Largest turn text accepted, in UTF-8 bytes.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "limits.max_body_bytes",
        8 * MIB,
        "Largest request body accepted (413 beyond).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "limits.max_turns_per_request",
        256,
        "Most turns in one POST .../turns.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "limits.max_open_users",
        32,
        "Users whose stores stay open at once (LRU beyond).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "encoder.threads",
        1,
        "onnxruntime intra-op threads for one embedding.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "router.threshold",
        0.5,
        "Probability at which the router assigns a label.",
        check=_fraction,
        rule="must be in [0, 1]",
    ),
    Setting(
        "router.tau0",
        0.90,
        "Deferral threshold before any training round: less confident turns go to the LLM.",
        check=_fraction,
        rule="must be in [0, 1]",
    ),
    Setting(
        "router.beta",
        0.05,
        "Decay per training round: tau_t = max(tau_min, tau0 * e^(-beta * t)).",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "router.tau_min",
        0.50,
        "Floor of the deferral threshold.",
        check=_fraction,
        rule="must be in [0, 1]",
    ),
    Setting(
        "router.retrain_every",
        200,
        "New LLM labels in a user's pool that trigger a training round.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "router.max_attempts",
        3,
        "LLM labelling attempts per deferred turn before it keeps its classifier label.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "router.retry_backoff",
        5.0,
        "Seconds before the first retry of a failed labelling; doubles on each retry.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "router.drain_interval",
        2.0,
        "Seconds between runs of the background job that labels deferred turns.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "llm.backend",
        "none",
        "LLM for background work: none (deferral off), llamacpp (a local GGUF) or openai "
        "(an OpenAI-compatible server such as Ollama, llama-server or vLLM).",
        choices=("none", "llamacpp", "openai"),
    ),
    Setting("llm.model_path", "", "GGUF file for the llamacpp backend."),
    Setting(
        "llm.url",
        "http://127.0.0.1:8080/v1",
        "Base URL of the OpenAI-compatible server (the part before /chat/completions).",
    ),
    Setting("llm.model", "", "Model name sent to the OpenAI-compatible server."),
    Setting("llm.api_key", "", "Bearer key for the OpenAI-compatible server, if it needs one."),
    Setting(
        "llm.timeout",
        30.0,
        "Seconds one LLM call may take before it is abandoned (and retried later).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "llm.max_tokens",
        768,
        "Most tokens one LLM answer may have (labels take ~20; a full abstraction answer "
        "~500-800).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "llm.threads",
        1,
        "CPU threads for the llamacpp backend (llama.cpp threads spin-wait for each other: "
        "2 threads on a busy 2-core machine were 28x slower than 1).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "llm.context",
        2048,
        "Context window (tokens) for the llamacpp backend.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "llm.idle_release",
        300.0,
        "Seconds without a call after which the llamacpp model is unloaded to free memory.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "memory.entity_threshold",
        0.90,
        "Cosine at which a new entity name that looks like a known one (a shared word or prefix) "
        "is taken to be it (MiniLM: 'knee injury'/'injured knee' 0.935, 'New York City'/'York' "
        "0.889).",
        check=lambda v: 0 < v <= 1,
        rule="must be in (0, 1]",
    ),
    Setting(
        "memory.expire_after",
        12 * 3600.0,
        "Seconds after its due time that a still-pending task expires.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "memory.recent_hours",
        24.0,
        "Tasks done or cancelled this many hours before a query still show with the open ones "
        "('took aspirin this morning' bears on tonight's plan).",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "memory.maintenance_interval",
        60.0,
        "Seconds between runs of the job that expires overdue tasks.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "memory.abstract_interval",
        300.0,
        "Seconds between runs of the LLM abstraction job (facts and rules from new episodes).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "memory.abstract_batch",
        6,
        "Episodes per LLM abstraction call, at most 6 (a small model's context is short).",
        check=lambda v: 1 <= v <= 6,
        rule="must be in 1..6",
    ),
    Setting(
        "graph.engine",
        "ladybug",
        "Graph engine: ladybug (default) or kuzu (archived).",
        choices=("ladybug", "kuzu"),
    ),
    Setting(
        "graph.max_db_size",
        4096 * MIB,
        "Largest graph file per user, bytes (mmap size).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "graph.buffer_pool_size",
        64 * MIB,
        "Graph buffer pool per open user, bytes (32 MiB fills at 10k turns; larger costs RSS).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting("vectors.m", 16, "hnswlib M (graph degree).", check=_positive, rule="must be > 0"),
    Setting(
        "vectors.ef_construction",
        100,
        "hnswlib ef at build time.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "vectors.ef_search",
        64,
        "hnswlib ef at query time (raised to k when smaller).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "vectors.save_every",
        500,
        "Save a user's vector index after this many changes.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "retrieval.fusion",
        "score",
        "How rankings are fused: score (min-max normalised scores) or rrf (reciprocal rank).",
        choices=("score", "rrf"),
    ),
    Setting(
        "retrieval.rrf_k",
        60,
        "Reciprocal-rank-fusion constant.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "retrieval.bm25_weight",
        1.0,
        "Weight of the BM25 ranking in the fusion.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "retrieval.dense_weight",
        0.2,
        "Weight of the dense ranking in the fusion (MiniLM is weaker than BM25 on chat turns).",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "retrieval.session_weight",
        1.0,
        "Weight of a memory's session score (its best 3 memories) in the fusion.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "retrieval.candidates",
        100,
        "Candidates taken from each ranking before fusion.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "tiers.search",
        "tiered",
        "Default search of a query: tiered (tier 1, then 1+2, then all, stopping when "
        "sufficient) or all (exhaustive). A query's own `search` wins.",
        choices=("tiered", "all"),
    ),
    Setting(
        "tiers.alpha",
        0.1,
        "α: weight of importance (1-10) in a record's score.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "tiers.beta",
        1.0,
        "β: weight of persona similarity (a cosine) in a record's score.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "tiers.decay",
        0.05,
        "λ: decay of a score per time unit since the last recall (slower for often recalled).",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "tiers.time_unit",
        86400.0,
        "Seconds in the time unit of λ (a day).",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "tiers.recent_sessions",
        5,
        "S: every record of the last S sessions is in tier 1.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "tiers.cache_size",
        50,
        "K: records in tier 1 by score, besides the recent sessions.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "tiers.buffer_size",
        200,
        "H: records in tier 2.",
        check=lambda v: v >= 0,
        rule="must be >= 0",
    ),
    Setting(
        "tiers.drift_threshold",
        0.10,
        "τ: persona drift ‖P − P_anchor‖₂ at which the active tiers' similarities are recomputed.",
        check=lambda v: 0 <= v <= 2,
        rule="must be in [0, 2]",
    ),
    Setting(
        "tiers.sufficiency",
        "score",
        "Who decides that a tier's hits suffice: score (best evidence over a threshold and a "
        "full top-k) or llm (the LLM judges tier 1's hits; needs llm.backend).",
        choices=("score", "llm"),
    ),
    Setting(
        "tiers.threshold",
        0.8,
        "Word share `score` sufficiency needs: the idf-weighted share of the records holding "
        "the query's words that are in the pool searched (calibrated with `make bench-tiers`).",
        check=_fraction,
        rule="must be in [0, 1]",
    ),
    Setting(
        "tiers.reshuffle_interval",
        300.0,
        "Seconds between runs of the job that re-scores and re-places the open users' records.",
        check=_positive,
        rule="must be > 0",
    ),
    Setting(
        "tiers.importance_interval",
        600.0,
        "Seconds between runs of the LLM importance job (only with an LLM).",
        check=_positive,
        rule="must be > 0",
    ),
)
SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


@dataclass(frozen=True)
class Config:
    """Validated settings. Field names are the setting names with '.' replaced by '_'."""

    host: str
    port: int
    data_dir: Path
    model_dir: Path
    log_level: str
    auth_token: str
    auth_enabled: bool
    limits_max_turn_bytes: int
    limits_max_body_bytes: int
    limits_max_turns_per_request: int
    limits_max_open_users: int
    encoder_threads: int
    router_threshold: float
    router_tau0: float
    router_beta: float
    router_tau_min: float
    router_retrain_every: int
    router_max_attempts: int
    router_retry_backoff: float
    router_drain_interval: float
    llm_backend: str
    llm_model_path: str
    llm_url: str
    llm_model: str
    llm_api_key: str
    llm_timeout: float
    llm_max_tokens: int
    llm_threads: int
    llm_context: int
    llm_idle_release: float
    memory_entity_threshold: float
    memory_expire_after: float
    memory_recent_hours: float
    memory_maintenance_interval: float
    memory_abstract_interval: float
    memory_abstract_batch: int
    graph_engine: str
    graph_max_db_size: int
    graph_buffer_pool_size: int
    vectors_m: int
    vectors_ef_construction: int
    vectors_ef_search: int
    vectors_save_every: int
    retrieval_fusion: str
    retrieval_rrf_k: int
    retrieval_bm25_weight: float
    retrieval_dense_weight: float
    retrieval_session_weight: float
    retrieval_candidates: int
    tiers_search: str
    tiers_alpha: float
    tiers_beta: float
    tiers_decay: float
    tiers_time_unit: float
    tiers_recent_sessions: int
    tiers_cache_size: int
    tiers_buffer_size: int
    tiers_drift_threshold: float
    tiers_sufficiency: str
    tiers_threshold: float
    tiers_reshuffle_interval: float
    tiers_importance_interval: float

    def __repr__(self) -> str:
        shown = {f.name: getattr(self, f.name) for f in fields(self)}
        shown["auth_token"] = "***" if self.auth_token else ""
        shown["llm_api_key"] = "***" if self.llm_api_key else ""
        return f"Config({shown})"

    def value(self, name: str) -> Any:
        return getattr(self, SETTINGS_BY_NAME[name].field)


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


_BOOLS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _coerce(setting: Setting, raw: Any) -> Any:
    kind = type(setting.default)
    if isinstance(raw, kind) and not (kind is int and isinstance(raw, bool)):
        return raw
    if kind is str and isinstance(raw, Path):
        return str(raw)
    if kind is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if isinstance(raw, str) and kind is bool and raw.lower() in _BOOLS:
        return _BOOLS[raw.lower()]
    if isinstance(raw, str) and kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    raise ConfigError(setting.name, raw, f"expected {kind.__name__}")


def _validate(setting: Setting, value: Any) -> None:
    if setting.choices and value not in setting.choices:
        raise ConfigError(setting.name, value, "allowed: " + ", ".join(setting.choices))
    if setting.check and not setting.check(value):
        raise ConfigError(setting.name, value, setting.rule)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return _flatten(tomllib.load(f))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", str(path), f"not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError("config", str(path), f"cannot read: {exc.strerror}") from exc


def load_config(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Merge file < env < overrides, coerce and validate every setting.

    ``environ`` is passed in (tests give a dict); ``overrides`` use setting names as keys and
    ignore ``None`` values (unset CLI flags).
    """
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if path is not None:
        layers.append((str(path), read_toml(path)))
    env = environ or {}
    layers.append(("env", {s.name: env[s.env] for s in SETTINGS if s.env in env}))
    layers.append(("flags", {k: v for k, v in (overrides or {}).items() if v is not None}))
    values = {s.name: s.default for s in SETTINGS}
    for _source, layer in layers:
        for name, raw in layer.items():
            setting = SETTINGS_BY_NAME.get(name)
            if setting is None:
                raise ConfigError(name, raw, "unknown setting (see `memoryd doctor`)")
            values[name] = _coerce(setting, raw)
    for setting in SETTINGS:
        _validate(setting, values[setting.name])
    kwargs = {SETTINGS_BY_NAME[n].field: v for n, v in values.items()}
    kwargs["data_dir"] = Path(kwargs["data_dir"]).expanduser()
    kwargs["model_dir"] = Path(kwargs["model_dir"]).expanduser()
    return Config(**kwargs)


def default_config_path() -> Path | None:
    """``config/memoryd.toml`` next to the source tree, when running from a checkout."""
    candidate = Path(__file__).resolve().parents[2] / "config" / "memoryd.toml"
    return candidate if candidate.is_file() else None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def default_toml() -> str:
    """config/memoryd.toml as generated from SETTINGS (a test keeps the file equal to this)."""
    lines = [
        "# memoryd settings: every setting, its default and what it is for.",
        "# Precedence: this file < environment MEMORYD_<NAME> (e.g. MEMORYD_GRAPH_ENGINE) < flags.",
        "# Relative paths are relative to the working directory. `memoryd doctor` shows the values",
        "# in force. Generated by `make config` from memoryd/config.py: edit SETTINGS, not this.",
    ]
    section = ""
    for setting in SETTINGS:
        table, _, key = setting.name.rpartition(".")
        lines.append("")
        if table != section:
            lines += [f"[{table}]"]
            section = table
        allowed = f" Allowed: {', '.join(setting.choices)}." if setting.choices else ""
        lines.append(f"# {setting.help}{allowed}")
        lines.append(f"{key} = {_toml_value(setting.default)}")
    return "\n".join(lines) + "\n"
