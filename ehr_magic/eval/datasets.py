"""EHRSQL-format benchmark splits: questions, gold SQL (SQLite dialect) and gold answers.

A dataset folder holds one folder per split, each with ``data.json``
(``{"version", "data": [{"id", "question"}]}``), ``label.json`` (id -> gold SQL or
``"null"`` for an unanswerable question), ``answer.json`` (id -> gold answer as a
stringified list of rows, or ``"null"``) and optionally ``annotated.json`` (a list
of ``{"id", "template", ...}``; the template names the question's kind).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ehr_magic.errors import DataSourceError
from ehr_magic.eval.scoring import Rows, parse_gold_answer

NULL = "null"
UNANSWERABLE = "(unanswerable)"
_REQUIRED = ("data.json", "label.json", "answer.json")


@dataclass(frozen=True)
class Item:
    """One benchmark question with its gold SQL and answer (None = unanswerable)."""

    id: str
    question: str
    gold_sql: str | None
    gold_answer: Rows | None
    annotated_template: str | None = None

    @property
    def answerable(self) -> bool:
        return self.gold_sql is not None

    @property
    def template(self) -> str:
        """The question's kind: the annotated template, else the gold SQL with literals masked."""
        if self.annotated_template is not None:
            return UNANSWERABLE if self.annotated_template in ("-", "") else self.annotated_template
        return template_key(self.gold_sql) if self.gold_sql else UNANSWERABLE

    @property
    def tables(self) -> str:
        """How many tables the gold SQL reads, as a label ("1", "2", ... or "(unanswerable)")."""
        return str(count_tables(self.gold_sql)) if self.gold_sql else UNANSWERABLE


@dataclass(frozen=True)
class Split:
    name: str
    directory: Path
    version: str
    items: list[Item]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items)

    def by_id(self) -> dict[str, Item]:
        return {item.id: item for item in self.items}


def available_splits(dataset_dir: str | os.PathLike[str]) -> list[str]:
    """Names of the split folders (those with a data.json) under ``dataset_dir``."""
    root = Path(dataset_dir).expanduser()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "data.json").is_file())


def load_split(dataset_dir: str | os.PathLike[str], split: str) -> Split:
    """Read one split of an EHRSQL-format dataset folder."""
    root = Path(dataset_dir).expanduser()
    if not root.is_dir():
        raise DataSourceError(
            f"No dataset folder at {dataset_dir}; pass the folder that holds the split folders "
            "(e.g. ../shared/data/ehrsql-2024 with train/ and valid/)."
        )
    folder = root / split
    if not (folder / "data.json").is_file():
        names = available_splits(root)
        hint = f"available: {', '.join(names)}" if names else "it has no split folders with a data.json"
        raise DataSourceError(f"No split {split!r} in {dataset_dir} ({hint}).")
    missing = [name for name in _REQUIRED if not (folder / name).is_file()]
    if missing:
        raise DataSourceError(f"Split {split!r} in {dataset_dir} lacks {', '.join(missing)}; "
                              "an EHRSQL-format split needs data.json, label.json and answer.json.")
    data = _read_json(folder / "data.json")
    labels = _read_json(folder / "label.json")
    answers = _read_json(folder / "answer.json")
    templates: dict[str, str] = {}
    if (folder / "annotated.json").is_file():
        for entry in _read_json(folder / "annotated.json"):
            if isinstance(entry, dict) and "id" in entry and "template" in entry:
                templates[str(entry["id"])] = str(entry["template"])
    questions = data.get("data") if isinstance(data, dict) else data
    if not isinstance(questions, list):
        raise DataSourceError(f"{folder / 'data.json'} has no \"data\" list of questions.")
    items = []
    for entry in questions:
        qid = str(entry["id"])
        if qid not in labels or qid not in answers:
            raise DataSourceError(f"Question {qid} of {folder / 'data.json'} has no entry in label.json "
                                  "or answer.json.")
        sql = labels[qid]
        gold_sql = None if sql is None or str(sql).strip() == NULL else str(sql)
        try:
            gold_answer = parse_gold_answer(answers[qid])
        except (ValueError, SyntaxError):
            raise DataSourceError(f"The gold answer of {qid} in {folder / 'answer.json'} is not a "
                                  "list of rows.") from None
        if (gold_sql is None) != (gold_answer is None):
            raise DataSourceError(f"Question {qid}: label.json and answer.json disagree on whether it is "
                                  "answerable.")
        items.append(Item(qid, str(entry["question"]), gold_sql, gold_answer, templates.get(qid)))
    version = str(data.get("version", "")) if isinstance(data, dict) else ""
    return Split(split, folder, version, items)


@lru_cache(maxsize=16384)
def template_key(sql: str) -> str:
    """The SQL's structure: the query with every literal replaced by ``?``."""
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except SqlglotError:
        return "(unparsable SQL)"
    masked = tree.transform(lambda n: exp.Placeholder() if isinstance(n, exp.Literal) else n)
    return masked.sql(dialect="sqlite")


@lru_cache(maxsize=16384)
def count_tables(sql: str) -> int:
    """Distinct database tables a query reads (derived tables and CTEs not counted)."""
    try:
        tree = sqlglot.parse_one(sql, read="sqlite")
    except SqlglotError:
        return 0
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return len({t.name.lower() for t in tree.find_all(exp.Table) if t.name and t.name.lower() not in ctes})


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise DataSourceError(f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}).") from None
    except OSError as exc:
        raise DataSourceError(f"Cannot read {path}: {exc.strerror}.") from None
