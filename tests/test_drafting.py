"""Knowledge drafted from a stranger's tables: keys and joins from the values, dictionaries and
lookup columns, meaning from names; on real open data loaded as plain CSV folders.

- a home-grown renamed copy of part of the EHRSQL-2024 database, built here: CamelCase file
  and column names nobody tuned for, and a dense row number in every table;
- the MIMIC-III, eICU and MIMIC-IV demos as plain folders, compared with their packaged
  knowledge (files linked into a temporary folder, never copied into the repo);
- bad input: one-row tables, all-empty columns, headers equal but for case, keys held as
  numbers in one file and text in another, a folder of 200 files.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import polars as pl
import pytest

import ehr_magic
from datapaths import SHARED_DATA
from ehr_magic.knowledge import model as knowledge_files
from ehr_magic.knowledge.drafting import naming
from ehr_magic import sources

EHRSQL = SHARED_DATA / "ehrsql-2024" / "mimic_iv.sqlite"
MIMIC_III = SHARED_DATA / "mimic-iii-clinical-database-demo-1.4"
EICU = SHARED_DATA / "eicu-collaborative-research-database-demo-2.0.1"
MIMIC_IV = SHARED_DATA / "mimic-iv-clinical-database-demo-2.2" / "hosp"


def _joins(ehr) -> set[str]:
    return {join for info in ehr.knowledge.tables.values() for join in info.joins}


def _linked(folder: Path, source: Path, names: list[str]) -> Path:
    folder.mkdir()
    for name in names:
        (folder / name).symlink_to(source / name)
    return folder


# -- a renamed copy, home-grown style ------------------------------------------------------------


def _query(sql: str) -> pl.DataFrame:
    with sqlite3.connect(f"file:{EHRSQL}?mode=ro", uri=True) as con:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        return pl.DataFrame(cursor.fetchall(), schema=names, orient="row", infer_schema_length=None)


def _write(folder: Path, name: str, frame: pl.DataFrame) -> None:
    # A dense row number 1..n first, as exports from a warehouse often have.
    frame.with_row_index("RecNo", offset=1).write_csv(folder / f"{name}.csv")


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("renamed") / "ward_export"
    folder.mkdir()
    _write(folder, "PatientRegister", _query("SELECT subject_id AS PatNo, gender AS Sex, dob AS BirthDt FROM patients"))
    _write(folder, "Visits", _query(
        "SELECT subject_id AS PatNo, hadm_id AS VisitNo, admittime AS AdmitDateTime, dischtime AS DischargeDateTime, "
        "admission_type AS AdmitKind FROM admissions"))
    _write(folder, "LabTestCatalog", _query("SELECT itemid AS ItemNo, label AS TestLabel FROM d_labitems"))
    _write(folder, "LabFindings", _query(
        "SELECT subject_id AS PatNo, hadm_id AS VisitNo, itemid AS ItemNo, charttime AS TakenDateTime, "
        "valuenum AS Result, valueuom AS ResultUnit FROM labevents"))
    _write(folder, "BedsideCatalog", _query("SELECT itemid AS ItemNo, label AS ItemLabel FROM d_items"))
    # Care units numbered 1..25 (a dense natural key, like a row number) that readings refer to.
    _write(folder, "BedsideReadings", _query(
        "SELECT subject_id AS PatNo, hadm_id AS VisitNo, itemid AS ItemNo, charttime AS ReadDateTime, "
        "valuenum AS Reading, valueuom AS ReadingUnit, stay_id % 25 + 1 AS UnitNo FROM chartevents"))
    _write(folder, "CareUnits", pl.DataFrame({"UnitNo": list(range(25, 0, -1)),
                                              "UnitLabel": [f"ward {chr(65 + i)}" for i in range(25)]}))
    # ICD-9 codes without their version prefix: '4019', 'V4581' (codes, not numbers).
    _write(folder, "DxCatalog", _query(
        "SELECT substr(icd_code, 6) AS DxCode, long_title AS DxText FROM d_icd_diagnoses WHERE icd_code LIKE 'icd9|%'"))
    _write(folder, "VisitDiagnoses", _query(
        "SELECT subject_id AS PatNo, hadm_id AS VisitNo, substr(icd_code, 6) AS DxCode, "
        "row_number() OVER (PARTITION BY hadm_id ORDER BY row_id) AS Rank FROM diagnoses_icd "
        "WHERE icd_code LIKE 'icd9|%'"))
    out = folder.parent / "ward.duckdb"
    sources.load("csv", [folder], out)
    with ehr_magic.connect(out) as ehr:
        yield ehr


def test_renamed_joins_are_found_from_values_and_row_numbers_join_nothing(renamed) -> None:
    assert _joins(renamed) == {
        "patientregister ON visits.patno = patientregister.patno",
        "patientregister ON labfindings.patno = patientregister.patno",
        "visits ON labfindings.visitno = visits.visitno",
        "labtestcatalog ON labfindings.itemno = labtestcatalog.itemno",  # one name, two dictionaries:
        "bedsidecatalog ON bedsidereadings.itemno = bedsidecatalog.itemno",  # each chosen by its values
        "patientregister ON bedsidereadings.patno = patientregister.patno",
        "visits ON bedsidereadings.visitno = visits.visitno",
        "careunits ON bedsidereadings.unitno = careunits.unitno",  # dense 1..25, yet a key: readings repeat it
        "patientregister ON visitdiagnoses.patno = patientregister.patno",
        "visits ON visitdiagnoses.visitno = visits.visitno",
        "dxcatalog ON visitdiagnoses.dxcode = dxcatalog.dxcode",
    }  # and nothing on RecNo, nor on Rank (1..n integers that any 1..25 key holds)
    tables = renamed.knowledge.tables
    assert tables["patientregister"].key == "patno" and tables["patientregister"].description == ""
    assert tables["patientregister"].columns["patno"] == "BIGINT, the unique key; a patient id."
    # the key named as the column: the table alone says the join
    assert "refers to visits (a visit id)" in tables["labfindings"].columns["visitno"]
    assert "a unit of measure" in tables["labfindings"].columns["resultunit"]
    assert tables["careunits"].key == "unitno"
    assert tables["labfindings"].key == "recno" and tables["labfindings"].description == ""
    assert tables["labfindings"].columns["recno"] == "BIGINT, the unique row number."
    # that row numbers join nothing is said once, for every table, by a convention
    assert any("row numbers join nothing" in rule for rule in renamed.knowledge.conventions)


def test_renamed_dictionaries_give_lookup_columns_and_codes_stay_codes(renamed) -> None:
    tables = renamed.knowledge.tables
    for table, column in [("labtestcatalog", "testlabel"), ("bedsidecatalog", "itemlabel"), ("dxcatalog", "dxtext")]:
        assert "A dictionary" in tables[table].description, table
        assert column in tables[table].vocabulary, table  # however many distinct values
    assert "resultunit" in tables["labfindings"].vocabulary  # repeated text in an event table
    assert "admitkind" in tables["visits"].vocabulary
    code = tables["dxcatalog"].columns["dxcode"]
    assert "codes, compared as stored text" in code and "TRY_CAST" not in code
    assert "TRY_CAST" not in tables["visitdiagnoses"].columns["dxcode"]
    assert renamed.lookup("labtestcatalog", "testlabel", "hemoglobin")[0] == "hemoglobin"


def test_renamed_tables_get_one_line_of_meaning(renamed) -> None:
    tables = renamed.knowledge.tables
    findings = tables["labfindings"]
    assert findings.row == "One row per lab finding. 26,426 rows."  # the file is the table's
    # the columns say in words what their names run together, and what they point to
    assert "item (-> lab test catalog)" in findings.columns["itemno"]
    assert findings.columns["takendatetime"].startswith("TIMESTAMP, taken date/time, 2100-")
    assert "result unit" in findings.columns["resultunit"]
    assert "item (-> bedside catalog)" in tables["bedsidereadings"].columns["itemno"]
    assert tables["visits"].row.startswith("One row per visit. Referred to by ")
    assert "admit date/time" in tables["visits"].columns["admitdatetime"]


def test_compound_names_are_split_into_words() -> None:
    assert naming.words("admitdatetime") == ("admit", "date", "time")
    assert naming.words("AdmitDateTime") == naming.words("admit_date_time") == ("admit", "date", "time")
    assert naming.words("patientunitstayid") == ("patient", "unit", "stay", "id")
    assert naming.words("LabTestKey") == ("lab", "test", "key")
    assert naming.words("recorded_at") == ("recorded", "at")
    assert naming.entity("d_labitems") == "lab item" and naming.entity("lab_results") == "lab result"


def test_an_unknown_word_keeps_its_english_ending_and_known_words_still_split() -> None:
    # '-age' after a word the vocabulary lacks is that word's ending, not 'age'
    assert naming.words("payer_coverage") == ("payer", "coverage")
    assert naming.words("HealthcareCoverage") == naming.words("healthcare_coverage") == ("health", "care", "coverage")
    assert naming.words("averagevalue") == ("average", "value")
    assert naming.words("percentageRate") == ("percentage", "rate")
    # after a known word, or standing alone, 'age' is the age
    assert naming.words("patientage") == ("patient", "age") and naming.words("anchor_age") == ("anchor", "age")
    assert naming.words("AgeAtAdmit") == ("age", "at", "admit")
    # an ending joins a known stem only as English does: store-d, not drug-d
    assert naming.words("drugdosage") == ("drug", "dosage") and naming.words("storedtime") == ("stored", "time")
    # glued names of known words and abbreviations split as before; English words count where they
    # cover the whole run (health system), and an English word stays whole (lockout)
    assert naming.words("drughiclseqno") == ("drug", "hicl", "seq", "no")
    assert naming.words("patienthealthsystemstayid") == ("patient", "health", "system", "stay", "id")
    assert naming.words("icustayid") == ("icu", "stay", "id") and naming.words("hadmid") == ("hadmid",)
    assert naming.words("lockout_interval") == ("lockout", "interval")


# -- the demos as plain folders -----------------------------------------------------------------


def _packaged_pairs(schema: str, present: list[str]) -> set[frozenset]:
    pairs = set()
    for info in knowledge_files.load(schema).restricted_to(present).tables.values():
        for join in info.joins:
            target, column = (part.strip() for part in join.split(" ON "))
            pairs.add(frozenset({(info.name, column), (target, column)}))
    return pairs


def _drafted_pairs(ehr) -> set[frozenset]:
    pairs = set()
    for info in ehr.knowledge.tables.values():
        for join in info.joins:
            left, right = join.split(" ON ")[1].split(" = ")
            pairs.add(frozenset({tuple(left.split(".")), tuple(right.split("."))}))
    return pairs


@pytest.fixture(scope="module")
def mimic_iii(tmp_path_factory: pytest.TempPathFactory):
    names = ["PATIENTS", "ADMISSIONS", "ICUSTAYS", "D_LABITEMS", "LABEVENTS", "D_ITEMS", "OUTPUTEVENTS",
             "MICROBIOLOGYEVENTS", "DIAGNOSES_ICD", "D_ICD_DIAGNOSES", "CAREGIVERS", "PRESCRIPTIONS"]
    folder = _linked(tmp_path_factory.mktemp("m3") / "mimic3", MIMIC_III, [f"{n}.csv.gz" for n in names])
    sources.load("csv", [folder], folder.parent / "m3.duckdb")
    with ehr_magic.connect(folder.parent / "m3.duckdb") as ehr:
        yield ehr


def test_mimic_iii_folder_drafts_every_packaged_join_and_no_wrong_one(mimic_iii) -> None:
    drafted = _drafted_pairs(mimic_iii)
    assert _packaged_pairs("mimic_iii", mimic_iii.tables()) <= drafted
    joins = _joins(mimic_iii)
    assert "d_labitems ON labevents.itemid = d_labitems.itemid" in joins  # not d_items, though named alike
    assert "d_items ON outputevents.itemid = d_items.itemid" in joins
    assert "d_items ON microbiologyevents.org_itemid = d_items.itemid" in joins  # documented, not packaged
    assert "caregivers ON outputevents.cgid = caregivers.cgid" in joins
    for source, target in ([sorted(pair) for pair in drafted]):
        assert source[1].endswith(target[1]) or target[1].endswith(source[1]), (source, target)
    assert not any("row_id" in join for join in joins)


def test_mimic_iii_dictionaries_lookup_columns_and_codes(mimic_iii) -> None:
    tables = mimic_iii.knowledge.tables
    assert {"label", "fluid"} <= set(tables["d_labitems"].vocabulary)
    assert {"short_title", "long_title"} <= set(tables["d_icd_diagnoses"].vocabulary)
    assert {"spec_type_desc", "org_name"} <= set(tables["microbiologyevents"].vocabulary)
    assert {"drug", "route"} <= set(tables["prescriptions"].vocabulary)
    assert "valueuom" in tables["labevents"].vocabulary
    assert "a code" in tables["d_labitems"].columns["loinc_code"]
    for info in tables.values():
        for column in ("icd9_code", "loinc_code", "ndc"):
            assert "TRY_CAST" not in info.columns.get(column, ""), (info.name, column)
    assert "TRY_CAST" in tables["prescriptions"].columns["dose_val_rx"]  # '1-2', '0.5': numbers as text
    assert tables["labevents"].row.startswith("One row per lab event.")
    assert "item (-> lab items)" in tables["labevents"].columns["itemid"]


@pytest.fixture(scope="module")
def eicu(tmp_path_factory: pytest.TempPathFactory):
    names = ["patient", "hospital", "apacheApsVar", "apachePatientResult", "medication", "diagnosis", "microLab"]
    folder = _linked(tmp_path_factory.mktemp("eicu") / "eicu", EICU, [f"{n}.csv.gz" for n in names])
    sources.load("csv", [folder], folder.parent / "eicu.duckdb")
    with ehr_magic.connect(folder.parent / "eicu.duckdb") as ehr:
        yield ehr


def test_eicu_folder_drafts_the_packaged_joins_to_the_outermost_key(eicu) -> None:
    assert _packaged_pairs("eicu", eicu.tables()) <= _drafted_pairs(eicu)
    joins = _joins(eicu)
    # Stay ids are unique in the one-row-per-stay score table too: the patient table, which holds them all, wins.
    assert "patient ON apacheapsvar.patientunitstayid = patient.patientunitstayid" in joins
    assert not any(join.startswith("apacheapsvar ON") for join in joins)
    assert "hospital ON patient.hospitalid = hospital.hospitalid" in joins  # small integers, vouched by name
    tables = eicu.knowledge.tables
    assert "drugname" in tables["medication"].vocabulary and "organism" in tables["microlab"].vocabulary


def test_mimic_iv_codes_join_their_dictionary_with_the_version(tmp_path: Path) -> None:
    names = ["patients", "admissions", "diagnoses_icd", "d_icd_diagnoses"]
    folder = _linked(tmp_path / "mimic4", MIMIC_IV, [f"{n}.csv.gz" for n in names])
    sources.load("csv", [folder], tmp_path / "m4.duckdb")
    with ehr_magic.connect(tmp_path / "m4.duckdb") as ehr:
        tables = ehr.knowledge.tables
        assert tables["d_icd_diagnoses"].description.startswith(
            "Each row has its own icd_code and icd_version together.")
        assert ("d_icd_diagnoses ON diagnoses_icd.icd_code = d_icd_diagnoses.icd_code AND "
                "diagnoses_icd.icd_version = d_icd_diagnoses.icd_version") in tables["diagnoses_icd"].joins
        assert "long_title" in tables["d_icd_diagnoses"].vocabulary


def test_synthea_folder_joins_by_identifiers_and_not_by_small_integers(tmp_path: Path) -> None:
    synthea = SHARED_DATA / "synthea-dbt-synthea-seeds" / "synthea"
    folder = _linked(tmp_path / "synthea", synthea, ["patients.csv", "encounters.csv", "claims.csv",
                                                    "claims_transactions.csv", "providers.csv", "payers.csv"])
    sources.load("csv", [folder], tmp_path / "s.duckdb")
    with ehr_magic.connect(tmp_path / "s.duckdb") as ehr:
        joins = _joins(ehr)
        assert "claims ON claims_transactions.claimid = claims.id" in joins
        assert "encounters ON claims.appointmentid = encounters.id" in joins
        # Claim type ids 1..2 lie inside the transactions' charge ids, and the names share "claim": chance.
        assert not any("claimtypeid" in join for join in joins)
        encounters = ehr.knowledge.tables["encounters"]
        assert encounters.row.startswith("One row per encounter.")
        assert encounters.columns["patient"].startswith("VARCHAR, refers to patients")  # the name says 'patient'
        assert encounters.columns["encounterclass"].startswith("VARCHAR, encounter class, ")  # run together


# -- bad input -----------------------------------------------------------------------------------


def test_awkward_tables_load_whole_and_say_what_they_lack(tmp_path: Path) -> None:
    folder = tmp_path / "awkward"
    folder.mkdir()
    (folder / "people.csv").write_text("person,sex\n" + "".join(f"{i},{'FM'[i % 2]}\n" for i in range(101, 131)))
    (folder / "settings.csv").write_text("person,site,started\n105,north,2020-01-01\n")  # one row
    (folder / "notes.csv").write_text("person,note,spare\n" + "".join(f"{101 + i % 7},seen,\n" for i in range(40)))
    # Two headers equal but for case, and a person id written as text with a prefix.
    (folder / "codes.csv").write_text("Id,ID,label\n" + "".join(f"{i},{i * 7},L{i}\n" for i in range(1, 21)))
    (folder / "visits.csv").write_text("visit,person\n" + "".join(f"{i},P{i}\n" for i in range(1, 11)))
    report = sources.load("csv", [folder], tmp_path / "a.duckdb")
    assert report.tables == {"codes": 20, "notes": 40, "people": 30, "settings": 1, "visits": 10}  # nothing lost
    with ehr_magic.connect(tmp_path / "a.duckdb") as ehr:
        tables = ehr.knowledge.tables
        assert tables["settings"].description == "Only 1 row, so no key is drafted and nothing joins to it."
        assert "people ON settings.person = people.person" in tables["settings"].joins  # it may refer to others
        assert tables["notes"].description == "No single column identifies a row."
        assert tables["notes"].columns["spare"] == "VARCHAR, always empty in this data."
        assert "people ON notes.person = people.person" in tables["notes"].joins
        assert "'ID', renamed" in tables["codes"].columns["id_1"]
        assert ehr.sql("SELECT id_1 FROM codes WHERE id = 3").item() == 21
        assert not tables["visits"].joins
        clash = [rule for rule in ehr.knowledge.conventions if rule.startswith("Column person holds")]
        assert clash == ["Column person holds numbers in notes, people, settings but text in visits: cast one side "
                         "(e.g. CAST(person AS VARCHAR)) before comparing or joining them."]


def test_a_folder_of_200_files_is_drafted_whole(tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    (folder / "patients.csv").write_text("patient_key,sex\n" + "".join(f"{1000 + i},{'FM'[i % 2]}\n"
                                                                        for i in range(50)))
    for n in range(199):
        rows = "".join(f"{1000 + (i * 7 + n) % 50},{i % 5},{n}.{i}\n" for i in range(20))
        (folder / f"measure_{n:03d}.csv").write_text("patient_key,grade,reading\n" + rows)
    report = sources.load("csv", [folder], tmp_path / "many.duckdb")
    assert len(report.tables) == 200
    with ehr_magic.connect(tmp_path / "many.duckdb") as ehr:
        tables = ehr.knowledge.tables
        assert len(tables) == 200
        for n in range(199):
            assert tables[f"measure_{n:03d}"].joins == (
                f"patients ON measure_{n:03d}.patient_key = patients.patient_key",)
        assert tables["measure_007"].row.startswith("One row per measure.")


def test_keys_are_probed_in_batches_and_every_join_across_them_is_found(tmp_path: Path) -> None:
    # each table's own key, referred to by the next table: more keys than one query scans
    from ehr_magic.knowledge.drafting import joins

    count = 2 * joins.SCANS_PER_QUERY + 10
    folder = tmp_path / "chain"
    folder.mkdir()
    for n in range(count):
        header = f"unit_{n:03d}_key" + (f",unit_{n - 1:03d}_key" if n else "") + ",reading"
        rows = "".join(f"K{n}-{i * 7919 % 10007}" + (f",K{n - 1}-{i % 10 * 7919 % 10007}" if n else "")
                       + f",{i % 4}\n" for i in range(20))
        (folder / f"unit_{n:03d}.csv").write_text(header + "\n" + rows)
    sources.load("csv", [folder], tmp_path / "chain.duckdb")
    with ehr_magic.connect(tmp_path / "chain.duckdb") as ehr:
        tables = ehr.knowledge.tables
        for n in range(1, count):
            assert tables[f"unit_{n:03d}"].joins == (
                f"unit_{n - 1:03d} ON unit_{n:03d}.unit_{n - 1:03d}_key = unit_{n - 1:03d}.unit_{n - 1:03d}_key",)


def test_a_time_range_is_said_by_its_days_unless_it_lies_within_one_day() -> None:
    import duckdb

    from ehr_magic.knowledge.drafting import meaning
    from ehr_magic.knowledge.drafting.profiling import profile

    with duckdb.connect() as con:
        con.execute("CREATE TABLE shifts AS SELECT TIMESTAMP '2100-03-01 07:00:00' + INTERVAL (i) HOUR AS started, "
                    "TIMESTAMP '2100-03-01 07:30:00' + INTERVAL (i * 50) HOUR AS ended FROM range(10) t(i)")
        table = profile(con, "shifts", "shifts.csv")
    # the hours of one day's data are what its range tells; over days, the days are
    assert meaning.describe_column(table, table.columns["started"], {}, False) == (
        "TIMESTAMP, 2100-03-01 07:00:00 to 2100-03-01 16:00:00.")
    assert meaning.describe_column(table, table.columns["ended"], {}, False) == "TIMESTAMP, 2100-03-01 to 2100-03-20."


def test_a_big_table_is_profiled_on_the_same_sample_every_time() -> None:
    """A table past the profiling sample size, profiled twice in one connection on two threads: a
    seeded system sample read by several threads picks other rows the second time, and drafted
    knowledge would differ from one connect to the next."""
    import duckdb

    from ehr_magic.knowledge.drafting.profiling import PROFILE_SAMPLE, profile

    with duckdb.connect() as con:
        con.execute("SET threads = 2")
        con.execute("CREATE TABLE events AS SELECT i AS event_id, hash(i) % 5000 AS patient_id, "
                    "'item ' || (hash(i * 7) % 900)::VARCHAR AS label, (hash(i * 3) % 100000) / 7.0 AS reading "
                    f"FROM range({7 * PROFILE_SAMPLE}) t(i)")
        first = profile(con, "events", "events.csv")
        con.execute("SELECT count(*) FROM events").fetchall()
        second = profile(con, "events", "events.csv")
        assert con.execute("SELECT current_setting('threads')").fetchall()[0][0] == 2  # as it was
    assert first.rows == 7 * PROFILE_SAMPLE
    assert first == second


def test_a_hub_counts_the_tables_that_refer_to_it_and_a_second_unit_column_names_the_first(tmp_path: Path) -> None:
    folder = tmp_path / "hub"
    folder.mkdir()
    patients = [1000 + 7 * i for i in range(40)]  # not 1..n: a dense sequence would be a row number
    pl.DataFrame({"PatNo": patients, "Sex": ["f", "m"] * 20}).write_csv(folder / "Patients.csv")
    for name in ("Labs", "Notes", "Orders", "Bills"):
        pl.DataFrame({"PatNo": patients[::2] * 3, "Amount": list(range(60))}).write_csv(folder / f"{name}.csv")
    units = ["medical intensive care unit (micu)", "surgical intensive care unit (sicu)",
             "cardiac vascular intensive care unit (cvicu)", "trauma surgical intensive care unit (tsicu)",
             "neurology stepdown unit"]
    pl.DataFrame({"StayNo": [5000 + 3 * i for i in range(40)], "PatNo": patients,
                  "FirstUnit": [units[i % 5] for i in range(40)],
                  "LastUnit": [units[i % 4] for i in range(40)]}).write_csv(folder / "Stays.csv")
    sources.load("csv", [folder], tmp_path / "hub.duckdb")
    with ehr_magic.connect(tmp_path / "hub.duckdb") as ehr:
        tables = ehr.knowledge.tables
        # five tables refer to the patients: counted, not named (their own columns say the join)
        assert tables["patients"].row == "One row per patient. Referred to by 5 tables. 40 rows."
        assert tables["stays"].row.startswith("One row per stay. 40 rows")
        # the first unit's list is cut (long names); the last unit's values are among them, said so once
        assert "'medical intensive care unit (micu)'" in tables["stays"].columns["firstunit"]
        assert "4 of the values of firstunit" in tables["stays"].columns["lastunit"]
        assert "'" not in tables["stays"].columns["lastunit"]
