"""Evaluation on EHRSQL-format benchmarks: ``ehr-magic eval`` and its library API.

    from ehr_magic.eval import evaluate
    report = evaluate("../shared/data/ehrsql-2024", "valid", "ehrsql.duckdb", mode="oracle")
    report.metrics["rs10"]

Modules: ``datasets`` (reading a split), ``sqlite_dialect`` (gold SQLite SQL -> DuckDB),
``scoring`` (answer normalisation, exact match, containment, RS), ``answerers`` (the
``Answerer`` protocol, ``ANSWERERS`` registry, the oracle), ``runner`` (workers,
resume), ``metrics`` and ``report`` (JSON, markdown, JSONL).
"""

from __future__ import annotations

from ehr_magic.eval.answerers import (
    ANSWERERS,
    Answerer,
    AnswererFactory,
    EvalContext,
    Example,
    Learner,
    OracleAnswerer,
    Outcome,
    gold_examples,
    make_answerer,
    register_answerer,
)
from ehr_magic.eval.datasets import Item, Split, available_splits, load_split
from ehr_magic.eval.metrics import Prices, compute_metrics
from ehr_magic.eval.runner import Evaluation, EvalReport, QuestionResult, evaluate, run_questions
from ehr_magic.eval.scoring import contains_answer, judge, normalize_answer, parse_gold_answer
from ehr_magic.eval.sqlite_dialect import SQLiteTranslator, TranslationError, run_sqlite_sql, translate

__all__ = [
    "ANSWERERS",
    "Answerer",
    "AnswererFactory",
    "EvalContext",
    "EvalReport",
    "Evaluation",
    "Example",
    "Item",
    "Learner",
    "OracleAnswerer",
    "Outcome",
    "Prices",
    "QuestionResult",
    "SQLiteTranslator",
    "Split",
    "TranslationError",
    "available_splits",
    "compute_metrics",
    "contains_answer",
    "evaluate",
    "gold_examples",
    "judge",
    "load_split",
    "make_answerer",
    "normalize_answer",
    "parse_gold_answer",
    "register_answerer",
    "run_questions",
    "run_sqlite_sql",
    "translate",
]
