"""Notebook variables as context: which ones a question refers to, and what the model
may learn of them at each privacy level.

Offered: polars and pandas frames, Arrow tables, lists and scalars; described by name,
type, shape, column names and dtypes. Values: none at ``schema``; column ranges and
counts at ``aggregates``; a few rows or items at ``full``. A LazyFrame is described
from its schema only (never collected); huge eager frames get no aggregates. Nothing
here imports IPython or pandas: the front end passes a plain mapping of variables.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

HUGE_ROWS = 1_000_000  # above this, no aggregates or samples: shape and columns only
MAX_COLUMNS = 40
SAMPLE_ROWS = 3
# Words that point at a table without naming it ("them", "that table", "the cohort").
_POINTERS = re.compile(r"\b(them|those|these|that (?:table|frame|data ?frame|list|cohort|result)|"
                       r"this (?:table|frame|data ?frame|list|cohort)|the cohort|my (?:table|frame|cohort|list))\b",
                       re.IGNORECASE)
_BACKTICKED = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")
_SCALARS = (int, float, str, bool, dt.date, dt.datetime, dt.timedelta)


@dataclass(frozen=True)
class Described:
    """One variable as offered to the model (``text``), or why it could not be."""

    name: str
    text: str
    known: bool = True  # False: an unknown type, offered by name and type only
    note: str = ""  # a sentence for the analyst when the description is partial (huge, lazy, unknown)


def referenced(question: str, variables: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """``(names present, names missing)``: the variables the question names (as a word or
    in backticks) or points at ("them", "that table": the most recent table-like one).
    A backticked name that is not a variable is reported missing."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", question))
    present = [name for name in variables if name in words and len(name) > 1]
    missing = [name for name in dict.fromkeys(_BACKTICKED.findall(question)) if name not in variables]
    if not present and _POINTERS.search(question):
        tables = [name for name, value in variables.items() if _kind(value) in ("polars", "lazy", "pandas", "arrow")]
        if tables:
            present = [tables[-1]]
    return present, missing


def describe(name: str, value: Any, level: str) -> Described:
    """What the model may know of ``value`` at privacy ``level``."""
    kind = _kind(value)
    if kind == "lazy":
        schema = value.collect_schema()
        return Described(name, f"`{name}`: polars LazyFrame (rows not counted; not collected), "
                               f"columns {_columns(schema.items())}",
                         note=f"`{name}` is a LazyFrame: the model sees its columns only; it was not collected.")
    if kind == "polars":
        rows = value.len() if isinstance(value, pl.Series) else value.height
        note = f"`{name}` is huge ({rows:,} rows): the model sees its shape and columns only." \
            if rows > HUGE_ROWS else ""
        return Described(name, _polars(name, value, level), note=note)
    if kind == "pandas":
        return Described(name, _pandas(name, value, level))
    if kind == "arrow":
        columns = _columns((field.name, field.type) for field in value.schema)
        return Described(name, f"`{name}`: Arrow table, {value.num_rows:,} rows x {value.num_columns} columns, "
                               f"columns {columns}")
    if kind == "list":
        return Described(name, _sequence(name, value, level))
    if kind == "scalar":
        shown = f" = {value!r}" if level != "schema" and len(repr(value)) <= 80 else ""
        return Described(name, f"`{name}`: {type(value).__name__}{shown}")
    text = (f"`{name}`: a {type(value).__module__}.{type(value).__qualname__} (a type ehr-magic "
            "does not describe; only its name and type are offered)")
    return Described(name, text, known=False, note=text)


def _kind(value: Any) -> str:
    if isinstance(value, pl.LazyFrame):
        return "lazy"
    if isinstance(value, (pl.DataFrame, pl.Series)):
        return "polars"
    module = type(value).__module__
    if module.startswith("pandas") and hasattr(value, "dtypes") and hasattr(value, "shape"):
        return "pandas"
    if module.startswith("pyarrow") and hasattr(value, "num_rows") and hasattr(value, "schema"):
        return "arrow"
    if isinstance(value, (list, tuple, set, frozenset)):
        return "list"
    if isinstance(value, _SCALARS) or value is None:
        return "scalar"
    return "unknown"


def _columns(pairs: Any) -> str:
    pairs = list(pairs)
    shown = ", ".join(f"{column} ({dtype})" for column, dtype in pairs[:MAX_COLUMNS])
    return shown + (f", ... ({len(pairs) - MAX_COLUMNS} more)" if len(pairs) > MAX_COLUMNS else "")


def _polars(name: str, value: pl.DataFrame | pl.Series, level: str) -> str:
    frame = value.to_frame() if isinstance(value, pl.Series) else value
    kind = "polars Series" if isinstance(value, pl.Series) else "polars DataFrame"
    text = f"`{name}`: {kind}, {frame.height:,} rows x {frame.width} columns, columns {_columns(frame.schema.items())}"
    if frame.height > HUGE_ROWS:
        return text + " (huge: described from its shape and columns only)"
    if level in ("aggregates", "full") and frame.height:
        ranges = []
        for column, dtype in list(frame.schema.items())[:MAX_COLUMNS]:
            if dtype.is_numeric() or dtype.is_temporal():
                series = frame[column]
                ranges.append(f"{column} {series.min()!s}..{series.max()!s}")  # numbers and times, never bytes
        if ranges:
            text += "; ranges: " + ", ".join(ranges)
    if level == "full" and frame.height:
        rows = [dict(zip(frame.columns[:MAX_COLUMNS], row)) for row in frame.head(SAMPLE_ROWS).iter_rows()]
        text += f"; first rows: {_short(rows)}"
    return text


def _pandas(name: str, value: Any, level: str) -> str:
    rows = int(value.shape[0])
    if hasattr(value, "columns"):
        pairs = [(str(c), str(d)) for c, d in zip(value.columns, value.dtypes)]
        shape = f"{rows:,} rows x {len(pairs)} columns, columns {_columns(pairs)}"
    else:
        shape = f"{rows:,} values of dtype {value.dtype}"
    text = f"`{name}`: pandas {type(value).__name__}, {shape}"
    if level == "full" and 0 < rows <= HUGE_ROWS:
        head = value.head(SAMPLE_ROWS)
        text += f"; first rows: {_short(head.to_dict('records') if hasattr(value, 'columns') else list(head))}"
    return text


def _sequence(name: str, value: Any, level: str) -> str:
    items = list(value)[:SAMPLE_ROWS * 3] if level == "full" else []
    types = sorted({type(item).__name__ for item in list(value)[:100]}) if len(value) <= HUGE_ROWS else []
    text = f"`{name}`: {type(value).__name__} of {len(value):,} items" + (f" ({', '.join(types)})" if types else "")
    if level == "aggregates" and value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        text += f"; range {min(value)}..{max(value)}"
    if items:
        text += f"; first items: {_short(items)}"
    return text


def _short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# Names a notebook has that are not the analyst's data.
_NOT_THE_ANALYSTS = {"In", "Out", "exit", "quit", "get_ipython", "ehr", "skills", "open"}


def analyst_variables(namespace: Mapping[str, Any], hidden: Iterable[str] = ()) -> dict[str, Any]:
    """The analyst's own variables of a kernel's ``namespace``: no kernel internals (``hidden``,
    names starting with ``_``), modules, functions or classes."""
    import inspect

    skip = set(hidden) | _NOT_THE_ANALYSTS
    return {name: value for name, value in namespace.items()
            if not name.startswith("_") and name not in skip
            and not (inspect.ismodule(value) or inspect.isroutine(value) or inspect.isclass(value))}
