"""Answer normalisation and scoring: EHRSQL-2024's exact-match, EHRAgent's containment,
and the reliability scores RS(c).

EHRSQL-2024's scorer executes a query, turns each cell into text (floats rounded to
3 decimals first), sorts the rows and keeps the first 100, then compares the two
results as strings. ``answer.json`` holds gold answers already in that form, e.g.
``"[['785.0']]"``, ``"[['89']]"``, ``"[['2100-12-05 16:00:00']]"``. We apply the same
rule to whatever an answerer returns (a polars frame, rows, a list of values or one
value), so an integer stays ``'89'``, a float is ``'89.0'``, a timestamp is
``'YYYY-MM-DD HH:MM:SS'`` text and SQL NULL is ``'None'``. Booleans become ``'1'`` /
``'0'`` (SQLite has no booleans: ``COUNT(*) > 0`` gives 1 or 0).
"""

from __future__ import annotations

import ast
import datetime as dt
import decimal
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Rows = list[list[str]]
ROW_LIMIT = 100  # the scorer compares only the first 100 rows (after sorting)
ROUND_DIGITS = 3

Verdict = Literal["correct_answer", "correct_abstention", "wrong_answer", "answered_unanswerable", "missed"]
ANSWERED = "answered"


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


def parse_gold_answer(text: str | None) -> Rows | None:
    """A gold answer from ``answer.json`` (a stringified list of rows), or None for "null"."""
    if text is None or str(text).strip() == "null":
        return None
    value = ast.literal_eval(text) if isinstance(text, str) else text
    return normalize_rows(to_rows(value))


def same_answer(predicted: Rows, gold: Rows) -> bool:
    """EHRSQL-2024's exact match on normalised results."""
    return str(predicted) == str(gold)


def contains_answer(predicted: Rows, gold: Rows) -> bool:
    """EHRAgent's looser check: every gold value occurs in the predicted answer's text.

    Gold values lose a trailing ``.0`` first (``'785.0'`` also matches ``785``), as
    EHRAgent's judge does. An empty gold answer needs an empty prediction.
    """
    if not gold:
        return not predicted or all(cell == "None" for row in predicted for cell in row)
    text = " | ".join(cell for row in predicted for cell in row)
    for row in gold:
        for cell in row:
            target = cell[:-2] if cell.endswith(".0") else cell
            if target not in text:
                return False
    return True


@dataclass(frozen=True)
class Judgement:
    """How one outcome scores against its gold answer."""

    verdict: Verdict
    contained: bool  # EHRAgent-style containment (abstentions judged as in ``verdict``)

    @property
    def correct(self) -> bool:
        return self.verdict in ("correct_answer", "correct_abstention")

    def reliability(self, penalty: float) -> float:
        """EHRSQL-2024's per-question score: +1, 0 or -penalty."""
        if self.correct:
            return 1.0
        return 0.0 if self.verdict == "missed" else -float(penalty)


def judge(status: str, answer: Rows | None, gold: Rows | None) -> Judgement:
    """Score one outcome. Anything but an ``answered`` status counts as abstaining."""
    answered = status == ANSWERED
    if gold is None:
        verdict: Verdict = "answered_unanswerable" if answered else "correct_abstention"
        return Judgement(verdict, contained=not answered)
    if not answered:
        return Judgement("missed", contained=False)
    predicted = answer if answer is not None else []
    verdict = "correct_answer" if same_answer(predicted, gold) else "wrong_answer"
    return Judgement(verdict, contained=contains_answer(predicted, gold))


def reliability_score(judgements: Sequence[Judgement], penalty: float) -> float:
    """RS(c) as a percentage: mean of +1 / 0 / -c over the questions, times 100."""
    if not judgements:
        return 0.0
    return 100.0 * sum(j.reliability(penalty) for j in judgements) / len(judgements)
