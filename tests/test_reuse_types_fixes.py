"""Bugs the type check of ``ehr_magic.reuse`` showed.

A column of more than 300k distinct values (a full OMOP vocabulary's ``concept.concept_name``,
a vocabulary column of the OMOP knowledge file) is indexed by linking as a ``LargeVocabulary``:
its values sit in one Arrow column and have no normal forms. Reuse's value index sliced and
zipped them as a ``Vocabulary``'s, so building a reuse index on such a database failed.
"""

from __future__ import annotations

import polars as pl

from ehr_magic.linking.large_vocabulary import LargeVocabulary
from ehr_magic.linking.lookup import Vocabulary
from ehr_magic.reuse.values import ValueDetector, VocabularyIndex

CONCEPT_NAMES = ["Essential hypertension", "Type 2 diabetes mellitus", "Aspirin 81 MG Oral Tablet", "X"]


class _ConceptDatabase:
    """The little of a database the value index reads: one text column and its linking index."""

    def __init__(self, large: bool) -> None:
        self.large = large
        self.clock = None

    def columns(self, table: str) -> dict[str, str]:
        return {"concept_id": "BIGINT", "concept_name": "VARCHAR"}

    def vocabulary(self, table: str, column: str) -> Vocabulary | LargeVocabulary:
        values = sorted(CONCEPT_NAMES)
        return LargeVocabulary.build(pl.Series(values)) if self.large else Vocabulary.build(values)


def _index(large: bool) -> VocabularyIndex:
    index = VocabularyIndex(_ConceptDatabase(large))  # type: ignore[arg-type]  # a stand-in, not a whole database
    assert index.add_column("concept", "concept_name")
    return index


def test_a_column_indexed_as_a_large_vocabulary_is_indexed_for_reuse() -> None:
    index = _index(large=True)
    assert index.find("essential HYPERTENSION") == [("concept", "concept_name", "Essential hypertension")]
    assert index.exists("concept", "concept_name", "Aspirin 81 MG Oral Tablet")
    assert index.longest == 5


def test_a_large_vocabulary_gives_the_entries_a_small_one_gives() -> None:
    large, small = _index(large=True), _index(large=False)
    assert large.words() == small.words()
    assert large.longest == small.longest
    for name in CONCEPT_NAMES:
        assert large.find(name) == small.find(name)


def test_the_detector_finds_a_value_of_a_large_vocabulary_in_a_question() -> None:
    ehr = _ConceptDatabase(large=True)
    detector = ValueDetector(ehr, _index(large=True))  # type: ignore[arg-type]  # a stand-in database
    found = detector.detect("How many patients have type 2 diabetes mellitus?")
    assert [(v.type, v.value) for v in found.vocab] == [("vocab:concept.concept_name", "Type 2 diabetes mellitus")]
