"""Storage: one user's journal file (the source of truth and the stores that share it), and the
graph and vector projections of it. Nothing here imports above :mod:`memoryd.models`.

- :mod:`~memoryd.store.sqlite`: the journal file's connections, pragmas and transactions;
- :mod:`~memoryd.store.journal`: log, turns, memories and full-text rows, entities, cursors;
- :mod:`~memoryd.store.headers`: HMO headers, tier moves and runs, the persona;
- :mod:`~memoryd.store.router_state`: the router's queue, label pool, rounds and decisions;
- :mod:`~memoryd.store.lexical`: BM25 over the full-text index;
- :mod:`~memoryd.store.mentions`: which episodes mention which entities;
- :mod:`~memoryd.store.active_pool`: the active tiers (1-2) mirrored in memory while small;
- :mod:`~memoryd.store.codec` and :mod:`~memoryd.store.records`: how records are written and
  what the stores take and give back;
- :mod:`~memoryd.store.graph` (Kùzu family), with :mod:`~memoryd.store.episode_order` (its
  episode chains' order, in memory), and :mod:`~memoryd.store.vectors` (hnswlib).
"""

from memoryd.store.active_pool import POOL_CAP, ActivePool
from memoryd.store.codec import (
    change_of_payload,
    decode_embedding,
    encode_embedding,
    memory_of_record,
    patch_embedding,
    receipt_of_payload,
    receipt_payload,
    relabel_of_payload,
    to_payload,
    turn_of_payload,
    updates_of_payload,
)
from memoryd.store.graph import MAX_CHAIN_HOPS, GraphStore
from memoryd.store.headers import HeaderRow, HeaderStore, Move, PersonaSlot, Placement, RunKind
from memoryd.store.journal import Journal
from memoryd.store.lexical import FTS_TOKENIZER, TextSearch, match_expression
from memoryd.store.mentions import MentionIndex
from memoryd.store.records import (
    FEEDBACK_POSITIVE,
    LogEntry,
    LogKind,
    MemoryChange,
    NewMemory,
    Relabel,
    Routing,
    StoredMemory,
    TurnEntry,
    Written,
)
from memoryd.store.router_state import RoundKind, RoundRecord, RouterStore
from memoryd.store.sqlite import Database, copy_database, integrity_problems
from memoryd.store.vectors import VectorStore

__all__ = [
    "FEEDBACK_POSITIVE",
    "FTS_TOKENIZER",
    "MAX_CHAIN_HOPS",
    "POOL_CAP",
    "ActivePool",
    "Database",
    "GraphStore",
    "HeaderRow",
    "HeaderStore",
    "Journal",
    "LogEntry",
    "LogKind",
    "MemoryChange",
    "MentionIndex",
    "Move",
    "NewMemory",
    "PersonaSlot",
    "Placement",
    "Relabel",
    "RoundKind",
    "RoundRecord",
    "RouterStore",
    "Routing",
    "RunKind",
    "StoredMemory",
    "TextSearch",
    "TurnEntry",
    "VectorStore",
    "Written",
    "change_of_payload",
    "copy_database",
    "decode_embedding",
    "encode_embedding",
    "integrity_problems",
    "match_expression",
    "memory_of_record",
    "patch_embedding",
    "receipt_of_payload",
    "receipt_payload",
    "relabel_of_payload",
    "to_payload",
    "turn_of_payload",
    "updates_of_payload",
]
