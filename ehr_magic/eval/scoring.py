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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ehr_magic.runtime.answers import (  # noqa: F401  (the normal form answers are compared in)
    ROUND_DIGITS,
    ROW_LIMIT,
    Rows,
    normalize_answer,
    normalize_rows,
    normalize_value,
    same_answer,
    to_rows,
)

Verdict = Literal["correct_answer", "correct_abstention", "wrong_answer", "answered_unanswerable", "missed"]
ANSWERED = "answered"


def parse_gold_answer(text: str | None) -> Rows | None:
    """A gold answer from ``answer.json`` (a stringified list of rows), or None for "null"."""
    if text is None or str(text).strip() == "null":
        return None
    value = ast.literal_eval(text) if isinstance(text, str) else text
    return normalize_rows(to_rows(value))


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
