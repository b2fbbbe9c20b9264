"""Scoring: EHRSQL-2024 normalisation and exact match, EHRAgent containment, RS(c), metrics."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import polars as pl
import pytest

from ehr_magic.eval.datasets import Item
from ehr_magic.eval.metrics import Prices, compute_metrics
from ehr_magic.eval.answerers import Outcome
from ehr_magic.eval.runner import score
from ehr_magic.eval.scoring import (
    Judgement,
    contains_answer,
    judge,
    normalize_answer,
    normalize_value,
    parse_gold_answer,
    reliability_score,
    same_answer,
)

# -- normalisation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.357142857, "0.357"),
        (2120.5075000001, "2120.508"),
        (61.7, "61.7"),
        (785.0, "785.0"),  # a float keeps its ".0", as SQLite's float results do
        (89, "89"),  # an integer stays an integer
        (True, "1"),  # COUNT(*) > 0: SQLite has no booleans
        (False, "0"),
        (None, "None"),
        (decimal.Decimal("3.14159"), "3.142"),  # DuckDB decimal literals behave as floats
        (dt.datetime(2100, 12, 5, 16, 0), "2100-12-05 16:00:00"),
        (dt.date(2100, 12, 5), "2100-12-05"),
        ("07", "07"),  # text stays text (strftime('%m', ...))
        (-0.0001, "-0.0"),
    ],
)
def test_normalize_value(value: object, text: str) -> None:
    assert normalize_value(value) == text


def test_rows_are_sorted_then_cut_at_100() -> None:
    rows = [(i,) for i in range(150)]
    random.Random(0).shuffle(rows)
    normalised = normalize_answer(rows)
    assert len(normalised) == 100
    # Text order, as the scorer sorts the stringified cells: '0', '1', '10', '100', '101', ...
    assert normalised == sorted([[str(i)] for i in range(150)])[:100]
    assert normalised[:4] == [["0"], ["1"], ["10"], ["100"]]


def test_row_order_does_not_matter() -> None:
    assert normalize_answer([("b", 2), ("a", 1)]) == normalize_answer([("a", 1), ("b", 2)])


@pytest.mark.parametrize(
    "answer",
    [
        pl.DataFrame({"x": [1.23456, 2.0]}),
        pl.Series("x", [1.23456, 2.0]),
        [1.23456, 2.0],
        [(1.23456,), (2.0,)],
        [[2.0], [1.23456]],
    ],
)
def test_answer_shapes(answer: object) -> None:
    assert normalize_answer(answer) == [["1.235"], ["2.0"]]


def test_scalar_answer() -> None:
    assert normalize_answer(42) == [["42"]]
    assert normalize_answer(None) == [["None"]]


def test_gold_answer_parsing() -> None:
    assert parse_gold_answer("null") is None
    assert parse_gold_answer("[['785.0']]") == [["785.0"]]
    assert parse_gold_answer("[['b'], ['a']]") == [["a"], ["b"]]
    assert parse_gold_answer("[]") == []
    # The gold text and a live result meet in the same form.
    assert same_answer(normalize_answer(pl.DataFrame({"s": [785.0]})), parse_gold_answer("[['785.0']]"))
    assert not same_answer(normalize_answer([[785]]), parse_gold_answer("[['785.0']]"))


# -- containment -----------------------------------------------------------------------------


def test_containment_is_looser_than_exact_match() -> None:
    gold = parse_gold_answer("[['785.0']]")
    assert contains_answer(normalize_answer([[785]]), gold)  # '785' matches '785.0' gold
    assert not same_answer(normalize_answer([[785]]), gold)
    assert contains_answer(normalize_answer([("iv", 3), ("iv drip", 1)]), [["iv"], ["iv drip"]])
    assert not contains_answer(normalize_answer([["iv"]]), [["iv"], ["iv drip"]])
    assert contains_answer([], [])
    assert not contains_answer([["1"]], [])


# -- RS cases --------------------------------------------------------------------------------

GOLD = [["5"]]


@pytest.mark.parametrize(
    ("status", "answer", "gold", "verdict", "rs10"),
    [
        ("answered", [["5"]], GOLD, "correct_answer", 1.0),
        ("abstained", None, None, "correct_abstention", 1.0),
        ("failed", None, None, "correct_abstention", 1.0),  # no answer given: abstention
        ("abstained", None, GOLD, "missed", 0.0),
        ("clarify", None, GOLD, "missed", 0.0),
        ("answered", [["6"]], GOLD, "wrong_answer", -10.0),
        ("answered", [["6"]], None, "answered_unanswerable", -10.0),
    ],
)
def test_each_rs_case(status: str, answer: list | None, gold: list | None, verdict: str, rs10: float) -> None:
    judgement = judge(status, answer, gold)
    assert judgement.verdict == verdict
    assert judgement.reliability(10) == rs10
    assert judgement.reliability(0) == (1.0 if rs10 == 1.0 else 0.0)


def test_reliability_score_is_a_percentage() -> None:
    judgements = [Judgement("correct_answer", True), Judgement("correct_abstention", True),
                  Judgement("missed", False), Judgement("wrong_answer", False)]
    assert reliability_score(judgements, 0) == pytest.approx(50.0)
    assert reliability_score(judgements, 5) == pytest.approx(100 * (1 + 1 + 0 - 5) / 4)
    assert reliability_score(judgements, 4) == pytest.approx(100 * (1 + 1 + 0 - 4) / 4)


def test_metrics_from_outcomes() -> None:
    items = [
        Item("a", "q a", "SELECT 1", [["5"]]),
        Item("b", "q b", "SELECT 2", [["2.5"]]),
        Item("c", "q c", "SELECT 3", [["x"]]),
        Item("d", "q d", None, None),
        Item("e", "q e", None, None),
    ]
    outcomes = [
        Outcome("answered", answer=5, llm_calls=2, prompt_tokens=1000, completion_tokens=100, seconds=1.0),
        Outcome("answered", answer=2.4999, llm_calls=1, prompt_tokens=500, completion_tokens=50, seconds=2.0),
        Outcome("abstained", note="not in the data", llm_calls=1, prompt_tokens=500, seconds=3.0),
        Outcome("abstained", seconds=4.0),
        Outcome("answered", answer="yes", seconds=5.0),
    ]
    results = [score(item, outcome, 0.5) for item, outcome in zip(items, outcomes, strict=True)]
    m = compute_metrics(results, prices=Prices(prompt=2.0, completion=8.0))
    assert (m["n"], m["answered"], m["correct"], m["correct_answers"], m["correct_abstentions"]) == (5, 3, 3, 2, 1)
    assert m["answerable"] == 3
    assert m["sr"] == pytest.approx(60.0)
    assert m["cr"] == pytest.approx(60.0)
    assert m["precision"] == pytest.approx(100 * 2 / 3, abs=1e-3)
    assert m["rs0"] == pytest.approx(60.0)
    assert m["rs5"] == pytest.approx(100 * (3 - 5) / 5)
    assert m["rs10"] == pytest.approx(100 * (3 - 10) / 5)
    assert m["rsN"] == pytest.approx(100 * (3 - 5) / 5)
    assert (m["llm_calls"], m["prompt_tokens"], m["completion_tokens"]) == (4, 2000, 150)
    assert m["cost"] == pytest.approx((2000 * 2.0 + 150 * 8.0) / 1e6)
    assert m["seconds"] == pytest.approx(15.0)
    assert m["median_seconds"] == pytest.approx(3.0)
    assert m["per_tables"]["(unanswerable)"]["n"] == 2
    assert m["per_tables"]["0"]["n"] == 3  # "SELECT 1" reads no table
    assert sum(g["n"] for g in m["per_template"].values()) == 5


def test_runner_wall_time_stands_in_for_missing_seconds() -> None:
    result = score(Item("a", "q", "SELECT 1", [["1"]]), Outcome("answered", answer=1), 0.25)
    assert result.seconds == 0.25 and result.wall_seconds == 0.25 and result.correct


def test_outcome_status_is_checked() -> None:
    with pytest.raises(ValueError, match="status"):
        Outcome("done")  # type: ignore[arg-type]
