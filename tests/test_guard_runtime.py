"""Issue 23, item 6: SQL built at run time is judged on the SQL it runs.

The static guard cannot parse ``f"... ORDER BY {column} {direction}"``; it used to refuse such
code. Now it notes it, and ``ehr.sql`` checks every query of model-written code as it runs,
with the same rules; whatever the visible text already shows to be unsafe is still refused
before anything runs. Real DuckDB, the real executor, the fake model over real HTTP.
"""

from __future__ import annotations

import hashlib
import types
from pathlib import Path

import duckdb
import pytest

import ehr_magic
from ehr_magic.engines import duckdb_engine
from ehr_magic.runtime.executor import Executor
from ehr_magic.safety import check_code
from test_guard_snippets import BLOCKED, ENGINE_BLOCKED

BUILT_AT_RUN_TIME = (
    "column = [c for c in ehr.columns('patients') if c.startswith('gend')][0]\n"
    "direction = ['ASC', 'DESC'][len(column) > 3]\n"
    "answer = ehr.sql(f\"SELECT {column}, count(*) AS n FROM patients GROUP BY {column} ORDER BY {column} "
    "{direction}\")\n")


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory, ehrsql_db: Path):
    db = tmp_path_factory.mktemp("runtime-db") / "copy.duckdb"
    db.write_bytes(ehrsql_db.read_bytes())
    with ehr_magic.connect(db) as ehr:
        yield ehr, db


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sql_built_at_run_time_is_noted_and_runs(copy) -> None:
    ehr, _ = copy
    report = check_code(BUILT_AT_RUN_TIME)
    assert report.allowed, report.describe()
    assert any("checked as it runs" in note for note in report.notes)
    execution = Executor(ehr, timeout=10).run(BUILT_AT_RUN_TIME)
    assert execution.ok, execution.error
    assert execution.answer.columns == ["gender", "n"] and execution.answer["n"].sum() == 94


def test_unsafe_sql_filled_in_at_run_time_is_refused_as_it_runs(copy, tmp_path: Path) -> None:
    ehr, db = copy
    target = tmp_path / "out.csv"
    # The statement comes from the data (a prompt-injection route): no static check can see it.
    quoted = "''" + str(target) + "''"
    code = (f"statement = ehr.sql(\"SELECT 'COPY patients TO {quoted}' AS s\").item()\n"
            "answer = ehr.sql(f\"SELECT 1; {statement}\")\n")
    assert check_code(code).allowed, check_code(code).describe()
    before = _digest(db)
    execution = Executor(ehr, timeout=10).run(code)
    assert not execution.ok and execution.error.type == "BlockedSQLError", execution.error
    assert "COPY" in execution.error.message and "not allowed" in execution.error.message
    assert not target.exists() and _digest(db) == before


def test_what_the_visible_text_shows_unsafe_is_still_refused_before_running() -> None:
    for code in ("answer = ehr.sql(f\"SELECT {c} FROM t; COPY t TO '/tmp/x.csv'\")",
                 "answer = ehr.sql(f\"SELECT {c} FROM read_csv('/etc/passwd')\")",
                 "answer = ehr.sql(f\"SELECT {c} FROM t WHERE x {op} 3; DROP TABLE t\")"):
        report = check_code(code)
        assert not report.allowed and report.violations[0].rule == "sql", code


@pytest.fixture(scope="module")
def writable(tmp_path_factory: pytest.TempPathFactory, ehrsql_db: Path):
    """The database on a writable DuckDB connection with file access on: where the read-only
    engine would refuse a route a second time, here only the check as SQL runs stands in the way."""
    db = tmp_path_factory.mktemp("writable-db") / "copy.duckdb"
    db.write_bytes(ehrsql_db.read_bytes())
    plain = types.ModuleType("duckdb")
    plain.__dict__.update(duckdb.__dict__)
    plain.connect = lambda database, read_only=False, config=None: duckdb.connect(database)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(duckdb_engine, "duckdb", plain)
        ehr = ehr_magic.connect(db)
    try:
        ehr.sql("CREATE TABLE written AS SELECT 1 AS a")  # the analyst's own write goes through here
        ehr.sql("DROP TABLE written")
        yield ehr
    finally:
        ehr.close()


def _state(ehr) -> tuple:
    """What a route could change: tables, views and macros, rows, settings, attached databases."""
    return (ehr.sql("SELECT database_name, schema_name, table_name, estimated_size FROM duckdb_tables() "
                    "ORDER BY ALL").rows(),
            ehr.sql("SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY ALL").rows(),
            ehr.sql("SELECT function_name FROM duckdb_functions() WHERE function_type = 'macro' AND NOT internal "
                    "ORDER BY ALL").rows(),
            ehr.sql("SELECT count(*), count(DISTINCT gender), min(gender) FROM patients").rows(),
            ehr.sql("SELECT current_setting('memory_limit'), current_setting('enable_external_access')").rows(),
            ehr.sql("SELECT database_name FROM duckdb_databases() ORDER BY ALL").rows())


# ehr_con reaches for a raw connection EHR does not have: no SQL route (test_guard covers it);
# hidden_branch's branch taken only reads.
@pytest.mark.parametrize("name", [n for n in ENGINE_BLOCKED if n not in ("hidden_branch", "ehr_con")])
def test_every_sql_route_is_refused_as_it_runs(name: str, writable, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    before = _state(writable)
    execution = Executor(writable, timeout=10).run(BLOCKED[name][0].replace("TMP", str(work)))
    assert not execution.ok and execution.error.type == "BlockedSQLError", (name, execution.error)
    assert execution.error.message.startswith("This query was blocked for safety")
    assert _state(writable) == before and not any(work.iterdir())


def test_the_analysts_own_queries_are_not_checked(copy) -> None:
    ehr, _ = copy
    # PRAGMA is refused in generated code (it is not a read query) but harmless on the read-only
    # connection; the analyst's own cells never pass through the guard.
    assert ehr.sql("PRAGMA database_list").height >= 1


def test_the_agent_answers_with_sql_built_at_run_time(fake_llm, ehrsql_db: Path) -> None:
    from ehr_magic.agent import Agent, AgentSettings
    from ehr_magic.llm import LLMClient, resolve_settings

    fake_llm.enqueue(f"```python\n{BUILT_AT_RUN_TIME}```")
    with ehr_magic.connect(ehrsql_db) as ehr, LLMClient(resolve_settings(), audit=False) as client:
        result = Agent(ehr, client, settings=AgentSettings(timeout=10.0)).run("How many patients per gender?")
    assert result.status == "answered" and len(result.steps) == 1 and len(fake_llm.chat_requests()) == 1
