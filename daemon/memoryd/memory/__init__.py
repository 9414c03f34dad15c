"""Typed memory: extraction of candidates from text, building the four memory types from a
routed turn, consolidation with what is stored, entity canonicalisation, explicit changes
(tasks, feedback, undo), LLM abstraction operators and time expressions.

Everything here is a function of its inputs: records in, records out. Storage is the caller's.
"""

from memoryd.memory.abstract import MAX_BATCH, abstract_facts, abstract_rules
from memoryd.memory.build import HEALTH_ATTRIBUTES, build_memories, build_reports, fact_values
from memoryd.memory.changes import api_task, expired, reopen_fact, transition, with_feedback
from memoryd.memory.consolidate import BatchView, MemoryView, StagedView, consolidate
from memoryd.memory.entities import EntityResolver
from memoryd.memory.extract import (
    canonical_name,
    entity_id,
    extract,
    is_health_related,
    related_drug_terms,
)
from memoryd.memory.hearing import Named, named_in
from memoryd.memory.timeparse import TimeMention, find_times, parse_timestamp

__all__ = [
    "HEALTH_ATTRIBUTES",
    "MAX_BATCH",
    "BatchView",
    "EntityResolver",
    "MemoryView",
    "Named",
    "StagedView",
    "TimeMention",
    "abstract_facts",
    "abstract_rules",
    "api_task",
    "build_memories",
    "build_reports",
    "canonical_name",
    "consolidate",
    "entity_id",
    "expired",
    "extract",
    "fact_values",
    "find_times",
    "is_health_related",
    "named_in",
    "parse_timestamp",
    "related_drug_terms",
    "reopen_fact",
    "transition",
    "with_feedback",
]
