"""Run EHRSQL's SQLite-dialect gold SQL on our DuckDB databases, through ``ehr.sql``.

``translate(sql, now=...)`` parses the SQLite query with sqlglot, rewrites the
constructs whose meaning differs between the two engines on the syntax tree, and
prints DuckDB SQL:

* ``current_time`` / ``current_timestamp`` / ``current_date`` and ``'now'`` become
  the dataset clock (never the wall clock), as EHRSQL's scorer does.
* ``datetime/date/time/julianday/strftime/unixepoch(x, modifier, ...)`` with the
  modifiers ``start of year|month|day``, ``weekday N`` and ``+/-N
  year|month|day|hour|minute|second``. Month and year steps keep SQLite's
  overflow rule (2100-12-31 minus one month is 2100-12-01, not DuckDB's 2100-11-30).
  Calls on constants are folded into literals. ``datetime`` gives a TIMESTAMP
  (its text form equals SQLite's); ``strftime`` gives zero-padded text like SQLite;
  ``strftime('%J', x)`` and ``julianday`` give the Julian day number (a DOUBLE,
  16 significant digits like SQLite's text).
* ``/`` follows SQLite: integer division for two integers, true division otherwise,
  NULL on a zero divisor (DuckDB's ``//`` has exactly this meaning for numbers).
* SQLite's "bare columns": in an aggregate query, a column that is neither grouped
  nor aggregated takes its value from the row that holds the query's only
  ``min()``/``max()`` (``arg_min``/``arg_max``), otherwise from any row.
* ``sum``/``avg``/``total`` of a text column convert it to a number, as SQLite does.
* EHRSQL's vital-sign placeholders (``sao2_lower`` ...) become the scorer's ranges.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ehr_magic.errors import EhrMagicError

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from ehr_magic.db import EHR

Schema = Mapping[str, Mapping[str, str]]  # table -> column -> DuckDB type

# The normal ranges EHRSQL-2024's scorer substitutes for `<vital>_lower` / `<vital>_upper`.
VITAL_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (35.5, 38.1),
    "sao2": (95.0, 100.0),
    "heart rate": (60.0, 100.0),
    "respiration": (12.0, 18.0),
    "systolic bp": (90.0, 120.0),
    "diastolic bp": (60.0, 90.0),
    "mean bp": (60.0, 110.0),
}

_DATE_FUNCTIONS = {"DATETIME", "DATE", "TIME", "JULIANDAY", "STRFTIME", "UNIXEPOCH"}
_MODIFIER = re.compile(r"^\s*([+-]?\s*\d+(?:\.\d*)?|[+-]?\s*\.\d+)\s+(year|month|day|hour|minute|second)s?\s*$", re.I)
_WEEKDAY = re.compile(r"^\s*weekday\s+([0-6])\s*$", re.I)
_START_OF = re.compile(r"^\s*start\s+of\s+(year|month|day)\s*$", re.I)
# strftime directives that DuckDB formats exactly like SQLite (zero padded).
_SAME_DIRECTIVES = set("YmdHMSjwW%")
_TIME_TEXT = re.compile(r"^\s*(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?)?\s*$")
_INTEGER_TYPES = {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT,
                  exp.DataType.Type.TINYINT}
_JD_UNIX_EPOCH = 2440587.5  # Julian day number of 1970-01-01 00:00:00

_Node = TypeVar("_Node", bound=exp.Expr)


class TranslationError(EhrMagicError):
    """A SQLite query uses something the DuckDB translation does not support."""


def translate(sql: str, *, now: dt.datetime, schema: Schema | None = None) -> str:
    """DuckDB SQL that means what the SQLite query ``sql`` means on the same data.

    ``now`` is the dataset clock that replaces SQLite's current time; ``schema``
    (table -> column -> DuckDB type) lets ``sum``/``avg`` of text columns be cast.
    """
    return SQLiteTranslator(now=now, schema=schema).translate(sql)


def run_sqlite_sql(ehr: EHR, sql: str) -> pl.DataFrame:
    """Translate SQLite SQL for ``ehr`` (its clock and column types) and run it with ``ehr.sql``."""
    return translator_for(ehr).run(ehr, sql)


def translator_for(ehr: EHR) -> SQLiteTranslator:
    """A translator bound to ``ehr``'s clock and column types."""
    schema = {table: ehr.columns(table) for table in ehr.tables()}
    return SQLiteTranslator(now=ehr.clock.now if ehr.clock else None, schema=schema)


class SQLiteTranslator:
    """Translate SQLite queries for one database (its clock and column types)."""

    def __init__(self, *, now: dt.datetime | None, schema: Schema | None = None) -> None:
        # None: a database without dates (offset time), where SQL asking for "now" cannot be translated.
        self._now = now.replace(microsecond=0, tzinfo=None) if now is not None else None
        self.schema = {t.lower(): {c.lower(): ty.upper() for c, ty in cols.items()}
                       for t, cols in (schema or {}).items()}

    @property
    def now(self) -> dt.datetime:
        if self._now is None:
            raise TranslationError("This database has no dates (times are offsets), so SQL about the current time "
                                   "cannot be translated; compare offset columns instead.")
        return self._now

    def translate(self, sql: str) -> str:
        try:
            tree = sqlglot.parse_one(sql, read="sqlite")
        except SqlglotError as exc:
            raise TranslationError(f"Cannot parse the SQLite query: {_first_line(exc)}") from None
        # One pass over the tree, in place (it is ours; copying it costs more than the rest).
        tree = tree.transform(self._rewrite, copy=False)
        for select in list(tree.find_all(exp.Select)):
            _bind_bare_columns(select)
            if self.schema:
                self._sum_in_scan_order(select)
        try:
            return tree.sql(dialect="duckdb")
        except SqlglotError as exc:  # pragma: no cover - generator failures are rare
            raise TranslationError(f"Cannot write the query in DuckDB SQL: {_first_line(exc)}") from None

    def run(self, ehr: EHR, sql: str) -> pl.DataFrame:
        return ehr.sql(self.translate(sql))

    def _rewrite(self, node: exp.Expression) -> exp.Expression:
        """Rewrite one node (sqlglot's ``transform`` visits parents before children)."""
        if isinstance(node, exp.Div):
            return _division(node, self._rewrite)
        if isinstance(node, exp.Column):
            return _vital_placeholder(node)
        if self.schema and isinstance(node, (exp.Sum, exp.Avg)):
            return self._text_aggregate(node)
        if isinstance(node, exp.Like):  # SQLite's LIKE ignores ASCII case
            return exp.ILike(**{k: v for k, v in node.args.items() if v is not None})
        if isinstance(node, exp.Round):  # SQLite's round() always gives a float
            node.set("this", exp.cast(node.this, "DOUBLE"))
            return node
        if isinstance(node, exp.Cast) and node.to.this in _INTEGER_TYPES:
            # SQLite truncates toward zero (3.7 -> 3); DuckDB's cast rounds (3.7 -> 4).
            inner = node.this.transform(self._rewrite, copy=False)
            return _duckdb("CAST(TRUNC(TRY_CAST(__x AS DOUBLE)) AS BIGINT)", x=inner)
        if isinstance(node, exp.Anonymous) and str(node.this).upper() == "TOTAL" and len(node.expressions) == 1:
            inner = node.expressions[0].transform(self._rewrite, copy=False)
            return _duckdb("COALESCE(SUM(TRY_CAST(__x AS DOUBLE)), 0.0)", x=inner)
        return self._dates(node)

    # -- date and time functions -------------------------------------------------------------

    def _dates(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.CurrentTime, exp.CurrentTimestamp, exp.CurrentDatetime)):
            return _timestamp_literal(self.now)
        if isinstance(node, exp.CurrentDate):
            return exp.cast(exp.Literal.string(self.now.strftime("%Y-%m-%d")), "DATE")
        call = _date_call(node)
        if call is None:
            return node
        name, args = call
        args = [arg.transform(self._rewrite, copy=False) for arg in args]
        if name == "STRFTIME":
            if not args:
                raise TranslationError("strftime() needs a format.")
            fmt, args = args[0], args[1:]
            if not (isinstance(fmt, exp.Literal) and fmt.is_string):
                raise TranslationError("strftime() with a computed format is not supported.")
            return self._strftime(fmt.this, args)
        if not args:
            args = [exp.Literal.string("now")]
        moment = self._moment(args[0], args[1:])
        if name == "DATETIME":
            return moment.expression()
        if name == "DATE":
            return moment.date()
        if name == "TIME":
            return moment.format("%H:%M:%S")
        if name == "JULIANDAY":
            return moment.julian()
        return moment.unixepoch()  # UNIXEPOCH

    def _moment(self, base: exp.Expression, modifiers: list[exp.Expression]) -> _Moment:
        mods: list[str] = []
        for m in modifiers:
            if not (isinstance(m, exp.Literal) and m.is_string):
                raise TranslationError(f"Date modifier {m.sql()} is not a constant string; it is not supported.")
            mods.append(m.this)
        if isinstance(base, exp.Literal) and base.is_string:
            value = self.now if base.this.strip().lower() == "now" else _parse_time_text(base.this)
            if value is None:
                return _Moment(None, mods)
            return _Moment(_fold(value, mods), [])
        if isinstance(base, exp.Null):
            return _Moment(None, mods)
        if _is_timestamp_literal(base):
            return _Moment(_fold(dt.datetime.fromisoformat(base.this.this), mods), [])
        if isinstance(base, exp.Literal):
            raise TranslationError(f"Date functions on numbers ({base.sql()}) are not supported.")
        if isinstance(base, exp.Column) and self._column_type(base).startswith("TIMESTAMP"):
            return _Moment(base, mods)
        return _Moment(exp.cast(base, "TIMESTAMP"), mods)

    def _strftime(self, fmt: str, args: list[exp.Expression]) -> exp.Expression:
        if not args:
            raise TranslationError("strftime() needs a time value.")
        moment = self._moment(args[0], args[1:])
        if fmt == "%J":
            return moment.julian()
        if fmt == "%s":
            return exp.cast(moment.unixepoch(), "TEXT")
        directives = re.findall(r"%(.)", fmt)
        unsupported = [f"%{d}" for d in directives if d not in _SAME_DIRECTIVES]
        if unsupported:
            raise TranslationError(f"strftime format {fmt!r} uses {', '.join(unsupported)}, which is not supported.")
        return moment.format(fmt)

    # -- text columns in numeric aggregates --------------------------------------------------

    def _text_aggregate(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node.this, exp.Column):
            if self._column_type(node.this).startswith(("VARCHAR", "TEXT", "STRING")):
                node.set("this", exp.TryCast(this=node.this, to=exp.DataType.build("DOUBLE")))
        return node

    def _sum_in_scan_order(self, select: exp.Select) -> None:
        """Add floats in SQLite's order (table scan = rowid order), so sums round the same way.

        Floating-point addition is not associative: DuckDB's parallel ``sum`` can differ
        from SQLite's in the last bits, which flips a 3-decimal rounding at ``x.xxx5``.
        Applied to ``sum``/``avg`` of float columns in queries over one base table.
        """
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None or select.args.get("joins") or not isinstance(from_.this, exp.Table):
            return
        table = from_.this
        if table.name.lower() not in self.schema:
            return
        for agg in _local_nodes(select, (exp.Sum, exp.Avg)):
            if _inside(agg, exp.Window, select) or isinstance(agg.this, exp.Order):
                continue
            float_column = any(self._column_type(c).startswith(("DOUBLE", "FLOAT", "REAL", "DECIMAL"))
                               for c in agg.this.find_all(exp.Column))
            if float_column or isinstance(agg.this, exp.TryCast):
                rowid = exp.column("rowid", table=table.alias_or_name)
                agg.set("this", exp.Order(this=agg.this, expressions=[exp.Ordered(this=rowid, nulls_first=False)]))

    def _column_type(self, column: exp.Column) -> str:
        name = column.name.lower()
        if column.table:
            return self.schema.get(column.table.lower(), {}).get(name, "")
        types = {cols[name] for cols in self.schema.values() if name in cols}
        return types.pop() if len(types) == 1 else ""


class _Moment:
    """A point in time: a folded constant, SQL NULL, or a SQL expression plus pending modifiers."""

    def __init__(self, value: dt.datetime | exp.Expression | None, modifiers: list[str]) -> None:
        self.value = value
        self.modifiers = modifiers

    def expression(self) -> exp.Expression:
        if self.value is None:
            return exp.Null()
        if isinstance(self.value, dt.datetime):
            return _timestamp_literal(self.value)
        return _apply_modifiers_sql(self.value, self.modifiers)

    def date(self) -> exp.Expression:
        if isinstance(self.value, dt.datetime):
            return exp.cast(exp.Literal.string(self.value.strftime("%Y-%m-%d")), "DATE")
        return _null_or(self, lambda e: exp.cast(e, "DATE"))

    def format(self, fmt: str) -> exp.Expression:
        if isinstance(self.value, dt.datetime):
            return exp.Literal.string(self.value.strftime(fmt))
        return _null_or(self, lambda e: exp.TimeToStr(this=e, format=exp.Literal.string(fmt)))

    def julian(self) -> exp.Expression:
        if isinstance(self.value, dt.datetime):
            return exp.cast(exp.Literal.number(repr(_julian_day(self.value))), "DOUBLE")
        # SQLite prints %J with 16 significant digits: 7 before the point, 9 after.
        return _null_or(self, lambda e: _duckdb(f"ROUND(EPOCH(__t) / 86400 + {_JD_UNIX_EPOCH}, 9)", t=e))

    def unixepoch(self) -> exp.Expression:
        if isinstance(self.value, dt.datetime):
            return exp.Literal.number(int(calendar.timegm(self.value.timetuple())))
        return _null_or(self, lambda e: _duckdb("CAST(FLOOR(EPOCH(__t)) AS BIGINT)", t=e))


def _null_or(moment: _Moment, build: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    if moment.value is None:
        return exp.Null()
    return build(moment.expression())


# -- modifiers -------------------------------------------------------------------------------


def _fold(value: dt.datetime, modifiers: list[str]) -> dt.datetime | None:
    """Apply SQLite date modifiers to a constant (None where SQLite would give NULL)."""
    try:
        return _fold_unchecked(value, modifiers)
    except (OverflowError, ValueError):  # beyond year 1..9999
        return None


def _fold_unchecked(value: dt.datetime, modifiers: list[str]) -> dt.datetime:
    for modifier in modifiers:
        kind, amount = _parse_modifier(modifier)
        if kind == "start":
            if amount == "year":
                value = dt.datetime(value.year, 1, 1)
            elif amount == "month":
                value = dt.datetime(value.year, value.month, 1)
            else:
                value = dt.datetime(value.year, value.month, value.day)
        elif kind == "weekday":
            sqlite_weekday = (value.weekday() + 1) % 7  # 0 = Sunday
            value += dt.timedelta(days=(int(amount) - sqlite_weekday) % 7)
        elif kind in ("year", "month"):
            months = int(amount) * (12 if kind == "year" else 1)
            value = _add_months_sqlite(value, months)
        else:
            value += dt.timedelta(**{f"{kind}s": float(amount)})
    return value


def _add_months_sqlite(value: dt.datetime, months: int) -> dt.datetime:
    """SQLite's month step: shift the month, then let an impossible day overflow forward."""
    index = value.year * 12 + value.month - 1 + months
    year, month = divmod(index, 12)
    first = value.replace(year=year, month=month + 1, day=1)
    return first + dt.timedelta(days=value.day - 1)


def _apply_modifiers_sql(value: exp.Expression, modifiers: list[str]) -> exp.Expression:
    first_of_month = False  # after 'start of month/year' a month step cannot overflow
    for modifier in modifiers:
        kind, amount = _parse_modifier(modifier)
        if kind == "start":
            value = exp.DateTrunc(unit=exp.Literal.string(amount.upper()), this=value)
            first_of_month = first_of_month or amount in ("year", "month")
        elif kind == "weekday":
            value = _duckdb(f"__t + TO_DAYS(CAST(({amount} - DAYOFWEEK(__t) + 7) % 7 AS INTEGER))", t=value)
            first_of_month = False
        elif kind in ("year", "month"):
            months = int(amount) * (12 if kind == "year" else 1)
            if first_of_month:
                value = _duckdb(f"__t + INTERVAL ({months}) MONTH", t=value)
            else:
                # Shift the first of the month, then add back the offset into the month, so
                # an impossible day overflows forward as in SQLite (DuckDB would clamp it).
                value = _duckdb(
                    f"DATE_TRUNC('MONTH', __t) + INTERVAL ({months}) MONTH + (__t - DATE_TRUNC('MONTH', __t))",
                    t=value,
                )
        else:
            first_of_month = False
            number = float(amount)
            if number.is_integer():
                value = _duckdb(f"__t + INTERVAL ({int(number)}) {kind.upper()}", t=value)
            else:
                seconds = {"day": 86_400, "hour": 3_600, "minute": 60, "second": 1}[kind]
                value = _duckdb(f"__t + TO_MICROSECONDS({round(number * seconds * 1_000_000)})", t=value)
    return value


def _parse_modifier(modifier: str) -> tuple[str, str]:
    if match := _START_OF.match(modifier):
        return "start", match.group(1).lower()
    if match := _WEEKDAY.match(modifier):
        return "weekday", match.group(1)
    if match := _MODIFIER.match(modifier):
        amount, unit = match.group(1).replace(" ", ""), match.group(2).lower()
        if unit in ("year", "month") and not float(amount).is_integer():
            raise TranslationError(f"Fractional {unit} modifier {modifier!r} is not supported.")
        return unit, amount
    raise TranslationError(f"Date modifier {modifier!r} is not supported.")


# -- other rewrites --------------------------------------------------------------------------


def _division(node: exp.Div, rewrite: Callable[[exp.Expression], exp.Expression]) -> exp.Expression:
    """SQLite's ``/``: DuckDB's ``//`` (integer division for integers, true division otherwise)."""
    divisor = exp.Nullif(this=node.expression.transform(rewrite, copy=False), expression=exp.Literal.number(0))
    return exp.IntDiv(this=node.this.transform(rewrite, copy=False), expression=divisor)


def _vital_placeholder(node: exp.Column) -> exp.Expression:
    if not node.table:
        match = re.fullmatch(r"(\w+)_(lower|upper)", node.name.lower())
        if match and (bounds := VITAL_RANGES.get(match.group(1).replace("_", " "))):
            value = bounds[0] if match.group(2) == "lower" else bounds[1]
            return exp.cast(exp.Literal.number(repr(value)), "DOUBLE")
    return node


def _bind_bare_columns(select: exp.Select) -> None:
    """Give SQLite's bare columns in an aggregate query an explicit aggregate."""
    group = select.args.get("group")
    having = select.args.get("having")
    order = select.args.get("order")
    parts: list[exp.Expression] = list(select.expressions)
    if having:
        parts.append(having)
    if order:
        parts.append(order)
    aggregates = [a for part in parts for a in _local_nodes(part, exp.AggFunc) if not _inside(a, exp.Window, select)]
    if not group and not aggregates:
        return
    sources = _source_names(select)
    aliases = {e.alias.lower() for e in select.expressions if e.alias}
    keys = [_column_key(g) for g in (group.expressions if group else [])]
    grouped_sql = {g.sql() for g in (group.expressions if group else []) if not isinstance(g, exp.Column)}
    extremes = [a for a in aggregates if isinstance(a, (exp.Min, exp.Max))]
    bare: list[exp.Column] = []
    for part in parts:
        for column in _local_nodes(part, exp.Column):
            if (_inside(column, (exp.AggFunc, exp.Window), select)
                    or _in_grouped_expression(column, grouped_sql, select)):
                continue
            table, name = _column_key(column)
            if not table and name in aliases:
                continue
            if table and table not in sources:
                continue  # a column of an outer query
            if any(name == k_name and (not table or not k_table or table == k_table) for k_table, k_name in keys):
                continue
            bare.append(column)
    for column in bare:
        if len(extremes) == 1:
            kind = exp.ArgMin if isinstance(extremes[0], exp.Min) else exp.ArgMax
            bound: exp.Expr = kind(this=column.copy(), expression=extremes[0].this.copy())
        else:
            bound = exp.AnyValue(this=column.copy())
        if column.parent is select:  # keep the output column's name for outer queries
            bound = exp.alias_(bound, column.name)
        column.replace(bound)


def _local_nodes(root: exp.Expr, kind: type[_Node] | tuple[type[_Node], ...]) -> Iterator[_Node]:
    """Nodes of ``kind`` under ``root`` that belong to the same query (not to a subquery)."""
    for node in root.walk(prune=lambda n: n is not root and isinstance(n, (exp.Select, exp.Subquery))):
        if isinstance(node, kind) and not (node is not root and isinstance(node, (exp.Select, exp.Subquery))):
            yield node


def _in_grouped_expression(node: exp.Expr, grouped_sql: set[str], stop: exp.Expr) -> bool:
    parent = node.parent
    while grouped_sql and parent is not None and parent is not stop:
        if parent.sql() in grouped_sql:
            return True
        parent = parent.parent
    return False


def _inside(node: exp.Expr, kind: type | tuple[type, ...], stop: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and parent is not stop:
        if isinstance(parent, kind):
            return True
        parent = parent.parent
    return False


def _source_names(select: exp.Select) -> set[str]:
    names: set[str] = set()
    sources = []
    if from_ := select.args.get("from_") or select.args.get("from"):
        sources.append(from_.this)
    sources.extend(join.this for join in select.args.get("joins") or [])
    for source in sources:
        names.add(source.alias_or_name.lower())
    return names


def _column_key(node: exp.Expression) -> tuple[str, str]:
    if isinstance(node, exp.Column):
        return node.table.lower(), node.name.lower()
    return "", node.sql().lower()


# -- small helpers ---------------------------------------------------------------------------


def _date_call(node: exp.Expression) -> tuple[str, list[exp.Expression]] | None:
    """(NAME, args) when ``node`` is a SQLite date function call as sqlglot parsed it."""
    if isinstance(node, exp.Anonymous) and str(node.this).upper() in _DATE_FUNCTIONS:
        return str(node.this).upper(), list(node.expressions)
    if isinstance(node, exp.TimeToStr):  # strftime(fmt, x) parsed as TimeToStr(TsOrDsToTimestamp(x), fmt)
        inner = node.this.this if isinstance(node.this, exp.TsOrDsToTimestamp) else node.this
        return "STRFTIME", [node.args["format"], inner]
    if isinstance(node, exp.Date):  # date(x)
        args = [node.this] + list(node.expressions or [])
        return "DATE", [a for a in args if a is not None]
    return None


def _parse_time_text(text: str) -> dt.datetime | None:
    match = _TIME_TEXT.match(text)
    if not match:
        return None
    y, mo, d, h, mi, s, frac = match.groups()
    try:
        value = dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0))
    except ValueError:
        return None
    return value + dt.timedelta(seconds=float(frac)) if frac else value


def _julian_day(value: dt.datetime) -> float:
    """SQLite's Julian day number, rounded to the 16 significant digits its %J prints."""
    millis = (value - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)
    return float(f"{millis / 86_400_000 + _JD_UNIX_EPOCH:.16g}")


def _timestamp_literal(value: dt.datetime) -> exp.Expression:
    text = value.strftime("%Y-%m-%d %H:%M:%S") + (f".{value.microsecond:06d}" if value.microsecond else "")
    return exp.cast(exp.Literal.string(text), "TIMESTAMP")


def _is_timestamp_literal(node: exp.Expression) -> bool:
    return (isinstance(node, exp.Cast) and node.to.is_type("timestamp")
            and isinstance(node.this, exp.Literal) and node.this.is_string)


def _duckdb(template: str, **parts: exp.Expression) -> exp.Expression:
    """Parse a DuckDB snippet and put ``parts`` in place of its ``__name`` placeholders."""
    tree = _parse_template(template).copy()

    def fill(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not node.table and node.name.startswith("__"):
            return parts[node.name[2:]].copy()
        return node

    return tree.transform(fill, copy=False)


@lru_cache(maxsize=512)
def _parse_template(template: str) -> exp.Expr:
    return sqlglot.parse_one(template, read="duckdb")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
