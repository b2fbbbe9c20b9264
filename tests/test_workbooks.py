"""Spreadsheet workbooks in a data folder: each sheet with data is a table, typed and drafted like a
CSV file's, on real .xlsx files written by xlsxwriter and read by fastexcel."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import xlsxwriter

import ehr_magic
from ehr_magic import sources
from test_csv_folder import one_error_line, run

TESTS = ("Hemoglobin", "Sodium", "Potassium")


def _ward_export(folder: Path) -> None:
    """A two-sheet workbook with a title above one header and an empty third sheet, a one-sheet
    workbook, a CSV file beside them and a spreadsheet program's lock file."""
    folder.mkdir()
    book = xlsxwriter.Workbook(folder / "ward_extract.xlsx")
    day, minute = book.add_format({"num_format": "yyyy-mm-dd"}), book.add_format({"num_format": "yyyy-mm-dd hh:mm"})
    patients = book.add_worksheet("Patients")
    patients.write(0, 0, "Extract of 2024-03-01, ward 7")
    patients.write_row(2, 0, ["PatientId", "Birth Date", "Sex", "Zip", "Weight (kg)"])
    for i in range(1, 30):
        patients.write_row(2 + i, 0, [i])
        patients.write_datetime(2 + i, 1, dt.datetime(1950, 1, 1) + dt.timedelta(days=300 * i), day)
        patients.write_row(2 + i, 2, ["F" if i % 2 else "M", f"{i:05d}", 60 + i * 0.5])
    labs = book.add_worksheet("Lab Results")
    labs.write_row(0, 0, ["PatientId", "Test", "Value", "Taken"])
    for i in range(1, 60):
        labs.write_row(i, 0, [i % 29 + 1, TESTS[i % 3], 12.5 + i % 5 if i != 7 else "<1"])
        labs.write_datetime(i, 3, dt.datetime(2024, 1, 1, 8, 30) + dt.timedelta(hours=7 * i), minute)
    book.add_worksheet("Notes")
    book.close()
    wards = xlsxwriter.Workbook(folder / "WardList.xlsx")
    sheet = wards.add_worksheet("Sheet1")
    sheet.write_row(0, 0, ["WardNo", "WardName"])
    for i in range(1, 8):
        sheet.write_row(i, 0, [i, f"Ward {i}"])
    wards.close()
    (folder / "stays.csv").write_text("PatientId,WardNo\n" + "".join(f"{i},{i % 7 + 1}\n" for i in range(1, 30)))
    (folder / "~$ward_extract.xlsx").write_bytes(b"\x00locked by an open spreadsheet")


def test_each_sheet_with_data_is_a_typed_drafted_table(tmp_path: Path) -> None:
    folder = tmp_path / "ward_export"
    _ward_export(folder)
    out = tmp_path / "ward.duckdb"
    report = sources.load("csv", [folder], out)
    assert sorted(report.tables) == ["lab_results", "patients", "stays", "wardlist"]  # Notes is empty
    assert report.tables["patients"] == 29 and report.tables["lab_results"] == 59
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ward.duckdb", "ward_export"]  # no sheet copies left
    with duckdb.connect(str(out), read_only=True) as con:
        types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name = 'patients'").fetchall())
        # the header under the title; whole numbers as integers, midnight-only dates as dates
        assert types == {"patientid": "BIGINT", "birth date": "DATE", "sex": "VARCHAR", "zip": "VARCHAR",
                         "weight (kg)": "DOUBLE"}
        assert con.execute('SELECT zip, "birth date" FROM patients WHERE patientid = 1').fetchall() == [
            ("00001", dt.date(1950, 10, 28))]
        assert con.execute("SELECT typeof(taken), typeof(value) FROM lab_results LIMIT 1").fetchall() == [
            ("TIMESTAMP", "VARCHAR")]  # a column with '<1' among its numbers stays text, as in a CSV file
        assert con.execute("SELECT count(*) FROM wardlist").fetchall() == [(7,)]
    with ehr_magic.connect(out) as ehr:
        tables = ehr.knowledge.tables
        assert tables["lab_results"].row.startswith("One row per lab result."), tables["lab_results"].row
        assert "refers to patients" in tables["lab_results"].columns["patientid"]
        assert "refers to wardlist" in tables["stays"].columns["wardno"]
        assert "test" in tables["lab_results"].vocabulary
        assert ehr.lookup("lab_results", "test", "hemoglobin")[0] == "Hemoglobin"
        assert str(ehr.now)[:10] == "2024-01-18"  # the clock from the sheets' own dates


def test_a_workbook_that_cannot_be_read_is_one_sentence_and_an_empty_one_is_reported(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "staff.xlsx").write_bytes(b"PK\x03\x04 not really a workbook")
    out = tmp_path / "b.duckdb"
    line = one_error_line(run("data", "load", "csv", str(broken), "--out", str(out), "--quiet"))
    assert line.startswith(f"error: Cannot read workbook {broken / 'staff.xlsx'} (") and line.endswith(
        "check that it opens in a spreadsheet program, or export its sheets as CSV files."), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken"]

    blank = tmp_path / "blank"
    blank.mkdir()
    xlsxwriter.Workbook(blank / "empty.xlsx").close()
    (blank / "visits.csv").write_text("id,day\n1,2024-01-02\n")
    report = sources.load("csv", [blank], tmp_path / "e.duckdb")
    assert report.tables == {"visits": 1} and report.empty == {"empty": str(blank / "empty.xlsx")}
