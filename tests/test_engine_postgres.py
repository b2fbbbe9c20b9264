"""The same ``ehr`` on a real PostgreSQL server: API, read-only sessions, errors, search_path
layouts, ``data load/info`` with a URL, memory across engines, the agent, ``%%ehr`` and the
side panel, and the EHRSQL-2024 valid oracle (931/931)."""

from __future__ import annotations

import datetime as dt
import json
import sys
import types
from pathlib import Path

import duckdb
import polars as pl
import pytest

import ehr_magic
import ehr_magic.cli as cli
from datapaths import EHRSQL_DIR, EHRSQL_SQLITE
from ehr_magic.engines import QueryError, TranslationError, publish, to_dialect
from ehr_magic.errors import DatabaseError, EhrMagicError, ReadOnlyError
from ehr_magic.safety import limits
from fake_llm import messages_text
from servers import PostgresServer
from test_magic import ipython_shell

pytestmark = pytest.mark.shared_data(EHRSQL_SQLITE)

COUNT_CODE = "patients = ehr.sql('SELECT count(*) AS n FROM patients')\nanswer = patients.item()"


def fenced(code: str) -> str:
    return f"Knowledge:\n- patients has one row per patient\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def duck(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


@pytest.fixture(scope="module")
def pg(pg_ehrsql: str):
    with ehr_magic.connect(pg_ehrsql) as handle:
        yield handle


@pytest.fixture()
def ehr(pg):
    """The PostgreSQL-backed ``ehr`` for conftest's ``make_agent``."""
    return pg


# -- the same API ---------------------------------------------------------------------------


def test_metadata_clock_and_tables_match_duckdb(pg, duck) -> None:
    assert (pg.schema, pg.dataset, pg.now) == (duck.schema, duck.dataset, duck.now)
    assert pg.engine_name == "PostgreSQL" and duck.engine_name == "DuckDB"
    assert pg.tables() == duck.tables()
    for table in duck.tables():
        assert pg.columns(table) == duck.columns(table), table
        assert pg.count(table) == duck.count(table), table
    assert pg.ago(months=1) == duck.ago(months=1) and pg.period("year", -1) == duck.period("year", -1)
    assert "ehr-test-pw" not in pg.location and "ehr-test-pw" not in repr(pg)


def test_sql_returns_the_same_polars_frames(pg, duck) -> None:
    query = ("SELECT a.subject_id, count(*) AS n, max(a.admittime) AS last, avg(l.valuenum) AS mean "
             "FROM admissions a JOIN labevents l ON l.hadm_id = a.hadm_id "
             "WHERE a.admittime >= TIMESTAMP '2100-01-01' GROUP BY a.subject_id ORDER BY n DESC, a.subject_id LIMIT 5")
    left, right = pg.sql(query), duck.sql(query)
    assert left.schema == right.schema
    assert left.drop("mean").equals(right.drop("mean"))
    assert left["mean"].round(6).to_list() == right["mean"].round(6).to_list()
    assert pg.sql("SELECT arg_max(label, itemid) AS top, 7 // 2 AS half FROM d_labitems").row(0) == \
        duck.sql("SELECT arg_max(label, itemid) AS top, 7 // 2 AS half FROM d_labitems").row(0)


def test_parameters_positional_and_named(pg, duck) -> None:
    query = "SELECT count(*) AS n FROM admissions WHERE subject_id = ? AND admittime < ?"
    args = [10014729, dt.datetime(2100, 12, 31)]
    assert pg.sql(query, args).item() == duck.sql(query, args).item() > 0
    named = "SELECT count(*) AS n FROM admissions WHERE subject_id = $who"
    assert pg.sql(named, {"who": 10014729}).item() == duck.sql(named, {"who": 10014729}).item()


def test_table_describe_lookup(pg, duck) -> None:
    assert pg.table("patients").collect().sort("row_id").equals(duck.table("patients").collect().sort("row_id"))
    assert pg.describe("d_labitems")["column"].to_list() == ["row_id", "itemid", "label"]
    assert pg.describe("d_labitems")["type"].to_list() == duck.describe("d_labitems")["type"].to_list()
    assert pg.lookup("d_labitems", "label", "RDW")[0] == "rdw"
    assert pg.lookup("d_labitems", "label", "RDW") == duck.lookup("d_labitems", "label", "RDW")
    info = pg.info()
    assert info["engine"] == "PostgreSQL" and info["tables"] == duck.info()["tables"]


def test_lookup_reads_the_distinct_values_once(pg_ehrsql: str) -> None:
    with ehr_magic.connect(pg_ehrsql) as handle:
        queries: list[str] = []
        run = handle._engine.query
        handle._engine.query = lambda sql, *a, **k: queries.append(sql) or run(sql, *a, **k)
        handle.lookup("d_items", "label", "heart rate")
        handle.lookup("d_items", "label", "respiratory rate")
        assert len([q for q in queries if "DISTINCT" in q]) == 1


def test_table_past_the_row_cap_is_refused_with_a_sentence(pg) -> None:
    patients = pg.count("patients")
    with limits.row_cap(patients):
        with pytest.raises(limits.ResultTooLargeError, match=r"filter in SQL instead.*FROM labevents WHERE"):
            pg.table("labevents")
        assert pg.table("patients").collect().height == patients
        with pytest.raises(limits.ResultTooLargeError, match=f"more than {patients} rows"):
            pg.sql("SELECT * FROM labevents")
        assert pg.sql(f"SELECT * FROM labevents LIMIT {patients}").height == patients


# -- read-only and errors -------------------------------------------------------------------


def test_writes_are_refused_before_and_by_the_server(pg, pg_server: PostgresServer) -> None:
    from ehr_magic.safety.guard import check_code

    report = check_code("ehr.sql('DROP TABLE patients')")
    assert not report.allowed and any(v.rule == "sql" for v in report.violations)
    with pytest.raises(ReadOnlyError, match="read-only"):
        pg.sql("DELETE FROM patients")
    with pytest.raises(ReadOnlyError, match="read-only"):
        pg.sql("CREATE TABLE x AS SELECT 1 AS a")
    # Past the parser, the session itself refuses: default_transaction_read_only = on.
    with pytest.raises(ReadOnlyError, match="cannot execute DELETE in a read-only transaction"):
        pg._engine.query_arrow("DELETE FROM patients")
    with pytest.raises(TranslationError, match="one query at a time"):
        pg.sql("SELECT 1; SELECT 2")
    assert pg_server.execute("SELECT count(*) FROM patients", "ehrsql")[0][0] == pg.count("patients")


def test_engine_errors_come_back_in_postgres_words_with_the_sql(pg) -> None:
    with pytest.raises(QueryError) as caught:
        pg.sql("SELECT no_such_column FROM patients WHERE subject_id = ?", [1])
    message = str(caught.value)
    assert 'column "no_such_column" does not exist' in message
    assert "SELECT no_such_column FROM patients WHERE subject_id = $1" in message
    with pytest.raises(QueryError, match='relation "no_such_table" does not exist'):
        pg.sql("SELECT * FROM no_such_table")
    with pytest.raises(EhrMagicError, match=r"No table 'patient'.*Did you mean 'patients'"):
        pg.table("patient")


def test_a_query_postgres_cannot_express_is_one_sentence() -> None:
    with pytest.raises(TranslationError, match="cannot be translated from DuckDB to PostgreSQL"):
        to_dialect("SELECT FROM WHERE (", "postgres")
    with pytest.raises(TranslationError, match=r"^PostgreSQL cannot express lambda functions \(x -> \.\.\.\), which"):
        to_dialect("SELECT list_reduce([1, 2, 3], (a, b) -> a + b) AS s", "postgres")
    with pytest.raises(TranslationError, match="PostgreSQL cannot express SELECT \\* EXCLUDE"):
        to_dialect("SELECT * EXCLUDE (dod) FROM patients", "postgres")
    with pytest.raises(TranslationError, match="PostgreSQL cannot express part of this query.*IGNORE NULLS"):
        to_dialect("SELECT first(dod IGNORE NULLS) FROM patients", "postgres")


def test_connection_problems_are_one_sentence(pg_server: PostgresServer, monkeypatch, tmp_path) -> None:
    wrong = pg_server.url("ehrsql").replace(pg_server.password, "wrong")
    with pytest.raises(DatabaseError, match=r"refused the password of user ehr; check the password in the URL, "
                                            r"PGPASSWORD or ~/.pgpass\.$"):
        ehr_magic.connect(wrong)
    with pytest.raises(DatabaseError, match=r"^There is no database nope on the PostgreSQL server at 127\.0\.0\.1"):
        ehr_magic.connect(pg_server.url("nope"))
    from servers import free_port

    closed = f"postgresql://ehr@127.0.0.1:{free_port()}/ehrsql"
    # libpq's two lines ("Connection refused" / "Is the server running ...?") read as two sentences.
    with pytest.raises(DatabaseError, match=r"^Cannot reach the PostgreSQL server at 127\.0\.0\.1:\d+: Connection "
                                            r"refused\. Is the server running .*\? Check that it is running"):
        ehr_magic.connect(closed)
    with pytest.raises(DatabaseError, match=r"no schema mimiciv_nope in PostgreSQL database ehrsql.*public"):
        ehr_magic.connect(pg_server.url("ehrsql", query="search_path=mimiciv_nope"))
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    with pytest.raises(DatabaseError, match="asks a password for user ehr"):
        ehr_magic.connect(pg_server.url("ehrsql", password=False))


def test_password_from_pgpassword_or_pgpass(pg_server: PostgresServer, monkeypatch, tmp_path) -> None:
    url = pg_server.url("ehrsql", password=False)
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    with ehr_magic.connect(url) as handle:
        assert handle.schema == "ehrsql_mimic_iv"
    monkeypatch.delenv("PGPASSWORD")
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{pg_server.port}:*:ehr:{pg_server.password}\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    with ehr_magic.connect(url) as handle:
        assert handle.count("patients") > 0


def test_missing_driver_names_the_extra(monkeypatch, pg_server: PostgresServer) -> None:
    monkeypatch.setitem(sys.modules, "adbc_driver_postgresql", None)
    monkeypatch.setitem(sys.modules, "adbc_driver_postgresql.dbapi", None)
    with pytest.raises(EhrMagicError, match=r"pip install 'ehr-magic\[postgres\]'"):
        ehr_magic.connect(pg_server.url("ehrsql"))


def test_time_limit_and_statement_timeout_stop_server_queries(pg, pg_server: PostgresServer) -> None:
    from ehr_magic.runtime.executor import Executor

    run = Executor(pg, timeout=1.0).run("answer = ehr.sql('SELECT pg_sleep(20) AS s')")
    assert not run.ok and run.error.type == "Timeout"
    sleeping = pg_server.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                 "AND query LIKE '%pg_sleep(20)%' AND pid <> pg_backend_pid()")
    assert sleeping == [(0,)]  # the server's query was cancelled with the run
    assert pg.count("patients") > 0  # the pool still serves queries after the cancel
    with ehr_magic.connect(pg_server.url("ehrsql", query="statement_timeout=200ms")) as short:
        with pytest.raises(QueryError, match="statement timeout"):
            short.sql("SELECT pg_sleep(3) AS s")


# -- layouts, loading, info -----------------------------------------------------------------


def test_search_path_with_two_schemas(pg_server: PostgresServer, pg_ehrsql: str) -> None:
    pg_server.execute("CREATE SCHEMA IF NOT EXISTS mimiciv_hosp; CREATE SCHEMA IF NOT EXISTS mimiciv_icu; "
                      "DROP TABLE IF EXISTS mimiciv_hosp.patients, mimiciv_hosp.admissions, mimiciv_icu.icustays; "
                      "CREATE TABLE mimiciv_hosp.patients AS SELECT * FROM public.patients; "
                      "CREATE TABLE mimiciv_hosp.admissions AS SELECT * FROM public.admissions; "
                      "CREATE TABLE mimiciv_icu.icustays AS SELECT * FROM public.icustays", "ehrsql")
    query = ("SELECT count(DISTINCT p.subject_id) AS n FROM patients p JOIN admissions a USING (subject_id) "
             "JOIN icustays i USING (hadm_id)")
    for url in (pg_server.url("ehrsql", query="search_path=mimiciv_hosp,mimiciv_icu"),
                pg_server.url("ehrsql", query="options=-csearch_path%3Dmimiciv_hosp,mimiciv_icu")):
        with ehr_magic.connect(url) as handle:
            assert handle.tables() == ["admissions", "icustays", "patients"]
            # No _ehr_meta in these schemas: a schema id of its own, knowledge drafted on connect.
            assert handle.schema.startswith("db_ehrsql") and handle.knowledge is not None
            with ehr_magic.connect(pg_ehrsql) as full:
                assert handle.sql(query).item() == full.sql(query).item() > 0
            assert handle.now > dt.datetime(2100, 1, 1)  # the clock falls back to the latest timestamp


ICU_MODULE = ("caregiver", "chartevents", "d_items", "datetimeevents", "icustays", "ingredientevents", "inputevents",
              "outputevents", "procedureevents")


def test_a_mimic_code_layout_is_recognised_as_mimic_iv(pg_server: PostgresServer, mimic_demo_db: Path) -> None:
    """MIMIC-IV as mimic-code builds it: hosp and icu tables in two schemas, no ehr-magic metadata."""
    pg_server.execute("CREATE DATABASE mimiciv")
    publish(mimic_demo_db, pg_server.url("mimiciv", query="search_path=mimiciv_hosp"))
    icu = [row[0] for row in pg_server.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'mimiciv_hosp'", "mimiciv")
        if row[0] in ICU_MODULE]
    pg_server.execute("CREATE SCHEMA mimiciv_icu; DROP TABLE mimiciv_hosp._ehr_meta; "
                      + "; ".join(f"ALTER TABLE mimiciv_hosp.{t} SET SCHEMA mimiciv_icu" for t in icu), "mimiciv")
    url = pg_server.url("mimiciv", query="search_path=mimiciv_hosp,mimiciv_icu")
    with ehr_magic.connect(url) as pg, ehr_magic.connect(mimic_demo_db) as duck:
        assert pg.schema == "mimic_iv" and pg.knowledge is not None
        assert pg.tables() == duck.tables()
        query = ("SELECT count(*) AS n FROM icustays i JOIN admissions a USING (hadm_id) JOIN chartevents c "
                 "USING (stay_id) WHERE a.admission_type LIKE '%EMER%'")
        assert pg.sql(query).item() == duck.sql(query).item() > 0
        latest = duck.sql("SELECT max(charttime) FROM chartevents").item()
        assert pg.now >= latest


def test_data_load_and_info_with_a_url(pg_server: PostgresServer, capsys) -> None:
    pg_server.execute("CREATE DATABASE loaded")
    url = pg_server.url("loaded", query="search_path=ehr")
    assert cli.main(["data", "load", "ehrsql", str(EHRSQL_SQLITE), "--out", url, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Wrote postgresql://ehr@127.0.0.1:") and pg_server.password not in out
    assert cli.main(["data", "info", url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["engine"] == "PostgreSQL" and info["schema"] == "ehrsql_mimic_iv" and info["tables"]["patients"] > 0
    assert pg_server.password not in info["path"]
    schemas = {row[0] for row in pg_server.execute("SELECT nspname FROM pg_namespace", "loaded")}
    assert "ehr" in schemas and not any(s.startswith("_ehr_load") for s in schemas)
    assert cli.main(["data", "info", url]) == 0
    assert "patients" in capsys.readouterr().out


def test_a_failed_publish_changes_nothing(pg_server: PostgresServer, tmp_path: Path) -> None:
    pg_server.execute("CREATE DATABASE atomic")
    good, bad = tmp_path / "good.duckdb", tmp_path / "bad.duckdb"
    with duckdb.connect(str(good)) as con:
        con.execute("CREATE TABLE a AS SELECT 1 AS x; CREATE TABLE _ehr_meta AS SELECT 'schema' AS key, 's1' AS value")
    with duckdb.connect(str(bad)) as con:
        con.execute("CREATE TABLE a AS SELECT 2 AS x; CREATE TABLE b AS SELECT map([1], ['x']) AS m")
    url = pg_server.url("atomic")
    publish(good, url)
    with pytest.raises(DatabaseError, match="nothing was changed"):
        publish(bad, url)
    assert pg_server.execute("SELECT x FROM a", "atomic") == [(1,)]
    tables = {row[0] for row in pg_server.execute(
        "SELECT table_schema || '.' || table_name FROM information_schema.tables WHERE table_schema NOT IN "
        "('pg_catalog', 'information_schema')", "atomic")}
    assert tables == {"public.a", "public._ehr_meta"}


# -- memory, agent, magic, panel ------------------------------------------------------------


def test_memory_accepted_on_duckdb_answers_on_postgres(duck, pg, tmp_path: Path, fake_llm) -> None:
    from ehr_magic.session import Session
    from ehr_magic.memory import MemoryStore

    store = MemoryStore(tmp_path / "memory.sqlite")
    question = "How many patients are there?"
    Session(duck, memory=store).cells.remember(question, COUNT_CODE)
    answer = Session(pg, memory=store).ask(question)
    assert answer.source == "memory" and answer.answer == duck.count("patients")
    assert fake_llm.chat_requests() == []  # no model call
    store.close()


def test_agent_answers_on_postgres(make_agent, fake_llm, duck) -> None:
    fake_llm.enqueue(fenced("answer = ehr.sql('SELECT count(*) AS n FROM patients WHERE gender = ?', ['f']).item()"))
    result = make_agent().run("How many female patients are there?")
    assert result.status == "answered"
    assert result.answer == duck.sql("SELECT count(*) AS n FROM patients WHERE gender = 'f'").item()
    system = fake_llm.chat_requests()[0].json["messages"][0]["content"]
    assert "labevents" in system


def test_agent_sees_postgres_errors_and_recovers(make_agent, fake_llm) -> None:
    fake_llm.enqueue(fenced("answer = ehr.sql('SELECT nope FROM patients').item()"))
    fake_llm.responder = lambda request: fenced(COUNT_CODE) if 'column "nope" does not exist' in messages_text(
        request) else "no"
    result = make_agent().run("How many patients are there?")
    assert result.status == "answered" and result.answer > 0


@pytest.fixture()
def shell(pg_ehrsql: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from test_panel_comm import FakeCommManager

    yield from ipython_shell(pg_ehrsql, monkeypatch, tmp_path,
                             kernel=types.SimpleNamespace(comm_manager=FakeCommManager()))


def test_magic_answers_on_a_postgres_backed_ehr(shell, fake_llm, duck) -> None:
    assert shell.user_ns["ehr"].engine_name == "PostgreSQL"
    fake_llm.enqueue(fenced(COUNT_CODE))
    shell.run_cell_magic("ehr", "", "How many patients are there?")
    assert shell.user_ns["answer"] == duck.count("patients")
    assert shell.run_cell(getattr(shell, "rl_next_input", "")).success  # the inserted cell runs on PG too


def test_magic_connect_takes_a_url(shell, pg_ehrsql: str, capsys) -> None:
    shell.run_line_magic("ehr", f"connect {pg_ehrsql}")
    out = capsys.readouterr().out
    assert "schema ehrsql_mimic_iv" in out
    assert shell.user_ns["ehr"].engine_name == "PostgreSQL"


def test_side_panel_answers_on_postgres(shell, fake_llm, duck) -> None:
    from ehr_magic.panel import TARGET
    from test_panel_comm import FakeComm, Panel

    comm = FakeComm()
    shell.kernel.comm_manager.targets[TARGET](comm, {"content": {"data": {}}})
    panel = Panel(comm, shell._ehr_magic[0])
    status = panel.result("status")
    assert status["database"]["schema"] == "ehrsql_mimic_iv" and "ehr-test-pw" not in json.dumps(status)
    fake_llm.enqueue(fenced(COUNT_CODE))
    _, reply = panel.call("ask", question="How many patients are there?")
    assert reply["kind"] == "result" and reply["result"]["status"] == "answered"
    assert str(duck.count("patients")) in json.dumps(reply["result"])


# -- the oracle -----------------------------------------------------------------------------


@pytest.mark.slow
def test_oracle_answers_every_valid_question_on_postgres(pg_ehrsql: str) -> None:
    """All 931 answerable valid questions: gold SQLite SQL -> DuckDB SQL -> PostgreSQL (sqlglot)."""
    from ehr_magic.eval import evaluate

    report = evaluate(EHRSQL_DIR, "valid", pg_ehrsql, mode="oracle")
    failures = [(r.id, r.error or r.answer) for r in report.results if not r.correct]
    assert failures == []
    assert (report.metrics["answerable"], report.metrics["answered"], report.metrics["correct"]) == (931, 931, 1163)


def test_frames_are_polars_with_duckdb_types(pg) -> None:
    frame = pg.sql("SELECT avg(valuenum) AS mean, round(avg(valuenum), 2) AS r, "
                   "max(charttime) - min(charttime) AS span FROM labevents")
    assert frame.schema == pl.Schema({"mean": pl.Float64, "r": pl.Float64, "span": pl.Duration("us")})
