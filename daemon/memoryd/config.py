"""The validated, typed configuration, loaded from the settings table (:mod:`memoryd.settings`).

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

import os
import tomllib
from collections.abc import Mapping
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
    McpTools,
    SearchMode,
    SufficiencyJudge,
)
from memoryd.settings import SETTINGS, SETTINGS_BY_NAME, Setting

__all__ = [
    "SECTIONS",
    "AuthConfig",
    "Config",
    "EncoderConfig",
    "GraphConfig",
    "LLMConfig",
    "LimitsConfig",
    "McpConfig",
    "MemoryConfig",
    "RetrievalConfig",
    "RouterConfig",
    "TierConfig",
    "VectorsConfig",
    "default_config_path",
    "default_toml",
    "load_config",
]


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
    max_import_bytes: int
    max_turns_per_request: int
    max_open_users: int


@dataclass(frozen=True, repr=False)
class EncoderConfig(Section):
    NAME = "encoder"
    threads: int
    workers: int

    @property
    def pool_size(self) -> int:
        """Encoder workers for a batch: ``workers``, or one per core when 0."""
        return self.workers or len(os.sched_getaffinity(0))


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
    neighbour_weight: float
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


@dataclass(frozen=True, repr=False)
class McpConfig(Section):
    NAME = "mcp"
    enabled: bool
    default_user: str
    tools: McpTools
    allowed_hosts: str

    def hosts(self) -> list[str]:
        """``allowed_hosts`` as a list."""
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]


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
    McpConfig,
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
    mcp: McpConfig

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
        "# in force. Generated by `make config` from memoryd/settings.py: edit SETTINGS, not this.",
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
