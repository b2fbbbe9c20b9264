"""The eICU and MIMIC-III loaders write every target of the engines: besides a DuckDB file, a
PostgreSQL URL and a Spark Connect URL. What lands on a server is the same database as the
DuckDB file: tables, row counts, schema, time model, clock and absent tables, and the offset
helpers of eICU give the same answers in the server's SQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ehr_magic
import ehr_magic.cli as cli
from datapaths import EICU_DEMO, MIMIC_III_DEMO
from servers import PostgresServer
from spark_server import SparkServer

pytestmark = pytest.mark.shared_data(EICU_DEMO, MIMIC_III_DEMO)


def load(source: str, folder: Path, url: str, capsys) -> dict:
    """``ehr-magic data load SOURCE FOLDER --out URL``, then ``data info URL --json``."""
    assert cli.main(["data", "load", source, str(folder), "--out", url, "--quiet"]) == 0
    assert capsys.readouterr().out.startswith("Wrote ")
    assert cli.main(["data", "info", url, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def same_database(server_url: str, duckdb_file: Path) -> None:
    with ehr_magic.connect(duckdb_file) as duck, ehr_magic.connect(server_url) as server:
        assert server.schema == duck.schema and server.time_model == duck.time_model
        assert (server.clock.now if server.clock else None) == (duck.clock.now if duck.clock else None)
        assert sorted(server.tables()) == sorted(duck.tables())
        assert {t: server.count(t) for t in server.tables()} == {t: duck.count(t) for t in duck.tables()}
        assert server.knowledge.absent == duck.knowledge.absent


EICU_FIRST_DAY = """SELECT count(*) FROM vitalaperiodic v WHERE {first_day}"""
EICU_DURING_STAY = """SELECT count(*) FROM medication m JOIN patient p USING (patientunitstayid)
                      WHERE {during_stay}"""


def assert_offset_helpers_agree(server_url: str, duckdb_file: Path) -> None:
    with ehr_magic.connect(duckdb_file) as duck, ehr_magic.connect(server_url) as server:
        for ehr in (duck, server):
            assert ehr.clock is None and ehr.time_model == "offset"
        queries = [
            EICU_FIRST_DAY.format(first_day=server.in_first("v.observationoffset", hours=24)),
            EICU_DURING_STAY.format(during_stay=server.during_stay("m.drugstartoffset", "hospital")),
        ]
        for sql in queries:
            counted = duck.sql(sql).item()
            assert counted > 0 and server.sql(sql).item() == counted, sql


def test_eicu_loads_into_postgresql(pg_server: PostgresServer, eicu_demo_db: Path, capsys) -> None:
    pg_server.execute("CREATE DATABASE eicu")
    info = load("eicu", EICU_DEMO, pg_server.url("eicu"), capsys)
    assert info["engine"] == "PostgreSQL" and info["schema"] == "eicu" and info["time_model"] == "offset"
    assert info["now"] == "" and info["tables"]["patient"] > 0
    same_database(pg_server.url("eicu"), eicu_demo_db)
    assert_offset_helpers_agree(pg_server.url("eicu"), eicu_demo_db)


def test_eicu_loads_into_spark(spark_server: SparkServer, eicu_demo_db: Path, capsys) -> None:
    info = load("eicu", EICU_DEMO, spark_server.url("eicu"), capsys)
    assert info["engine"] == "Spark" and info["schema"] == "eicu" and info["time_model"] == "offset"
    same_database(spark_server.url("eicu"), eicu_demo_db)
    assert_offset_helpers_agree(spark_server.url("eicu"), eicu_demo_db)


def test_mimic_iii_loads_into_postgresql(pg_server: PostgresServer, mimic_iii_demo_db: Path, capsys) -> None:
    pg_server.execute("CREATE DATABASE mimic3")
    info = load("mimic-iii", MIMIC_III_DEMO, pg_server.url("mimic3"), capsys)
    assert info["schema"] == "mimic_iii" and info["now"] == "2202-12-05 00:00:00"
    same_database(pg_server.url("mimic3"), mimic_iii_demo_db)
