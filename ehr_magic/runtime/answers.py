"""Answers in one normal form, so two answers can be compared: EHRSQL-2024's rule.

Each cell becomes text (floats rounded to 3 decimals first, a timestamp as
``'YYYY-MM-DD HH:MM:SS'``, SQL NULL as ``'None'``, booleans as ``'1'``/``'0'``), the rows
are sorted and the first 100 kept. Reuse calibration compares a reused answer with the
remembered cell's own this way; the evaluation scores with it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Iterable, Sequence
from typing import Any

Rows = list[list[str]]
ROW_LIMIT = 100  # the scorer compares only the first 100 rows (after sorting)
ROUND_DIGITS = 3


def normalize_value(value: Any) -> str:
    """One cell as the EHRSQL-2024 scorer writes it."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (float, decimal.Decimal)):
        number = float(value)
        return str(number) if math.isnan(number) or math.isinf(number) else str(round(number, ROUND_DIGITS))
    if isinstance(value, dt.datetime):
        return str(value.replace(tzinfo=None))
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode(errors="ignore")
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__.startswith("numpy"):
        return normalize_value(item())
    return str(value)


def to_rows(answer: Any) -> list[tuple[Any, ...]]:
    """Rows of an answer: a polars DataFrame or Series, a list of rows or values, or one value."""
    if hasattr(answer, "rows") and hasattr(answer, "columns") and callable(answer.rows):  # polars DataFrame
        return [tuple(row) for row in answer.rows()]
    if hasattr(answer, "to_list") and hasattr(answer, "dtype"):  # polars Series
        return [(v,) for v in answer.to_list()]
    if isinstance(answer, dict):
        return [tuple(answer.values())]
    if isinstance(answer, (list, tuple, set, frozenset)):
        items = list(answer)
        if items and all(isinstance(i, (list, tuple)) for i in items):
            return [tuple(i) for i in items]
        return [(i,) for i in items]
    return [(answer,)]


def normalize_rows(rows: Iterable[Sequence[Any]]) -> Rows:
    """Cells to text, rows sorted, first 100 kept: the form answers are compared in."""
    return sorted([normalize_value(c) for c in row] for row in rows)[:ROW_LIMIT]


def normalize_answer(answer: Any) -> Rows:
    return normalize_rows(to_rows(answer))


def same_answer(predicted: Rows, gold: Rows) -> bool:
    """EHRSQL-2024's exact match on normalised results."""
    return str(predicted) == str(gold)
