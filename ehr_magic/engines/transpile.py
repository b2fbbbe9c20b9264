"""DuckDB SQL -> another engine's SQL, with sqlglot, in one place.

The model and the analyst write DuckDB SQL everywhere; ``to_dialect`` turns one query
into the engine's dialect. sqlglot does most of it; ``REWRITES`` holds the few syntax
tree rewrites for constructs whose sqlglot output would fail or mean something else on
the target (keyed by dialect, applied in order). Anything the target cannot express
raises ``TranslationError`` with one sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from ehr_magic.engines import spark_sql
from ehr_magic.errors import EhrMagicError, ReadOnlyError, sentences



@dataclass
class Context:
    """What a rewrite may know beyond the node: the tables' columns (table -> column -> type)."""

    schema: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    aliases: int = 0

    def has_column(self, name: str) -> bool:
        return any(name in columns for columns in self.schema.values())


Rewrite = Callable[[exp.Expression, Context], exp.Expression]

_DIALECT_NAMES = {"postgres": "PostgreSQL", "spark": "Spark SQL", "duckdb": "DuckDB"}
_QUERIES = (exp.Query, exp.Describe, exp.Show, exp.Pivot)


class TranslationError(EhrMagicError):
    """A DuckDB query that the target dialect cannot express (or that sqlglot cannot read)."""


def to_dialect(sql: str, dialect: str, params: list[Any] | dict[str, Any] | None = None, *,
               schema: Mapping[str, Mapping[str, str]] | None = None) -> tuple[str, list[Any] | None]:
    """``sql`` (DuckDB) in ``dialect``, and ``params`` as a list for its placeholders.

    ``schema`` (table -> column -> type) lets rewrites tell real columns from DuckDB's
    pseudo-columns (``rowid``).

    Only one query is allowed: a write or a second statement raises before the engine
    sees it (the sessions are read-only anyway).
    """
    target = _DIALECT_NAMES.get(dialect, dialect)
    try:
        statements = [s for s in sqlglot.parse(sql, read="duckdb") if s is not None]
    except SqlglotError as exc:
        raise TranslationError(f"This SQL cannot be translated from DuckDB to {target} (sqlglot: "
                               f"{_first_line(exc)}); check the syntax or write a simpler query.") from None
    if len(statements) != 1:
        raise TranslationError(f"Send one query at a time to {target} ({len(statements)} statements were given).")
    tree = statements[0]
    if not isinstance(tree, _QUERIES):
        raise ReadOnlyError(f"Only queries run on a {target} target, which is read-only for analysis; "
                            f"this statement is {_a(tree.key.upper())}.")
    for node in tree.walk():
        for matches, what in DUCKDB_ONLY.get(dialect, []):
            if matches(node):
                raise TranslationError(f"{target} cannot express {what}, which this query uses; "
                                       "rewrite that part with plain SQL.")
    positional = _number_placeholders(tree, params, dialect)
    context = Context(schema or {})
    for rewrite in REWRITES.get(dialect, []):
        tree = tree.transform(rewrite, context, copy=False)
    try:
        text = tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        raise TranslationError(f"{target} cannot express part of this query: {sentences(_first_line(exc))} "
                               "Rewrite it with simpler SQL.") from None
    return text, positional


def _number_placeholders(tree: exp.Expr, params: list[Any] | dict[str, Any] | None,
                         dialect: str) -> list[Any] | None:
    """Rewrite ``?``, ``$1`` and ``$name`` to the target's positional style; params as a list."""
    style = PLACEHOLDERS.get(dialect)
    found = list(tree.find_all(exp.Placeholder, exp.Parameter))
    if style is None or not found:
        return list(params.values()) if isinstance(params, dict) else params
    values: list[Any] = []
    names: dict[str, int] = {}
    for i, node in enumerate(found):
        key = node.name
        if isinstance(params, dict):
            if key not in params:
                raise TranslationError(f"No value for the query parameter ${key}; pass it in params.")
            if key not in names:
                names[key] = len(values) + 1
                values.append(params[key])
            number = names[key]
        elif key.isdigit():
            number = int(key)
        else:
            number = i + 1
        node.replace(exp.Var(this=style.format(n=number)))
    if isinstance(params, dict):
        return values
    return list(params) if params is not None else None


# -- rewrites ---------------------------------------------------------------------------------


def _pg_arg_extreme(node: exp.Expression, context: Context) -> exp.Expression:
    """``arg_max(x, y)`` -> the first ``x`` ordered by ``y`` (rows with NULL ``y`` ignored, as in DuckDB)."""
    if isinstance(node, (exp.ArgMax, exp.ArgMin)):
        order = exp.Ordered(this=node.expression.copy(), desc=isinstance(node, exp.ArgMax), nulls_first=False)
        aggregate = exp.ArrayAgg(this=exp.Order(this=node.this.copy(), expressions=[order]))
        return _first_of(aggregate, node.expression)
    return node


def _pg_any_value(node: exp.Expression, context: Context) -> exp.Expression:
    """``any_value(x)`` (PostgreSQL 16+ only) -> the first non-NULL ``x`` in scan order, as DuckDB picks."""
    inner = node.this if isinstance(node, exp.IgnoreNulls) else node
    if isinstance(inner, exp.AnyValue):
        return _first_of(exp.ArrayAgg(this=inner.this.copy()), inner.this)
    return node


def _first_of(aggregate: exp.Expression, not_null: exp.Expression) -> exp.Expression:
    filtered = exp.Filter(this=aggregate, expression=exp.Where(this=exp.Not(this=exp.Is(
        this=not_null.copy(), expression=exp.Null()))))
    return exp.Bracket(this=exp.Paren(this=filtered), expressions=[exp.Literal.number(1)], offset=1)


def _pg_rowid(node: exp.Expression, context: Context) -> exp.Expression:
    """DuckDB's ``rowid`` pseudo-column -> ``ctid`` (the physical position; insertion order after a load)."""
    if isinstance(node, exp.Column) and node.name.lower() == "rowid" and not context.has_column(node.name):
        node.set("this", exp.to_identifier("ctid"))
    return node


def _pg_round(node: exp.Expression, context: Context) -> exp.Expression:
    """``round(x, n)`` rounds a DOUBLE on DuckDB; PostgreSQL has it for NUMERIC only, and its
    DOUBLE -> NUMERIC cast keeps 15 digits, which moves results near a rounding boundary.
    Going through text keeps the shortest exact form of the double (every digit DuckDB sees)."""
    if isinstance(node, exp.Round) and node.args.get("decimals") is not None \
            and not node.this.is_type(*exp.DataType.TEXT_TYPES):
        text = exp.Cast(this=node.this.copy(), to=exp.DataType.build("TEXT"))
        node.set("this", exp.Cast(this=text, to=exp.DataType.build("DECIMAL")))
    return node


def _pg_subquery_alias(node: exp.Expression, context: Context) -> exp.Expression:
    """PostgreSQL before 16 requires an alias on every subquery in FROM and JOIN."""
    if isinstance(node, exp.Subquery) and not node.alias and isinstance(node.parent, (exp.From, exp.Join)):
        context.aliases += 1
        node.set("alias", exp.TableAlias(this=exp.to_identifier(f"_subquery{context.aliases}")))
    return node


# DuckDB constructs sqlglot would pass through unchanged but the target cannot run.
_DUCKDB_ONLY = [
    (lambda n: isinstance(n, exp.Lambda), "lambda functions (x -> ...)"),
    (lambda n: isinstance(n, exp.Star) and bool(n.args.get("except_") or n.args.get("replace")),
     "SELECT * EXCLUDE/REPLACE"),
    (lambda n: isinstance(n, exp.Join) and str(n.args.get("method") or "").upper() == "ASOF", "ASOF joins"),
    (lambda n: isinstance(n, exp.Columns), "COLUMNS(...) expressions"),
    (lambda n: isinstance(n, exp.Pivot) and n.parent is None, "PIVOT statements"),
    (lambda n: isinstance(n, exp.Ordered) and isinstance(n.this, exp.Var) and n.this.name.upper() == "ALL",
     "ORDER BY ALL"),
]
DUCKDB_ONLY: dict[str, list[tuple[Callable[[exp.Expr], bool], str]]] = {
    "postgres": _DUCKDB_ONLY,
    "spark": spark_sql.DUCKDB_ONLY,
}
PLACEHOLDERS: dict[str, str] = {"postgres": "${n}", "spark": ":p{n}"}
REWRITES: dict[str, list[Rewrite]] = {
    "postgres": [_pg_arg_extreme, _pg_any_value, _pg_rowid, _pg_round, _pg_subquery_alias],
    "spark": spark_sql.REWRITES,
}


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "AEIOU" else f"a {word}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
