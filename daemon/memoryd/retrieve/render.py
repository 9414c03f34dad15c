"""The compact, typed context block an LLM prompt gets, one line per item. Shared by the
API, the CLI and the LLM sufficiency judge."""

from __future__ import annotations

from memoryd.models import OTHERWISE, Episode, Fact, MemoryType, Rule, TaskStatus
from memoryd.retrieve.result import Item, QueryResult

__all__ = ["SECTION_TITLES", "fact_line", "render_context", "render_line"]

USER_SUBJECT = "user"
"""The subject of a fact about the user when no speaker is named."""

SECTION_TITLES = {
    MemoryType.EPISODIC: "What happened (episodic)",
    MemoryType.SEMANTIC: "What is known about the user (semantic)",
    MemoryType.PROCEDURAL: "Rules and procedures (procedural)",
    MemoryType.WORKING: "Open tasks and recent states (working)",
}


def render_line(item: Item) -> str:
    memory = item.memory
    if isinstance(memory, Episode):
        when = memory.ts.strftime("%Y-%m-%d %H:%M")
        who = f"{memory.speaker}: " if memory.speaker else ""
        return f"[{when}] {who}{memory.text}"
    if isinstance(memory, Fact):
        return fact_line(memory)
    if isinstance(memory, Rule):
        # "if C then A1; A2 (when W: X) (otherwise B1)", then the branch a query matched, marked
        # "[applies: otherwise]" ("[applies: none]" when it negated a rule with no else).
        conditions = " and ".join(memory.conditions) or memory.title
        line = f"if {conditions} then {'; '.join(memory.actions) or memory.text}"
        for when, actions in memory.branches.items():
            steps = "; ".join(actions)
            line += f" (otherwise {steps})" if when == OTHERWISE else f" (when {when}: {steps})"
        if "branch" in item.detail:
            line += f" [applies: {item.detail['branch'] or 'none'}]"
        return line
    due = f" (due {memory.due.strftime('%Y-%m-%d %H:%M')})" if memory.due else ""
    if memory.status is TaskStatus.PENDING or not memory.states:
        return f"[{memory.status.value}] {memory.title}{due}"
    when = memory.states[-1].ts.strftime("%Y-%m-%d %H:%M")
    return f"[{memory.status.value} {when}] {memory.title}{due}"


def fact_line(fact: Fact) -> str:
    """ "manager: Marcus Lee (since 2026-02-20)"; another subject's fact names it ("Tom — lives
    in: Edinburgh"); a fact a later one may have replaced says so, a closed one until when."""
    who = "" if fact.subject == USER_SUBJECT else f"{fact.subject} — "
    when = []
    if fact.valid_from is not None:
        when.append(f"since {fact.valid_from:%Y-%m-%d}")
    if fact.valid_to is not None:
        when.append(f"until {fact.valid_to:%Y-%m-%d}")
    elif fact.doubted_by is not None:
        when.append("possibly outdated")
    return f"{who}{fact.statement}" + (f" ({', '.join(when)})" if when else "")


def render_context(result: QueryResult) -> str:
    """A compact, typed block for an LLM prompt; empty sections are left out."""
    blocks = []
    for mtype, title in SECTION_TITLES.items():
        items = result.section(mtype)
        if items:
            lines = "\n".join(f"- {render_line(i)}" for i in items)
            blocks.append(f"## {title}\n{lines}")
    return "\n\n".join(blocks)
