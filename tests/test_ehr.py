"""The EHR object: read-only safety, SQL and frames, lookup, clock."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import polars as pl
import pytest

import ehr_magic
from ehr_magic.db.clock import Clock, add_months
from ehr_magic.errors import DatabaseError, EhrMagicError, ReadOnlyError


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


def test_sql_returns_polars(ehr) -> None:
    frame = ehr.sql("SELECT subject_id, gender FROM patients ORDER BY subject_id LIMIT 3")
    assert isinstance(frame, pl.DataFrame)
    assert frame.columns == ["subject_id", "gender"] and frame.height == 3
    with_params = ehr.sql("SELECT count(*) AS n FROM admissions WHERE subject_id = ?", [10004235])
    assert with_params["n"][0] >= 1


def test_table_is_lazy_and_cached(ehr) -> None:
    lazy = ehr.table("patients")
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect().height == 94
    assert ehr.table("PATIENTS").collect().height == 94  # case-insensitive name
    with pytest.raises(EhrMagicError, match="Did you mean 'patients'"):
        ehr.table("patient")


def test_tables_and_describe(ehr) -> None:
    assert "_ehr_meta" not in ehr.tables()
    assert len(ehr.tables()) == 17
    described = ehr.describe("d_labitems")
    assert described["column"].to_list() == ["row_id", "itemid", "label"]
    assert described.filter(pl.col("column") == "label")["examples"][0] != ""


def test_read_only_is_enforced_and_file_unchanged(ehrsql_db: Path, tmp_path: Path) -> None:
    before = _digest(ehrsql_db)
    target = tmp_path / "leak.csv"
    attempts = [
        "INSERT INTO patients (row_id, subject_id, gender, dob) VALUES (999, 1, 'f', '2000-01-01')",
        "DELETE FROM patients",
        "CREATE TABLE evil AS SELECT 1",
        f"COPY patients TO '{target}'",
        "SELECT * FROM read_csv('/etc/passwd')",
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS other",
        "SET enable_external_access = true",
        "INSTALL sqlite",
    ]
    with ehr_magic.connect(ehrsql_db) as ehr:
        for statement in attempts:
            with pytest.raises(ReadOnlyError) as caught:
                ehr.sql(statement)
            message = str(caught.value)
            assert "read-only" in message or "disabled for safety" in message or "locked" in message, statement
        assert ehr.count("patients") == 94
    assert not target.exists()
    assert not (tmp_path / "other.duckdb").exists()
    assert _digest(ehrsql_db) == before


def test_lookup_finds_stored_spelling(ehr) -> None:
    assert ehr.lookup("d_labitems", "label", "RDW")[0] == "rdw"
    assert "rdw-sd" in ehr.lookup("d_labitems", "label", "RDW")
    assert ehr.lookup("d_labitems", "label", "Creatinine")[0] == "creatinine"
    assert ehr.lookup("d_labitems", "label", "W.B.C. Count")[0] == "wbc count"
    assert all("potassium" in v for v in ehr.lookup("d_labitems", "label", "Potassium"))
    scored = ehr.lookup("prescriptions", "drug", "Aspirin", k=3, scores=True)
    assert scored[0][0] == "aspirin" and scored[0][1] == 100.0
    # Word order and punctuation do not matter.
    titles = ehr.lookup("d_icd_diagnoses", "long_title", "infarction myocardial acute")
    assert any("acute myocardial infarction" in t for t in titles)
    with pytest.raises(EhrMagicError, match="no column"):
        ehr.lookup("d_labitems", "nosuch", "x")


def test_clock_uses_dataset_time_not_wall_clock(ehr) -> None:
    assert ehr.now == dt.datetime(2100, 12, 31, 23, 59)
    assert ehr.ago(years=1) == dt.datetime(2099, 12, 31, 23, 59)
    assert ehr.ago(days=2) == dt.datetime(2100, 12, 29, 23, 59)
    assert ehr.start_of("year") == dt.datetime(2100, 1, 1)
    assert ehr.start_of("month", -1) == dt.datetime(2100, 11, 1)
    assert ehr.period("year", -1) == (dt.datetime(2099, 1, 1), dt.datetime(2100, 1, 1))


def test_clock_month_arithmetic_clamps() -> None:
    assert add_months(dt.datetime(2100, 3, 31), -1) == dt.datetime(2100, 2, 28)
    assert add_months(dt.datetime(2100, 1, 15), -13) == dt.datetime(2098, 12, 15)
    clock = Clock(dt.datetime(2101, 1, 6, 12))  # a Thursday
    assert clock.start_of("week") == dt.datetime(2101, 1, 3)
    assert clock.start_of("day", -1) == dt.datetime(2101, 1, 5)
    assert clock.ago(months=1, hours=2) == dt.datetime(2100, 12, 6, 10)


def test_now_can_be_overridden(ehrsql_db: Path) -> None:
    with ehr_magic.connect(ehrsql_db, now="2100-06-01") as ehr:
        assert ehr.now == dt.datetime(2100, 6, 1)


def test_bad_database_paths(tmp_path: Path) -> None:
    with pytest.raises(DatabaseError, match="No database file"):
        ehr_magic.connect(tmp_path / "missing.duckdb")
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database")
    with pytest.raises(DatabaseError, match="junk.duckdb is not a DuckDB database file"):
        ehr_magic.connect(junk)
    assert junk.read_text() == "not a database"


def test_threads_get_their_own_cursor(ehr) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        counts = list(pool.map(lambda _: ehr.sql("SELECT count(*) AS n FROM labevents")["n"][0], range(16)))
    assert set(counts) == {26426}
