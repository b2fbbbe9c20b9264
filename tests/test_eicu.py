"""The eICU loader on the real open demo, its bad inputs, and offset time end to end."""

from __future__ import annotations

import csv
import gzip
import io
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

import ehr_magic
from datapaths import EICU_DEMO, MIMIC_IV_DEMO
from ehr_magic.knowledge import model as knowledge
from ehr_magic.sources import sources
from ehr_magic.sources import eicu
from ehr_magic.sources import mimic_iv
from ehr_magic.errors import DataSourceError, EhrMagicError

DEMO_MISSING = ["lab", "nursecharting", "vitalperiodic"]


def data_rows(path: Path) -> int:
    """Data rows of a gzipped CSV, counted by the csv module (quoted newlines are one row)."""
    with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


@pytest.fixture(scope="module")
def ehr(eicu_demo_db: Path):
    with ehr_magic.connect(eicu_demo_db) as handle:
        yield handle


def leaves_nothing(out: Path) -> bool:
    return not out.exists() and not list(out.parent.glob(f".{out.name}*"))


# -- loading ------------------------------------------------------------------------------------

def test_every_table_has_the_source_files_row_count(ehr) -> None:
    files = sorted(EICU_DEMO.glob("*.csv.gz"))
    assert len(files) == 28
    expected = {path.name.removesuffix(".csv.gz").lower(): data_rows(path) for path in files}
    assert sorted(ehr.tables()) == sorted(expected)
    for table, rows in expected.items():
        assert ehr.count(table) == rows, table
    assert expected["patient"] == 2520 and expected["vitalaperiodic"] == 274_088


def test_missing_official_tables_are_reported_and_recorded(tmp_path: Path) -> None:
    report = eicu.load([EICU_DEMO], tmp_path / "e.duckdb")
    assert report.missing == DEMO_MISSING
    assert report.now == "" and report.time_model == "offset"
    assert len(report.tables) + len(report.missing) == len(eicu.OFFICIAL_TABLES) == 31
    with ehr_magic.connect(tmp_path / "e.duckdb") as handle:
        assert handle.meta["missing_tables"] == ",".join(DEMO_MISSING)
        assert handle.meta["time_model"] == "offset" and handle.dataset == "eicu-demo"
        assert handle.schema == "eicu"
    assert sources()["eicu"].schema == "eicu"


def test_types_are_fixed_where_duckdb_would_guess_wrong(ehr) -> None:
    patient = ehr.columns("patient")
    assert patient["patientunitstayid"] == "BIGINT" and patient["patienthealthsystemstayid"] == "BIGINT"
    assert patient["uniquepid"] == "VARCHAR" and patient["age"] == "VARCHAR"
    assert patient["hospitaladmitoffset"] == "INTEGER" and patient["unitdischargeoffset"] == "INTEGER"
    assert patient["unitadmittime24"] == "VARCHAR"  # a clock reading, not a TIME (Spark has none)
    assert ehr.columns("apachepredvar")["age"] == "BIGINT"
    assert ehr.columns("diagnosis")["icd9code"] == "VARCHAR"
    assert ehr.columns("infusiondrug")["volumeoffluid"] == "DOUBLE"  # ends in "id" but is a volume
    assert ehr.columns("intakeoutput")["cellvaluetext"] == "VARCHAR"
    assert ehr.columns("vitalaperiodic")["observationoffset"] == "INTEGER"
    assert ehr.sql("SELECT count(*) AS n FROM patient WHERE age = '> 89'").item() == 98
    assert ehr.sql("SELECT count(*) FROM patient WHERE uniquepid = '002-10148'").item() == 5  # leading zeros kept


def test_cli_loads_warns_per_missing_table_and_reports_no_dates(tmp_path: Path) -> None:
    out = tmp_path / "cli.duckdb"
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "data", "load", "eicu", str(EICU_DEMO),
                           "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "28 tables" in done.stdout and "no dates" in done.stdout
    for table in DEMO_MISSING:
        assert f"warning: table {table} not found" in done.stderr
    info = subprocess.run([sys.executable, "-m", "ehr_magic", "data", "info", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    assert "schema eicu" in info.stdout and "time offsets" in info.stdout and "2,520" in info.stdout
    refused = subprocess.run([sys.executable, "-m", "ehr_magic", "data", "load", "eicu", str(EICU_DEMO),
                              "--out", str(tmp_path / "n.duckdb"), "--now", "2015-01-01"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--now does not apply" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "n.duckdb").exists()


def small_copy(folder: Path, *tables: str) -> Path:
    """A folder with the demo files of ``tables`` (file names as in the demo)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in tables:
        shutil.copy(EICU_DEMO / f"{name}.csv.gz", folder)
    return folder


def test_csv_and_parquet_files_and_a_second_folder(tmp_path: Path) -> None:
    first = small_copy(tmp_path / "a", "hospital")
    with gzip.open(EICU_DEMO / "patient.csv.gz", "rb") as handle:
        (first / "patient.csv").write_bytes(handle.read())
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{EICU_DEMO}/diagnosis.csv.gz')) TO '{first}/diagnosis.parquet' "
               "(FORMAT parquet)")
    second = small_copy(tmp_path / "b", "treatment", "patient")  # patient is taken from the first folder
    report = eicu.load([first, second], tmp_path / "two.duckdb")
    assert report.tables == {"diagnosis": 24_978, "hospital": 186, "patient": 2520, "treatment": 38_290}
    assert "lab" in report.missing and "treatment" not in report.missing
    with ehr_magic.connect(tmp_path / "two.duckdb") as handle:
        assert handle.columns("patient")["age"] == "VARCHAR"
        assert handle.knowledge.absent[:3] == ("admissiondrug", "admissiondx", "allergy")


# -- bad input: one sentence, nothing written ------------------------------------------------------

def test_a_folder_that_is_not_eicu_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "x.duckdb"
    with pytest.raises(DataSourceError, match=r"is not an eICU folder: it has no patient file") as caught:
        eicu.load([MIMIC_IV_DEMO / "hosp"], out)
    assert "\n" not in str(caught.value)
    assert leaves_nothing(out)
    with pytest.raises(DataSourceError, match="does not exist"):
        eicu.load([tmp_path / "nope"], out)


def test_a_corrupt_gzip_is_named_in_one_sentence(tmp_path: Path) -> None:
    folder = small_copy(tmp_path / "in", "patient")
    good = (EICU_DEMO / "hospital.csv.gz").read_bytes()
    (folder / "hospital.csv.gz").write_bytes(good[: len(good) // 2])  # truncated download
    out = tmp_path / "x.duckdb"
    with pytest.raises(DataSourceError) as caught:
        eicu.load([folder], out)
    message = str(caught.value)
    assert message == (f"Cannot load {folder / 'hospital.csv.gz'} as table hospital: it is not a valid gzip file "
                       "(truncated or corrupt); fix or replace the file.")
    assert leaves_nothing(out)


@pytest.mark.parametrize("change", ["extra", "short"])
def test_a_ragged_row_is_named_with_its_line(tmp_path: Path, change: str) -> None:
    folder = small_copy(tmp_path / "in", "patient")
    with gzip.open(EICU_DEMO / "hospital.csv.gz", "rt", newline="") as handle:
        lines = handle.read().splitlines()
    lines[41] = lines[41] + ",surplus" if change == "extra" else lines[41].rsplit(",", 1)[0]  # file line 42
    with gzip.open(folder / "hospital.csv.gz", "wt", newline="") as handle:
        handle.write("\n".join(lines) + "\n")
    out = tmp_path / "x.duckdb"
    with pytest.raises(DataSourceError) as caught:
        eicu.load([folder], out)
    assert str(caught.value) == (f"Cannot load {folder / 'hospital.csv.gz'} as table hospital: the row at line 42 "
                                 "has a different number of fields than the header; fix or replace the file.")
    assert leaves_nothing(out)


@pytest.mark.parametrize("other", ["patient.csv", "patient.parquet", "Patient.csv.gz"])
def test_two_files_of_one_table_are_refused(tmp_path: Path, other: str) -> None:
    folder = small_copy(tmp_path / "in", "patient", "hospital")
    (folder / other).write_bytes(b"patientunitstayid\n1\n")
    out = tmp_path / "x.duckdb"
    with pytest.raises(DataSourceError, match=r"would load table patient; remove or move all but one") as caught:
        eicu.load([folder], out)
    assert other in str(caught.value) and "patient.csv.gz" in str(caught.value)
    assert leaves_nothing(out)


def test_a_failed_rebuild_keeps_the_old_database(tmp_path: Path) -> None:
    out = tmp_path / "keep.duckdb"
    eicu.load([small_copy(tmp_path / "good", "patient", "hospital")], out)
    before = out.read_bytes()
    bad = small_copy(tmp_path / "bad", "patient")
    (bad / "hospital.csv.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DataSourceError, match="hospital"):
        eicu.load([bad], out)
    assert out.read_bytes() == before


def test_the_mimic_loader_refuses_a_ragged_csv_too(tmp_path: Path) -> None:
    """The strict CSV dialect is shared: DuckDB's sniffer used to load a ragged file as one text column."""
    hosp = tmp_path / "in" / "hosp"
    hosp.mkdir(parents=True)
    shutil.copy(MIMIC_IV_DEMO / "hosp" / "admissions.csv.gz", hosp)
    (hosp / "patients.csv").write_text("subject_id,gender,anchor_age\n1,F,50\n2,M\n3,F,70\n")
    with pytest.raises(DataSourceError, match=r"patients\.csv as table patients: the row at line 3 has a different"):
        mimic_iv.load([tmp_path / "in"], tmp_path / "m.duckdb")


# -- offset time --------------------------------------------------------------------------------------

def test_the_clock_helpers_refuse_and_name_the_offset_helpers(ehr) -> None:
    assert ehr.time_model == "offset" and ehr.clock is None
    for call in (lambda: ehr.now, lambda: ehr.ago(days=1), lambda: ehr.start_of("year"), lambda: ehr.period("year")):
        with pytest.raises(EhrMagicError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith("This database has no dates: times are offsets in minutes")
        assert "ehr.in_first" in message and "ehr.during_stay" in message and message.count(".") >= 4
    assert "time=offset" in repr(ehr)
    assert ehr.info()["now"] == "" and ehr.info()["time_model"] == "offset"


def test_a_clock_cannot_be_set_on_an_offset_database(eicu_demo_db: Path) -> None:
    with pytest.raises(EhrMagicError, match="has no dates .* connect without now="):
        ehr_magic.connect(eicu_demo_db, now="2015-01-01")


def test_offset_helpers_are_refused_on_a_calendar_database(ehrsql_db: Path) -> None:
    with ehr_magic.connect(ehrsql_db) as calendar:
        assert calendar.time_model == "calendar" and calendar.offsets is None
        with pytest.raises(EhrMagicError, match=r"ehr\.in_first is for databases whose times are offsets"):
            calendar.in_first("charttime", hours=24)
        assert calendar.minutes(days=1, hours=2) == 1560  # plain arithmetic works everywhere


def test_minutes_and_bad_arguments(ehr) -> None:
    assert ehr.minutes(hours=24) == 1440 and ehr.minutes(days=2, minutes=30) == 2910
    with pytest.raises(EhrMagicError, match="positive length"):
        ehr.in_first("observationoffset")
    with pytest.raises(EhrMagicError, match="not a column name"):
        ehr.in_first("x; DROP TABLE patient", hours=1)
    with pytest.raises(EhrMagicError, match="use 'icu' or 'hospital'"):
        ehr.during_stay("observationoffset", "ward")  # type: ignore[arg-type]
    with pytest.raises(EhrMagicError, match="whole number of minutes"):
        ehr.minutes(minutes=0.5)


def test_first_24_hours_matches_a_polars_computation(ehr) -> None:
    got = ehr.sql(f"""SELECT patientunitstayid, max(noninvasivesystolic) AS top FROM vitalaperiodic v
                      WHERE {ehr.in_first('v.observationoffset', hours=24)} GROUP BY ALL""")
    expected = (ehr.table("vitalaperiodic")
                .filter((pl.col("observationoffset") >= 0) & (pl.col("observationoffset") < 24 * 60))
                .group_by("patientunitstayid").agg(pl.col("noninvasivesystolic").max().alias("top")).collect())
    joined = got.join(expected, on="patientunitstayid", suffix="_polars")
    assert got.height == expected.height == joined.height > 1000
    assert joined.filter(pl.col("top") != pl.col("top_polars")).height == 0


def test_during_the_hospital_and_icu_stay(ehr) -> None:
    inside = ehr.sql(f"""SELECT count(*) FROM intakeoutput i JOIN patient p USING (patientunitstayid)
                         WHERE {ehr.during_stay('i.intakeoutputoffset', 'hospital')}""").item()
    icu = ehr.sql(f"""SELECT count(*) FROM intakeoutput i JOIN patient p USING (patientunitstayid)
                      WHERE {ehr.during_stay('i.intakeoutputoffset', 'icu')}""").item()
    frame = ehr.table("intakeoutput").join(ehr.table("patient"), on="patientunitstayid").collect()
    offset = pl.col("intakeoutputoffset")
    assert inside == frame.filter(offset.is_between(pl.col("hospitaladmitoffset"),
                                                    pl.col("hospitaldischargeoffset"))).height
    assert icu == frame.filter(offset.is_between(0, pl.col("unitdischargeoffset"))).height
    assert 0 < icu < inside <= frame.height


def test_chronological_orders_a_patients_stays(ehr) -> None:
    """Patient 002-10009 style: several ICU stays in one hospital visit; the last measurement
    is in the latest stay even though its offsets restart at zero."""
    pid = ehr.sql("""SELECT uniquepid FROM patient p JOIN vitalaperiodic v USING (patientunitstayid)
                     GROUP BY uniquepid, patienthealthsystemstayid HAVING count(DISTINCT patientunitstayid) >= 2
                     ORDER BY uniquepid LIMIT 1""").item()
    last = ehr.sql(f"""SELECT p.patientunitstayid, v.observationoffset FROM vitalaperiodic v
                       JOIN patient p USING (patientunitstayid) WHERE p.uniquepid = ?
                       ORDER BY {ehr.chronological('v.observationoffset', latest_first=True)} LIMIT 1""", [pid])
    stays = (ehr.table("patient").filter(pl.col("uniquepid") == pid)
             .sort("hospitaldischargeyear", "patienthealthsystemstayid", "unitvisitnumber").collect())
    measured = set(ehr.table("vitalaperiodic")
                   .filter(pl.col("patientunitstayid").is_in(stays["patientunitstayid"].to_list()))
                   .select("patientunitstayid").unique().collect()["patientunitstayid"])
    latest_stay = [s for s in stays["patientunitstayid"] if s in measured][-1]
    assert last["patientunitstayid"].item() == latest_stay
    top = ehr.sql("SELECT max(observationoffset) FROM vitalaperiodic WHERE patientunitstayid = ?", [latest_stay])
    assert last["observationoffset"].item() == top.item()


def test_callers_of_the_clock_work_on_an_offset_database(ehr) -> None:
    from ehr_magic.agent.context import system_prompt
    from ehr_magic.eval.sqlite_dialect import TranslationError, translator_for
    from ehr_magic.reuse.unanswerable import unanswerable_reason
    from ehr_magic.reuse.values import ValueDetector

    prompt = system_prompt(ehr)
    assert "patientunitstayid" in prompt and "ehr.in_first" in prompt
    detected = ValueDetector(ehr).detect("How many stays had urine output last year in the first 24 hours?")
    assert any(v.type.startswith("time:duration") for v in detected.values)
    assert unanswerable_reason("How many stays last year?", detected, None, ehr) == ""
    translator = translator_for(ehr)
    assert "patient" in translator.translate("SELECT count(*) FROM patient")
    with pytest.raises(TranslationError, match="no dates"):
        translator.translate("SELECT datetime('now')")


# -- knowledge restricted to the tables present ----------------------------------------------------

def test_knowledge_describes_only_present_tables(ehr) -> None:
    info = ehr.knowledge
    assert info.absent == tuple(DEMO_MISSING)
    assert "lab" not in info.tables and "patient" in info.tables
    assert "Not in this database: lab, nursecharting, vitalperiodic; questions that need them cannot be " \
           "answered." in info.guide()
    with pytest.raises(EhrMagicError, match="Table lab is not in this database"):
        info.detail(["patient", "lab"])
    assert "This copy lacks" not in knowledge.load("eicu").introduction


def test_restricted_to_drops_joins_to_absent_tables() -> None:
    full = knowledge.load("eicu")
    small = full.restricted_to(["PATIENT", "diagnosis"])
    assert list(small.tables) == ["patient", "diagnosis"]
    assert full.tables["patient"].joins == ("hospital ON hospitalid",) and small.tables["patient"].joins == ()
    assert small.tables["diagnosis"].joins == ("patient ON patientunitstayid",)
    assert "hospital" in small.absent and len(small.absent) == 29
    assert small.restricted_to(["patient"]).absent[-1] == "diagnosis"  # absences accumulate
    mimic = knowledge.load("mimic_iv").restricted_to(["patients", "admissions", "icustays"])
    assert "labevents" in mimic.absent
    assert any(info.joins for info in mimic.tables.values())
    assert all(t in mimic.tables for info in mimic.tables.values() for t in info.join_targets)
    assert knowledge.load("eicu").absent == ()  # the cached full knowledge is not changed


def test_plain_csv_with_quoted_commas_and_newlines_loads_exactly(tmp_path: Path) -> None:
    """Plain CSV text written by a spreadsheet (quoted fields with commas and newlines) loads exactly."""
    folder = small_copy(tmp_path / "in", "hospital")
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["patientunitstayid", "patienthealthsystemstayid", "uniquepid", "age", "apacheadmissiondx"])
    writer.writerow([1, 10, "001-1", "> 89", "Sepsis, pulmonary\nsecond line"])
    writer.writerow([2, 20, "001-2", "45", ""])
    (folder / "patient.csv").write_text(text.getvalue())
    eicu.load([folder], tmp_path / "p.duckdb")
    with ehr_magic.connect(tmp_path / "p.duckdb") as handle:
        rows = handle.sql("SELECT * FROM patient ORDER BY patientunitstayid").rows()
        assert rows[0][3:] == ("> 89", "Sepsis, pulmonary\nsecond line") and rows[1][4] is None
        assert handle.count("hospital") == 186
