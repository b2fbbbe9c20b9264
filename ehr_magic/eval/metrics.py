"""Aggregate per-question results into the field's metrics.

* ``sr`` (EHRAgent's success rate): questions handled correctly - right answer, or
  abstention where the gold is null - over all questions. Equal to RS(0).
* ``cr`` (EHRAgent's completion rate): questions that got an answer without error
  (status ``answered``) over all questions, right or wrong.
* ``rs0``, ``rs5``, ``rs10``, ``rsN`` (EHRSQL-2024's reliability scores): mean of +1
  (right answer or right abstention), 0 (abstention on an answerable question) and
  -c (wrong answer, or any answer to an unanswerable question), with c = 0, 5, 10 and
  N = the number of questions; as percentages.
* ``precision``: right answers among answered questions.
* ``containment``: like ``sr`` with EHRAgent's looser check (gold values occur in
  the answer) instead of exact match.
Rates are percentages (0-100). Abstaining, asking to clarify and failing all count as
not answering.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ehr_magic.eval.scoring import Judgement, reliability_score

if TYPE_CHECKING:  # pragma: no cover
    from ehr_magic.eval.runner import QuestionResult


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens (0 = not priced)."""

    prompt: float = 0.0
    completion: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1_000_000


def compute_metrics(results: Sequence[QuestionResult], *, prices: Prices = Prices()) -> dict[str, Any]:
    """The headline metrics, then breakdowns per template and per number of tables."""
    metrics = _summary(results, prices)
    metrics["per_template"] = _breakdown(results, lambda r: r.template, by_size=True)
    metrics["per_tables"] = _breakdown(results, lambda r: r.tables, by_size=False)
    return metrics


def _summary(results: Sequence[QuestionResult], prices: Prices) -> dict[str, Any]:
    n = len(results)
    judgements = [Judgement(r.verdict, r.contained) for r in results]  # type: ignore[arg-type]
    counts = {status: sum(r.status == status for r in results) for status in ("answered", "abstained", "clarify",
                                                                              "failed")}
    correct_answers = sum(r.verdict == "correct_answer" for r in results)
    correct_abstentions = sum(r.verdict == "correct_abstention" for r in results)
    correct = correct_answers + correct_abstentions
    answered = counts["answered"]
    prompt_tokens = sum(r.prompt_tokens for r in results)
    completion_tokens = sum(r.completion_tokens for r in results)
    seconds = [r.seconds for r in results]
    cost = prices.cost(prompt_tokens, completion_tokens)
    return {
        "n": n,
        "answerable": sum(r.gold is not None for r in results),
        "answered": answered,
        "abstained": counts["abstained"],
        "clarify": counts["clarify"],
        "failed": counts["failed"],
        "correct": correct,
        "correct_answers": correct_answers,
        "correct_abstentions": correct_abstentions,
        "wrong_answers": sum(r.verdict == "wrong_answer" for r in results),
        "answered_unanswerable": sum(r.verdict == "answered_unanswerable" for r in results),
        "sr": _rate(correct, n),
        "cr": _rate(answered, n),
        "rs0": round(reliability_score(judgements, 0), 4),
        "rs5": round(reliability_score(judgements, 5), 4),
        "rs10": round(reliability_score(judgements, 10), 4),
        "rsN": round(reliability_score(judgements, n), 4),
        "precision": _rate(correct_answers, answered) if answered else None,
        "containment": _rate(sum(r.contained for r in results), n),
        "llm_calls": sum(r.llm_calls for r in results),
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "cost": round(cost, 6),
        "cost_per_question": round(cost / n, 6) if n else 0.0,
        "seconds": round(sum(seconds), 3),
        "seconds_per_question": round(statistics.fmean(seconds), 4) if seconds else 0.0,
        "median_seconds": round(statistics.median(seconds), 4) if seconds else 0.0,
        "p95_seconds": round(_percentile(seconds, 95), 4) if seconds else 0.0,
    }


def _breakdown(results: Sequence[QuestionResult], key: Callable[[QuestionResult], str], *,
               by_size: bool) -> dict[str, dict[str, Any]]:
    """Metrics per group; the largest groups first (``by_size``) or in natural key order."""
    groups: dict[str, list[QuestionResult]] = {}
    for result in results:
        groups.setdefault(key(result), []).append(result)
    fields = ("n", "answered", "correct", "sr", "cr", "precision", "rs0", "rs10")
    out = {}
    order = sorted(groups, key=lambda g: (-len(groups[g]) if by_size else 0, _natural(g)))
    for name in order:
        summary = _summary(groups[name], Prices())
        out[name] = {f: summary[f] for f in fields}
    return out


def _rate(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 4) if whole else 0.0


def _percentile(values: Sequence[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def _natural(text: str) -> tuple[int, str]:
    return (int(text), "") if text.isdigit() else (10**9, text)
