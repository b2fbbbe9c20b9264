"""Typed values in questions: time expressions, identifiers, vocabulary values,
numbers and aggregates (ehr_magic.reuse.values / timeexpr)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from ehr_magic.db import connect
from ehr_magic.db.clock import Clock
from ehr_magic.reuse.timeexpr import find_times
from ehr_magic.reuse.values import ValueDetector

CLOCK = Clock(dt.datetime(2100, 12, 31, 23, 59, 0))


def only_time(text: str):
    found = find_times(text)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(("text", "type_", "renderings"), [
    ("in 2100", "time:year:in", {"y": "2100", "start": "2100-01-01 00:00:00"}),
    ("since 2100", "time:year:since", {"y": "2100"}),
    ("since 05/2100", "time:month:since", {"ym": "2100-05", "start": "2100-05-01 00:00:00"}),
    ("in march 2100", "time:month:in", {"ym": "2100-03"}),
    ("on 03/04/2100", "time:date:in", {"at_date": "2100-03-04", "md": "03-04"}),
    ("since 2100-06-22", "time:date:since", {"at_date": "2100-06-22"}),
    ("at 2100-06-07 05:00:00", "time:datetime:in", {"at": "2100-06-07 05:00:00"}),
    ("last year", "time:period:year:in", {"start": "2099-01-01 00:00:00", "y": "2099", "offset": "-1"}),
    ("this month", "time:period:month:in", {"start": "2100-12-01 00:00:00", "ym": "2100-12"}),
    ("during the previous week", "time:period:week:in", {"start": "2100-12-20 00:00:00"}),
    ("yesterday", "time:period:day:in", {"start": "2100-12-30 00:00:00"}),
    ("today", "time:period:day:in", {"start_date": "2100-12-31"}),
    ("since 3 months ago", "time:ago:month:since", {"point": "2100-09-30 23:59:00", "n": "3"}),
    ("since 30 month ago", "time:ago:month:since", {"point": "2098-06-30 23:59:00",
                                                    "point_overflow": "2098-07-01 23:59:00"}),
    ("since one year ago", "time:ago:year:since", {"point": "2099-12-31 23:59:00"}),
    ("in the last 3 days", "time:ago:day:in", {"point": "2100-12-28 23:59:00"}),
    ("on 12/24/last year", "time:day_of_period:year:in", {"start": "2099-01-01 00:00:00", "md": "12-24",
                                                          "at_date": "2099-12-24"}),
    ("in 04/this year", "time:month_of_year:year:in", {"y": "2100", "m": "04"}),
    ("on this month/21", "time:day_of_period:month:in", {"ym": "2100-12", "d": "21"}),
    ("within 2 days after", "time:duration:day:in", {"n": "2"}),
    ("the 6-month survival", "time:duration:month", {"n": "6"}),
    ("on the first hospital visit", "time:visit:hospital:first", {}),
    ("during their last ICU stay", "time:visit:icu:last", {}),
    ("in the current hospital encounter", "time:visit:hospital:current", {}),
    ("within the same hospital visit", "time:visit:hospital:same", {}),
    ("within the same month", "time:same:month", {}),
])
def test_time_expressions(text: str, type_: str, renderings: dict[str, str]) -> None:
    value = only_time(text)
    assert value.type == type_
    rendered = value.renderings(CLOCK)
    for name, expected in renderings.items():
        assert rendered[name] == expected, (name, rendered)


def test_times_do_not_overlap_and_longest_wins() -> None:
    found = find_times("On 12/24/last year and since 3 months ago, not last year alone")
    assert [v.text for v in found] == ["12/24/last year", "3 months ago", "last year"]


def test_future_times_are_recognised() -> None:
    assert only_time("in 2101").is_future(CLOCK)
    assert only_time("next month").is_future(CLOCK)
    assert not only_time("this year").is_future(CLOCK)
    assert not only_time("since 3 months ago").is_future(CLOCK)


def test_invalid_dates_are_not_times() -> None:
    assert find_times("on 02/30/2100") == []
    assert find_times("potassium chl 20 meq / 1000 ml") == []


@pytest.fixture(scope="module")
def detector(ehrsql_db: Path):
    ehr = connect(ehrsql_db)
    d = ValueDetector(ehr)
    d.vocabulary.add_columns([("d_labitems", "label"), ("prescriptions", "drug")])
    d.add_id_column("subject_id", "patients")
    d.entity_words["patient"] = "subject_id"
    yield d
    ehr.close()


def test_identifiers_are_checked_against_the_database(detector) -> None:
    found = detector.detect("last rdw of patient 10004235")
    ids = [v for v in found.values if v.kind == "id"]
    assert [(v.type, v.value) for v in ids] == [("id:subject_id", "10004235")]
    assert not [v for v in found.values if v.kind == "number"]  # an id is not also a count
    missing = detector.detect("last rdw of patient 15257")
    assert not [v for v in missing.values if v.kind == "id"]
    assert missing.unknown_ids == [("patient", "15257")]


def test_vocabulary_values_tolerate_case_and_punctuation(detector) -> None:
    found = detector.detect("What was the last RDW and the first Potassium; Whole Blood?")
    labs = {(v.text, v.value) for v in found.vocab if v.type == "vocab:d_labitems.label"}
    assert ("RDW", "rdw") in labs
    assert ("Potassium; Whole Blood", "potassium, whole blood") in labs


def test_vocabulary_values_keep_every_reading(detector) -> None:
    found = detector.detect("How is aspirin ec given?")
    drugs = {v.value for v in found.vocab if v.type == "vocab:prescriptions.drug"}
    assert {"aspirin", "aspirin ec"} <= drugs  # the longest reading wins later, in matching


def test_numbers_number_words_and_decades(detector) -> None:
    found = detector.detect("the top five labs of patients aged 30s with a value above 98.6")
    numbers = {(v.type, v.value): v.renderings for v in found.values if v.kind == "number"}
    assert numbers[("number", "5")] == {"n": "5"}
    assert numbers[("number", "98.6")] == {"n": "98.6"}
    assert numbers[("number:decade", "30")] == {"lo": "30", "hi": "39"}


def test_aggregate_words(detector) -> None:
    found = detector.detect("the highest heart rate and the average weight, not the total number of visits")
    ops = [(v.text, v.value, v.renderings["sql"]) for v in found.values if v.kind == "op"]
    assert ops == [("highest", "max", "MAX"), ("average", "avg", "AVG")]


def test_table_and_column_names_are_quoted_in_every_check(tmp_path: Path) -> None:
    """A table or column named with a quote or a space is still one name in the SQL reuse runs."""
    from ehr_magic.db.build import building, write_metadata

    path = tmp_path / "odd.duckdb"
    with building(path) as con:
        con.execute('CREATE TABLE "rx ""orders""" ("subject id" BIGINT, "drug ""name""" VARCHAR)')
        con.execute('INSERT INTO "rx ""orders""" VALUES (7, \'heparin\'), (8, \'aspirin ec\')')
        write_metadata(con, schema="odd_test", source="test", now="2100-12-31 23:59:00", dataset="odd")
    with connect(path) as ehr:
        detector = ValueDetector(ehr)
        assert detector.vocabulary.add_column('rx "orders"', 'drug "name"')
        detector.add_id_column("subject id", 'rx "orders"')
        detector.entity_words["patient"] = "subject id"
        found = detector.detect("How was heparin given to patient 7?")
        assert {v.value for v in found.vocab} == {"heparin"}
        assert [(v.type, v.value) for v in found.values if v.kind == "id"] == [("id:subject id", "7")]
        assert detector.detect("How was heparin given to patient 9?").unknown_ids == [("patient", "9")]
