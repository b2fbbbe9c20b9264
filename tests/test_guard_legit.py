"""The guard has no false positives: legitimate DuckDB analytics queries and every gold
query of EHRSQL-2024 train and valid (in our DuckDB translation) pass it, and they are
real DuckDB: each runs on the EHRSQL database through ``ehr.sql``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datapaths import EHRSQL_DIR
from ehr_magic.db import connect
from ehr_magic.eval.datasets import load_split
from ehr_magic.eval.sqlite_dialect import translator_for
from ehr_magic.safety.guard import check_code
from ehr_magic.safety.sql import check_sql

CORPUS = Path(__file__).parent / "data" / "legit_duckdb.sql"


def legit_queries() -> list[tuple[str, object]]:
    """(query, params) pairs of the corpus file."""
    queries, params, lines = [], None, []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if line.startswith("-- params:"):
            params = json.loads(line.removeprefix("-- params:"))
        elif line.startswith("--") or not line.strip():
            continue
        else:
            lines.append(line)
            if line.rstrip().endswith(";"):
                queries.append((" ".join(lines).rstrip().rstrip(";"), params))
                params, lines = None, []
    return queries


CORPUS_QUERIES = legit_queries()


def test_the_corpus_is_large_and_covers_the_syntax() -> None:
    text = "\n".join(q for q, _ in CORPUS_QUERIES).upper()
    assert len(CORPUS_QUERIES) >= 100
    for syntax in ("::", "?", "$1", "$SID", "[1, 2, 3]", "{'KIND'", "LAMBDA ", "QUALIFY", "PIVOT", "UNPIVOT",
                   "ASOF JOIN", "SEMI JOIN", "ANTI JOIN", "FILTER (WHERE", "GROUP BY ALL", "COLUMNS(", "EXCLUDE",
                   "REPLACE (", "WITH RECURSIVE", "WINDOW W AS", "FROM ADMISSIONS SELECT", "LATERAL", "UNION BY NAME"):
        assert syntax in text, syntax


@pytest.mark.parametrize("query,params", CORPUS_QUERIES, ids=[f"q{i}" for i in range(len(CORPUS_QUERIES))])
def test_legitimate_duckdb_is_allowed_and_runs(ehrsql_db: Path, query: str, params: object) -> None:
    assert check_sql(query) == []
    call = f"answer = ehr.sql({query!r}, params={params!r})" if params is not None else f"answer = ehr.sql({query!r})"
    report = check_code(call)
    assert report.allowed, report.describe()
    with connect(ehrsql_db) as ehr:
        ehr.sql(query, params)  # raises if it is not valid DuckDB on this database


@pytest.mark.parametrize("split", ["train", "valid"])
def test_no_ehrsql_gold_query_is_blocked(ehrsql_db: Path, split: str) -> None:
    with connect(ehrsql_db) as ehr:
        translator = translator_for(ehr)
        items = [item for item in load_split(EHRSQL_DIR, split) if item.answerable]
        blocked = []
        for item in items:
            query = translator.translate(item.gold_sql)
            report = check_code(f"answer = ehr.sql({query!r})")
            if check_sql(query) or not report.allowed:
                blocked.append((item.id, query))
    assert len(items) > 900
    assert blocked == []


def test_the_model_s_unnest_parameter_query_runs_through_the_guard(ehrsql_db: Path) -> None:
    # The query a capable model wrote, blocked before as "cannot parse".
    query = "SELECT drug, count(*) AS n FROM prescriptions WHERE drug IN (SELECT unnest(?::VARCHAR[])) GROUP BY drug"
    assert check_code(f"answer = ehr.sql({query!r}, params=[['aspirin']])").allowed


@pytest.mark.parametrize("query", [
    # DuckDB-only syntax that sqlglot cannot parse must still be refused when it reaches outside.
    "SELECT * FROM read_csv(?::VARCHAR)",
    "SELECT * FROM read_parquet(['a.parquet'][1]::VARCHAR)",
    "SELECT unnest(?::VARCHAR[]) FROM '/etc/passwd'",
    "SELECT x FROM glob(?::VARCHAR)",
    "SELECT unnest(?::VARCHAR[]); COPY patients TO 'out.csv'",
    "SELECT unnest(?::VARCHAR[]) INTO x",
    "SELECT getenv(?::VARCHAR)",
])
def test_the_duckdb_fallback_still_refuses_outside_access(query: str) -> None:
    assert check_sql(query), query
