"""DuckDB SQL -> Spark SQL: the rewrites sqlglot's ``spark`` dialect needs on top of its own.

``ehr_magic.engines.transpile`` applies ``REWRITES`` to every query bound for a Spark
target and refuses the ``DUCKDB_ONLY`` constructs, so a gap found on one query is
fixed here for all of them:

* ``INTERVAL (n) DAY`` (an expression before the unit, not a string) and DuckDB's
  ``to_days(n)``/``to_hours(n)``/... become ``n * INTERVAL '1' DAY``: Spark accepts
  only string literals inside ``INTERVAL``.
* ``sum(x ORDER BY y)`` and the other aggregates whose value does not depend on the
  order of their rows (sum, avg, min, max, count...) lose the ``ORDER BY``, which
  Spark rejects. The order changes at most the last bits of a floating-point sum.
* ``HUGEINT`` (DuckDB's 128-bit integer) becomes ``DECIMAL(38, 0)``.

sqlglot only, no pyspark: the translation and its tests work without the Spark extra.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

# Aggregates whose result does not depend on the order of their input rows.
_ORDER_FREE_AGGREGATES: tuple[type[exp.Expression], ...] = (
    exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count, exp.Stddev, exp.StddevPop, exp.StddevSamp,
    exp.Variance, exp.VariancePop, exp.ApproxDistinct, exp.Median, exp.Quantile,
    exp.PercentileCont, exp.PercentileDisc, exp.LogicalAnd, exp.LogicalOr, exp.CountIf,
)

# DuckDB's interval constructors: to_days(n) means INTERVAL (n) DAY.
_INTERVAL_FUNCTIONS = {
    "TO_YEARS": "YEAR", "TO_MONTHS": "MONTH", "TO_WEEKS": "WEEK", "TO_DAYS": "DAY",
    "TO_HOURS": "HOUR", "TO_MINUTES": "MINUTE", "TO_SECONDS": "SECOND",
    "TO_MILLISECONDS": "MILLISECOND", "TO_MICROSECONDS": "MICROSECOND",
}


def interval_amounts(node: exp.Expression, context: Any) -> exp.Expression:
    """``INTERVAL (n) DAY`` and ``to_days(n)`` -> ``INTERVAL 'n' DAY`` or ``(n) * INTERVAL '1' DAY``."""
    if isinstance(node, exp.Interval) and node.this is not None and node.unit is not None:
        if not (isinstance(node.this, exp.Literal) and node.this.is_string):
            return _interval_times(node.this, node.unit.name.upper())
    if isinstance(node, exp.ToDays):
        return _interval_times(node.this, "DAY")
    if isinstance(node, exp.Anonymous) and node.name.upper() in _INTERVAL_FUNCTIONS and len(node.expressions) == 1:
        return _interval_times(node.expressions[0], _INTERVAL_FUNCTIONS[node.name.upper()])
    return node


def unordered_aggregates(node: exp.Expression, context: Any) -> exp.Expression:
    """``sum(x ORDER BY y)`` -> ``sum(x)`` for aggregates whose value ignores the order."""
    if isinstance(node, _ORDER_FREE_AGGREGATES) and isinstance(node.this, exp.Order):
        node.set("this", node.this.this)
    return node


def hugeint(node: exp.Expression, context: Any) -> exp.Expression:
    """DuckDB's ``HUGEINT`` -> ``DECIMAL(38, 0)`` (Spark has no 128-bit integer)."""
    if isinstance(node, exp.DataType) and node.this == exp.DataType.Type.INT128:
        return exp.DataType.build("DECIMAL(38, 0)")
    return node


def _interval_times(amount: exp.Expression, unit: str) -> exp.Expression:
    literal = _number(amount)
    if literal is not None:
        return exp.Interval(this=exp.Literal.string(literal), unit=exp.var(unit))
    one = exp.Interval(this=exp.Literal.string("1"), unit=exp.var(unit))
    factor = amount if isinstance(amount, exp.Paren) else exp.paren(amount, copy=False)
    return exp.Paren(this=exp.Mul(this=factor, expression=one))


def _number(node: exp.Expression) -> str | None:
    """The text of a (possibly parenthesised or negated) number literal, else None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return f"-{node.this.name}"
    if isinstance(node, exp.Literal) and not node.is_string:
        return node.name
    return None


REWRITES: list[Callable[[exp.Expression, Any], exp.Expression]] = [interval_amounts, unordered_aggregates, hugeint]

# DuckDB constructs sqlglot would pass through unchanged but Spark cannot run.
DUCKDB_ONLY: list[tuple[Callable[[exp.Expr], bool], str]] = [
    (lambda n: isinstance(n, exp.Join) and str(n.args.get("method") or "").upper() == "ASOF", "ASOF joins"),
    (lambda n: isinstance(n, exp.Columns), "COLUMNS(...) expressions"),
    (lambda n: isinstance(n, exp.Pivot) and n.parent is None, "PIVOT statements"),
]
