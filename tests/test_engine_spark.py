"""The same ``ehr`` on a real Spark Connect server: API, SELECT only, one-sentence errors,
``data load/info`` with an ``sc://`` URL and atomic publishing, the agent, memory across
engines, and the EHRSQL-2024 valid oracle on a marked subset (every 3rd answerable
question, 311 of 931) with the same answers as DuckDB."""

from __future__ import annotations

import datetime as dt
import json
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest

import ehr_magic
import ehr_magic.cli as cli
from datapaths import EHRSQL_DIR, EHRSQL_SQLITE
from ehr_magic.engines import QueryError, TranslationError, publish, to_dialect
from ehr_magic.errors import DatabaseError, EhrMagicError, ReadOnlyError
from ehr_magic.safety import limits
from fake_llm import messages_text
from spark_server import SparkServer, free_port, spark_connect_server

pytestmark = pytest.mark.shared_data(EHRSQL_SQLITE)

# The marked subset of the valid split that runs through Spark: every 3rd answerable question.
SPARK_ORACLE_STEP = 3
COUNT_CODE = "patients = ehr.sql('SELECT count(*) AS n FROM patients')\nanswer = patients.item()"


def fenced(code: str) -> str:
    return f"Knowledge:\n- patients has one row per patient\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def duck(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


@pytest.fixture(scope="module")
def spark(spark_ehrsql: str):
    with ehr_magic.connect(spark_ehrsql) as handle:
        yield handle


@pytest.fixture()
def ehr(spark):
    """The Spark-backed ``ehr`` for conftest's ``make_agent``."""
    return spark


# -- the same API ---------------------------------------------------------------------------


def test_metadata_clock_and_tables_match_duckdb(spark, duck) -> None:
    assert (spark.schema, spark.dataset, spark.now) == (duck.schema, duck.dataset, duck.now)
    assert spark.engine_name == "Spark"
    assert spark.tables() == duck.tables()
    for table in duck.tables():
        assert spark.columns(table) == duck.columns(table), table
        assert spark.count(table) == duck.count(table), table
    assert spark.ago(months=1) == duck.ago(months=1) and spark.period("year", -1) == duck.period("year", -1)


def test_sql_returns_the_same_polars_frames(spark, duck) -> None:
    query = ("SELECT a.subject_id, count(*) AS n, max(a.admittime) AS last, avg(l.valuenum) AS mean "
             "FROM admissions a JOIN labevents l ON l.hadm_id = a.hadm_id "
             "WHERE a.admittime >= TIMESTAMP '2100-01-01' + INTERVAL (1) DAY "
             "GROUP BY a.subject_id ORDER BY n DESC, a.subject_id LIMIT 5")
    left, right = spark.sql(query), duck.sql(query)
    assert left.schema == right.schema  # timestamps stay naive (TIMESTAMP_NTZ), integers BIGINT
    assert left.drop("mean").equals(right.drop("mean"))
    assert left["mean"].round(6).to_list() == right["mean"].round(6).to_list()
    query = ("SELECT arg_max(label, itemid) AS top, 7 // 2 AS half, sum(itemid ORDER BY row_id) AS total, "
             "strftime(max(charttime), '%Y-%m') AS month FROM d_labitems, (SELECT max(charttime) AS charttime "
             "FROM labevents)")
    assert spark.sql(query).row(0) == duck.sql(query).row(0)


def test_parameters_positional_and_named(spark, duck) -> None:
    query = "SELECT count(*) AS n FROM admissions WHERE subject_id = ? AND admittime < ?"
    args = [10014729, dt.datetime(2100, 12, 31)]
    assert spark.sql(query, args).item() == duck.sql(query, args).item() > 0
    named = "SELECT count(*) AS n FROM admissions WHERE subject_id = $who"
    assert spark.sql(named, {"who": 10014729}).item() == duck.sql(named, {"who": 10014729}).item()


def test_table_describe_lookup(spark, duck) -> None:
    assert spark.table("patients").collect().sort("row_id").equals(duck.table("patients").collect().sort("row_id"))
    assert spark.describe("d_labitems")["column"].to_list() == ["row_id", "itemid", "label"]
    assert spark.describe("d_labitems")["type"].to_list() == duck.describe("d_labitems")["type"].to_list()
    assert spark.lookup("d_labitems", "label", "RDW") == duck.lookup("d_labitems", "label", "RDW")
    info = spark.info()
    assert info["engine"] == "Spark" and info["tables"] == duck.info()["tables"]


def test_table_past_the_row_cap_is_refused_with_a_sentence(spark) -> None:
    patients = spark.count("patients")
    with limits.row_cap(patients):
        with pytest.raises(limits.ResultTooLargeError, match=r"filter in SQL instead.*FROM labevents WHERE"):
            spark.table("labevents")
        assert spark.table("patients").collect().height == patients
        with pytest.raises(limits.ResultTooLargeError, match=f"more than {patients} rows"):
            spark.sql("SELECT * FROM labevents")


# -- SELECT only and errors -----------------------------------------------------------------


def test_only_queries_reach_spark(spark, spark_server: SparkServer) -> None:
    from ehr_magic.safety.guard import check_code

    assert not check_code("ehr.sql('DROP TABLE patients')").allowed
    for statement in ("DELETE FROM patients", "CREATE TABLE x AS SELECT 1 AS a", "DROP TABLE patients"):
        with pytest.raises(ReadOnlyError, match="read-only"):
            spark.sql(statement)
    # Past the EHR layer, the engine refuses on its own (Spark has no read-only session).
    engine = spark._engine
    for statement in ("DROP TABLE patients", "INSERT INTO patients SELECT * FROM patients",
                      "SELECT 1; DROP TABLE patients", "CACHE TABLE patients", "SET spark.sql.ansi.enabled=false"):
        with pytest.raises(ReadOnlyError, match="read-only for analysis"):
            engine.query_arrow(statement)
    with pytest.raises(ReadOnlyError, match=r"reflect\(\) runs code on the Spark server"):
        engine.query_arrow("SELECT reflect('java.lang.System', 'getProperty', 'user.home') AS h")
    with pytest.raises(ReadOnlyError, match="Reading files by path is refused"):
        engine.query_arrow("SELECT * FROM parquet.`/tmp`")
    assert spark.count("patients") == 94


def test_spark_errors_come_back_in_its_words_with_the_sql(spark) -> None:
    with pytest.raises(QueryError) as caught:
        spark.sql("SELECT no_such_column FROM patients WHERE subject_id = ?", [1])
    message = str(caught.value)
    assert message.startswith("Spark error: [UNRESOLVED_COLUMN")
    assert "`no_such_column`" in message and "JVM stacktrace" not in message
    assert "SELECT no_such_column FROM patients WHERE subject_id = :p1" in message
    with pytest.raises(QueryError, match=r"TABLE_OR_VIEW_NOT_FOUND.*`no_such_table`"):
        spark.sql("SELECT * FROM no_such_table")
    with pytest.raises(EhrMagicError, match=r"No table 'patient'.*Did you mean 'patients'"):
        spark.table("patient")


def test_a_bug_under_the_engine_keeps_its_traceback(spark, monkeypatch) -> None:
    # only Spark's, gRPC's and Arrow's errors become a one-line QueryError; a TypeError is a bug
    def bug(*args, **kwargs):
        raise TypeError("a bug of ours")

    monkeypatch.setattr(spark._engine._spark, "sql", bug)
    with pytest.raises(TypeError, match="a bug of ours") as caught:
        spark.sql("SELECT count(*) FROM patients")
    assert not isinstance(caught.value, EhrMagicError)
    assert any(entry.name == "bug" for entry in caught.traceback)  # raised where it happened


def test_a_query_spark_cannot_express_is_one_sentence() -> None:
    with pytest.raises(TranslationError, match="cannot be translated from DuckDB to Spark SQL"):
        to_dialect("SELECT FROM WHERE (", "spark")
    with pytest.raises(TranslationError, match=r"^Spark SQL cannot express ASOF joins, which this query uses"):
        to_dialect("SELECT * FROM a ASOF JOIN b ON a.t >= b.t", "spark")


def test_spark_rewrites_in_one_place() -> None:
    sql, _ = to_dialect("SELECT sum(x ORDER BY rowid), t + INTERVAL (2) DAY, t - to_hours(n), "
                        "CAST(x AS HUGEINT) FROM a", "spark")
    assert sql == ("SELECT SUM(x), t + INTERVAL '2' DAY, t - ((n) * INTERVAL '1' HOUR), "
                   "CAST(x AS DECIMAL(38, 0)) FROM a")


def test_connection_problems_are_one_sentence(spark_server: SparkServer) -> None:
    with pytest.raises(DatabaseError, match=r"^There is no database nope on the Spark server at 127\.0\.0\.1:\d+; "
                                            r"its databases are: .*ehrsql"):
        ehr_magic.connect(spark_server.url("nope"))
    started = time.monotonic()
    with pytest.raises(DatabaseError, match=r"^Cannot reach the Spark Connect server at 127\.0\.0\.1:\d+: "
                                            r"Connection refused\. Check that it is running"):
        ehr_magic.connect(f"sc://127.0.0.1:{free_port()}")
    assert time.monotonic() - started < 10
    with pytest.raises(DatabaseError, match="parameters after the slash look like /;key=value"):
        ehr_magic.connect(f"sc://127.0.0.1:{spark_server.port}/;database")
    # database= in the URL or as an option, the same database
    with ehr_magic.connect(spark_server.url(), database="ehrsql") as handle:
        assert handle.location == spark_server.url("ehrsql") and handle.schema == "ehrsql_mimic_iv"


def test_token_never_shows(spark_server: SparkServer) -> None:
    from ehr_magic.engines.spark import Target

    target = Target("sc://example.org:443/;use_ssl=true;token=s3cret;database=mimic")
    assert (target.host, target.port, target.database) == ("example.org", 443, "mimic")
    assert target.url == "sc://example.org:443/;use_ssl=true;token=s3cret"  # what pyspark gets
    assert "s3cret" not in target.location and target.location.endswith(";database=mimic")


def test_missing_extra_names_the_pip_command(monkeypatch, spark_server: SparkServer) -> None:
    monkeypatch.setitem(sys.modules, "pyspark.sql.connect.session", None)
    with pytest.raises(EhrMagicError, match=r"pip install 'ehr-magic\[spark\]'"):
        ehr_magic.connect(spark_server.url("ehrsql"))


def test_time_limit_interrupts_a_spark_query(spark) -> None:
    from ehr_magic.runtime.executor import Executor

    slow = ("SELECT count(*) AS n FROM range(0, 2000000000) a JOIN range(0, 2000000000) b "
            "ON a.id % 1000003 = b.id % 1000003")
    run = Executor(spark, timeout=2.0).run(f"answer = ehr.sql('{slow}')")
    assert not run.ok and run.seconds < 15
    assert spark.count("patients") == 94  # the session still answers after the interrupt


# -- loading, info, atomic publish ----------------------------------------------------------


def test_data_load_and_info_with_a_url(spark_server: SparkServer, capsys) -> None:
    url = spark_server.url("loaded")
    assert cli.main(["data", "load", "ehrsql", str(EHRSQL_SQLITE), "--out", url, "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(f"Wrote {url}")
    assert cli.main(["data", "info", url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["engine"] == "Spark" and info["schema"] == "ehrsql_mimic_iv" and info["tables"]["patients"] == 94
    assert cli.main(["data", "info", url]) == 0
    assert "patients" in capsys.readouterr().out
    with ehr_magic.connect(url) as handle:
        hidden = handle._engine._table_names()
        assert "_ehr_meta" in hidden and not any(name.startswith("_ehr_load") for name in hidden)


def _spark_rows(server: SparkServer, sql: str) -> list[tuple]:
    from ehr_magic.engines.spark import Target, _session

    session = _session(Target(server.url()))
    try:
        return [tuple(row) for row in session.sql(sql).collect()]
    finally:
        session.stop()


def test_a_failed_publish_changes_nothing(spark_server: SparkServer, tmp_path: Path, monkeypatch) -> None:
    good, bad = tmp_path / "good.duckdb", tmp_path / "bad.duckdb"
    with duckdb.connect(str(good)) as con:
        con.execute("CREATE TABLE a AS SELECT 1 AS x, TIMESTAMP '2100-01-02 03:04:05' AS t, 3::UTINYINT AS u, "
                    "'8e1f1b9a-0c3e-4d7e-9a57-1d6c1c1e2f3a'::UUID AS id; "
                    "CREATE TABLE empty (y VARCHAR); "
                    "CREATE TABLE _ehr_meta AS SELECT 'schema' AS key, 's1' AS value")
    with duckdb.connect(str(bad)) as con:
        con.execute("CREATE TABLE a AS SELECT 2 AS x; CREATE TABLE b AS SELECT 1 AS y")
    publish(good, spark_server.url("atomic"))
    assert _spark_rows(spark_server, "SELECT x, t, u, id FROM atomic.a") == [
        (1, dt.datetime(2100, 1, 2, 3, 4, 5), 3, "8e1f1b9a-0c3e-4d7e-9a57-1d6c1c1e2f3a")]
    assert _spark_rows(spark_server, "SELECT count(*) FROM atomic.empty") == [(0,)]

    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    from ehr_magic.engines import spark_publish

    original = spark_publish._copy_table

    def failing(session, source, table, destination):  # the server accepts a, then b fails midway
        if table == "b":
            raise SparkConnectGrpcException(message="disk full")  # as the server reports it
        original(session, source, table, destination)

    monkeypatch.setattr(spark_publish, "_copy_table", failing)
    with pytest.raises(DatabaseError, match="nothing was changed: disk full"):
        publish(bad, spark_server.url("atomic"))
    with pytest.raises(DatabaseError, match="nothing was changed"):
        publish(bad, spark_server.url("fresh"))
    monkeypatch.undo()
    assert _spark_rows(spark_server, "SELECT x FROM atomic.a") == [(1,)]
    tables = sorted(row[1] for row in _spark_rows(spark_server, "SHOW TABLES IN atomic"))
    assert tables == ["_ehr_meta", "a", "empty"]
    assert "fresh" not in [row[0] for row in _spark_rows(spark_server, "SHOW DATABASES")]


# -- memory, agent --------------------------------------------------------------------------


def test_memory_accepted_on_duckdb_answers_on_spark(duck, spark, tmp_path: Path, fake_llm) -> None:
    from ehr_magic.session import Session
    from ehr_magic.memory import MemoryStore

    store = MemoryStore(tmp_path / "memory.sqlite")
    question = "How many patients are there?"
    Session(duck, memory=store).cells.remember(question, COUNT_CODE)
    answer = Session(spark, memory=store).ask(question)
    assert answer.source == "memory" and answer.answer == duck.count("patients")
    assert fake_llm.chat_requests() == []
    store.close()


def test_agent_answers_on_spark(make_agent, fake_llm, duck) -> None:
    fake_llm.enqueue(fenced("answer = ehr.sql('SELECT count(*) AS n FROM patients WHERE gender = ?', ['f']).item()"))
    result = make_agent().run("How many female patients are there?")
    assert result.status == "answered"
    assert result.answer == duck.sql("SELECT count(*) AS n FROM patients WHERE gender = 'f'").item()


def test_agent_sees_spark_errors_and_recovers(make_agent, fake_llm) -> None:
    fake_llm.enqueue(fenced("answer = ehr.sql('SELECT nope FROM patients').item()"))
    fake_llm.responder = lambda request: fenced(COUNT_CODE) if "UNRESOLVED_COLUMN" in messages_text(
        request) else "no"
    result = make_agent().run("How many patients are there?")
    assert result.status == "answered" and result.answer == 94


# -- the oracle -----------------------------------------------------------------------------


def _subset(root: Path) -> Path:
    """Every SPARK_ORACLE_STEP-th answerable valid question, as a dataset folder with split ``spark``."""
    valid = EHRSQL_DIR / "valid"
    data = json.loads((valid / "data.json").read_text())
    labels = json.loads((valid / "label.json").read_text())
    answers = json.loads((valid / "answer.json").read_text())
    chosen = [q for q in data["data"] if labels[q["id"]] != "null"][::SPARK_ORACLE_STEP]
    folder = root / "spark"
    folder.mkdir(parents=True)
    (folder / "data.json").write_text(json.dumps({"version": "spark-subset", "data": chosen}))
    (folder / "label.json").write_text(json.dumps({q["id"]: labels[q["id"]] for q in chosen}))
    (folder / "answer.json").write_text(json.dumps({q["id"]: answers[q["id"]] for q in chosen}))
    return root


def test_oracle_on_spark_matches_duckdb(spark_ehrsql: str, ehrsql_db: Path, tmp_path: Path, capsys) -> None:
    """311 valid questions: gold SQLite SQL -> DuckDB SQL -> Spark SQL (sqlglot), through ``ehr-magic eval``."""
    dataset = _subset(tmp_path / "dataset")
    for name, target in (("duckdb", str(ehrsql_db)), ("spark", spark_ehrsql)):
        assert cli.main(["eval", str(dataset), "--split", "spark", "--db", target, "--mode", "oracle",
                         "--workers", "2", "--out", str(tmp_path / name), "--quiet"]) == 0
    capsys.readouterr()
    results = {}
    for name in ("duckdb", "spark"):
        lines = (tmp_path / name / "results.jsonl").read_text().splitlines()
        results[name] = {row["id"]: row for row in map(json.loads, lines)}
    assert len(results["spark"]) == 311
    wrong = [(qid, row["error"] or row["answer"]) for qid, row in results["spark"].items() if not row["correct"]]
    assert wrong == []
    assert {qid: row["answer"] for qid, row in results["spark"].items()} == \
        {qid: row["answer"] for qid, row in results["duckdb"].items()}


# -- the server going away ------------------------------------------------------------------


def test_server_going_away_mid_run_is_one_sentence(ehrsql_db: Path) -> None:
    """Its own server: this test stops it while a query runs."""
    with spark_connect_server() as server:
        url = server.url("gone")
        publish(ehrsql_db, url)
        handle = ehr_magic.connect(url)
        assert handle.count("patients") == 94
        errors: list[BaseException] = []

        def run() -> None:
            try:
                handle.sql("SELECT count(*) AS n FROM labevents a, labevents b, labevents c "
                           "WHERE a.valuenum + b.valuenum + c.valuenum > 1e9")
            except BaseException as exc:  # noqa: BLE001 - what the user would see
                errors.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(2)
        server.stop()
        worker.join(60)
        assert not worker.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], DatabaseError)
        assert str(errors[0]).startswith(f"The Spark Connect server at 127.0.0.1:{server.port} stopped answering")
        with pytest.raises(DatabaseError, match="stopped answering|Cannot reach"):
            handle.sql("SELECT 1 AS one")
        handle.close()


def test_lookup_columns_indexed_together_hold_what_duckdb_holds(spark, duck) -> None:
    """A question's first linking reads many columns to a statement (``index_columns``); on Spark
    the statement is translated, and each column holds the values DuckDB reads."""
    columns = spark.lookup_columns()
    spark.index_columns(columns)
    assert len(columns) > 10
    for table, column in columns:
        assert list(spark.vocabulary(table, column).values) == list(duck.vocabulary(table, column).values), column
        assert spark.indexed_rows(table) == duck.count(table)
