"""Lookups in columns of millions of values: ``LargeVocabulary`` finds what ``Vocabulary`` finds, on
real values (the ICD titles of the EHRSQL database); a connection indexes a column past ``LARGE``
values with it, keeps a vocabulary column's index on disk for the next connection (never a
patient-level column's), and generated code can look up a column of more values than its row cap.
A question's first prompt links the same stored values whether its columns are large or not."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import ehr_magic
from ehr_magic.linking import large_vocabulary
from ehr_magic.linking.clinical_vocabulary import clinical_vocabulary
from ehr_magic.linking.large_vocabulary import LargeVocabulary
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.safety import limits

QUERIES = ("chronic kidney disease", "hypertension", "COPD", "sepsis", "atrial fibrilation", "pneumonia due to",
           "CKD stage 3", "hb", "type 2 diabetes mellitus without complications")


@pytest.fixture(scope="module")
def titles(ehrsql_db: Path) -> list[str]:
    with ehr_magic.connect(ehrsql_db) as ehr:
        return ehr._distinct_values("d_icd_diagnoses", "long_title")


def test_large_vocabulary_finds_what_vocabulary_finds(titles: list[str]) -> None:
    small, large = Vocabulary.build(titles), LargeVocabulary.build(pl.Series(titles))
    assert len(large.values) == len(small.values) > 100_000
    assert list(large.words) == sorted(small.words)
    assert np.allclose(large.value_weights(), small.value_weights())  # what table choice weighs values by
    for query in QUERIES:
        alternatives = clinical_vocabulary().alternatives(query)
        expected, found = small.match(query, 5, alternatives), large.match(query, 5, alternatives)
        assert found[0] == expected[0], query
        assert len(set(found) & set(expected)) >= 4, query
    assert large.match("qqqzzzxxy", 5) == []


def _index_fields(vocabulary: Vocabulary) -> tuple:
    arrays = (vocabulary.idf, vocabulary.word_order, *vocabulary.postings)
    return (vocabulary.values, vocabulary.normalised, vocabulary.compact, vocabulary.repeated, vocabulary.words,
            tuple((a.dtype.str, a.tolist()) for a in arrays))


def test_a_short_value_list_is_indexed_in_python_exactly_as_polars_indexes_it(ehrsql_db: Path,
                                                                               titles: list[str]) -> None:
    """Every text column of the EHRSQL database, whole or cut to a few values, and runs of the ICD
    titles (punctuation, repeated spellings): the Python index is the polars one, field by field."""
    from ehr_magic.linking.lookup import _PYTHON_BUILD

    lists = [titles[start:start + _PYTHON_BUILD] for start in range(0, 20_000, 2_500)]
    with ehr_magic.connect(ehrsql_db) as ehr:
        for table, column in ehr.lookup_columns():
            values = ehr._distinct_values(table, column)
            lists += [values[:_PYTHON_BUILD], values[:7]]
    lists += [["T bili", "T-bili", "t bili", "", "  ", "Hb (g/dL)", "hb g dl"], []]
    for values in lists:
        assert _index_fields(Vocabulary._build_in_python(values)) == _index_fields(
            Vocabulary._build_in_polars(values)), values[:3]
    assert len(lists) > 20
    assert isinstance(Vocabulary.build(["final", "preliminary"]).postings[0], np.ndarray)


def test_columns_indexed_together_are_indexed_as_one_by_one(ehrsql_db: Path) -> None:
    """``index_columns`` (what a question's first linking calls) reads many small columns to a
    statement; each index is the one ``vocabulary`` builds alone, and its rows are counted once."""
    with ehr_magic.connect(ehrsql_db) as together, ehr_magic.connect(ehrsql_db) as alone:
        columns = together.lookup_columns()
        together.index_columns(columns)
        assert len(columns) > 10
        for table, column in columns:
            assert _index_fields(together.vocabulary(table, column)) == _index_fields(alone.vocabulary(table, column))
            assert together.indexed_rows(table) == alone.count(table)


def test_a_large_vocabulary_column_is_kept_on_disk_and_read_back(ehrsql_db: Path, titles: list[str], monkeypatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(large_vocabulary, "LARGE", 1000)
    monkeypatch.setenv("EHR_MAGIC_CACHE_DIR", str(tmp_path / "cache"))
    kept = tmp_path / "cache" / "column-indexes"
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert ("d_icd_diagnoses", "long_title") in ehr.lookup_columns()
        first = ehr.lookup("d_icd_diagnoses", "long_title", "acute kidney failure", k=3)
        assert isinstance(ehr.vocabulary("d_icd_diagnoses", "long_title"), LargeVocabulary)
        assert first == [v for v, _ in Vocabulary.build(titles).match("acute kidney failure", 3)]
        assert len(list(kept.iterdir())) == 1
        # a patient-level column (not a lookup column) is indexed in memory only
        assert ("labevents", "charttime") not in ehr.lookup_columns() and ehr.count("labevents") > 1000
        ehr.lookup("labevents", "charttime", "2100-01-01")
        assert len(list(kept.iterdir())) == 1
    with ehr_magic.connect(ehrsql_db) as again:
        queries: list[str] = []
        run = again._engine.query
        again._engine.query = lambda sql, *a, **k: queries.append(sql) or run(sql, *a, **k)
        assert again.lookup("d_icd_diagnoses", "long_title", "acute kidney failure", k=3) == first
        assert not [q for q in queries if "DISTINCT" in q]  # read from disk, not from the database


def test_generated_code_looks_up_a_column_past_its_row_cap(ehrsql_db: Path) -> None:
    with ehr_magic.connect(ehrsql_db) as ehr:
        rows = ehr.count("d_icd_diagnoses")
        with limits.row_cap(100):
            assert rows > 100 and ehr.lookup("d_icd_diagnoses", "long_title", "sepsis", k=1) == ["sepsis"]
            with pytest.raises(limits.ResultTooLargeError):
                ehr.sql("SELECT long_title FROM d_icd_diagnoses")


LINKED = ("What was the first hemoglobin value of patient 10021487?",
          "How many patients were diagnosed with acute kidney failure, unspecified since 2100?",
          "What was the name of the procedure that patient 10021487 received two or more times?",
          "How many patients were given sodium chloride 0.9% in the icu?")


def test_a_question_links_the_same_stored_values_in_a_large_column(ehrsql_db: Path, monkeypatch,
                                                                  tmp_path: Path) -> None:
    from ehr_magic.agent import Agent, context
    from ehr_magic.linking.question import link_question

    monkeypatch.setenv("EHR_MAGIC_CACHE_DIR", str(tmp_path / "cache"))

    def linked() -> list[str]:
        with ehr_magic.connect(ehrsql_db) as ehr:
            for question in LINKED:
                Agent(ehr, None).prompt(question)  # table choice and the prompt read the indexes too
            return [context.linked_values(link_question(ehr, question)) for question in LINKED]

    small = linked()
    monkeypatch.setattr(large_vocabulary, "LARGE", 1000)
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert isinstance(ehr.vocabulary("d_icd_diagnoses", "long_title"), LargeVocabulary)
    assert linked() == small
    assert "d_icd_diagnoses.long_title = 'acute kidney failure, unspecified'" in small[1]
