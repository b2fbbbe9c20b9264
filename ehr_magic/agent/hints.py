"""Value hints: string literals in generated code that match nothing in the data.

The classic failure: the model filters ``label = 'RDW'`` while the data stores ``rdw``;
the query runs and returns nothing. EHRAgent answered such failures with five example
values of the column; we generalise that to SQL (parsed with sqlglot) and polars code
(``pl.col("label") == "RDW"``, ``.is_in([...])``): for each string compared against a
text column that occurs nowhere in it, list the closest stored values via ``ehr.lookup``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from ehr_magic.identifiers import quote_identifier as quote

_MAX_LITERALS = 12


@dataclass(frozen=True)
class ValueHint:
    literal: str
    table: str
    column: str
    closest: tuple[str, ...]

    def describe(self) -> str:
        values = ", ".join(repr(v) for v in self.closest) or "(no similar values)"
        return f"{self.literal!r} does not occur in {self.table}.{self.column}; closest stored values: {values}"


def value_hints(code: str, ehr: Any, k: int = 5) -> list[ValueHint]:
    """Hints for every compared string literal of ``code`` that is absent from its column."""
    hints: list[ValueHint] = []
    seen: set[tuple[str, str, str]] = set()
    for literal, column, tables in list(_comparisons(code, ehr))[: _MAX_LITERALS * 3]:
        for table in tables:
            key = (literal, table, column)
            if key in seen or len(hints) >= _MAX_LITERALS:
                continue
            seen.add(key)
            if not ehr.columns(table).get(column, "").startswith("VARCHAR"):
                continue
            if _occurs(ehr, table, column, literal):
                continue
            closest = tuple(ehr.lookup(table, column, literal.strip("%"), k=k))
            hints.append(ValueHint(literal, table, column, closest))
    return hints


def _occurs(ehr: Any, table: str, column: str, literal: str) -> bool:
    operator = "ILIKE" if "%" in literal or "_" in literal and "%" in literal else "="
    found = ehr.sql(f"SELECT 1 AS hit FROM {quote(table)} WHERE {quote(column)} {operator} ? LIMIT 1", [literal])
    return found.height > 0


def _comparisons(code: str, ehr: Any):
    """Yield ``(literal, column, candidate tables)`` for strings compared against columns."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return
    named_tables = {n.value.lower() for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.lower() in ehr.tables()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _looks_like_sql(node.value):
            yield from _sql_comparisons(node.value, ehr)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            column = _polars_column(node.left)
            right = node.comparators[0]
            if column and isinstance(right, ast.Constant) and isinstance(right.value, str):
                yield right.value, column, _tables_with(ehr, column, named_tables)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            column = _polars_column(node.func.value)
            if not column:
                continue
            method = node.func.attr
            argument = node.args[0]
            if method in {"eq", "ne"} and isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                yield argument.value, column, _tables_with(ehr, column, named_tables)
            elif method == "is_in" and isinstance(argument, (ast.List, ast.Tuple, ast.Set)):
                for element in argument.elts:
                    if isinstance(element, ast.Constant) and isinstance(element.value, str):
                        yield element.value, column, _tables_with(ehr, column, named_tables)


def _looks_like_sql(text: str) -> bool:
    lowered = text.lower()
    return "select" in lowered and "from" in lowered


def _polars_column(node: ast.AST) -> str | None:
    """``pl.col("x")`` (optionally followed by ``.str.to_lowercase()`` etc.) -> ``"x"``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr != "col":
        node = node.func.value
        if isinstance(node, ast.Attribute):  # pl.col("x").str.<method>()
            node = node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "col"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def _tables_with(ehr: Any, column: str, preferred: set[str]) -> list[str]:
    tables = [t for t in ehr.tables() if column in ehr.columns(t)]
    chosen = [t for t in tables if t in preferred]
    return chosen or tables


def _sql_comparisons(sql: str, ehr: Any):
    try:
        statements = sqlglot.parse(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return
    for statement in statements:
        if statement is None:
            continue
        aliases = {}
        for table in statement.find_all(exp.Table):
            aliases[(table.alias_or_name or "").lower()] = table.name.lower()
            aliases[table.name.lower()] = table.name.lower()
        in_query = sorted({t for t in aliases.values() if t in ehr.tables()})
        for node in statement.find_all(exp.EQ, exp.NEQ, exp.Like, exp.ILike, exp.In):
            pairs: list[tuple[exp.Expression, exp.Expression]] = []
            if isinstance(node, exp.In):
                pairs = [(node.this, e) for e in node.expressions]
            else:
                pairs = [(node.left, node.right), (node.right, node.left)]
            for column, literal in pairs:
                if isinstance(column, exp.Column) and isinstance(literal, exp.Literal) and literal.is_string:
                    name = column.name.lower()
                    qualifier = column.table.lower()
                    if qualifier and aliases.get(qualifier) in ehr.tables():
                        tables = [aliases[qualifier]]
                    else:
                        tables = [t for t in in_query if name in ehr.columns(t)] or _tables_with(ehr, name, set())
                    yield literal.this, name, tables
