"""Loaders on the real open data in ../shared/data (no mocks of DuckDB)."""

from __future__ import annotations

import gzip
import logging
import shutil
import sqlite3
from pathlib import Path

import pytest

import ehr_magic
from datapaths import EHRSQL_SQLITE, MIMIC_IV_DEMO
from ehr_magic.sources import ehrsql
from ehr_magic.sources import mimic_iv
from ehr_magic.errors import DataSourceError

# Row counts of the official MIMIC-IV demo 2.2 files (chartevents: the reconstruction, same count).
MIMIC_DEMO_ROWS = {"admissions": 275, "patients": 100, "labevents": 107_727, "icustays": 140,
                   "transfers": 1_190, "prescriptions": 18_087, "d_labitems": 1_622, "chartevents": 668_862}


def test_mimic_iv_demo_loads_with_official_row_counts(mimic_demo_db: Path) -> None:
    with ehr_magic.connect(mimic_demo_db) as ehr:
        assert ehr.schema == "mimic_iv"
        assert len(ehr.tables()) == 31
        for table, rows in MIMIC_DEMO_ROWS.items():
            assert ehr.count(table) == rows, table
        # The clock of a raw dataset is its latest timestamp.
        latest = ehr.sql("SELECT max(charttime) AS t FROM chartevents")["t"][0]
        assert ehr.now >= latest


def test_mimic_iv_types_are_right(mimic_demo_db: Path) -> None:
    with ehr_magic.connect(mimic_demo_db) as ehr:
        labs = ehr.columns("labevents")
        assert labs["subject_id"] == "BIGINT" and labs["itemid"] == "BIGINT"
        assert labs["charttime"] == "TIMESTAMP" and labs["valuenum"] == "DOUBLE" and labs["value"] == "VARCHAR"
        assert ehr.columns("admissions")["admittime"] == "TIMESTAMP"
        assert ehr.columns("patients")["dod"] == "DATE"
        assert ehr.columns("diagnoses_icd")["icd_code"] == "VARCHAR"  # codes keep leading zeros
        assert ehr.columns("chartevents")["caregiver_id"] == "BIGINT"  # empty in the reconstruction
        assert ehr.columns("procedureevents").keys() >= {"originalamount", "originalrate"}  # lowercased
        # An ICD-9 code with a leading zero survives as text.
        assert ehr.sql("SELECT count(*) AS n FROM diagnoses_icd WHERE icd_code LIKE '0%'")["n"][0] > 0


def test_missing_table_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "m.duckdb"
    with caplog.at_level(logging.WARNING):
        report = mimic_iv.load([MIMIC_IV_DEMO], out)
    assert report.missing == ["chartevents"]
    assert "chartevents" in caplog.text
    with ehr_magic.connect(out) as ehr:
        assert "chartevents" not in ehr.tables()
        assert ehr.meta["missing_tables"] == "chartevents"


def test_plain_csv_and_parquet_inputs(tmp_path: Path) -> None:
    src = tmp_path / "src" / "hosp"
    src.mkdir(parents=True)
    for table in ("patients", "admissions"):
        with gzip.open(MIMIC_IV_DEMO / "hosp" / f"{table}.csv.gz", "rb") as f:
            (src / f"{table}.csv").write_bytes(f.read())
    import duckdb

    duckdb.sql(f"COPY (SELECT * FROM read_csv('{MIMIC_IV_DEMO}/hosp/d_labitems.csv.gz')) "
               f"TO '{src}/d_labitems.parquet' (FORMAT parquet)")
    out = tmp_path / "small.duckdb"
    report = mimic_iv.load([tmp_path / "src"], out)
    assert report.tables == {"admissions": 275, "d_labitems": 1622, "patients": 100}


def test_unreadable_input_fails_cleanly_and_leaves_no_file(tmp_path: Path) -> None:
    src = tmp_path / "broken" / "hosp"
    src.mkdir(parents=True)
    shutil.copy(MIMIC_IV_DEMO / "hosp" / "patients.csv.gz", src)
    (src / "admissions.csv.gz").write_bytes(b"\x1f\x8b\x08 this is not gzip")
    out = tmp_path / "out.duckdb"
    with pytest.raises(DataSourceError, match="admissions"):
        mimic_iv.load([tmp_path / "broken"], out)
    assert not out.exists()
    assert not list(tmp_path.glob(".out.duckdb*"))


def test_existing_output_is_kept_when_a_rebuild_fails(tmp_path: Path) -> None:
    out = tmp_path / "keep.duckdb"
    ehrsql.load(EHRSQL_SQLITE, out)
    before = out.read_bytes()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    with pytest.raises(DataSourceError):
        ehrsql.load(bad, out)
    assert out.read_bytes() == before


def test_wrong_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match="does not exist"):
        mimic_iv.load([tmp_path / "nope"], tmp_path / "x.duckdb")
    with pytest.raises(DataSourceError, match="patients/admissions"):
        mimic_iv.load([tmp_path], tmp_path / "x.duckdb")


def test_ehrsql_sqlite_loads_all_tables_with_identical_counts(ehrsql_db: Path) -> None:
    source = sqlite3.connect(f"file:{EHRSQL_SQLITE}?mode=ro", uri=True)
    names = [r[0] for r in source.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert len(names) == 17
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert sorted(ehr.tables()) == sorted(names)
        for name in names:
            assert ehr.count(name) == source.execute(f"SELECT count(*) FROM {name}").fetchone()[0], name
        assert ehr.schema == "ehrsql_mimic_iv"
        assert str(ehr.now) == "2100-12-31 23:59:00"
        assert ehr.columns("labevents")["charttime"] == "TIMESTAMP"
        # Values survive the trip: same sum of a numeric column, same text of a timestamp.
        total = source.execute("SELECT round(sum(valuenum), 3) FROM labevents").fetchone()[0]
        assert round(ehr.sql("SELECT sum(valuenum) AS s FROM labevents")["s"][0], 3) == total
        first = source.execute("SELECT charttime FROM labevents WHERE row_id = 0").fetchone()[0]
        got = ehr.sql("SELECT strftime(charttime, '%Y-%m-%d %H:%M:%S') AS t FROM labevents WHERE row_id = 0")
        assert got["t"][0] == first
