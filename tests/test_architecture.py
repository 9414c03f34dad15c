"""The house rules, read from the source (docs/architecture.md, "The import rule"):

- imports flow one way, surfaces → service → domain → engines → base, and inside the domain
  the workspace → the pipelines → the memory, router and persona modules;
- nothing imports the HTTP layer (``api``) but the app factory;
- a package is used through its root: what other packages import from it is exactly its
  ``__all__``;
- no module of the daemon is longer than the size a reader can hold, but the one the design
  names (the graph store).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from support.config import REPO

PACKAGE = REPO / "daemon" / "memoryd"

# Lowest first; a module may import its own layer and any layer below it.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    (
        "base",
        frozenset(
            {
                "__init__",
                "models",
                "errors",
                "settings",
                "config",
                "text",
                "files",
                "tokens",
                "jsonlines",
            }
        ),
    ),
    (
        "engines",
        frozenset({"store", "encoder", "routing_corpus", "fact_corpus", "llm", "writer", "heap"}),
    ),
    ("domain: records", frozenset({"memory", "router", "reader", "persona"})),
    ("domain: pipelines", frozenset({"ingest", "retrieve", "tiers"})),
    ("domain: the user", frozenset({"workspace"})),
    ("service", frozenset({"service", "registry", "labelling", "portability", "backup"})),
    (
        "surfaces",
        frozenset(
            {
                "schemas",
                "api",
                "ui",
                "mcp",
                "app",
                "jobs",
                "client",
                "cli",
                "bridge",
                "doctor",
                "eval",
                "__main__",
            }
        ),
    ),
)
LAYER_OF = {name: rank for rank, (_, names) in enumerate(LAYERS) for name in names}
ONLY_IMPORTED_BY = {"api": {"app"}, "ui": {"app"}}
LONG_MODULES = {"store/graph.py"}
MAX_LINES = 700


def unit(module: str) -> str:
    """The top-level part of a dotted module's package ("memoryd.store.x" → "store")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """(line, imported module, names) of every memoryd import in ``path``, lazy ones too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memoryd"):
            found.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("memoryd"):
                    found.append((node.lineno, alias.name, []))
    return found


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    units = {unit(module_name(p)) for p in SOURCES} | {"__main__"}
    assert units <= set(LAYER_OF), f"give these a layer: {sorted(units - set(LAYER_OF))}"


def test_imports_flow_one_way() -> None:
    wrong = []
    for path in SOURCES:
        importer = module_name(path)
        for line, imported, _ in imports(path):
            source, target = unit(importer), unit(imported)
            if LAYER_OF[target] > LAYER_OF[source]:
                wrong.append(
                    f"{path.relative_to(REPO)}:{line}: {importer} ({LAYERS[LAYER_OF[source]][0]})"
                    f" imports {imported} ({LAYERS[LAYER_OF[target]][0]})"
                )
            allowed = ONLY_IMPORTED_BY.get(target)
            if allowed is not None and source != target and source not in allowed:
                wrong.append(f"{path.relative_to(REPO)}:{line}: {importer} imports {imported}")
    assert not wrong, "imports against the rule:\n" + "\n".join(wrong)


def declared_all(package: Path) -> set[str]:
    for node in ast.parse((package / "__init__.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{package.name}/__init__.py has no __all__")


PACKAGES = sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_a_package_is_used_through_its_root(package: Path) -> None:
    name = f"memoryd.{package.name}"
    used: dict[str, list[str]] = defaultdict(list)
    deep = []
    for path in SOURCES:
        importer = module_name(path)
        if importer == name or importer.startswith(name + "."):
            continue
        for line, imported, names in imports(path):
            where = f"{path.relative_to(REPO)}:{line}"
            if imported.startswith(name + "."):
                deep.append(f"{where}: from {imported} import {', '.join(names)}")
            elif imported == name:
                for n in names:
                    used[n].append(where)
    assert not deep, f"import {name}'s names from {name} itself:\n" + "\n".join(deep)
    exported = declared_all(package)
    assert set(used) <= exported, f"not in {name}.__all__: {sorted(set(used) - exported)}"
    assert exported <= set(used), f"in {name}.__all__, imported by no other package: " + str(
        sorted(exported - set(used))
    )


def test_modules_are_short() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in SOURCES
        if (n := len(p.read_text().splitlines())) > MAX_LINES
        and str(p.relative_to(PACKAGE)) not in LONG_MODULES
    }
    assert not long, f"over {MAX_LINES} lines: {long}"
