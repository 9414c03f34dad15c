"""The settings table: every setting's name, default, help text and rule, in one place.

It feeds the typed config (:mod:`memoryd.config`), the TOML file (``make config`` writes
``config/memoryd.toml`` from it, a test keeps the two equal), the environment variables, the
CLI's ``doctor`` and the docs. A setting with a closed set of values lists them as members of
an enum of :mod:`memoryd.models`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from memoryd.models import (
    USER_ID,
    Fusion,
    GraphEngine,
    LLMBackend,
    LogLevel,
    McpTools,
    SearchMode,
    SufficiencyJudge,
)

__all__ = ["SETTINGS", "SETTINGS_BY_NAME", "Setting"]

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
    return bool(v > 0)


def _fraction(v: Any) -> bool:
    return bool(0.0 <= v <= 1.0)


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
        "limits.max_import_bytes",
        2048 * MIB,
        "Largest export POST .../import accepts (413 beyond); spooled to the data directory.",
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
        "Users whose stores stay open at once (LRU beyond); each holds about 65 MB.",
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
        "encoder.workers",
        0,
        "Threads embedding the turns of one batch in parallel, one text per call"
        " (0: one per core).",
        check=lambda v: v >= 0,
        rule="must be >= 0",
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
        128 * MIB,
        "Graph buffer pool per open user, bytes (64 MiB fills on LoCoMo's largest conversation "
        "and at 10k bench turns; pages are touched as used, so RSS grows with the graph only).",
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
        "retrieval.neighbour_weight",
        0.15,
        "Share of a hit's fused score given to the episodes of the turns just before and after "
        "it in its session (0 turns the lift off).",
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
        "Who decides that a tier's hits suffice: score (the pool holds tiers.threshold of what "
        "the store has on the query's words, and the top-k is full) or llm (the LLM judges the "
        "hits; needs llm.backend).",
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
    Setting("mcp.enabled", True, "Serve MCP (streamable HTTP) at /mcp/ on the daemon's port."),
    Setting(
        "mcp.default_user",
        "default",
        "The user /mcp/ serves; /mcp/users/<user>/ serves another. No tool takes a user.",
        check=lambda v: bool(USER_ID.fullmatch(v)),
        rule="use 1-64 characters from A-Z a-z 0-9 _ -",
    ),
    Setting(
        "mcp.tools",
        McpTools.DEFAULT,
        "MCP tools offered: default (ten: remember, ingest_turns, recall, list_facts, undo_fact, "
        "list_tasks, add_task, update_task, forget, memory_status) or all (also memories, turns, "
        "feedback, tiers, router, forget_user).",
        choices=tuple(McpTools),
    ),
    Setting(
        "mcp.allowed_hosts",
        "",
        "Host headers MCP accepts besides the loopback names, comma-separated (e.g. "
        '"pi.local:*,100.64.0.7:8765"); any other Host gets 421 (DNS-rebinding protection).',
    ),
)
SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
