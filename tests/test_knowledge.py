"""The dataset knowledge: packaged descriptions match the real demo data, and the loader
validates files, honours override directories and explains its errors."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import os
import re
import sqlite3
from pathlib import Path

import pytest

from datapaths import CHARTEVENTS_RECONSTRUCTED, EHRSQL_SQLITE, EICU_DEMO, MIMIC_III_DEMO, MIMIC_IV_DEMO, need_shared
from ehr_magic.knowledge import model as knowledge
from ehr_magic.knowledge.model import Knowledge, TableInfo
from ehr_magic.errors import EhrMagicError

CHARTEVENTS = CHARTEVENTS_RECONSTRUCTED / "icu" / "chartevents.csv.gz"

PACKAGED = ["ehrsql_mimic_iv", "eicu", "mimic_iii", "mimic_iv", "omop_cdm"]


def _need(path: Path) -> Path:
    need_shared(path)
    return path


def _csv_header(path: Path) -> list[str]:
    with gzip.open(path, "rt", newline="", encoding="utf-8") as handle:
        return [name.lower() for name in next(csv.reader(handle))]


def _csv_tables(folder: Path) -> dict[str, Path]:
    """Lower-cased table name -> file, for every ``*.csv.gz`` directly in ``folder``."""
    return {path.name.split(".")[0].lower(): path for path in sorted(folder.glob("*.csv.gz"))}


# -- packaged files ---------------------------------------------------------------------------


def test_available_lists_the_packaged_schemas() -> None:
    assert knowledge.available() == PACKAGED


@pytest.mark.parametrize("schema", PACKAGED)
def test_every_packaged_schema_loads(schema: str) -> None:
    info = knowledge.load(schema)
    assert isinstance(info, Knowledge)
    assert info.schema == schema
    assert isinstance(info.version, int) and info.title and info.introduction.strip()
    assert info.conventions, "each schema states at least one convention"
    assert info.tables
    for name, table in info.tables.items():
        assert isinstance(table, TableInfo) and table.name == name
        assert table.row.strip() and table.columns
        assert all(isinstance(text, str) and text.strip() for text in table.columns.values())
    assert knowledge.load(schema) is info, "loading is cached"


@pytest.mark.parametrize("schema", PACKAGED)
def test_joins_and_vocabulary_name_described_tables_and_columns(schema: str) -> None:
    info = knowledge.load(schema)
    for table in info.tables.values():
        assert len(table.join_targets) == len(set(table.join_targets))
        for target in table.join_targets:
            assert target in info.tables, f"{table.name} joins unknown table {target}"
        for column in table.vocabulary:
            assert column in table.columns
    pairs = info.vocabulary_columns()
    assert pairs and all(column in info.tables[table].columns for table, column in pairs)


# -- the descriptions match the data ----------------------------------------------------------


def test_ehrsql_descriptions_match_the_sqlite_exactly() -> None:
    con = sqlite3.connect(_need(EHRSQL_SQLITE))
    try:
        real = {
            table: [row[1] for row in con.execute(f"PRAGMA table_info({table})")]
            for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    finally:
        con.close()
    info = knowledge.load("ehrsql_mimic_iv")
    assert set(info.tables) == set(real)
    assert len(real) == 17
    for table, columns in real.items():
        assert set(info.tables[table].columns) == set(columns), table


def test_ehrsql_example_values_and_vital_labels_exist() -> None:
    con = sqlite3.connect(_need(EHRSQL_SQLITE))
    info = knowledge.load("ehrsql_mimic_iv")
    try:
        for table, column in info.vocabulary_columns():
            for example in re.findall(r"'([^']+)'", info.tables[table].columns[column]):
                found = con.execute(f'SELECT count(*) FROM {table} WHERE "{column}" = ?', (example,)).fetchone()[0]
                assert found, f"{table}.{column} has no value {example!r}"
        vitals = next(rule for rule in info.conventions if rule.startswith("Vital signs"))
        labels = re.findall(r"'([a-z0-9 ()%]+)'", vitals)
        labels = [label for label in labels if label != "chartevents"]
        assert len(labels) == 9
        for label in labels:
            rows = con.execute(
                "SELECT count(*) FROM chartevents JOIN d_items USING (itemid) "
                "WHERE d_items.label = ? AND d_items.linksto = 'chartevents'",
                (label,),
            ).fetchone()[0]
            assert rows, f"no chartevents rows for {label!r}"
    finally:
        con.close()


def test_mimic_iv_descriptions_match_the_demo_csv_headers() -> None:
    _need(MIMIC_IV_DEMO)
    files = {
        name: (module, path)
        for module in ("hosp", "icu")
        for name, path in _csv_tables(MIMIC_IV_DEMO / module).items()
    }
    files["chartevents"] = ("icu", _need(CHARTEVENTS))
    info = knowledge.load("mimic_iv")
    assert len(files) == 31
    assert set(info.tables) == set(files)
    for table, (module, path) in files.items():
        described = info.tables[table]
        assert described.module == module, table
        assert set(described.columns) == set(_csv_header(path)), table


@pytest.mark.parametrize(("schema", "folder"), [("eicu", EICU_DEMO), ("mimic_iii", MIMIC_III_DEMO)])
def test_demo_tables_are_described_with_real_columns(schema: str, folder: Path) -> None:
    files = _csv_tables(_need(folder))
    info = knowledge.load(schema)
    assert set(files) <= set(info.tables)
    # The eICU knowledge describes the three official tables the open demo snapshot lacks.
    assert set(info.tables) - set(files) <= {"lab", "nursecharting", "vitalperiodic"}
    for table, path in files.items():
        header = set(_csv_header(path))
        unknown = set(info.tables[table].columns) - header
        assert not unknown, f"{schema}.{table} describes columns not in the file: {sorted(unknown)}"


# -- prompt text ------------------------------------------------------------------------------


def test_overview_is_one_line_per_table() -> None:
    info = knowledge.load("ehrsql_mimic_iv")
    lines = info.overview().splitlines()
    assert lines[0].startswith("Tables of ") and "ehrsql_mimic_iv" in lines[0]
    assert [line.split(":")[0] for line in lines[1:]] == list(info.tables)
    assert "cost: One row per priced event" in info.overview()
    assert "admissions: One row per hospital visit." in info.overview()


@pytest.mark.parametrize("schema", PACKAGED)
def test_overviews_stay_compact(schema: str) -> None:
    tokens = len(knowledge.load(schema).overview()) / 4
    assert tokens < 2_500
    if schema == "ehrsql_mimic_iv":
        assert tokens < 1_000


def test_detail_lists_columns_and_joins_of_the_named_tables_only() -> None:
    info = knowledge.load("ehrsql_mimic_iv")
    text = info.detail(["cost", "ADMISSIONS", "cost"])
    assert text.count("## cost [hosp]") == 1
    assert text.index("## cost") < text.index("## admissions")
    assert "- event_id: row_id of the event in the event_type table." in text
    assert "- dischtime: Discharge time; empty while the patient is still in hospital." in text
    assert "joins: admissions ON hadm_id; diagnoses_icd, procedures_icd, labevents, prescriptions ON " in text
    assert "look up values of: admission_type" in text
    assert "## chartevents" not in text and "- valuenum" not in text
    assert info.detail([]) == ""


def test_joins_on_a_column_of_the_same_name_are_said_once_for_all_their_tables() -> None:
    info = knowledge.load("ehrsql_mimic_iv")
    admissions = info.detail(["admissions"])
    assert "joins: icustays, diagnoses_icd, procedures_icd, labevents" in admissions
    assert admissions.count("ON hadm_id") == 1
    # the column's own meaning says the join to patients ("joins to patients"): not said again
    assert "- subject_id: Patient identifier; joins to patients." in admissions and "patients ON" not in admissions
    # joins that differ only by the joined table's name (a row pointing at rows of several tables) are said
    # once, <table> standing for each, in the place of the first
    assert ("joins: admissions ON hadm_id; diagnoses_icd, procedures_icd, labevents, prescriptions ON "
            "event_id = <table>.row_id AND event_type = '<table>'") in info.detail(["cost"])
    # a join with its own condition stays whole, in its place
    joins = ["patients ON subject_id", "labevents ON event_id = labevents.row_id AND event_type = 'labevents'",
             "admissions ON cost.hadm_id = admissions.hadm_id AND cost.kind = 'visit'"]
    assert knowledge.grouped_joins("cost", joins) == "; ".join(joins)


def test_one_line_tables_leave_out_the_joins_said_before_them() -> None:
    info = knowledge.load("ehrsql_mimic_iv")
    lines = info.brief(["d_labitems", "labevents"], described=["admissions"]).splitlines()
    assert lines[0].endswith("Joins: labevents ON itemid.")
    # admissions (in full) and d_labitems (the line before) already say how labevents joins them
    assert "Joins: cost ON row_id = cost.event_id" in lines[1]
    assert "d_labitems ON" not in lines[1] and "admissions ON" not in lines[1]
    alone = info.brief(["labevents"])
    assert "d_labitems ON itemid" in alone and "admissions ON hadm_id" in alone


def test_full_descriptions_say_a_join_once_by_the_first_of_its_two_tables() -> None:
    text = knowledge.load("ehrsql_mimic_iv").detail(["labevents", "d_labitems"])
    assert "- itemid: Test; joins to d_labitems." in text and "joins: admissions ON hadm_id" in text
    assert "d_labitems ON" not in text  # said by labevents' itemid line
    d_labitems = text[text.index("## d_labitems"):]
    assert "joins:" not in d_labitems and "look up values of: label" in d_labitems


def test_a_join_the_column_line_already_says_is_not_said_again() -> None:
    info = TableInfo(
        "lab_results", None, "One row per lab result.", "",
        {"patient_id": "BIGINT, refers to patient_demographics.patient_id (a patient id).",
         "test_key": "BIGINT, refers to lab_test_types.test_id.",
         "visit": "BIGINT, a visit id.",
         "unit": "VARCHAR, 32 distinct terms, find them with ehr.lookup.",
         "flag": "VARCHAR, 2 values ('abnormal', 'delta')."},
        joins=("patient_demographics ON lab_results.patient_id = patient_demographics.patient_id",
               "lab_test_types ON lab_results.test_key = lab_test_types.test_id",
               "hospital_admissions ON lab_results.visit = hospital_admissions.admission_id",
               "ranges ON lab_results.test_key = ranges.test_id AND lab_results.unit = ranges.unit"),
        vocabulary=("unit", "flag"))
    text = info.detail()
    # the lines of patient_id and test_key name the table and key they join: each join said there only
    assert "patient_demographics ON" not in text and "lab_test_types ON" not in text
    # a column that does not name its table, and a join on two columns, keep their joins
    assert "joins: hospital_admissions ON lab_results.visit = hospital_admissions.admission_id; ranges ON " in text
    # the key named otherwise than the column must be named too: the table alone does not say the join
    assert info.said_by_column("lab_test_types ON lab_results.test_key = lab_test_types.test_id")
    assert not dataclasses.replace(info, columns={**info.columns, "test_key": "BIGINT, see lab_test_types."}
                                   ).said_by_column("lab_test_types ON lab_results.test_key = lab_test_types.test_id")
    # a key named as the column: the table alone says it (as drafted now: "refers to patient_demographics")
    assert dataclasses.replace(info, columns={**info.columns, "patient_id": "BIGINT, refers to patient_demographics."}
                               ).said_by_column(info.joins[0])
    # a lookup column whose line sends it to ehr.lookup, or quotes every value it holds, is not listed
    # again; one whose line quotes some of its values is
    assert "look up values of" not in text
    some = dataclasses.replace(info, columns={**info.columns,
                                              "flag": "VARCHAR, 3 values ('abnormal', 'delta' and 1 more)."})
    assert "look up values of: flag" in some.detail()
    packaged = dataclasses.replace(info, columns={**info.columns, "flag": "Flag, 'abnormal' or 'delta'."})
    assert "look up values of" not in packaged.detail()
    assert "look up values of: flag" in dataclasses.replace(
        info, columns={**info.columns, "flag": "Flag, e.g. 'abnormal' or 'delta'."}).detail()



def test_a_drafted_join_on_columns_of_the_same_name_reads_as_the_packaged_ones() -> None:
    joins = ["patient_demographics ON lab_results.patient_id = patient_demographics.patient_id",
             "hospital_admissions ON hospital_admissions.admission_id = lab_results.admission_id",
             "lab_test_types ON lab_results.test_key = lab_test_types.test_id"]
    assert knowledge.grouped_joins("lab_results", joins) == (
        "patient_demographics ON patient_id; hospital_admissions ON admission_id; "
        "lab_test_types ON lab_results.test_key = lab_test_types.test_id")  # different names: kept whole
    # a third table's column is not this table's: kept whole
    other = "icu_stays ON hospital_admissions.admission_id = icu_stays.admission_id"
    assert knowledge.grouped_joins("lab_results", [other]) == other


def test_guide_carries_introduction_and_conventions() -> None:
    guide = knowledge.load("ehrsql_mimic_iv").guide()
    assert "2100-12-31 23:59:00" in guide
    assert "dischtime IS NULL" in guide
    assert "\n- " in guide


def test_unknown_table_error_suggests_and_lists() -> None:
    info = knowledge.load("mimic_iv")
    with pytest.raises(EhrMagicError, match=r"Did you mean 'labevents'\?.*Described tables: patients, admissions"):
        info.table("labevent")
    with pytest.raises(EhrMagicError, match="No table 'nothing'"):
        info.detail(["admissions", "nothing"])


def test_unknown_schema_error_lists_known_schemas() -> None:
    with pytest.raises(EhrMagicError, match=r"No knowledge file for schema 'omop'; known: ehrsql_mimic_iv, eicu"):
        knowledge.load("omop")


# -- user files -------------------------------------------------------------------------------

MINIMAL = """\
schema: {schema}
version: 2
title: My own {schema}
introduction: A tiny test schema.
tables:
  people:
    row: One row per person.
    columns:
      person_id: Person identifier.
      name: Name.
    joins: [visits ON person_id]
    vocabulary: [name]
  visits:
    row: One row per visit.
    columns:
      person_id: Person identifier.
"""


def test_extra_dir_replaces_a_packaged_schema_and_adds_new_ones(tmp_path: Path) -> None:
    (tmp_path / "mimic_iv.yaml").write_text(MINIMAL.format(schema="mimic_iv"))
    (tmp_path / "clinic.yml").write_text(MINIMAL.format(schema="clinic"))
    replaced = knowledge.load("mimic_iv", extra_dirs=[tmp_path])
    assert replaced.title == "My own mimic_iv" and list(replaced.tables) == ["people", "visits"]
    assert replaced.source == str((tmp_path / "mimic_iv.yaml").resolve())
    assert knowledge.load("mimic_iv").title.startswith("MIMIC-IV 2.2"), "the packaged file is untouched"
    assert knowledge.load("clinic", extra_dirs=[str(tmp_path)]).conventions == ()
    assert knowledge.available([tmp_path]) == sorted([*PACKAGED, "clinic"])
    assert replaced.vocabulary_columns() == [("people", "name")]


def test_first_extra_dir_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (first / "clinic.yaml").write_text(MINIMAL.format(schema="clinic").replace("My own", "First"))
    (second / "clinic.yaml").write_text(MINIMAL.format(schema="clinic").replace("My own", "Second"))
    assert knowledge.load("clinic", extra_dirs=[first, second]).title.startswith("First")


def test_edited_user_file_is_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "clinic.yaml"
    path.write_text(MINIMAL.format(schema="clinic"))
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert knowledge.load("clinic", extra_dirs=[tmp_path]).version == 2
    path.write_text(MINIMAL.format(schema="clinic").replace("version: 2", "version: 3"))
    os.utime(path, ns=(2_000_000_000, 2_000_000_000))
    assert knowledge.load("clinic", extra_dirs=[tmp_path]).version == 3


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("schema: clinic\nversion: 1\ntitle: [unclosed\n", r"not valid YAML: .*line 3"),
        ("- just\n- a list\n", "the top level must be a mapping"),
        (MINIMAL.format(schema="clinic").replace("title: My own clinic\n", ""), r"lacks required key\(s\): title"),
        (MINIMAL.format(schema="other"), "declares schema 'other' but is named 'clinic'"),
        (MINIMAL.format(schema="clinic").replace("version: 2", "version: two"), "version must be an integer"),
        (MINIMAL.format(schema="clinic").replace("    row: One row per visit.\n", ""),
         r"table 'visits' lacks required key\(s\): row"),
        (MINIMAL.format(schema="clinic").replace("      name: Name.", "      name: yes"),
         r"table 'people' column 'name' must be non-empty text, not True \(quote it in YAML\)"),
        (MINIMAL.format(schema="clinic").replace("visits ON person_id", "doctors ON person_id"),
         "join 'doctors ON person_id' names table 'doctors', which is not described"),
        (MINIMAL.format(schema="clinic").replace("visits ON person_id", "visits by person_id"),
         "should read '<table> ON <condition>'"),
        (MINIMAL.format(schema="clinic").replace("vocabulary: [name]", "vocabulary: [surname]"),
         "vocabulary column 'surname' is not among its columns"),
        (MINIMAL.format(schema="clinic").replace("    joins:", "    colums: {}\n    joins:"),
         r"table 'people' has unknown key\(s\) colums"),
        (MINIMAL.format(schema="clinic").replace("tables:", "hierarchy: visits\ntables:"),
         "hierarchy must be a mapping of table, broader and narrower"),
        (MINIMAL.format(schema="clinic").replace(
            "tables:", "hierarchy: {table: visits, broader: person_id, narrower: parent_id}\ntables:"),
         "hierarchy column 'parent_id' is not among the columns of 'visits'"),
        (MINIMAL.format(schema="clinic").replace("    row: One row per visit.", "    row: One row per visit.\n"
                                                 "    derived_from: stays"),
         "table 'visits': derived_from names table 'stays', which is not described"),
        (MINIMAL.format(schema="clinic").replace("    row: One row per visit.", "    row: One row per visit.\n"
                                                 "    by_hierarchy: often"),
         "table 'visits': by_hierarchy must be true or false"),
    ],
)
def test_malformed_user_file_names_the_file_and_the_problem(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "clinic.yaml"
    path.write_text(text)
    with pytest.raises(EhrMagicError, match=problem) as caught:
        knowledge.load("clinic", extra_dirs=[tmp_path])
    assert str(path.resolve()) in str(caught.value)


def test_hierarchy_statements_are_read_and_written() -> None:
    info = knowledge.load("omop_cdm")
    assert (info.hierarchy.table, info.hierarchy.broader, info.hierarchy.narrower) == (
        "concept_ancestor", "ancestor_concept_id", "descendant_concept_id")
    assert info.tables["drug_exposure"].by_hierarchy and not info.tables["condition_occurrence"].by_hierarchy
    assert info.tables["condition_era"].derived_from == "condition_occurrence"
    assert knowledge.parse(info.to_yaml(), source="export", expected_schema="omop_cdm") == info
    assert info.restricted_to([t for t in info.tables if t != "concept_ancestor"]).hierarchy is None


def test_missing_extra_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EhrMagicError, match="does not exist"):
        knowledge.load("mimic_iv", extra_dirs=[tmp_path / "nowhere"])
