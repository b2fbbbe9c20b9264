"""Privacy levels: defaults, dictionary columns, masking of feedback, answer descriptions."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

import ehr_magic
from ehr_magic.runtime.executor import ErrorInfo
from ehr_magic.agent.hints import ValueHint
from ehr_magic.db.build import building, write_metadata
from ehr_magic.errors import ConfigError
from ehr_magic.safety.privacy import (
    check_level,
    default_level,
    describe_answer,
    dictionary_columns,
    dictionary_values,
    filter_hints,
    hint_allowed,
    is_dictionary_column,
    mask_error,
    mask_feedback,
    mask_stdout,
)


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


def _tiny(path: Path, **meta: str) -> Path:
    with building(path) as con:
        con.execute("CREATE TABLE patients (subject_id BIGINT, gender VARCHAR)")
        con.execute("INSERT INTO patients VALUES (1, 'f')")
        if meta:
            write_metadata(con, now=dt.datetime(2100, 1, 1), **meta)
    return path


def test_levels_are_checked_with_a_helpful_message() -> None:
    assert check_level("schema") == "schema"
    with pytest.raises(ConfigError, match="choose one of: schema, aggregates, full"):
        check_level("none")


def test_default_level_is_full_only_for_synthetic_and_open_demo_data(ehr, tmp_path: Path) -> None:
    assert default_level(ehr) == "full"  # the EHRSQL demo (source ehrsql-sqlite)
    cases = {
        "credentialed.duckdb": (dict(schema="mimic_iv", source="mimic-iv-csv", dataset="mimic-iv"), "schema"),
        "demo.duckdb": (dict(schema="mimic_iv", source="mimic-iv-csv", dataset="mimic-iv-demo"), "full"),
        "synthetic.duckdb": (dict(schema="mimic_iv", source="synthetic", dataset="synthetic-100"), "full"),
        "unknown.duckdb": ({}, "schema"),
    }
    for name, (meta, expected) in cases.items():
        with ehr_magic.connect(_tiny(tmp_path / name, **meta)) as handle:
            assert default_level(handle) == expected, name


def test_dictionary_columns_come_from_d_tables_and_knowledge_vocabularies(ehr) -> None:
    assert is_dictionary_column(ehr, "d_labitems", "label")
    assert is_dictionary_column(ehr, "d_items", "itemid")  # everything in a d_* table
    assert is_dictionary_column(ehr, "prescriptions", "drug")  # vocabulary in the knowledge file
    assert is_dictionary_column(ehr, "admissions", "insurance")
    assert not is_dictionary_column(ehr, "labevents", "valuenum")
    assert not is_dictionary_column(ehr, "patients", "gender")
    assert not is_dictionary_column(ehr, "admissions", "language")
    pairs = dictionary_columns(ehr)
    assert ("d_labitems", "label") in pairs and not any(t == "patients" for t, _ in pairs)
    values = dictionary_values(ehr)
    assert "rdw" in values and "glucose" in values
    assert hint_allowed(ehr, "full", "patients", "gender") and not hint_allowed(ehr, "schema", "patients", "gender")


def test_hints_about_patient_level_columns_are_dropped(ehr) -> None:
    hints = [ValueHint("RDW", "d_labitems", "label", ("rdw",)), ValueHint("ENGLISH", "admissions", "language", ("x",))]
    assert filter_hints(hints, ehr, "schema") == hints[:1]
    assert filter_hints(hints, ehr, "aggregates") == hints[:1]
    assert filter_hints(hints, ehr, "full") == hints


def test_full_level_changes_nothing(ehr) -> None:
    text = "Could not convert string 'John' to INT32 at 2100-01-01 for 10004235"
    assert mask_feedback(text, "full", ehr) == text


def test_error_text_keeps_its_words_and_the_code_and_masks_data(ehr) -> None:
    code = "answer = ehr.sql(\"SELECT CAST(gender AS INTEGER) FROM patients WHERE subject_id = 10004235\")"
    message = ("Conversion Error: Could not convert string 'secretvalue' to INT32 when casting from source column "
               "gender\n\nLINE 1: SELECT CAST(gender AS INTEGER) FROM patients WHERE subject_id = 10004235 "
               "AND x = hiddenword\n               ^^^^")
    masked = mask_feedback(message, "schema", ehr, code=code)
    assert "Could not convert string '<value>' to INT32 when casting from source column gender" in masked
    assert "LINE 1: SELECT CAST(gender AS INTEGER) FROM patients WHERE subject_id = 10004235 AND <value> = <value>" \
        in masked
    assert "secretvalue" not in masked and "hiddenword" not in masked
    other = mask_feedback("value 55512 on 2133-01-02 10:11:12 and 'rdw' and 'Xq' in line 7", "schema", ehr)
    assert other == "value <n> on <date> and 'rdw' and '<value>' in line 7"  # 'rdw' is a lab name


def test_printed_output_is_masked_strictly(ehr) -> None:
    code = "df = ehr.sql('SELECT subject_id, gender FROM patients LIMIT 3')\nprint('rows:', df.height)\nprint(df)"
    frame = pl.DataFrame({"subject_id": [10004235, 10021487], "gender": ["f", "m"], "note": ["zqalpha", "zqbeta"]})
    stdout = f"rows: 2\n{frame}\n{frame['note']}\n['rdw', 'zqalpha', 'zqbeta']\nJohn Smith visited\n"
    masked = mask_stdout(stdout, "schema", ehr, code)
    assert "rows: <n>" in masked
    assert "columns: subject_id (i64), gender (str), <value> (str)" in masked
    assert "Series: '<value>' [str]" in masked and "not shown" in masked
    assert "['rdw', '<value>' (x2)]" in masked or "['rdw', '<value>', '<value>']" in masked
    assert "<value> visited" not in masked and "visited" not in masked  # free text is hidden
    for secret in ("10004235", "zqalpha", "zqbeta", "John", "Smith"):
        assert secret not in masked


def test_aggregates_show_counts_of_eleven_or_more(ehr) -> None:
    frame = pl.DataFrame({"insurance": ["medicare", "other", "zqfree"], "n": [40, 10, 2],
                          "subject_id": [1, 2, 3]})
    code = "print(frame)"
    aggregated = mask_stdout(str(frame), "aggregates", ehr, code)
    assert "medicare | 40 | <value>" in aggregated  # identifiers are always hidden
    assert "other | <11 | <value>" in aggregated  # a dictionary value stays, its small count does not
    assert "<value> | <11 | <value>" in aggregated and "zqfree" not in aggregated
    assert "counts under 11 are suppressed" in aggregated
    assert "40" not in mask_stdout(str(frame), "schema", ehr, code)


def test_errors_raised_by_the_code_are_masked_strictly(ehr) -> None:
    raised = ErrorInfo("ValueError", "unexpected language Klingon", 2, "raise ValueError(f'unexpected language {x}')")
    masked = mask_error(raised, "schema", ehr, "x = 1\nraise ValueError(f'unexpected language {x}')")
    assert masked.message == "unexpected language <value>" and raised.message.endswith("Klingon")
    library = ErrorInfo("KeyError", "'Klingon'", 1, "answer = d[key]")
    assert mask_error(library, "schema", ehr, "answer = d[key]").message == "'<value>'"
    assert mask_error(library, "full", ehr, "") is library and mask_error(None, "schema", ehr) is None


def test_describe_answer_per_level(ehr) -> None:
    frame = pl.DataFrame({"gender": ["f", "m"], "n": [50, 4]})
    assert describe_answer(frame, "schema", ehr=ehr) == "DataFrame with 2 rows x 2 columns: gender (str), n (i64)"
    aggregated = describe_answer(frame, "aggregates", ehr=ehr)
    assert "50" in aggregated and "<11" in aggregated and "| 4" not in aggregated
    rows = pl.DataFrame({"subject_id": [1, 2], "valuenum": [1.5, 2.5]})
    assert describe_answer(rows, "aggregates", ehr=ehr).startswith("DataFrame with 2 rows x 2 columns: subject_id")
    assert "1.5" in describe_answer(rows, "full")
    assert describe_answer(14.2, "schema") == "a value of type float"
    assert describe_answer("Klingon", "aggregates") == "a string of 7 characters"
    assert describe_answer(pl.Series("v", [1, 2]), "schema") == "Series '<value>' of 2 values (i64)"
    assert describe_answer(pl.Series("v", [1, 2]), "schema", code="v = 1") == "Series 'v' of 2 values (i64)"
    assert describe_answer(frame.lazy(), "schema", ehr=ehr).startswith("LazyFrame with columns gender (str), n (i64)")
    assert describe_answer([1, 2, 3], "schema") == "a list of 3 items"
    assert describe_answer(None, "schema") == "None"
