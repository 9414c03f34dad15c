"""What a graph store holds, as text to compare two stores by."""

from __future__ import annotations

from typing import Any

from memoryd.store.graph import GraphStore


def graph_dump(store: GraphStore) -> tuple[list[str], list[str]]:
    """Every node with its properties and every edge with its ends and properties, sorted."""

    def shown(value: dict[str, Any]) -> str:
        return repr(sorted((k, v) for k, v in value.items() if not k.startswith("_")))

    nodes = [
        f"{row[0]} {shown(row[1])}" for row in store._read("n", "MATCH (n) RETURN label(n), n")
    ]
    edges = [
        f"{row[0]} {row[1]}->{row[2]} {shown(row[3])}"
        for row in store._read(
            "r", "MATCH (a)-[r]->(b) RETURN label(r), coalesce(a.id, a.key), b.id, r"
        )
    ]
    return sorted(nodes), sorted(edges)
