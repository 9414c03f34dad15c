"""The journal file's tables, created on open (each statement is idempotent) and migrated.

Tables (their columns: ``docs/data-format.md``)
- ``log(seq, kind, ref, payload)``: the append-only stream. ``kind`` is one of
  :class:`~memoryd.store.records.LogKind`.
  A ``turn`` entry holds the turn, its derived memories and the stored memories it changed
  (``updates``: a closed fact, a completed task); ``memory_patch`` the new record;
  ``memory_delete`` the id; ``memory_change`` memories created and changed by something other
  than a turn (the task API, feedback, expiry, an undo, an abstraction pass), with its reason;
  ``turn_relabel`` a deferred turn re-routed under its LLM labels.
- ``turns``: one row per turn id with its embedding and its first receipt (idempotent retries).
- ``memories``: the current state of each memory (derived from the log in the same transaction).
  ``num`` is the integer label the vector index uses.
- ``memory_fts``: FTS5 over memory text (rowid = ``memories.num``), searched by
  :mod:`memoryd.store.lexical`.
- ``entities``: the user's canonical entities and the other names they were given (the
  registry entity canonicalisation matches new names against), written with the memories that
  name them.
- ``mentions(entity_id, num)``: which live episodes mention which entities, written with the
  episodes (a query's episodes sharing its hits' entities read an entity's latest ones).
- ``cursors``: how far a background pass has read (the last episode ``num`` each abstraction
  operator has seen), written in the transaction that journals the pass's result; and how far
  a backfill has (``mentions``: the journal's episodes up to it were indexed when it opened).

The indexes: ``turns_by_session`` (a session's turns in order), ``memories_by_turn``,
``memories_by_type``, and two over facts' payloads: ``facts_by_key`` (subject, relation: an
update's candidates) and ``facts_by_relation`` (a few relations of every subject: a health
profile).
"""

from __future__ import annotations

from memoryd.store.lexical import FTS_TOKENIZER
from memoryd.store.sqlite import Migration

__all__ = ["BACKFILLS", "MIGRATIONS", "SCHEMA"]

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    ref TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    turn_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    embedding BLOB NOT NULL,
    reply TEXT NOT NULL,
    relabel_seq INTEGER
);
CREATE INDEX IF NOT EXISTS turns_by_session ON turns(session_id, seq);
CREATE TABLE IF NOT EXISTS memories (
    num INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    turn_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    ts TEXT NOT NULL,
    payload TEXT NOT NULL,
    embedding BLOB,
    deleted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS memories_by_turn ON memories(turn_id);
CREATE INDEX IF NOT EXISTS facts_by_key ON memories(
    json_extract(payload, '$.subject'), json_extract(payload, '$.relation')
) WHERE type = 'semantic' AND deleted = 0;
CREATE INDEX IF NOT EXISTS facts_by_relation ON memories(json_extract(payload, '$.relation'))
    WHERE type = 'semantic' AND deleted = 0;
CREATE INDEX IF NOT EXISTS facts_by_value ON memories(json_extract(payload, '$.object.id'))
    WHERE type = 'semantic' AND deleted = 0;
CREATE INDEX IF NOT EXISTS memories_by_type ON memories(type, deleted, num);
CREATE VIRTUAL TABLE IF NOT EXISTS memory_fts USING fts5(text, tokenize='{FTS_TOKENIZER}');
CREATE TABLE IF NOT EXISTS entities (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    aliases TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS mentions (
    entity_id TEXT NOT NULL,
    num INTEGER NOT NULL,
    PRIMARY KEY (entity_id, num)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS mentions_by_num ON mentions(num);
CREATE TABLE IF NOT EXISTS cursors (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
"""
MIGRATIONS: tuple[Migration, ...] = (
    ("turns", "relabel_seq", "ALTER TABLE turns ADD COLUMN relabel_seq INTEGER"),
)
# A journal from before ``mentions`` has its live episodes' mentions indexed once, when it opens
# (the condition on the cursor is constant: a journal that has it scans nothing).
BACKFILLS = (
    "INSERT OR IGNORE INTO mentions(entity_id, num)"
    " SELECT json_extract(j.value, '$.entity.id'), m.num"
    " FROM memories m, json_each(m.payload, '$.mentions') j"
    " WHERE m.type = 'episodic' AND m.deleted = 0"
    " AND NOT EXISTS (SELECT 1 FROM cursors WHERE name = 'mentions')",
    "INSERT OR IGNORE INTO cursors(name, value)"
    " SELECT 'mentions', COALESCE(MAX(num), 0) FROM memories",
)
