"""The house plan, checked: every import in ``ehr_magic`` points down the layer list, and no
two packages import each other. Imports inside functions count the same as the ones at the
top of a module; a shared piece that two layers need moves down, it is never imported late
to hide a cycle.

The layer list lives here, once; README.md's package map follows it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import ehr_magic

PACKAGE = Path(ehr_magic.__file__).parent

# Bottom up. A module may import its own package, any package of a lower layer, and another
# package of its own layer, except where a layer is marked independent (front ends).
LAYERS: list[tuple[str, ...]] = [
    ("errors", "paths", "files", "identifiers", "version", "migrations", "text", "table_files"),
    ("llm", "safety", "engines", "memory"),
    ("linking", "knowledge"),
    ("db", "runtime"),
    ("sources",),
    ("agent",),
    ("reuse", "skills"),
    ("session",),
    ("eval",),
    ("magic", "panel", "cli"),
    ("__init__", "__main__"),  # the package's facade: may register the magic and the panel together
]
INDEPENDENT = {("magic", "panel", "cli")}  # front ends never import each other

RANK = {unit: number for number, layer in enumerate(LAYERS) for unit in layer}
LAYER_OF = {unit: layer for layer in LAYERS for unit in layer}


def unit_of(module: str) -> str:
    """``ehr_magic.agent.loop`` -> ``agent``; ``ehr_magic.errors`` -> ``errors``; ``ehr_magic`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, module: str | None = None) -> list[str]:
    """Every ``ehr_magic`` module ``path`` imports, wherever the import statement is."""
    module = module or module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:  # `from ehr_magic import paths` imports ehr_magic.paths, not the facade
                sub = PACKAGE.parent.joinpath(*f"{base}.{alias.name}".split("."))
                found.append(f"{base}.{alias.name}" if sub.is_dir() or sub.with_suffix(".py").exists() else base)
    return [name for name in found if name == "ehr_magic" or name.startswith("ehr_magic.")]


def imports_between_units() -> dict[tuple[str, str], list[str]]:
    """(importing unit, imported unit) -> the modules that make that import."""
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        if "labextension" in path.parts:
            continue
        source = module_name(path)
        for target in imported_modules(path):
            pair = (unit_of(source), unit_of(target))
            if pair[0] != pair[1]:
                edges[pair].append(f"{source} -> {target}")
    return edges


def allowed(source: str, target: str) -> bool:
    if RANK[target] < RANK[source]:
        return True
    return RANK[target] == RANK[source] and LAYER_OF[source] not in INDEPENDENT


def test_every_package_is_in_one_layer() -> None:
    units = {path.stem if path.is_file() else path.name
             for path in PACKAGE.iterdir()
             if (path.suffix == ".py" or (path.is_dir() and (path / "__init__.py").exists()))}
    assert sorted(units - set(RANK)) == []


def test_imports_only_point_down() -> None:
    upward = [line for (source, target), lines in imports_between_units().items()
              if not allowed(source, target) for line in lines]
    assert upward == []


def test_no_two_packages_import_each_other() -> None:
    edges = imports_between_units()
    graph: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        graph[source].add(target)
    cycles = sorted({tuple(sorted((a, b))) for a in graph for b in graph[a] if a in graph.get(b, ())})
    assert cycles == []


def test_the_checker_sees_late_and_relative_imports(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def late():\n    from ehr_magic.agent.loop import Agent\n    from . import store\n"
                     "    from ehr_magic import paths, __version__\n")
    assert imported_modules(probe, "ehr_magic.memory.probe") == [
        "ehr_magic.agent.loop", "ehr_magic.memory.store", "ehr_magic.paths", "ehr_magic"]
    assert not allowed("memory", "agent") and not allowed("magic", "panel") and allowed("session", "agent")
    assert allowed("__init__", "magic") and allowed("engines", "safety")
