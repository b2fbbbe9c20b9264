"""Privacy levels: what the model may see of the data.

* ``schema``: the schema, the descriptions and dictionary vocabularies (lab, drug,
  diagnosis names: values of ``d_*`` tables and of the columns a knowledge file lists as
  ``vocabulary``), never patient-level values. Execution feedback carries shapes, types,
  row counts and error text with literal data values masked.
* ``aggregates``: as ``schema``, plus aggregated results (tables with a count column),
  with counts under 11 suppressed together with the rest of their row.
* ``full``: everything; the default only for synthetic data and the open demo datasets.

Real (credentialed or unknown) data defaults to ``schema``. The level decides only what
is sent to the model; the analyst always sees everything in the notebook.

Entry points for the agent loop: ``mask_error`` and ``mask_stdout`` before building the
feedback and debugger text, ``filter_hints`` for value hints, ``describe_answer`` for any
answer preview that is sent to the model.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import Any, Literal

import polars as pl

from ehr_magic.errors import ConfigError
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.safety.tables import Tables
from ehr_magic.safety.masking import HIDDEN, SMALL_CELL, Known, aggregate_rows, is_count_column, mask_text

Level = Literal["schema", "aggregates", "full"]
LEVELS: tuple[Level, ...] = ("schema", "aggregates", "full")
OPEN_SOURCES = ("synthetic", "ehrsql-sqlite")
_VOCABULARY_LIMIT = 200_000  # distinct values read per dictionary column, at most
_vocabularies: weakref.WeakKeyDictionary[Tables, frozenset[str]] = weakref.WeakKeyDictionary()
_names: weakref.WeakKeyDictionary[Tables, frozenset[str]] = weakref.WeakKeyDictionary()

__all__ = ["LEVELS", "Level", "SMALL_CELL", "check_level", "default_level", "describe_answer", "dictionary_columns",
           "filter_hints", "hint_allowed", "is_dictionary_column", "mask_error", "mask_feedback", "mask_stdout"]


def check_level(level: str) -> Level:
    """``level`` if it is a privacy level; ``ConfigError`` saying the choices otherwise."""
    if level not in LEVELS:
        raise ConfigError(f"Unknown privacy level {level!r}; choose one of: {', '.join(LEVELS)} "
                          "(schema sends no patient-level values to the model).")
    return level  # type: ignore[return-value]


def default_level(ehr: object) -> Level:
    """``full`` for synthetic data and the open demos, ``schema`` for anything else.

    Decided from the database's own metadata (``source``, ``dataset``), which generated
    code cannot change; decide it once per session, when the database is connected.
    """
    meta = getattr(ehr, "meta", {}) or {}
    source = str(meta.get("source", "")).lower()
    dataset = str(getattr(ehr, "dataset", "") or meta.get("dataset", "")).lower()
    if source in OPEN_SOURCES or source.startswith("synthetic") or "demo" in dataset:
        return "full"
    return "schema"


# -- dictionary columns ------------------------------------------------------------------------


def is_dictionary_column(ehr: object, table: str, column: str) -> bool:
    """Whether values of ``table.column`` are vocabulary rather than patient-level data.

    Dictionary tables (``d_*``: ``d_labitems``, ``d_items``, ``d_icd_diagnoses``...) are
    vocabulary throughout; in other tables, only the columns the schema's knowledge file
    lists under ``vocabulary`` (``prescriptions.drug``, ``admissions.admission_type``...).
    """
    table, column = table.lower(), column.lower()
    if table.startswith("d_"):
        return True
    knowledge = getattr(ehr, "knowledge", None)
    info = knowledge.tables.get(table) if knowledge is not None else None
    return info is not None and column in {c.lower() for c in info.vocabulary}


def dictionary_columns(ehr: Tables) -> list[tuple[str, str]]:
    """Every ``(table, column)`` of the database that ``is_dictionary_column``."""
    return [(t, c) for t in ehr.tables() for c in ehr.columns(t) if is_dictionary_column(ehr, t, c)]


def dictionary_values(ehr: Tables) -> frozenset[str]:
    """The text values of all dictionary columns (read once per database connection)."""
    cached = _vocabularies.get(ehr)
    if cached is not None:
        return cached
    values: set[str] = set()
    for table, column in dictionary_columns(ehr):
        if not ehr.columns(table)[column].startswith("VARCHAR"):
            continue
        frame = ehr.sql(f"SELECT DISTINCT {quote(column)} AS v FROM {quote(table)} WHERE {quote(column)} IS NOT NULL "
                        f"LIMIT {_VOCABULARY_LIMIT}")
        values.update(str(v) for v in frame["v"].to_list())
    result = frozenset(values)
    _vocabularies[ehr] = result
    return result


def hint_allowed(ehr: object, level: str, table: str, column: str) -> bool:
    """Whether a value hint listing stored values of ``table.column`` may reach the model."""
    return check_level(level) == "full" or is_dictionary_column(ehr, table, column)


def filter_hints(hints: list[Any], ehr: object, level: str) -> list[Any]:
    """The value hints (objects with ``.table`` and ``.column``) allowed at ``level``.

    At ``schema`` and ``aggregates`` a hint about a patient-level column is dropped: its
    "closest stored values" would be patient data, and even "does not occur" answers a
    membership question about it.
    """
    return [h for h in hints if hint_allowed(ehr, level, h.table, h.column)]


# -- feedback text -----------------------------------------------------------------------------


def _known(ehr: Tables | None, code: str) -> Known:
    names = _names.get(ehr) if ehr is not None else None
    if ehr is not None and names is None:
        found = set()
        for table in ehr.tables():
            found.add(table.lower())
            found.update(c.lower() for c in ehr.columns(table))
        names = frozenset(found)
        _names[ehr] = names
    return Known(code=code, names=names or frozenset(),
                 vocabulary=(lambda: dictionary_values(ehr)) if ehr is not None else None)


def mask_feedback(text: str, level: str, ehr: Tables | None, *, code: str = "", strict: bool = False) -> str:
    """``text`` with patient-level literal values masked (unchanged at ``full``).

    ``code`` is the generated code the text is about: its own tokens are not masked.
    ``strict`` masks unquoted words too (for printed output and errors the code raised
    itself); otherwise only quoted strings, numbers, dates and times are masked.
    """
    level = check_level(level)
    if level == "full" or not text:
        return text
    return mask_text(text, _known(ehr, code), strict=strict, aggregates=level == "aggregates")


def mask_stdout(stdout: str, level: str, ehr: Tables | None, code: str = "") -> str:
    """Printed output of generated code, as the model may see it at ``level``."""
    return mask_feedback(stdout, level, ehr, code=code, strict=True)


def mask_error(error: Any, level: str, ehr: Tables | None, code: str = "") -> Any:
    """A copy of an ``ErrorInfo`` whose message is masked for ``level``.

    Messages of errors raised by a ``raise`` or ``assert`` line of the generated code are
    masked strictly, since the code may have formatted data values into them.
    """
    if error is None or check_level(level) == "full":
        return error
    own = error.line_text.lstrip().startswith(("raise", "assert"))
    return dataclasses.replace(error, message=mask_feedback(error.message, level, ehr, code=code, strict=own))


# -- answers -----------------------------------------------------------------------------------


def preview(value: Any, limit: int = 1500) -> str:
    """A short text view of an answer for feedback and memory."""
    if isinstance(value, pl.DataFrame):
        with pl.Config(tbl_rows=10, tbl_cols=12, fmt_str_lengths=60):
            text = f"DataFrame with {value.height} rows x {value.width} columns:\n{value}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + " ..."


def describe_answer(value: Any, level: str, *, ehr: Tables | None = None, code: str = "",
                    limit: int = 1500) -> str:
    """A text view of an answer for the model at ``level``.

    ``schema``: shape, column names and types, row count; never values. ``aggregates``:
    tables with a count column are shown with counts under 11 suppressed; anything else
    as in ``schema``. ``full``: a preview of the values.
    """
    level = check_level(level)
    if level == "full":
        return preview(value, limit)
    known = _known(ehr, code)
    if isinstance(value, pl.LazyFrame):
        schema = value.collect_schema()
        return f"LazyFrame with columns {_columns(list(schema.items()), known)} (not collected)"
    if isinstance(value, pl.DataFrame):
        types = [_dtype(d) for d in value.dtypes]
        if level == "aggregates" and any(is_count_column(n, t) for n, t in zip(value.columns, types)):
            lines = aggregate_rows(value.columns, types, [list(r) for r in value.iter_rows()], known)
            text = f"DataFrame with {value.height} rows x {value.width} columns (aggregated):\n" + "\n".join(lines)
            return text if len(text) <= limit else text[:limit] + " ..."
        return (f"DataFrame with {value.height} rows x {value.width} columns: "
                f"{_columns(list(zip(value.columns, value.dtypes)), known)}")
    if isinstance(value, pl.Series):
        name = value.name if known.column(value.name) else HIDDEN
        return f"Series {name!r} of {value.len()} values ({_dtype(value.dtype)})"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        return f"a {type(value).__name__} of {len(value)} items"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    if value is None:
        return "None"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return f"a value of type {type(value).__name__}"


def _dtype(dtype: Any) -> str:
    return str(dtype).replace("String", "str").replace("Int64", "i64").replace("Float64", "f64").lower() \
        if not isinstance(dtype, str) else dtype


def _columns(pairs: list[tuple[str, Any]], known: Known) -> str:
    return ", ".join(f"{n if known.column(n) else HIDDEN} ({_dtype(d)})" for n, d in pairs)
