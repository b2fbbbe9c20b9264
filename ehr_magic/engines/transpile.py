"""DuckDB SQL -> another engine's SQL, with sqlglot, in one place.

The model and the analyst write DuckDB SQL everywhere; ``to_dialect`` turns one query
into the engine's dialect. sqlglot does most of it; ``REWRITES`` holds the few syntax
tree rewrites for constructs whose sqlglot output would fail or mean something else on
the target (keyed by dialect, applied in order). Anything the target cannot express
raises ``TranslationError`` with one sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel, SqlglotError

from ehr_magic.errors import EhrMagicError, ReadOnlyError

Rewrite = Callable[[exp.Expression], exp.Expression]

_DIALECT_NAMES = {"postgres": "PostgreSQL", "spark": "Spark SQL", "duckdb": "DuckDB"}
_QUERIES = (exp.Query, exp.Describe, exp.Show)


class TranslationError(EhrMagicError):
    """A DuckDB query that the target dialect cannot express (or that sqlglot cannot read)."""


def to_dialect(sql: str, dialect: str, params: list[Any] | dict[str, Any] | None = None
               ) -> tuple[str, list[Any] | None]:
    """``sql`` (DuckDB) in ``dialect``, and ``params`` as a list for its placeholders.

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
    positional = _number_placeholders(tree, params, dialect)
    for rewrite in REWRITES.get(dialect, []):
        tree = tree.transform(rewrite)
    try:
        text = tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
    except SqlglotError as exc:
        raise TranslationError(f"{target} cannot express part of this query ({_first_line(exc)}); "
                               "rewrite it with simpler SQL.") from None
    return text, positional


def _number_placeholders(tree: exp.Expression, params: list[Any] | dict[str, Any] | None,
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


def _pg_arg_extreme(node: exp.Expression) -> exp.Expression:
    """``arg_max(x, y)`` -> the first ``x`` ordered by ``y`` (rows with NULL ``y`` ignored, as in DuckDB)."""
    if isinstance(node, (exp.ArgMax, exp.ArgMin)):
        order = exp.Ordered(this=node.expression.copy(), desc=isinstance(node, exp.ArgMax), nulls_first=False)
        aggregate = exp.ArrayAgg(this=exp.Order(this=node.this.copy(), expressions=[order]))
        filtered = exp.Filter(this=aggregate, expression=exp.Where(this=exp.Not(this=exp.Is(
            this=node.expression.copy(), expression=exp.Null()))))
        return exp.Bracket(this=exp.Paren(this=filtered), expressions=[exp.Literal.number(1)], offset=1)
    return node


PLACEHOLDERS: dict[str, str] = {"postgres": "${n}"}
REWRITES: dict[str, list[Rewrite]] = {
    "postgres": [_pg_arg_extreme],
}


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "AEIOU" else f"a {word}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
