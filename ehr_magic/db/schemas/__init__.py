"""Schema plug-ins: how a database that ehr-magic did not build is recognised as one of the packaged
schemas, and the helpers a schema adds to ``ehr`` (an OMOP CDM's ``ehr.concepts``).

Every packaged knowledge file (``ehr_magic/knowledge/schemas/<schema>.yaml``) is a schema. A schema
that needs more than the default rule has a module here named after it (``omop_cdm.py``) defining
``PLUGIN``, a ``SchemaPlugin``; the others are recognised by ``DescribedColumns``. A rule gives a score
(0: not this schema) and the best score wins. Names are compared case-insensitively: a database
exported with upper-case column names (as OMOP samples often are) is the same schema.

A helper is a function ``helper(ehr, ...)``; ``ehr.<name>`` is it, bound to the handle, on a database
of its schema, and on any other database raises one sentence saying which schema it is for.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ehr_magic.errors import EhrMagicError
from ehr_magic.knowledge.handle import Database

__all__ = ["CoreTables", "DescribedColumns", "SchemaHelperError", "SchemaPlugin", "helper", "helper_names", "plugin",
           "recognise"]

UNKNOWN = "unknown"
Tables = Mapping[str, Mapping[str, str]]  # table -> column -> type, as the engine lists them
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An empty table exported as a single header row: its columns are named column0, column1...
_PLACEHOLDER = re.compile(r"column\d+", re.IGNORECASE)


class SchemaHelperError(EhrMagicError, AttributeError):
    """A schema's helper asked of a database of another schema (an AttributeError too, so
    ``hasattr(ehr, 'concepts')`` says False rather than raising)."""


class Rule(Protocol):
    def score(self, tables: Tables) -> float:
        """How surely ``tables`` are this schema: 0 (not it) to 1."""


@dataclass(frozen=True)
class SchemaPlugin:
    """One schema: its recognition rule and the helpers it adds to ``ehr``."""

    schema: str
    rule: Rule
    title: str = ""  # how a sentence names the schema ("an OMOP CDM database")
    helpers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)


def lowered(tables: Tables) -> dict[str, set[str]]:
    """Table -> its column names, all lower case; tables whose columns are header placeholders
    (column0, column1...) have none."""
    found: dict[str, set[str]] = {}
    for table, columns in tables.items():
        names = {str(c).lower() for c in columns}
        found.setdefault(str(table).lower(), set()).update(
            set() if names and all(_PLACEHOLDER.fullmatch(n) for n in names) else names)
    return found


def described(schema: str) -> dict[str, set[str]]:
    """Table -> described column names (lower case) of a packaged schema; empty if it has no file."""
    from ehr_magic.knowledge import model as knowledge

    try:
        tables = knowledge.load(schema).tables
    except EhrMagicError:
        return {}
    return {name.lower(): {c.lower() for c in info.columns} for name, info in tables.items()}


@dataclass(frozen=True)
class DescribedColumns:
    """At least ``share`` of all the described columns of the schema are here (the default rule:
    a database laid out as the schema's own loader builds it, e.g. mimic-code's MIMIC-IV)."""

    schema: str
    share: float = 0.8

    def score(self, tables: Tables) -> float:
        want = {(t, c) for t, columns in described(self.schema).items() for c in columns}
        if not want:
            return 0.0
        here = {(t, c) for t, columns in lowered(tables).items() for c in columns}
        found = len(want & here) / len(want)
        return found if found >= self.share else 0.0


@dataclass(frozen=True)
class CoreTables:
    """A data model whose optional tables may be missing and whose versions differ in columns: its
    ``core`` tables are here, each with the columns it names (``{"person": ("person_id",)}``), and of
    the described tables that are here with their columns, at least ``share`` of the described
    columns are (tables exported empty, with placeholder columns, are left out of the count)."""

    schema: str
    core: Mapping[str, tuple[str, ...]]
    share: float = 0.6

    def score(self, tables: Tables) -> float:
        here = lowered(tables)
        if any(not set(columns) <= here.get(table, set()) or not here.get(table) for table, columns in
               self.core.items()):
            return 0.0
        want = described(self.schema)
        pairs = [(t, c) for t, columns in want.items() if here.get(t) for c in columns]
        if not pairs:
            return 0.0
        found = sum(c in here[t] for t, c in pairs) / len(pairs)
        return found if found >= self.share else 0.0


@functools.cache
def plugin(schema: str) -> SchemaPlugin:
    """The plug-in of ``schema``: its module's ``PLUGIN``, else the default rule."""
    name = f"{__name__}.{schema}"
    if _IDENTIFIER.fullmatch(schema) and importlib.util.find_spec(name) is not None:
        found = importlib.import_module(name).PLUGIN
        if not isinstance(found, SchemaPlugin) or found.schema != schema:
            raise TypeError(f"{name}.PLUGIN must be the SchemaPlugin of schema {schema!r}")
        return found
    return SchemaPlugin(schema, DescribedColumns(schema))


@functools.cache
def _with_modules() -> tuple[SchemaPlugin, ...]:
    """The plug-ins that have a module here (those that may add helpers)."""
    return tuple(plugin(info.name) for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_"))


def recognise(tables: Tables) -> str:
    """The packaged schema that ``tables`` (table -> column -> type) are, or ``"unknown"``."""
    from ehr_magic.knowledge import model as knowledge

    best, best_score = UNKNOWN, 0.0
    for schema in knowledge.available():
        score = plugin(schema).rule.score(tables)
        if score > 0 and score >= best_score:  # a tie goes to the later one, as it always did
            best, best_score = schema, score
    return best


def helper(ehr: Database, name: str) -> Callable[..., Any]:
    """``ehr.<name>`` for a schema helper: bound to ``ehr`` when its schema has it; ``AttributeError``
    for a name no schema has; ``SchemaHelperError`` (one sentence) for another schema's helper."""
    owners = [p for p in _with_modules() if name in p.helpers]
    if not owners:
        raise AttributeError(f"{type(ehr).__name__!r} object has no attribute {name!r}")
    schema = vars(ehr).get("schema", UNKNOWN)
    own = next((p for p in owners if p.schema == schema), None)
    if own is not None:
        return types.MethodType(own.helpers[name], ehr)
    which = " or ".join(f"{p.title or 'a database of schema ' + p.schema} (schema {p.schema})" for p in owners)
    dataset = vars(ehr).get("dataset", "this database")
    raise SchemaHelperError(f"ehr.{name} is for {which}, and {dataset} is of schema {schema}; "
                            "query its tables with ehr.sql instead.")


def helper_names(schema: str) -> list[str]:
    """The helpers ``ehr`` has on a database of ``schema``."""
    return sorted(plugin(schema).helpers)
