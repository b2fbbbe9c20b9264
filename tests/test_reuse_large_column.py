"""Reuse on a database with a lookup column of more than ``LARGE`` distinct values (a full OMOP
vocabulary's concept names): linking indexes such a column as a ``LargeVocabulary``, and reuse's
exact value index must read it as it reads a small one, not fail building.

On the EHRSQL database, with ``LARGE`` lowered so that the ICD diagnosis titles count as large."""

from __future__ import annotations

from pathlib import Path

import pytest

import ehr_magic
from ehr_magic.linking import large_vocabulary
from ehr_magic.linking.large_vocabulary import LargeVocabulary
from ehr_magic.reuse.values import ValueDetector, VocabularyIndex

COLUMN = ("d_icd_diagnoses", "long_title")


@pytest.fixture()
def indexes(ehrsql_db: Path, monkeypatch: pytest.MonkeyPatch,
            tmp_path: Path) -> tuple[VocabularyIndex, VocabularyIndex]:
    """The reuse index of the titles built from a small vocabulary, then from a large one."""
    monkeypatch.setenv("EHR_MAGIC_CACHE_DIR", str(tmp_path / "cache"))
    with ehr_magic.connect(ehrsql_db) as ehr:
        small = VocabularyIndex(ehr)
        assert small.add_column(*COLUMN)
    monkeypatch.setattr(large_vocabulary, "LARGE", 1000)
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert isinstance(ehr.vocabulary(*COLUMN), LargeVocabulary)
        large = VocabularyIndex(ehr)
        assert large.add_column(*COLUMN)
    return small, large


def test_a_large_column_gives_reuse_the_entries_a_small_one_gives(indexes) -> None:
    small, large = indexes
    assert large.words() == small.words()
    assert large.longest == small.longest
    for title in ("essential (primary) hypertension", "Acute kidney failure, unspecified", "sepsis"):
        assert large.find(title) == small.find(title), title
    assert large.find("ACUTE KIDNEY FAILURE, UNSPECIFIED") == [(*COLUMN, "acute kidney failure, unspecified")]


def test_reuse_finds_a_title_of_a_large_column_in_a_question(ehrsql_db: Path, indexes) -> None:
    _, large = indexes
    with ehr_magic.connect(ehrsql_db) as ehr:
        found = ValueDetector(ehr, large).detect("How many patients had acute kidney failure, unspecified in 2100?")
    assert ("vocab:d_icd_diagnoses.long_title", "acute kidney failure, unspecified") in \
        [(v.type, v.value) for v in found.vocab]
