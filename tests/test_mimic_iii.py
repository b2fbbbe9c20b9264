"""The MIMIC-III loader on the real open demo (../shared/data): row counts counted
independently from the files, column types, the dataset clock, and bad input."""

from __future__ import annotations

import csv
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

import ehr_magic
from datapaths import EICU_DEMO, MIMIC_III_DEMO, need_shared
from ehr_magic.knowledge import model as knowledge
from ehr_magic.sources import sources
from ehr_magic.sources import mimic_iii
from ehr_magic.errors import DataSourceError


def _demo_files() -> dict[str, Path]:
    need_shared(MIMIC_III_DEMO)
    return {path.name.split(".")[0].lower(): path for path in sorted(MIMIC_III_DEMO.glob("*.csv.gz"))}


def _csv_rows(path: Path) -> tuple[list[str], int]:
    """Header and number of data rows, read with the csv module (quoted fields may hold newlines)."""
    with gzip.open(path, "rt", newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = [name.lower() for name in next(reader)]
        return header, sum(1 for _ in reader)


@pytest.fixture(scope="module")
def demo(mimic_iii_demo_db: Path):
    with ehr_magic.connect(mimic_iii_demo_db) as ehr:
        yield ehr


def _folder_with(tmp_path: Path, *names: str) -> Path:
    """A folder holding copies of some demo files (``ADMISSIONS.csv.gz``, ...)."""
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(MIMIC_III_DEMO / name, folder / name)
    return folder


# -- the demo --------------------------------------------------------------------------------

def test_every_table_has_the_source_files_row_count(demo) -> None:
    files = _demo_files()
    assert set(files) == set(mimic_iii.TABLES) and len(files) == 26
    assert sorted(demo.tables()) == sorted(files)
    counted = {}
    for table, path in files.items():
        header, rows = _csv_rows(path)
        counted[table] = rows
        assert demo.count(table) == rows, table
        assert list(demo.columns(table)) == header, table  # every column, lower-cased, in file order
    # Figures published for the demo, so the independent count is itself checked.
    assert counted["patients"] == 100 and counted["admissions"] == 129 and counted["icustays"] == 136
    assert counted["chartevents"] == 758_355 and counted["labevents"] == 76_074 and counted["noteevents"] == 0


def test_embedded_newlines_in_quoted_fields_do_not_change_counts(tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "PATIENTS.csv.gz")
    (folder / "ADMISSIONS.csv").write_text(
        "row_id,subject_id,hadm_id,admittime,diagnosis\n"
        '1,10006,142345,2164-10-23 21:09:00,"SEPSIS;\nTELEMETRY"\n'
        '2,10011,105331,2126-08-14 22:32:00,HEPATITIS B\n', encoding="utf-8")
    mimic_iii.load([folder], tmp_path / "n.duckdb")
    with ehr_magic.connect(tmp_path / "n.duckdb") as ehr:
        assert ehr.count("admissions") == _csv_rows_plain(folder / "ADMISSIONS.csv") == 2
        assert ehr.sql("SELECT diagnosis FROM admissions WHERE row_id = 1").item() == "SEPSIS;\nTELEMETRY"


def _csv_rows_plain(path: Path) -> int:
    with path.open(newline="", encoding="utf-8") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


def test_types_are_fixed(demo) -> None:
    for table in demo.tables():
        columns = demo.columns(table)
        for name in ("row_id", "subject_id", "hadm_id", "icustay_id", "itemid", "cgid"):
            if name in columns:
                assert columns[name] == "BIGINT", (table, name)
    assert demo.columns("diagnoses_icd")["icd9_code"] == "VARCHAR"
    assert demo.columns("d_icd_diagnoses")["icd9_code"] == "VARCHAR"
    chart, labs = demo.columns("chartevents"), demo.columns("labevents")
    assert chart["charttime"] == "TIMESTAMP" and chart["value"] == "VARCHAR" and chart["valuenum"] == "DOUBLE"
    assert labs["value"] == "VARCHAR" and labs["valuenum"] == "DOUBLE"
    assert demo.columns("outputevents")["value"] == "DOUBLE"
    assert demo.columns("datetimeevents")["value"] == "TIMESTAMP"
    assert demo.columns("patients")["dob"] == "TIMESTAMP"
    assert demo.columns("prescriptions")["ndc"] == "VARCHAR"
    # Codes keep leading zeros and letters, as in the file.
    codes = set(demo.sql("SELECT icd9_code FROM diagnoses_icd")["icd9_code"])
    with gzip.open(MIMIC_III_DEMO / "DIAGNOSES_ICD.csv.gz", "rt", newline="") as handle:
        in_file = {row["icd9_code"] for row in csv.DictReader(handle) if row["icd9_code"]}
    assert codes - {None} == in_file
    assert any(c.startswith("0") for c in in_file) and any(c.startswith("V") for c in in_file)


def test_clock_is_the_latest_timestamp_and_sensible(demo) -> None:
    assert demo.schema == "mimic_iii" and demo.dataset == "mimic-iii-demo"
    latest = max(
        demo.sql(f'SELECT max("{column}") AS t FROM "{table}"')["t"][0] or demo.now.min
        for table in demo.tables() for column, dtype in demo.columns(table).items() if dtype == "TIMESTAMP")
    assert demo.now == latest
    # Shifted into 2100-2210, after every discharge: the demo's last event is a death date.
    assert 2100 <= demo.now.year <= 2210
    assert demo.now >= demo.sql("SELECT max(dischtime) AS t FROM admissions")["t"][0]
    assert str(demo.now) == "2202-12-05 00:00:00"


def test_knowledge_describes_exactly_the_loaded_columns(demo) -> None:
    info = knowledge.load("mimic_iii")
    assert set(info.tables) == set(demo.tables())
    for table in demo.tables():
        assert set(info.tables[table].columns) == set(demo.columns(table)), table
        for column in info.tables[table].vocabulary:
            assert demo.columns(table)[column] == "VARCHAR", (table, column)
    guide = info.guide()
    for convention in ("row_id", "icustay_id", "CareVue", "MetaVision", "ICD-9", "300", "ehr.now"):
        assert convention in guide, convention


def test_conventions_in_the_knowledge_hold_on_the_data(demo) -> None:
    # ages above 89 appear near 300
    ages = demo.sql("SELECT date_diff('year', p.dob, a.admittime) AS age FROM admissions a "
                    "JOIN patients p USING (subject_id)")["age"]
    assert ages.filter(ages > 89).min() >= 299 and ages.filter(ages < 150).max() <= 89
    # CareVue items below 220000, MetaVision from 220000
    systems = demo.sql("SELECT dbsource, min(itemid) AS lo, max(itemid) AS hi FROM d_items "
                       "WHERE dbsource IN ('carevue', 'metavision') GROUP BY dbsource").rows_by_key("dbsource")
    assert systems["carevue"][0][1] < 220000 <= systems["metavision"][0][0]
    heart = demo.sql("SELECT itemid FROM d_items WHERE label = 'Heart Rate' ORDER BY itemid")["itemid"].to_list()
    assert heart == [211, 220045]
    # row_id numbers the rows of its own table only: unique there, unrelated to the ids
    for table in ("patients", "admissions", "chartevents"):
        assert demo.sql(f"SELECT count(DISTINCT row_id) = count(*) FROM {table}").item(), table
    assert demo.sql("SELECT count(*) FROM patients WHERE row_id = subject_id").item() == 0


# -- sources, folders and formats -------------------------------------------------------------

def test_its_files_loaded_as_any_folder_are_loaded_by_its_loader(demo, tmp_path: Path) -> None:
    """``data load csv`` on MIMIC-III's files recognises them by their header rows and loads them as
    ``data load mimic-iii`` does (types, clock, packaged knowledge); ``--schema`` keeps them a
    folder of its own, with drafted knowledge."""
    from ehr_magic import sources as sources_module

    report = sources_module.load("csv", [MIMIC_III_DEMO], tmp_path / "m.duckdb")
    assert report.schema == "mimic_iii"
    with ehr_magic.connect(tmp_path / "m.duckdb") as ehr:
        assert ehr.schema == "mimic_iii" and ehr.now == demo.now
        assert {t: ehr.columns(t) for t in ehr.tables()} == {t: demo.columns(t) for t in demo.tables()}
        assert ehr.stored_knowledge is None and ehr.knowledge.title == knowledge.load("mimic_iii").title
    own = sources_module.load("csv", [_folder_with(tmp_path, "PATIENTS.csv.gz", "ADMISSIONS.csv.gz")],
                              tmp_path / "own.duckdb", schema="csv_my_copy")
    assert own.schema == "csv_my_copy"


def test_registered_as_a_source() -> None:
    spec = sources()["mimic-iii"]
    assert spec.schema == mimic_iii.SCHEMA == "mimic_iii"


def test_missing_tables_are_reported_and_recorded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = _folder_with(tmp_path, "PATIENTS.csv.gz", "ADMISSIONS.csv.gz", "ICUSTAYS.csv.gz")
    report = mimic_iii.load([folder], tmp_path / "m.duckdb")
    assert set(report.tables) == {"patients", "admissions", "icustays"}
    assert set(report.missing) == set(mimic_iii.TABLES) - set(report.tables)
    assert "MIMIC-III table chartevents not found" in caplog.text
    with ehr_magic.connect(tmp_path / "m.duckdb") as ehr:
        assert set(ehr.meta["missing_tables"].split(",")) == set(report.missing)


def test_lower_case_names_parquet_and_several_folders(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    shutil.copy(MIMIC_III_DEMO / "PATIENTS.csv.gz", first / "patients.csv.gz")
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * FROM read_csv('{MIMIC_III_DEMO / 'ADMISSIONS.csv.gz'}', all_varchar=true)) "
                f"TO '{first / 'ADMISSIONS.parquet'}' (FORMAT parquet)")
    con.close()
    shutil.copy(MIMIC_III_DEMO / "D_LABITEMS.csv.gz", second / "D_LABITEMS.csv.gz")
    report = mimic_iii.load([first, second], tmp_path / "p.duckdb")
    assert report.tables == {"admissions": 129, "d_labitems": _csv_rows(MIMIC_III_DEMO / "D_LABITEMS.csv.gz")[1],
                             "patients": 100}


# -- bad input --------------------------------------------------------------------------------

def test_a_folder_that_is_not_mimic_iii_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "x.duckdb"
    for folder in (EICU_DEMO, _folder_with(tmp_path, "D_ITEMS.csv.gz")):
        with pytest.raises(DataSourceError) as caught:
            mimic_iii.load([folder], out)
        message = str(caught.value)
        assert "is not a MIMIC-III folder" in message and "PATIENTS" in message and "\n" not in message
        assert not out.exists()
    assert not list(tmp_path.glob(".x.duckdb*"))


def test_two_files_for_one_table_are_refused(tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "PATIENTS.csv.gz", "ADMISSIONS.csv.gz")
    with gzip.open(folder / "ADMISSIONS.csv.gz", "rb") as packed:
        (folder / "ADMISSIONS.csv").write_bytes(packed.read())
    out = tmp_path / "c.duckdb"
    out.write_bytes(b"")  # an older build stays as it was
    with pytest.raises(DataSourceError, match=r"Both ADMISSIONS\.csv\.gz and ADMISSIONS\.csv in .* would load table "
                                               r"admissions; remove or move all but one"):
        mimic_iii.load([folder], out)
    assert out.read_bytes() == b""
    assert not list(tmp_path.glob(".c.duckdb*"))


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-m", "ehr_magic", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_cli_loads_warns_and_refuses_in_one_line(tmp_path: Path) -> None:
    folder = _folder_with(tmp_path, "PATIENTS.csv.gz", "ADMISSIONS.csv.gz")
    done = _cli("data", "load", "mimic-iii", str(folder), "--out", str(tmp_path / "ok.duckdb"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "2 tables, 229 rows" in done.stdout
    assert "warning: table chartevents not found" in done.stderr
    (folder / "PATIENTS.csv").write_text("row_id,subject_id\n1,2\n")
    for source in (folder, EICU_DEMO):
        done = _cli("data", "load", "mimic-iii", str(source), "--out", str(tmp_path / "bad.duckdb"), "--quiet")
        assert done.returncode == 2
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "bad.duckdb").exists()


def test_chartevents_frame_matches_file_values(demo) -> None:
    """A spot check of values, not only counts: the heart rates of one stay, as in the file."""
    with gzip.open(MIMIC_III_DEMO / "CHARTEVENTS.csv.gz", "rt", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["icustay_id"] == "263095" and r["itemid"] == "220045"]
    loaded = demo.sql("SELECT valuenum FROM chartevents WHERE icustay_id = 263095 AND itemid = 220045 "
                      "ORDER BY row_id")
    assert loaded.height == len(rows) > 0
    assert loaded["valuenum"].to_list() == [float(r["valuenum"]) if r["valuenum"] else None
                                            for r in sorted(rows, key=lambda r: int(r["row_id"]))]
    assert isinstance(loaded, pl.DataFrame)
