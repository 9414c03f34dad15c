"""Settings: one table of name, default and help feeds the TOML file, the env and the CLI.

Precedence: ``config/memoryd.toml`` (or ``--config PATH``) < environment ``MEMORYD_*`` < CLI flags.
A setting ``graph.engine`` lives in the TOML table ``[graph]`` as ``engine`` and in the environment
as ``MEMORYD_GRAPH_ENGINE``. Everything is validated once, in :func:`load_config`.

:class:`Config` holds one typed config per TOML table (``config.tiers.alpha``,
``config.graph.engine``); each is built from its section of :data:`SETTINGS` and has no defaults
of its own (a test keeps each one's fields equal to its section). A setting with a closed set of
values takes them from an enum of :mod:`memoryd.models`, and its value in the typed config is
that enum's member.

    config = load_config(path, os.environ, {"port": 0})
    config.tiers.cache_size, config.retrieval.fusion      # 50, Fusion.SCORE
    TierConfig.defaults(cache_size=3)                     # a section at its defaults, changed
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar, Self

from memoryd.errors import ConfigError
from memoryd.models import (
    Fusion,
    GraphEngine,
    LLMBackend,
    LogLevel,
    SearchMode,
    SufficiencyJudge,
)

__all__ = [
    "SETTINGS",
    "AuthConfig",
    "Config",
    "EncoderConfig",
    "GraphConfig",
    "LLMConfig",
    "LimitsConfig",
    "MemoryConfig",
    "RetrievalConfig",
    "RouterConfig",
    "Setting",
    "TierConfig",
    "VectorsConfig",
    "default_config_path",
    "default_toml",
    "load_config",
]

MIB = 1024 * 1024


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    choices: tuple[StrEnum, ...] | None = None
    check: Callable[[Any], bool] | None = None
    rule: str = ""

    @property
    def env(self) -> str:
        return "MEMORYD_" + self.name.upper().replace(".", "_")


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
        LogLevel.INFO,
        "Log level of the daemon.",
        choices=tuple(LogLevel),
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
        LLMBackend.NONE,
        "LLM for background work: none (deferral off), llamacpp (a local GGUF) or openai "
        "(an OpenAI-compatible server such as Ollama, llama-server or vLLM).",
        choices=tuple(LLMBackend),
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
        GraphEngine.LADYBUG,
        "Graph engine: ladybug (default) or kuzu (archived).",
        choices=tuple(GraphEngine),
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
        Fusion.SCORE,
        "How rankings are fused: score (min-max normalised scores) or rrf (reciprocal rank).",
        choices=(Fusion.SCORE, Fusion.RRF),
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
        SearchMode.TIERED,
        "Default search of a query: tiered (tier 1, then 1+2, then all, stopping when "
        "sufficient) or all (exhaustive). A query's own `search` wins.",
        choices=(SearchMode.TIERED, SearchMode.ALL),
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
        SufficiencyJudge.SCORE,
        "Who decides that a tier's hits suffice: score (best evidence over a threshold and a "
        "full top-k) or llm (the LLM judges tier 1's hits; needs llm.backend).",
        choices=tuple(SufficiencyJudge),
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


SECRETS = frozenset({"auth.token", "llm.api_key"})  # shown as *** in a config's repr


class Section:
    """A typed config built from the settings of one TOML table (``NAME``)."""

    NAME: ClassVar[str]

    @classmethod
    def defaults(cls, **changes: Any) -> Self:
        """This section at the defaults of :data:`SETTINGS`, with ``changes`` (tests, tools)."""
        values = {f.name: SETTINGS_BY_NAME[f"{cls.NAME}.{f.name}"].default for f in fields(cls)}  # type: ignore[arg-type]
        return cls(**(values | changes))

    def __repr__(self) -> str:
        shown = {
            f.name: "***"
            if f"{self.NAME}.{f.name}" in SECRETS and getattr(self, f.name)
            else getattr(self, f.name)
            for f in fields(self)  # type: ignore[arg-type]
        }
        return f"{type(self).__name__}({shown})"


@dataclass(frozen=True, repr=False)
class AuthConfig(Section):
    NAME = "auth"
    token: str
    enabled: bool


@dataclass(frozen=True, repr=False)
class LimitsConfig(Section):
    NAME = "limits"
    max_turn_bytes: int
    max_body_bytes: int
    max_turns_per_request: int
    max_open_users: int


@dataclass(frozen=True, repr=False)
class EncoderConfig(Section):
    NAME = "encoder"
    threads: int


@dataclass(frozen=True, repr=False)
class RouterConfig(Section):
    """The self-enhancement loop's gate, retries and retraining (:mod:`memoryd.router.enhance`)."""

    NAME = "router"
    threshold: float
    tau0: float
    beta: float
    tau_min: float
    retrain_every: int
    max_attempts: int
    retry_backoff: float
    drain_interval: float


@dataclass(frozen=True, repr=False)
class LLMConfig(Section):
    NAME = "llm"
    backend: LLMBackend
    model_path: str
    url: str
    model: str
    api_key: str
    timeout: float
    max_tokens: int
    threads: int
    context: int
    idle_release: float


@dataclass(frozen=True, repr=False)
class MemoryConfig(Section):
    NAME = "memory"
    entity_threshold: float
    expire_after: float
    recent_hours: float
    maintenance_interval: float
    abstract_interval: float
    abstract_batch: int


@dataclass(frozen=True, repr=False)
class GraphConfig(Section):
    NAME = "graph"
    engine: GraphEngine
    max_db_size: int
    buffer_pool_size: int


@dataclass(frozen=True, repr=False)
class VectorsConfig(Section):
    NAME = "vectors"
    m: int
    ef_construction: int
    ef_search: int
    save_every: int


@dataclass(frozen=True, repr=False)
class RetrievalConfig(Section):
    """Fusion knobs (measured with `memoryd eval locomo`; see :mod:`memoryd.retrieve`)."""

    NAME = "retrieval"
    fusion: Fusion
    rrf_k: int
    bm25_weight: float
    dense_weight: float
    session_weight: float
    candidates: int


@dataclass(frozen=True, repr=False)
class TierConfig(Section):
    """The HMO knobs (:mod:`memoryd.tiers`) and the tiered search's (:mod:`memoryd.retrieve`)."""

    NAME = "tiers"
    search: SearchMode
    alpha: float
    beta: float
    decay: float
    time_unit: float
    recent_sessions: int
    cache_size: int
    buffer_size: int
    drift_threshold: float
    sufficiency: SufficiencyJudge
    threshold: float
    reshuffle_interval: float
    importance_interval: float


SECTIONS: tuple[type[Section], ...] = (
    AuthConfig,
    LimitsConfig,
    EncoderConfig,
    RouterConfig,
    LLMConfig,
    MemoryConfig,
    GraphConfig,
    VectorsConfig,
    RetrievalConfig,
    TierConfig,
)


@dataclass(frozen=True)
class Config:
    """Validated settings: the top-level ones, then one typed config per TOML table."""

    host: str
    port: int
    data_dir: Path
    model_dir: Path
    log_level: LogLevel
    auth: AuthConfig
    limits: LimitsConfig
    encoder: EncoderConfig
    router: RouterConfig
    llm: LLMConfig
    memory: MemoryConfig
    graph: GraphConfig
    vectors: VectorsConfig
    retrieval: RetrievalConfig
    tiers: TierConfig

    def value(self, name: str) -> Any:
        """The value of the setting ``name`` ("port", "graph.engine")."""
        table, _, key = name.rpartition(".")
        return getattr(getattr(self, table), key) if table else getattr(self, name)


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
    if issubclass(kind, StrEnum) and isinstance(raw, str):
        return _member(setting, kind, raw)
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


def _member(setting: Setting, kind: type[StrEnum], raw: str) -> StrEnum:
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(setting.name, raw, _allowed(setting)) from None


def _allowed(setting: Setting) -> str:
    return "allowed: " + ", ".join(setting.choices or ())


def _validate(setting: Setting, value: Any) -> None:
    if setting.choices and value not in setting.choices:
        raise ConfigError(setting.name, value, _allowed(setting))
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
    return _build(values)


def _build(values: Mapping[str, Any]) -> Config:
    """The typed config of validated ``values`` (setting name → value)."""
    sections = {
        cls.NAME: cls(**{f.name: values[f"{cls.NAME}.{f.name}"] for f in fields(cls)})  # type: ignore[arg-type]
        for cls in SECTIONS
    }
    return Config(
        host=values["host"],
        port=values["port"],
        data_dir=Path(values["data_dir"]).expanduser(),
        model_dir=Path(values["model_dir"]).expanduser(),
        log_level=values["log_level"],
        **sections,  # type: ignore[arg-type]
    )


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
