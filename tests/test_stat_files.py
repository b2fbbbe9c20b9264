"""SAS, Stata and SPSS files in a data folder: each is a table whose labels describe it, on real
files written and read by pyreadstat (the ReadStat C library)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import polars as pl
import pyreadstat

import ehr_magic
from ehr_magic import sources
from ehr_magic.sources import stat_files
from test_csv_folder import one_error_line, run

PATIENTS = 40


def _clinic_extract(folder: Path) -> None:
    """A Stata cohort with value labels (one variable labelled throughout, one only for its special
    code) and two variables equal but for case, SPSS visits with labelled text codes and blank text,
    SAS XPORT labs and a SAS dataset of medication orders, each with its labels."""
    folder.mkdir()
    ids = list(range(1, PATIENTS + 1))
    cohort = pl.DataFrame({
        "PATID": [float(i) for i in ids],
        "SEX": [float(1 + i % 2) for i in ids],
        "AGE": [999.0 if i % 10 == 0 else float(30 + i) for i in ids],
        "SMOKER": [float(i % 3 == 0) for i in ids],
        "ward": [f"W{i % 4}" for i in ids],
        "WARD": [f"Block {i % 2}" for i in ids],
    })
    pyreadstat.write_dta(cohort, str(folder / "cohort.dta"),
                         file_label="Cardiology clinic cohort, one row per patient",
                         column_labels=["Patient identifier", "Sex at birth", "Age in years at entry",
                                        "Current smoker", "Ward code", "Hospital block"],
                         variable_value_labels={"SEX": {1: "Male", 2: "Female"}, "AGE": {999: "Not recorded"},
                                                "SMOKER": {0: "No", 1: "Yes"}})
    visits = pl.DataFrame({
        "visitid": [float(i) for i in range(1, 3 * PATIENTS + 1)],
        "patid": [float(1 + i % PATIENTS) for i in range(3 * PATIENTS)],
        "visitdt": [dt.date(2023, 1, 1) + dt.timedelta(days=5 * i) for i in range(3 * PATIENTS)],
        "unit": ["CCU" if i % 3 == 0 else "GEN" for i in range(3 * PATIENTS)],
        "note": ["" if i % 4 == 0 else f"seen by team {i % 5}" for i in range(3 * PATIENTS)],
    })
    pyreadstat.write_sav(visits, str(folder / "visits.sav"), file_label="Outpatient visits",
                         column_labels=["Visit number", "Patient identifier", "Date of the visit", "Care unit",
                                        "Clinician's note"],
                         variable_value_labels={"unit": {"CCU": "Coronary care unit", "GEN": "General ward"}})
    labs = pl.DataFrame({"PATID": [float(1 + i % PATIENTS) for i in range(200)],
                         "LBTESTCD": ["LDL" if i % 2 else "HBA1C" for i in range(200)],
                         "LBORRES": [2.5 + (i % 7) / 10 for i in range(200)]})
    pyreadstat.write_xport(labs, str(folder / "labs.xpt"), table_name="LB", file_label="Laboratory results",
                           column_labels=["Patient identifier", "Lab test short name", "Result as collected"])
    meds = pl.DataFrame({"PATID": [float(1 + i % PATIENTS) for i in range(90)],
                         "DRUG": ["atorvastatin" if i % 2 else "aspirin" for i in range(90)],
                         "ORDERED": [dt.datetime(2023, 2, 1, 9, 15) + dt.timedelta(hours=13 * i) for i in range(90)]})
    pyreadstat.write_sas7bdat(meds, str(folder / "meds.sas7bdat"), file_label="Medication orders",
                              column_labels=["Patient identifier", "Drug name as ordered", "Order date and time"])


def test_statistics_package_files_are_tables_described_by_their_labels(tmp_path: Path) -> None:
    folder = tmp_path / "clinic_extract"
    _clinic_extract(folder)
    out = tmp_path / "clinic.duckdb"
    report = sources.load("csv", [folder], out)
    assert report.tables == {"cohort": PATIENTS, "labs": 200, "meds": 90, "visits": 3 * PATIENTS}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clinic.duckdb", "clinic_extract"]  # no copies left
    with duckdb.connect(str(out), read_only=True) as con:
        types = dict(con.execute("SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name NOT LIKE '\\_%' ESCAPE '\\'").fetchall())
        # whole numbers as integers, labels in place of codes where every value has one
        assert {key: types[key] for key in ("cohort.patid", "cohort.sex", "cohort.age", "cohort.smoker",
                                            "visits.visitdt", "visits.unit", "meds.ordered", "labs.lborres")} == {
            "cohort.patid": "BIGINT", "cohort.sex": "VARCHAR", "cohort.age": "BIGINT", "cohort.smoker": "VARCHAR",
            "visits.visitdt": "DATE", "visits.unit": "VARCHAR", "meds.ordered": "TIMESTAMP", "labs.lborres": "DOUBLE"}
        assert con.execute("SELECT sex, smoker, age FROM cohort WHERE patid = 30").fetchall() == [("Male", "Yes", 999)]
        assert con.execute("SELECT DISTINCT unit FROM visits ORDER BY 1").fetchall() == [
            ("Coronary care unit",), ("General ward",)]
        assert con.execute("SELECT count(*) FROM visits WHERE note IS NULL").fetchall() == [(30,)]  # blank: missing
        assert con.execute("SELECT ward, ward_1 FROM cohort WHERE patid = 1").fetchall() == [("W1", "Block 1")]
    with ehr_magic.connect(out) as ehr:
        tables = ehr.knowledge.tables
        cohort, visits = tables["cohort"], tables["visits"]
        assert cohort.row.startswith("Cardiology clinic cohort, one row per patient. "), cohort.row
        assert cohort.columns["sex"] == (
            "VARCHAR, Sex at birth. Stored as labels; the codes: 1 Male, 2 Female. 2 values."), cohort.columns
        assert cohort.columns["age"].startswith("BIGINT, Age in years at entry. Labelled codes: 999 Not recorded. "
                                                "31 to 999"), cohort.columns["age"]
        assert cohort.columns["ward_1"].startswith("VARCHAR, Hospital block. ")
        assert visits.row.startswith("Outpatient visits. ") and "Refers to cohort." in visits.columns["patid"]
        assert visits.columns["unit"].startswith("VARCHAR, Care unit. Stored as labels; the codes: 'CCU' Coronary "
                                                 "care unit, 'GEN' General ward.")
        assert tables["labs"].columns["lbtestcd"].startswith("VARCHAR, Lab test short name. ")
        assert tables["meds"].row.startswith("Medication orders. ")
        assert ehr.lookup("cohort", "sex", "female")[0] == "Female"
        assert ehr.now == dt.datetime(2024, 8, 18)  # the latest visit, a date of the SPSS file
        smokers_orders = sum((1 + i % PATIENTS) % 3 == 0 for i in range(90))
        assert ehr.sql("SELECT count(*) FROM meds m JOIN cohort c USING (patid) WHERE c.smoker = 'Yes'").item() \
            == smokers_orders


def test_a_statistics_file_that_cannot_be_read_is_one_sentence(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "registry.sas7bdat").write_bytes(b"\x00" * 2048)
    (broken / "visits.csv").write_text("id,day\n1,2024-01-02\n")
    out = tmp_path / "b.duckdb"
    line = one_error_line(run("data", "load", "csv", str(broken), "--out", str(out), "--quiet"))
    assert line.startswith(f"error: Cannot read {broken / 'registry.sas7bdat'} (") and line.endswith(
        "check that it opens in the program that wrote it, or export it as a CSV file."), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]  # no database, no copies


def test_a_big_file_read_in_chunks_loads_as_when_read_whole(tmp_path: Path, monkeypatch) -> None:
    """A file too big to read at once is read in chunks, its types and labels decided on every row
    first: a code without a label in the last chunk keeps the column's numbers, a fraction in the
    last chunk keeps its floats."""
    folder = tmp_path / "extract"
    _clinic_extract(folder)
    tail = pl.DataFrame({"PATID": [float(i) for i in range(1, 40)],
                         "SCORE": [1.0] * 38 + [1.5], "GRADE": [1.0] * 38 + [3.0]})
    pyreadstat.write_dta(tail, str(folder / "scores.dta"), variable_value_labels={"GRADE": {1: "mild", 2: "severe"}})
    whole = tmp_path / "whole.duckdb"
    sources.load("csv", [folder], whole)
    monkeypatch.setattr(stat_files, "WHOLE_FILE_BYTES", 0)
    monkeypatch.setattr(stat_files, "CHUNK_ROWS", 7)
    chunked = tmp_path / "chunked.duckdb"
    sources.load("csv", [folder], chunked)
    query = ("SELECT table_name, column_name, data_type FROM information_schema.columns "
             "WHERE table_name NOT LIKE '\\_%' ESCAPE '\\' ORDER BY 1, ordinal_position")
    with duckdb.connect(str(whole), read_only=True) as one, duckdb.connect(str(chunked), read_only=True) as parts:
        assert parts.execute(query).fetchall() == one.execute(query).fetchall()
        for table in ("cohort", "visits", "labs", "meds", "scores"):
            rows = f"SELECT * FROM {table} ORDER BY ALL"
            assert parts.execute(rows).fetchall() == one.execute(rows).fetchall(), table
        assert parts.execute("SELECT typeof(score), typeof(grade) FROM scores LIMIT 1").fetchall() == [
            ("DOUBLE", "BIGINT")]
    with ehr_magic.connect(whole) as one, ehr_magic.connect(chunked) as parts:
        assert parts.knowledge.tables["cohort"].columns == one.knowledge.tables["cohort"].columns
        assert parts.knowledge.tables["scores"].columns["grade"].startswith("BIGINT, Labelled codes: 1 mild, 2 severe.")
