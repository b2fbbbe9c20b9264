"""`ehr-magic data load csv`: any folder of table files, with knowledge drafted from the data.

Built from the real Synthea sample in ../shared/data; knowledge export/import through the
CLI as a user runs it, on a DuckDB file and on a real PostgreSQL server.
"""

from __future__ import annotations

import codecs
import csv
import datetime as dt
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

import ehr_magic
from datapaths import SHARED_DATA
from ehr_magic.agent.context import system_prompt
from ehr_magic.agent.hints import value_hints
from ehr_magic.knowledge import model as knowledge_files
from ehr_magic import sources
from ehr_magic.errors import DataSourceError
from ehr_magic.safety import privacy

SYNTHEA = SHARED_DATA / "synthea-dbt-synthea-seeds" / "synthea"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ehr_magic", *args], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=300)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def synthea_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synthea") / "synthea.duckdb"
    sources.load("csv", [SYNTHEA], out)
    return out


@pytest.fixture()
def ehr(synthea_db: Path):
    with ehr_magic.connect(synthea_db) as connected:
        yield connected


def test_every_file_is_a_table_with_the_files_row_count(ehr) -> None:
    files = sorted(SYNTHEA.glob("*.csv"))
    assert len(files) == 18 and ehr.tables() == [f.stem for f in files]
    for path in files:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = sum(1 for _ in csv.reader(handle)) - 1  # the header
        assert ehr.count(path.stem) == rows, path.name
    assert ehr.count("patients") == 27
    assert ehr.schema == "csv_synthea" and ehr.meta["source"] == "csv-folder"


def test_types_are_inferred_from_the_whole_file_and_times_lose_their_zone(ehr) -> None:
    encounters = ehr.columns("encounters")
    assert encounters["start"] == "TIMESTAMP" and encounters["total_claim_cost"] == "DOUBLE"
    assert ehr.columns("conditions")["start"] == "DATE"
    # '2023-01-27T16:17:47Z' is the same instant, as a plain UTC time.
    first = ehr.sql("SELECT min(start) AS s FROM encounters WHERE id = '57f2562b-445c-f11c-ba40-edc55af3c84f'").item()
    assert first == dt.datetime(2023, 1, 27, 16, 17, 47)
    # Zip codes keep their leading zeros.
    assert ehr.columns("organizations")["zip"] == "VARCHAR" and ehr.columns("payers")["zip"] == "VARCHAR"
    assert ehr.sql("SELECT zip FROM organizations WHERE name = 'STURDY MEMORIAL HOSPITAL'").item() == "02703"


def test_the_drafted_knowledge_is_stored_valid_and_round_trips(ehr) -> None:
    knowledge = ehr.knowledge
    assert knowledge is not None and ehr.stored_knowledge is not None
    assert knowledge.schema == "csv_synthea" and set(knowledge.tables) == set(ehr.tables())
    assert "drafted from the data" in knowledge.introduction and "check and improve it" in knowledge.introduction
    # how a person checks it, in a notebook or a shell, in one sentence of the model's prompt too
    assert "%ehr knowledge in a notebook or ehr-magic data knowledge in a shell." in knowledge.introduction
    assert "--export" not in knowledge.introduction
    again = knowledge_files.parse(knowledge.to_yaml(), source="test", expected_schema="csv_synthea")
    assert again == knowledge
    for info in knowledge.tables.values():  # every column of every table, each described
        assert list(info.columns) == list(ehr.columns(info.name)), info.name


def test_keys_and_joins_found_from_names_and_values(ehr) -> None:
    tables = ehr.knowledge.tables
    assert tables["patients"].key == "id" and tables["patients"].description == ""  # the key's line says it
    assert tables["encounters"].columns["id"].startswith("VARCHAR, the unique key")
    assert tables["conditions"].description == "No single column identifies a row."
    joins = {join for info in tables.values() for join in info.joins}
    expected = {
        "patients ON encounters.patient = patients.id",  # a name without _id (Synthea's style)
        "payers ON encounters.payer = payers.id",
        "organizations ON providers.organization = organizations.id",
        "claims ON claims_transactions.claimid = claims.id",  # name + id
        "providers ON claims.supervisingproviderid = providers.id",  # a role before the name
        "encounters ON claims.appointmentid = encounters.id",  # from identifier values alone
        "organizations ON claims_transactions.placeofservice = organizations.id",
        "payers ON claims.primarypatientinsuranceid = payers.id",  # identifiers beside '0' placeholders
        # The name says insurance, but each of its values is the row's own patientid (UUIDs, so no
        # chance overlap): the values decide, as in the sibling above whose values are payer ids.
        "patients ON claims_transactions.patientinsuranceid = patients.id",
    }
    assert expected <= joins
    assert not tables["patients"].joins  # nothing in patients refers to another table
    # Numbers that happen to overlap are no join (departmentid 1-20 vs nothing keyed by integers).
    assert not any("departmentid" in join for join in joins)
    assert "refers to patients.id" in tables["conditions"].columns["patient"]


def test_value_lists_ranges_and_privacy(ehr) -> None:
    tables = ehr.knowledge.tables
    encounter_class = tables["encounters"].columns["encounterclass"]
    assert "6 values" in encounter_class and "'ambulatory'" in encounter_class and "'emergency'" in encounter_class
    assert {"encounterclass", "description"} <= set(tables["encounters"].vocabulary)
    assert tables["encounters"].columns["start"] == "TIMESTAMP, 1968-01-21 to 2024-02-02."  # days: what it covers
    assert tables["allergies"].columns["type"] == "VARCHAR, always 'allergy'."
    assert "type" not in tables["allergies"].vocabulary  # one value: nothing to look up
    assert "numbers written as text" in tables["observations"].columns["value"]
    assert "always empty" in tables["allergies"].columns["stop"]
    # Personal data is neither listed nor offered for lookup.
    patients = tables["patients"]
    assert {"gender", "race"} <= set(patients.vocabulary)
    assert not {"first", "last", "ssn", "address", "city", "zip", "birthplace"} & set(patients.vocabulary)
    text = ehr.knowledge.to_yaml()
    for name in ehr.sql("SELECT first, last, ssn, address FROM patients").rows():
        assert not any(value in text for value in name)
    assert "ownername" not in tables["payer_transitions"].vocabulary


def test_the_clock_is_the_latest_event_not_a_planned_end(ehr) -> None:
    # payer_transitions.end_year runs to 2025-02-06 (coverage planned ahead); events stop in February 2024.
    latest_end = ehr.sql("SELECT max(end_year) AS e FROM payer_transitions").item()
    assert latest_end.year == 2025
    assert ehr.now == dt.datetime(2024, 2, 7, 23, 24, 16)
    intro = ehr.knowledge.introduction
    assert "ehr.now) is 2024-02-07 23:24:16" in intro and "payer_transitions.end_year" in intro


def test_lookup_hints_and_privacy_use_the_drafted_vocabulary(ehr) -> None:
    assert ehr.lookup("encounters", "encounterclass", "Emergency")[0] == "emergency"
    assert ehr.lookup("conditions", "description", "viral pharyngitis")[0] == "Acute viral pharyngitis (disorder)"
    code = "answer = ehr.sql(\"SELECT count(*) AS n FROM encounters WHERE encounterclass = 'Emergency'\").item()"
    hints = value_hints(code, ehr)
    assert [(h.table, h.column, h.closest[0]) for h in hints] == [("encounters", "encounterclass", "emergency")]
    # Drafted lookup columns are dictionary columns: their hints may reach the model at the strictest level.
    assert privacy.filter_hints(hints, ehr, "schema") == hints
    assert privacy.is_dictionary_column(ehr, "encounters", "encounterclass")
    assert not privacy.is_dictionary_column(ehr, "patients", "first")


def test_a_condition_no_patient_has_still_brings_the_table_that_would_hold_it(ehr) -> None:
    # no patient of the sample has type 2 diabetes, so no stored value names it; the clinical
    # vocabulary knows it is a diagnosis, and the conditions table comes with the question in full,
    # where the model can find that nobody has it
    from ehr_magic.agent import Agent
    from ehr_magic.llm.window import ContextWindow

    assert not ehr.lookup("conditions", "description", "type 2 diabetes").exact
    prompt = Agent(ehr, None).prompt("How many patients have type 2 diabetes?", window=ContextWindow(8192, "test"))
    assert "conditions" in prompt.tables[:prompt.layout.tables], prompt.tables
    # a drug the data stores is found by its rows
    prompt = Agent(ehr, None).prompt("How many patients were given acetaminophen?", window=ContextWindow(8192, "test"))
    assert "medications" in prompt.tables[:prompt.layout.tables], prompt.tables


def test_stored_values_of_rows_keyed_by_long_identifiers_come_without_the_rows(ehr) -> None:
    # providers are keyed by UUIDs: a linked specialty says where it is stored, not every provider's
    # UUID and gender; a short key (an item id) would still be shown
    from ehr_magic.agent.context import linked_values
    from ehr_magic.linking.question import link_question

    text = linked_values(link_question(ehr, "How many encounters were emergency visits?"))
    assert "  providers.speciality = 'EMERGENCY MEDICINE'\n" in text, text
    assert "gender" not in text and "-3df9-" not in text


def test_each_folder_has_its_own_schema_and_schema_can_be_chosen(tmp_path: Path) -> None:
    folder = tmp_path / "Clinic 2024"
    folder.mkdir()
    shutil.copy(SYNTHEA / "patients.csv", folder / "Patients.csv")
    shutil.copy(SYNTHEA / "encounters.csv", folder / "encounter-list.csv")
    report = sources.load("csv", [folder], tmp_path / "a.duckdb")
    assert set(report.tables) == {"patients", "encounter_list"}
    with ehr_magic.connect(tmp_path / "a.duckdb") as ehr:
        assert ehr.schema == "csv_clinic_2024" and ehr.knowledge.schema == "csv_clinic_2024"
        assert "patients ON encounter_list.patient = patients.id" in ehr.knowledge.tables["encounter_list"].joins
    sources.load("csv", [folder], tmp_path / "b.duckdb", schema="clinic_b")
    with ehr_magic.connect(tmp_path / "b.duckdb") as ehr:
        assert ehr.schema == "clinic_b" and ehr.knowledge.schema == "clinic_b"
    with pytest.raises(DataSourceError, match="packaged description of another dataset"):
        sources.load("csv", [folder], tmp_path / "c.duckdb", schema="mimic_iv")
    assert not (tmp_path / "c.duckdb").exists()


def test_parquet_and_gzip_files_load_too(tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    duckdb.execute(f"COPY (SELECT * FROM read_csv('{SYNTHEA / 'patients.csv'}')) TO '{folder / 'patients.parquet'}'")
    (folder / "encounters.csv.gz").write_bytes(gzip.compress((SYNTHEA / "encounters.csv").read_bytes()))
    report = sources.load("csv", [folder], tmp_path / "m.duckdb", now="2030-01-01 00:00:00")
    assert report.tables == {"encounters": 604, "patients": 27}
    with ehr_magic.connect(tmp_path / "m.duckdb") as ehr:
        assert ehr.now == dt.datetime(2030, 1, 1)
        assert "set to 2030-01-01" in ehr.knowledge.introduction
        assert "patients ON encounters.patient = patients.id" in ehr.knowledge.tables["encounters"].joins


def test_files_separated_by_semicolons_tabs_or_bars_load_with_their_decimal_commas_and_bare_quotes(
        tmp_path: Path) -> None:
    """Spreadsheet exports: ';' with decimal commas and a byte order mark, tabs, '|'; a comma file
    whose header quotes a '|' stays a comma file, and a ';' file written with decimal points keeps them."""
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "patients.csv").write_bytes("\ufeffPatient ID;Sex;Weight (kg)\n1;F;70,5\n2;M;82,0\n3;F;\n".encode())
    (folder / "labs.tsv").write_text("patient_id\tlab\tresult\n1\tHb\t12.5\n2\tK\t4.1\n")
    (folder / "notes.csv").write_text("patient_id|note\n1|fever, cough\n")
    (folder / "codes.csv").write_text('code,"name|short"\nA1,alpha\nB2,beta\n')
    (folder / "vitals.csv").write_text("patient_id;temp\n1;37.5\n2;38.25\n")
    # a vocabulary export that never quotes (a name may start with a quote), and one that quotes a tab
    (folder / "concept.csv").write_text('concept_id\tconcept_name\n1\t"Elderly" patient\n2\tSaline "Baxter"\n')
    (folder / "terms.tsv").write_text('id\tterm\n1\t"a\tb"\n2\t"say ""hi"""\n')
    report = sources.load("csv", [folder], tmp_path / "e.duckdb")
    assert report.tables == {"codes": 2, "concept": 2, "labs": 2, "notes": 1, "patients": 3, "terms": 2, "vitals": 2}
    with duckdb.connect(str(tmp_path / "e.duckdb"), read_only=True) as con:
        def rows(sql: str) -> list[tuple]:
            return con.execute(sql).fetchall()

        assert rows('SELECT "patient id", sex, "weight (kg)" FROM patients ORDER BY 1') == [
            (1, "F", 70.5), (2, "M", 82.0), (3, "F", None)]
        assert rows("SELECT lab, result FROM labs ORDER BY 1") == [("Hb", 12.5), ("K", 4.1)]
        assert rows("SELECT note FROM notes") == [("fever, cough",)]
        assert rows('SELECT code, "name|short" FROM codes ORDER BY 1') == [("A1", "alpha"), ("B2", "beta")]
        assert rows("SELECT temp FROM vitals ORDER BY 1") == [(37.5,), (38.25,)]
        assert rows("SELECT concept_name FROM concept ORDER BY 1") == [('"Elderly" patient',), ('Saline "Baxter"',)]
        assert rows("SELECT term FROM terms ORDER BY id") == [("a\tb",), ('say "hi"',)]


def test_windows_and_utf_16_text_load_as_written_and_text_that_is_neither_is_one_sentence(tmp_path: Path) -> None:
    """Windows exports (code page 1252: Latin-1 plus '€', curly quotes and dashes, which DuckDB's
    Latin-1 reader refuses) and a file that turns to Windows text after its UTF-8 start load as the
    spreadsheet meant them; no copy is left behind."""
    folder = tmp_path / "windows"
    folder.mkdir()
    (folder / "staff.csv").write_bytes("id;Ärztin;Größe\n1;Dr. Müller;180,5\n2;Dr. Öz;175,0\n".encode("latin-1"))
    (folder / "notes.csv").write_bytes("id\tname\n1\tMüller\n".encode("utf-16"))  # with its byte order mark
    (folder / "fees.csv.gz").write_bytes(gzip.compress(
        "id,Preis €,note\r\n1,5,“Smart” quotes – café\r\n2,7,plain\r\n".encode("cp1252")))
    late = "".join(f"{i},Müller\n" for i in range(20_000)).encode()  # UTF-8 well past the sample read
    (folder / "late.csv").write_bytes(b"id,name\n" + late + "20000,Öz – €\n".encode("cp1252"))
    sources.load("csv", [folder], tmp_path / "w.duckdb")
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        assert con.execute('SELECT "ärztin", "größe" FROM staff ORDER BY id').fetchall() == [
            ("Dr. Müller", 180.5), ("Dr. Öz", 175.0)]
        assert con.execute("SELECT name FROM notes").fetchall() == [("Müller",)]
        assert con.execute('SELECT "preis €", note FROM fees ORDER BY id').fetchall() == [
            (5, "“Smart” quotes – café"), (7, "plain")]
        assert con.execute("SELECT count(*), count(DISTINCT name) FROM late").fetchall() == [(20_001, 2)]
        assert con.execute("SELECT name FROM late WHERE id = 20000").fetchall() == [("Öz – €",)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.duckdb", "windows"]

    broken = tmp_path / "broken"
    broken.mkdir()
    text = codecs.BOM_UTF16_LE + "id,name\n1,ab\n".encode("utf-16-le") + b"\x00\xd8" + "x\n".encode("utf-16-le")
    (broken / "staff.csv").write_bytes(text)  # a lone surrogate
    out = tmp_path / "b.duckdb"
    line = one_error_line(run("data", "load", "csv", str(broken), "--out", str(out), "--quiet"))
    assert "staff.csv" in line and "its text is not valid UTF-8 or UTF-16; fix or replace the file" in line, line
    assert not out.exists()


def test_names_and_values_sql_cannot_read_bare_are_shown_as_the_model_should_write_them(tmp_path: Path) -> None:
    """A spreadsheet's headers ('Weight (kg)') stay the column names, so the prompt shows them quoted;
    a value with a line break is shown as an exact literal on one line, and both work as written."""
    folder = tmp_path / "sheet"
    folder.mkdir()
    (folder / "patients.csv").write_text("Patient ID,Sex,Weight (kg)\n1,F,70.5\n2,M,82.0\n3,F,61.0\n")
    (folder / "admissions.csv").write_text('Patient ID,Diagnosis\n1,"Sepsis\nwith shock"\n2,Pneumonia\n'
                                           "3,Pneumonia\n1,Pneumonia\n")
    sources.load("csv", [folder], tmp_path / "s.duckdb")
    with ehr_magic.connect(tmp_path / "s.duckdb") as ehr:
        index = system_prompt(ehr)
        assert 'patients: "patient id", sex, "weight (kg)"' in index
        described = ehr.knowledge.tables["patients"].detail()
        assert '\n- "weight (kg)": DOUBLE' in described and '\n- sex: VARCHAR' in described
        diagnosis = ehr.knowledge.tables["admissions"].columns["diagnosis"]
        literal = "'Sepsis' || chr(10) || 'with shock'"
        assert literal in diagnosis and "\n" not in diagnosis
        assert ehr.sql('SELECT avg("weight (kg)") AS w FROM patients').item() == pytest.approx(71.1666, rel=1e-4)
        assert ehr.sql(f"SELECT count(*) FROM admissions WHERE diagnosis = {literal}").item() == 1


def _bad_folders(root: Path) -> dict[str, tuple[Path, list[str]]]:
    """name -> (folder, words the one-sentence error must contain)."""
    cases: dict[str, tuple[Path, list[str]]] = {}
    empty = root / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "notes.txt").write_text("not a table")
    cases["empty"] = (empty, ["No .csv, .tsv (or gzipped), .parquet, spreadsheet (.xlsx, .xls, .ods), SAS "
                              "(.sas7bdat, .xpt), Stata (.dta), SPSS (.sav) or JSON (.ndjson, .json) files",
                              str(empty)])
    nested = root / "nested"
    (nested / "hosp").mkdir(parents=True)
    shutil.copy(SYNTHEA / "devices.csv", nested / "hosp" / "devices.csv")
    cases["nested"] = (nested, ["subfolders hosp"])
    case_clash = root / "case"
    case_clash.mkdir()
    shutil.copy(SYNTHEA / "patients.csv", case_clash / "Patients.csv")
    shutil.copy(SYNTHEA / "patients.csv", case_clash / "patients.csv")
    cases["case clash"] = (case_clash, ["Patients.csv", "patients.csv", "both become table patients"])
    kind_clash = root / "kind"
    kind_clash.mkdir()
    shutil.copy(SYNTHEA / "devices.csv", kind_clash / "devices.csv")
    duckdb.execute(f"COPY (SELECT 1 AS a) TO '{kind_clash / 'devices.parquet'}'")
    cases["kind clash"] = (kind_clash, ["devices.csv", "devices.parquet", "both become table devices"])
    ragged = root / "ragged"
    ragged.mkdir()
    shutil.copy(SYNTHEA / "patients.csv", ragged / "patients.csv")
    (ragged / "visits.csv").write_text("id,patient,kind\n1,a,x\n2,b,y,EXTRA,MORE\n3,c,z\n")
    cases["ragged row"] = (ragged, ["visits.csv"])
    corrupt = root / "corrupt"
    corrupt.mkdir()
    shutil.copy(SYNTHEA / "patients.csv", corrupt / "patients.csv")
    data = gzip.compress((SYNTHEA / "encounters.csv").read_bytes())
    (corrupt / "encounters.csv.gz").write_bytes(data[: len(data) // 2])
    cases["corrupt gzip"] = (corrupt, ["encounters.csv.gz"])
    return cases


def test_bad_input_is_one_sentence_and_leaves_no_database(tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for name, (folder, words) in _bad_folders(tmp_path).items():
        out = out_dir / f"{name.replace(' ', '_')}.duckdb"
        line = one_error_line(run("data", "load", "csv", str(folder), "--out", str(out), "--quiet"))
        for word in words:
            assert word in line, (name, line)
        assert list(out_dir.iterdir()) == [], (name, list(out_dir.iterdir()))  # no file, no temporary file


def test_knowledge_export_edit_import_on_a_duckdb_file(synthea_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    shutil.copy(synthea_db, db)
    summary = run("data", "knowledge", str(db))
    assert summary.returncode == 0, summary.stderr
    assert "stored in the database" in summary.stdout and "18 tables described" in summary.stdout
    assert f"ehr-magic data knowledge {db} --export FILE.yaml, then --import FILE.yaml" in summary.stdout
    assert "%ehr knowledge edit, then %ehr knowledge import FILE" in summary.stdout
    exported = tmp_path / "s.yaml"
    assert run("data", "knowledge", str(db), "--export", str(exported)).returncode == 0
    data = yaml.safe_load(exported.read_text())
    data["tables"]["encounters"]["row"] = "One row per visit of a patient."
    data["tables"]["encounters"]["vocabulary"].append("code")
    exported.write_text(yaml.safe_dump(data, sort_keys=False))
    with ehr_magic.connect(db) as ehr:
        assert "One row per visit of a patient." not in system_prompt(ehr, full_index=True)  # cached for this file now
    done = run("data", "knowledge", str(db), "--import", str(exported))
    assert done.returncode == 0, done.stderr
    assert "connect again" in done.stdout
    with ehr_magic.connect(db) as ehr:
        assert ehr.knowledge.tables["encounters"].row == "One row per visit of a patient."
        assert "One row per visit of a patient." in system_prompt(ehr, full_index=True)  # a reconnect sees the import
        assert "code" in ehr.knowledge.tables["encounters"].vocabulary
        stored = ehr.stored_knowledge
    mistakes = [
        (("tables", "payer_transition"), "table 'payer_transition'", "did you mean 'payer_transitions'?"),
        (("column", "patinet"), "column encounters.patinet", "did you mean 'patient'?"),
        (("vocabulary", "encounterclas"), "encounters.encounterclas", "did you mean 'encounterclass'?"),
        (("join", "patients ON encounters.patient = patients.idd"), "'idd'", "did you mean 'id'?"),
        (("schema", "csv_other"), "describes schema 'csv_other'", "schema: csv_synthea"),
    ]
    for (kind, value), *words in mistakes:
        broken = yaml.safe_load(exported.read_text())
        encounters = broken["tables"]["encounters"]
        if kind == "tables":
            broken["tables"][value] = broken["tables"].pop("payer_transitions")
        elif kind == "column":
            encounters["columns"][value] = "a typo"
        elif kind == "vocabulary":
            encounters["columns"][value] = "a typo"
            encounters["vocabulary"] = [value]
        elif kind == "join":
            encounters["joins"] = [value]
        else:
            broken["schema"] = value
        bad = tmp_path / f"bad-{kind}.yaml"
        bad.write_text(yaml.safe_dump(broken, sort_keys=False))
        line = one_error_line(run("data", "knowledge", str(db), "--import", str(bad)))
        for word in words:
            assert word in line, (kind, line)
        with ehr_magic.connect(db) as ehr:
            assert ehr.stored_knowledge == stored, kind  # nothing was written


def test_export_of_a_packaged_schema(ehrsql_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "ehrsql.yaml"
    done = run("data", "knowledge", str(ehrsql_db), "--export", str(out))
    assert done.returncode == 0, done.stderr
    assert knowledge_files.parse(out.read_text(), source=str(out), expected_schema="ehrsql_mimic_iv") == \
        knowledge_files.load("ehrsql_mimic_iv")
    summary = run("data", "knowledge", str(ehrsql_db))
    assert "packaged (ehr_magic/knowledge/schemas/ehrsql_mimic_iv.yaml)" in summary.stdout


def test_postgres_target_carries_the_drafted_knowledge_and_imports_into_it(pg_server, tmp_path: Path) -> None:
    pg_server.execute("CREATE DATABASE synthea")
    url = pg_server.url("synthea")
    done = run("data", "load", "csv", str(SYNTHEA), "--out", url, "--quiet")
    assert done.returncode == 0, done.stderr
    with ehr_magic.connect(url) as ehr:
        assert ehr.schema == "csv_synthea" and ehr.now == dt.datetime(2024, 2, 7, 23, 24, 16)
        assert "patients ON encounters.patient = patients.id" in ehr.knowledge.tables["encounters"].joins
        assert ehr.lookup("encounters", "encounterclass", "Emergency")[0] == "emergency"
        assert ehr.count("claims_transactions") == 5228
    exported = tmp_path / "pg.yaml"
    assert run("data", "knowledge", url, "--export", str(exported)).returncode == 0
    data = yaml.safe_load(exported.read_text())
    data["introduction"] = "Synthea patients, checked by an analyst."
    exported.write_text(yaml.safe_dump(data, sort_keys=False))
    done = run("data", "knowledge", url, "--import", str(exported))
    assert done.returncode == 0, done.stderr
    with ehr_magic.connect(url) as ehr:
        assert ehr.knowledge.introduction == "Synthea patients, checked by an analyst."
    info = json.loads(run("data", "info", url, "--json").stdout)
    assert "_ehr_knowledge" not in info["tables"] and info["tables"]["patients"] == 27


def test_spark_target_carries_the_drafted_knowledge_and_imports_into_it(spark_server, tmp_path: Path) -> None:
    folder = tmp_path / "small"
    folder.mkdir()
    for name in ("patients.csv", "encounters.csv"):
        shutil.copy(SYNTHEA / name, folder / name)
    url = spark_server.url("csv_small")
    done = run("data", "load", "csv", str(folder), "--out", url, "--quiet")
    assert done.returncode == 0, done.stderr
    with ehr_magic.connect(url) as ehr:
        assert ehr.schema == "csv_small" and ehr.stored_knowledge is not None
        assert "patients ON encounters.patient = patients.id" in ehr.knowledge.tables["encounters"].joins
    exported = tmp_path / "spark.yaml"
    assert run("data", "knowledge", url, "--export", str(exported)).returncode == 0
    data = yaml.safe_load(exported.read_text())
    data["tables"]["patients"]["row"] = "One row per patient."
    exported.write_text(yaml.safe_dump(data, sort_keys=False))
    done = run("data", "knowledge", url, "--import", str(exported))
    assert done.returncode == 0, done.stderr
    with ehr_magic.connect(url) as ehr:
        assert ehr.knowledge.tables["patients"].row == "One row per patient."
        assert ehr.count("encounters") == 604


def test_row_numbers_are_no_join_and_ids_named_alike_are(tmp_path: Path) -> None:
    # MIMIC-III's files, as any folder: upper-case names, a row_id in every table that overlaps everywhere.
    folder = tmp_path / "mimic3"
    folder.mkdir()
    for name in ("PATIENTS.csv.gz", "ADMISSIONS.csv.gz", "ICUSTAYS.csv.gz"):
        shutil.copy(SHARED_DATA / "mimic-iii-clinical-database-demo-1.4" / name, folder / name)
    sources.load("csv", [folder], tmp_path / "m.duckdb")
    with ehr_magic.connect(tmp_path / "m.duckdb") as ehr:
        tables = ehr.knowledge.tables
        assert ehr.tables() == ["admissions", "icustays", "patients"]
        assert (tables["patients"].key, tables["admissions"].key, tables["icustays"].key) == (
            "subject_id", "hadm_id", "icustay_id")
        assert tables["admissions"].columns["hadm_id"].startswith("BIGINT, the unique key")
        assert tables["admissions"].columns["row_id"] == "BIGINT, the unique row number."
        assert set(tables["icustays"].joins) == {"patients ON icustays.subject_id = patients.subject_id",
                                                 "admissions ON icustays.hadm_id = admissions.hadm_id"}
        assert not any("row_id" in join for info in tables.values() for join in info.joins)


@pytest.mark.parametrize("schema", knowledge_files.available())
def test_every_packaged_knowledge_round_trips_through_yaml(schema: str) -> None:
    packaged = knowledge_files.load(schema)
    assert knowledge_files.parse(packaged.to_yaml(), source="test", expected_schema=schema) == packaged


def test_a_tab_separated_windows_export_is_drafted_from_its_header_as_written(tmp_path: Path) -> None:
    """Drafting reads the header as loading does (tab, Windows text), so a name's case still tells
    its words apart, and a .tsv file's table is named for its stem."""
    folder = tmp_path / "ward_export"
    folder.mkdir()
    rows = "".join(f"{i}\t2100-01-{i % 28 + 1:02d} 08:00:00\tStation Süd – {i % 3}\n" for i in range(1, 40))
    (folder / "WardStays.tsv").write_bytes(("StayNo\tAdmitDateTime\tWardName\n" + rows).encode("cp1252"))
    out = tmp_path / "ward.duckdb"
    sources.load("csv", [folder], out)
    with ehr_magic.connect(out) as ehr:
        stays = ehr.knowledge.tables["wardstays"]
        assert "admit date/time" in stays.columns["admitdatetime"], stays.columns["admitdatetime"]
        assert "ward name" in stays.columns["wardname"], stays.columns["wardname"]
        assert stays.row.startswith("One row per ward stay."), stays.row
        assert ehr.sql("SELECT DISTINCT wardname FROM wardstays ORDER BY 1")["wardname"].to_list() == [
            "Station Süd – 0", "Station Süd – 1", "Station Süd – 2"]


def test_a_folder_of_parquet_parts_is_one_table_and_a_delta_table_is_refused(tmp_path: Path) -> None:
    """Spark's, Hive's and pyarrow's exports write a table as a folder of parts (partition folders
    such as year=2023 become a column); a folder of different tables is not one, and a Delta
    table, whose parts include rows it has since deleted, is refused in one sentence."""
    import polars as pl
    import pyarrow.parquet as pq

    lake = tmp_path / "lake"
    lake.mkdir()
    labs = pl.DataFrame({"PatientId": [i % 50 + 1 for i in range(3000)], "Test": ["Hb", "Na", "K"] * 1000,
                         "Taken": [dt.datetime(2023, 1, 1) + dt.timedelta(hours=3 * i) for i in range(3000)]})
    pq.write_to_dataset(labs.with_columns(year=pl.col("Taken").dt.year()).to_arrow(), lake / "lab_results",
                        partition_cols=["year"])
    spark = lake / "patients.parquet"  # Spark names the folder as a file, with bookkeeping beside the parts
    spark.mkdir()
    patients = pl.DataFrame({"PatientId": list(range(1, 51)), "Sex": ["F", "M"] * 25})
    patients[:25].write_parquet(spark / "part-00000-a1.snappy.parquet")
    patients[25:].write_parquet(spark / "part-00001-a1.snappy.parquet")
    (spark / "_SUCCESS").write_text("")
    (spark / ".part-00000-a1.snappy.parquet.crc").write_text("crc")
    (lake / "hosp").mkdir()  # different tables, not the parts of one
    pl.DataFrame({"a": [1]}).write_parquet(lake / "hosp" / "one.parquet")
    pl.DataFrame({"b": ["x"]}).write_parquet(lake / "hosp" / "two.parquet")
    (lake / "icu").mkdir()  # one parquet file among CSV files: a folder of tables too
    pl.DataFrame({"a": [1]}).write_parquet(lake / "icu" / "stays.parquet")
    (lake / "icu" / "events.csv").write_text("a\n1\n")
    (lake / "tests.csv").write_text("Test,TestName\nHb,Hemoglobin\nNa,Sodium\nK,Potassium\n")
    out = tmp_path / "lake.duckdb"
    report = sources.load("csv", [lake], out)
    assert report.tables == {"lab_results": 3000, "patients": 50, "tests": 3}
    with ehr_magic.connect(out) as ehr:
        assert ehr.sql("SELECT year, count(*) AS n FROM lab_results GROUP BY 1 ORDER BY 1").rows() == [
            (2023, 2920), (2024, 80)]
        tables = ehr.knowledge.tables
        assert tables["patients"].row.startswith("One row per patient."), tables["patients"].row
        assert "refers to patients" in tables["lab_results"].columns["patientid"]
        assert "refers to tests" in tables["lab_results"].columns["test"]

    (lake / "encounters" / "_delta_log").mkdir(parents=True)
    pl.DataFrame({"id": [1]}).write_parquet(lake / "encounters" / "part-0.parquet")
    line = one_error_line(run("data", "load", "csv", str(lake), "--out", str(tmp_path / "d.duckdb"), "--quiet"))
    assert line == (f"error: {lake / 'encounters'} is a Delta table, whose parquet files hold rows it has since "
                    "deleted or replaced; export it as plain parquet (Spark: df.write.parquet) or CSV and load that."
                    ), line


def test_a_column_of_only_f_is_text_and_true_false_columns_are_booleans(tmp_path: Path) -> None:
    """DuckDB's reader takes a lone 'F' for false: a cohort of women's sex column stays 'F'."""
    folder = tmp_path / "cohort"
    folder.mkdir()
    (folder / "women.csv").write_text("id,sex,smoker,consented,active\n1,F,T,yes,t\n2,F,F,no,f\n3,F,,yes,t\n")
    sources.load("csv", [folder], tmp_path / "c.duckdb")
    with duckdb.connect(str(tmp_path / "c.duckdb"), read_only=True) as con:
        assert con.execute("SELECT * FROM women ORDER BY id").fetchall() == [
            (1, "F", True, True, True), (2, "F", False, False, False), (3, "F", None, True, True)]


def test_dates_written_as_spreadsheets_and_hospital_systems_write_them_are_dates(tmp_path: Path) -> None:
    """US times ('3/1/2024 2:05 PM'), European dates ('01.03.2024', '31/12/2023 09:30'), Oracle's
    '01-MAR-2024' and two-digit years ('3/1/24', which DuckDB alone reads as the year 24)."""
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "visits.csv").write_text(
        "id,admitted,seen,born,ward_day,uk_time,code\n"
        "1,3/1/2024 14:05,3/1/2024 2:05 PM,3/1/24,01.03.2024,31/12/2023 09:30,1.2\n"
        "2,12/31/2023 9:30,12/31/2023 9:30 AM,12/31/23,31.12.2023,1/1/2024 00:00,1.3\n"
        "3,1/15/2024 23:59,,1/15/69,15.01.2024,15/01/2024 23:59,2.0\n"
        "4,1/16/2024,1/16/2024 12:00 AM,1/16/05,16-JAN-2024,16/01/2024 08:00,2.1\n")
    report = sources.load("csv", [folder], tmp_path / "e.duckdb")
    assert report.now == "2024-03-01 14:05:00"
    with duckdb.connect(str(tmp_path / "e.duckdb"), read_only=True) as con:
        types = dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name = 'visits'").fetchall())
        assert types == {"id": "BIGINT", "admitted": "TIMESTAMP", "seen": "TIMESTAMP", "born": "DATE",
                         "ward_day": "VARCHAR", "uk_time": "TIMESTAMP", "code": "DOUBLE"}  # one Oracle date
        rows = con.execute("SELECT admitted, seen, born, uk_time FROM visits ORDER BY id").fetchall()
    assert rows == [
        (dt.datetime(2024, 3, 1, 14, 5), dt.datetime(2024, 3, 1, 14, 5), dt.date(2024, 3, 1),
         dt.datetime(2023, 12, 31, 9, 30)),
        (dt.datetime(2023, 12, 31, 9, 30), dt.datetime(2023, 12, 31, 9, 30), dt.date(2023, 12, 31),
         dt.datetime(2024, 1, 1)),
        (dt.datetime(2024, 1, 15, 23, 59), None, dt.date(1969, 1, 15), dt.datetime(2024, 1, 15, 23, 59)),
        (dt.datetime(2024, 1, 16), dt.datetime(2024, 1, 16), dt.date(2005, 1, 16), dt.datetime(2024, 1, 16, 8))]


def test_a_report_title_above_the_header_row_is_skipped(tmp_path: Path) -> None:
    """Lab systems and spreadsheets export reports: a title and notes (padded with delimiters by a
    spreadsheet) above the header row, which is the first line as wide as the rows under it."""
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "labs.csv").write_text("Lab results report\r\nGenerated: 2024-03-01 08:00, by LIS\r\n\r\n"
                                     "patient_id,test,value\r\n1,Hb,12.5\r\n2,Na,140\r\n")
    (folder / "wards.csv").write_text("Ward census;;\nid;ward;beds\n1;A;10\n2;B;12,5\n")
    (folder / "plain.csv").write_text("id,a,b\n1,2,3\n4,5,6\n")  # a header that is the first line stays it
    sources.load("csv", [folder], tmp_path / "r.duckdb")
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as con:
        assert con.execute("SELECT * FROM labs ORDER BY 1").fetchall() == [(1, "Hb", 12.5), (2, "Na", 140.0)]
        assert con.execute("SELECT * FROM wards ORDER BY 1").fetchall() == [(1, "A", 10.0), (2, "B", 12.5)]
        assert con.execute("SELECT * FROM plain ORDER BY 1").fetchall() == [(1, 2, 3), (4, 5, 6)]
    with ehr_magic.connect(tmp_path / "r.duckdb") as ehr:
        assert list(ehr.columns("labs")) == ["patient_id", "test", "value"]


def test_a_report_footer_below_the_last_row_is_left_out_and_said(tmp_path: Path) -> None:
    """Query tools and report writers add lines below the rows ('(299 rows affected)', 'Total: 2'),
    which made the file fail to load; a last row with as many fields as the header stays, whatever
    it holds, and so does a ragged last row that is only a number (it still fails, as it should)."""
    folder = tmp_path / "exports"
    folder.mkdir()
    rows = "".join(f"{i},Sodium,{130 + i % 9},2024-01-{1 + i % 28:02d} 08:00\r\n" for i in range(1, 300))
    (folder / "labs.csv").write_text("patient_id,test,value,taken\r\n" + rows + "\r\n(299 rows affected)\r\n",
                                     newline="")
    (folder / "wards.csv").write_bytes("ward;beds;price\nA;10;5,5 €\nB;12;7 €\n;;\nTotal: 2 wards\n"
                                       "Printed by Bettenplanung 4.2\n".encode("cp1252"))
    (folder / "stays.csv").write_text("id,ward,note\n1,A,\n2,B,Total\n")  # a last row, not a footer
    out = tmp_path / "f.duckdb"
    done = run("data", "load", "csv", str(folder), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"note: the last lines of {folder / 'labs.csv'} ('(299 rows affected)') are a report's footer" \
        in done.stderr, done.stderr
    assert "('Total: 2 wards / Printed by Bettenplanung 4.2')" in done.stderr
    with duckdb.connect(str(out), read_only=True) as con:
        assert con.execute("SELECT count(*), max(patient_id) FROM labs").fetchall() == [(299, 299)]
        assert con.execute("SELECT * FROM wards ORDER BY 1 NULLS LAST").fetchall() == [
            ("A", 10, "5,5 €"), ("B", 12, "7 €"), (None, None, None)]
        assert con.execute("SELECT * FROM stays ORDER BY 1").fetchall() == [(1, "A", None), (2, "B", "Total")]
    with ehr_magic.connect(out) as ehr:
        assert any(rule == "The last lines of file labs.csv ('(299 rows affected)') are a report's footer, not rows; "
                   "they were not loaded." for rule in ehr.knowledge.conventions), ehr.knowledge.conventions
    ragged = tmp_path / "ragged"
    ragged.mkdir()
    (ragged / "ids.csv").write_text("id,name\n1,a\n2\n")
    line = one_error_line(run("data", "load", "csv", str(ragged), "--out", str(tmp_path / "g.duckdb"), "--quiet"))
    assert "different number of fields" in line, line


def test_dates_kept_as_yyyymmdd_numbers_are_described_as_dates(tmp_path: Path) -> None:
    """Warehouses keep dates as integer keys (20240301): the drafted description says so and how to
    read one as a date, which works as written, and the clock is the latest of them; an id that
    merely looks like one stays an id."""
    folder = tmp_path / "warehouse"
    folder.mkdir()
    rows = "".join(f"{i},{1000 + i % 40},2024{1 + i % 12:02d}{1 + i % 28:02d},19{40 + i % 10}0{1 + i % 3}15\n"
                   for i in range(1, 200))
    (folder / "enc_fact.csv").write_text("enc_id,pt_id,adm_dt_key,birth_date_key\n" + rows)
    out = tmp_path / "w.duckdb"
    sources.load("csv", [folder], out)
    with ehr_magic.connect(out) as ehr:
        columns = ehr.knowledge.tables["enc_fact"].columns
        assert columns["adm_dt_key"] == ("BIGINT, admission date key, dates written as YYYYMMDD numbers, 2024-01-01 "
                                         "to 2024-12-28 (as a date: strptime(adm_dt_key::VARCHAR, '%Y%m%d')).")
        assert "dates written as YYYYMMDD numbers, 1940-01-15 to 1949-03-15" in columns["birth_date_key"]
        assert "YYYYMMDD" not in columns["enc_id"] and "YYYYMMDD" not in columns["pt_id"]
        assert ehr.sql("SELECT max(strptime(adm_dt_key::VARCHAR, '%Y%m%d')) AS d FROM enc_fact").item() == \
            dt.datetime(2024, 12, 28)
        assert ehr.now == dt.datetime(2024, 12, 28)  # no DATE column: the clock is the latest date key
