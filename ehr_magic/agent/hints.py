"""Value hints, and what a query searched for.

The classic failure: the model filters ``label = 'RDW'`` while the data stores ``rdw``;
the query runs and returns nothing. EHRAgent answered such failures with five example
values of the column; we generalise that to SQL (parsed with sqlglot) and polars code
(``pl.col("label") == "RDW"``, ``.is_in([...])``): for each string compared against a
text column that occurs nowhere in it, list the closest stored values via ``ehr.lookup``.
A column is resolved through the aliases of its own query scope, so a query that reads a
table twice, or two tables under one alias in two subqueries, blames the right table.

When no such hint fires, the query is sound and a result that is empty is the answer:
``searched_for`` says what the code looked for ("prescriptions: subject_id = 10006, drug =
'Vancomycin'"), for the analyst to read next to "none found".
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.knowledge.handle import Database

_MAX_LITERALS = 12
_MAX_SEARCHED = 8
_MARK = "\x00"  # a value only known when the code runs (an f-string's {expression}, a ? parameter)
_OPERATORS: dict[type[exp.Expression], str] = {
    exp.EQ: "=", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
    exp.Like: "LIKE", exp.ILike: "ILIKE", exp.In: "IN"}
_FLIPPED = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


@dataclass(frozen=True)
class ValueHint:
    literal: str
    table: str
    column: str
    closest: tuple[str, ...]

    def describe(self) -> str:
        values = ", ".join(repr(v) for v in self.closest) or "(no similar values)"
        return f"{self.literal!r} does not occur in {self.table}.{self.column}; closest stored values: {values}"


@dataclass(frozen=True)
class _Comparison:
    tables: tuple[str, ...]  # the tables the column may belong to (one when resolved)
    column: str
    operator: str
    value: str  # the literal as written, or the expression the code fills in at run time
    text: bool  # a string literal (not a number, not filled in at run time)


def value_hints(code: str, ehr: Database, k: int = 5) -> list[ValueHint]:
    """Hints for every compared string literal of ``code`` that is absent from its column."""
    hints: list[ValueHint] = []
    seen: set[tuple[str, str, str]] = set()
    compared = [c for c in _comparisons(code, ehr) if c.text and c.operator in ("=", "!=", "LIKE", "ILIKE", "IN")]
    for comparison in compared[: _MAX_LITERALS * 3]:
        literal, column = comparison.value, comparison.column
        for table in comparison.tables:
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


def searched_for(code: str, ehr: Database) -> str:
    """What ``code`` compared columns with, table by table ("prescriptions: subject_id = 10006,
    drug = 'Vancomycin'"); "" when it compared nothing that can be read from the code."""
    by_table: dict[str, list[str]] = {}
    said: set[tuple[str, str]] = set()
    for comparison in _comparisons(code, ehr):
        table = comparison.tables[0] if len(comparison.tables) == 1 else ""
        value = comparison.value if not comparison.text else "'" + comparison.value.replace("'", "''") + "'"
        condition = f"{comparison.column} {comparison.operator} {value}"
        if (table, condition) in said or len(said) >= _MAX_SEARCHED:
            continue
        said.add((table, condition))
        by_table.setdefault(table, []).append(condition)
    return "; ".join(f"{table}: {', '.join(conditions)}" if table else ", ".join(conditions)
                     for table, conditions in by_table.items())


def _occurs(ehr: Database, table: str, column: str, literal: str) -> bool:
    operator = "ILIKE" if "%" in literal or "_" in literal and "%" in literal else "="
    found = ehr.sql(f"SELECT 1 AS hit FROM {quote(table)} WHERE {quote(column)} {operator} ? LIMIT 1", [literal])
    return found.height > 0


def _comparisons(code: str, ehr: Database) -> Iterator[_Comparison]:
    """Each comparison of a column with a value in ``code``: in its SQL, and in polars expressions."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return
    named_tables = {n.value.lower() for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.lower() in ehr.tables()}
    for sql in _sql_texts(tree):
        yield from _sql_comparisons(sql, ehr)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
            column = _polars_column(node.left)
            right = node.comparators[0]
            if column and isinstance(right, ast.Constant) and isinstance(right.value, (str, int, float)):
                yield _polars(column, "=" if isinstance(node.ops[0], ast.Eq) else "!=", right.value,
                              _tables_with(ehr, column, named_tables))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            column = _polars_column(node.func.value)
            if not column:
                continue
            method = node.func.attr
            argument = node.args[0]
            if method in {"eq", "ne"} and isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                yield _polars(column, "=" if method == "eq" else "!=", argument.value,
                              _tables_with(ehr, column, named_tables))
            elif method == "is_in" and isinstance(argument, (ast.List, ast.Tuple, ast.Set)):
                for element in argument.elts:
                    if isinstance(element, ast.Constant) and isinstance(element.value, str):
                        yield _polars(column, "IN", element.value, _tables_with(ehr, column, named_tables))


def _polars(column: str, operator: str, value: Any, tables: list[str]) -> _Comparison:
    text = isinstance(value, str)
    return _Comparison(tuple(tables), column, operator, value if text else repr(value), text)


def _sql_texts(tree: ast.AST) -> Iterator[str]:
    """The SQL strings of the code: plain strings, and f-strings with each ``{expression}`` (and
    each ``?`` of a query whose parameters are not literals) marked as filled in at run time."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sql" \
                and node.args:
            query = node.args[0]
            params = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "params"), None)
            text = _sql_of(query)
            if text is not None:
                yield _with_parameters(text, params)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _looks_like_sql(node.value):
            if not _is_sql_argument(node, tree):
                yield node.value


def _is_sql_argument(node: ast.AST, tree: ast.AST) -> bool:
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "sql" \
                and call.args and call.args[0] is node:
            return True
    return False


def _sql_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                parts.append(f"'{_MARK}{{{ast.unparse(part.value)}}}'")
        return "".join(parts)
    return None


def _with_parameters(sql: str, params: ast.AST | None) -> str:
    """``?`` placeholders replaced by the literal parameters, or marked as filled in at run time."""
    values = params.elts if isinstance(params, (ast.List, ast.Tuple)) else []
    pieces = sql.split("?")
    if len(pieces) == 1:
        return sql
    out = [pieces[0]]
    for index, piece in enumerate(pieces[1:]):
        value = values[index] if index < len(values) else None
        if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
            out.append(repr(value.value))
        elif isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.append("'" + value.value.replace("'", "''") + "'")
        else:
            out.append(f"'{_MARK}{ast.unparse(value) if value is not None else '?'}'")
        out.append(piece)
    return "".join(out)


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


def _tables_with(ehr: Database, column: str, preferred: set[str]) -> list[str]:
    tables = [t for t in ehr.tables() if column in ehr.columns(t)]
    chosen = [t for t in tables if t in preferred]
    return chosen or tables


def _sql_comparisons(sql: str, ehr: Database) -> Iterator[_Comparison]:
    """Comparisons of a column with a literal, each column resolved in its own scope: its alias
    names the table in that subquery, whatever the same alias means in another."""
    try:
        statements = sqlglot.parse(sql, read="duckdb")
    except sqlglot.errors.SqlglotError:
        return
    tables = {t.lower(): t for t in ehr.tables()}
    for statement in statements:
        if statement is None:
            continue
        try:
            scopes = traverse_scope(statement)
        except sqlglot.errors.SqlglotError:
            continue
        for scope in scopes:
            sources = {alias.lower(): tables[source.name.lower()] for alias, source in scope.sources.items()
                       if isinstance(source, exp.Table) and source.name.lower() in tables}
            for node in scope.expression.find_all(*_OPERATORS, exp.Between):
                if node.find_ancestor(exp.Select, exp.Union) is not scope.expression:
                    continue  # a subquery's own comparison: its scope reads it
                yield from _node_comparisons(node, sources, ehr)


def _node_comparisons(node: exp.Expression, sources: dict[str, str], ehr: Database) -> Iterator[_Comparison]:
    if isinstance(node, exp.Between):
        column, low, high = node.this, node.args.get("low"), node.args.get("high")
        if isinstance(column, exp.Column) and isinstance(low, exp.Literal) and isinstance(high, exp.Literal):
            resolved, name = _resolve(column, sources, ehr)
            if resolved:
                yield _Comparison(resolved, name, "BETWEEN", f"{_literal(low)[0]} AND {_literal(high)[0]}", False)
        return
    operator = _OPERATORS[type(node)]
    if isinstance(node, exp.In):
        pairs = [(node.this, e, operator) for e in node.expressions]
    elif isinstance(node, exp.Binary):  # every other operator compares a left side with a right one
        pairs = [(node.left, node.right, operator), (node.right, node.left, _FLIPPED.get(operator, operator))]
    else:
        return
    for column, literal, said in pairs:
        if isinstance(column, exp.Column) and isinstance(literal, exp.Literal):
            resolved, name = _resolve(column, sources, ehr)
            if resolved:
                value, text = _literal(literal)
                yield _Comparison(resolved, name, said, value, text)


def _literal(literal: exp.Literal) -> tuple[str, bool]:
    """The literal as the analyst reads it, and whether it is a stored text to check."""
    value = literal.this
    if literal.is_string and value.startswith(_MARK):
        return value[len(_MARK):], False
    return value, literal.is_string


def _resolve(column: exp.Column, sources: dict[str, str], ehr: Database) -> tuple[tuple[str, ...], str]:
    """The table(s) a column of a scope belongs to (through its qualifier, else the scope's tables
    that have it, else every table that has it) and the column's name as stored."""
    wanted = column.name.lower()
    qualifier = column.table.lower()
    if qualifier:
        table = sources.get(qualifier)
        name = _stored_name(ehr, table, wanted) if table else None
        return ((table,), name) if table and name else ((), wanted)
    own = sorted({t for t in sources.values() if _stored_name(ehr, t, wanted)})
    found = own or [t for t in ehr.tables() if _stored_name(ehr, t, wanted)]
    return tuple(found), ((_stored_name(ehr, found[0], wanted) or wanted) if found else wanted)


def _stored_name(ehr: Database, table: str, lowered: str) -> str | None:
    return next((c for c in ehr.columns(table) if c.lower() == lowered), None)
