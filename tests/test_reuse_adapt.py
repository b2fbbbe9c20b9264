"""Literals of code, linking them to a question's values, and writing new values in
(ehr_magic.reuse.literals / template / adapt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_magic.db import connect
from ehr_magic.reuse.adapt import AdaptationError, adapt, check_context
from ehr_magic.reuse.literals import code_literals, replace_literals
from ehr_magic.reuse.match import ReuseIndex
from ehr_magic.reuse.template import analyse, inconsistent_links


def sql_cell(sql: str) -> str:
    return f'answer = ehr.sql("""\n{sql}\n""")'


def test_literals_know_what_they_are_compared_with() -> None:
    code = sql_cell("SELECT COUNT(*) FROM prescriptions WHERE prescriptions.subject_id = 10020740 "
                    "AND prescriptions.drug IN ('a b', 'it''s') AND STRFTIME(starttime, '%Y-%m') = '2100-03' "
                    "LIMIT 1 OFFSET 2")
    found = {(lit.value, lit.column, lit.op, lit.keyword) for lit in code_literals(code)}
    assert ("10020740", "prescriptions.subject_id", "=", None) in found
    assert ("a b", "prescriptions.drug", "in", None) in found
    assert ("it's", "prescriptions.drug", "in", None) in found
    assert ("2100-03", None, "=", None) in found
    assert ("1", None, None, "limit") in found and ("2", None, None, "offset") in found


def test_python_literals_and_their_context() -> None:
    code = ("x = ehr.lookup('d_labitems', 'label', 'RDW')\n"
            "y = ehr.ago(months=3)\nz = ehr.period('year', -1)\nw = t.filter(pl.col('drug') == 'aspirin')\n")
    found = {lit.value: lit for lit in code_literals(code)}
    assert found["RDW"].context_strings == ("d_labitems", "label")
    assert found["3"].keyword == "months"
    assert found["-1"].kind == "number" and code[found["-1"].start:found["-1"].end] == "-1"
    assert found["aspirin"].column == "drug"


def test_substitution_inside_sql_strings_escapes_quotes() -> None:
    code = sql_cell("SELECT route FROM prescriptions WHERE prescriptions.drug = 'trazodone'")
    literal = next(lit for lit in code_literals(code) if lit.value == "trazodone")
    out = replace_literals(code, {literal: "children's tylenol"})
    assert "prescriptions.drug = 'children''s tylenol'" in out
    literal = next(lit for lit in code_literals("x = ehr.lookup('d', 'label', \"it's\")") if lit.value == "it's")
    assert replace_literals("x = ehr.lookup('d', 'label', \"it's\")", {literal: 'say "hi"'}) == \
        'x = ehr.lookup(\'d\', \'label\', "say \\"hi\\"")'


@pytest.fixture(scope="module")
def ehr(ehrsql_db: Path):
    with connect(ehrsql_db) as ehr:
        yield ehr


@pytest.fixture()
def index(ehr) -> ReuseIndex:
    return ReuseIndex(ehr)


LAST_LAB = sql_cell(
    "SELECT labevents.valuenum FROM labevents WHERE labevents.hadm_id IN (SELECT admissions.hadm_id FROM admissions "
    "WHERE admissions.subject_id = 10004235) AND labevents.itemid IN (SELECT d_labitems.itemid FROM d_labitems "
    "WHERE d_labitems.label = 'rdw') ORDER BY labevents.charttime DESC LIMIT 1")


def test_a_cell_becomes_a_template_with_typed_slots(index) -> None:
    template = index.add(1, "What was the last RDW of patient 10004235?", LAST_LAB)
    assert sorted(s.type for s in template.slots) == ["id:subject_id", "vocab:d_labitems.label"]
    assert "<vocab:d_labitems.label>" in template.tokens and "<id:subject_id>" in template.tokens
    assert "rdw" not in template.skeleton and "10004235" not in template.skeleton
    assert "LIMIT 1" in template.skeleton  # a constant stays


def test_new_values_are_written_where_the_old_ones_were(index) -> None:
    index.add(1, "What was the last RDW of patient 10004235?", LAST_LAB)
    match = index.match("What was the last hemoglobin of patient 10010471?")
    assert match.accepted, match.reason
    adaptation = adapt(match.best.template, match.best.values, index.detector.vocabulary)
    assert "d_labitems.label = 'hemoglobin'" in adaptation.code
    assert "admissions.subject_id = 10010471" in adaptation.code
    assert adaptation.substitutions == [("hemoglobin", "rdw"), ("10010471", "10004235")]


def test_time_arithmetic_is_rewritten_in_the_same_form(index) -> None:
    code = sql_cell("SELECT COUNT(*) FROM admissions WHERE admissions.subject_id = 10004235 "
                    "AND admissions.admittime >= CAST('2100-09-30 23:59:00' AS TIMESTAMP)")
    template = index.add(1, "How many times was patient 10004235 admitted since 3 months ago?", code)
    assert any(s.type == "time:ago:month:since" for s in template.slots)
    match = index.match("How many times was patient 10004235 admitted since 5 months ago?")
    adaptation = adapt(match.best.template, match.best.values)
    assert "CAST('2100-07-31 23:59:00' AS TIMESTAMP)" in adaptation.code
    assert adaptation.substitutions == [("5 months ago", "3 months ago")]


def test_period_start_and_python_offsets(index) -> None:
    code = ("start, end = ehr.period('year', -1)\n"
            "answer = ehr.sql('SELECT COUNT(*) FROM admissions WHERE admittime >= ? AND admittime < ?', [start, end])")
    template = index.add(1, "How many admissions were there last year?", code)
    assert [s.type for s in template.slots] == ["time:period:year:in"]
    match = index.match("How many admissions were there this year?")
    assert "ehr.period('year', 0)" in adapt(match.best.template, match.best.values).code


def test_aggregate_functions_are_swapped(index) -> None:
    code = sql_cell("SELECT MAX(labevents.valuenum) FROM labevents WHERE labevents.itemid IN "
                    "(SELECT d_labitems.itemid FROM d_labitems WHERE d_labitems.label = 'rdw')")
    index.add(1, "What is the maximum rdw value?", code)
    match = index.match("What is the minimum glucose value?")
    adaptation = adapt(match.best.template, match.best.values, index.detector.vocabulary)
    assert "SELECT MIN(labevents.valuenum)" in adaptation.code and "'glucose'" in adaptation.code


def test_coincidental_links_are_dropped_when_other_cells_disagree(ehr) -> None:
    from ehr_magic.reuse.values import ValueDetector

    detector = ValueDetector(ehr)
    code = "answer = ehr.sql('SELECT icd_code FROM ranked WHERE rank <= {n} AND days > 365 // {d}')"
    four = analyse(1, "top four diagnoses by 3-month mortality", code.format(n=4, d=4), detector)
    five = analyse(2, "top five diagnoses by 3-month mortality", code.format(n=5, d=4), detector)
    assert len([link for link in four.links if four.slots[link.slot].type == "number"]) == 2  # 4 and 365 // 4
    bad = inconsistent_links([four, five])
    renewed = analyse(1, four.question, four.code, detector, exclude=frozenset(bad))
    linked = [renewed.literals[link.literal] for link in renewed.links]
    assert [lit.value for lit in linked] == ["4"] and "rank <=" in renewed.code[:linked[0].start]


def test_new_value_must_exist_where_the_code_uses_it(ehr, index) -> None:
    code = sql_cell("SELECT COUNT(*) > 0 FROM inputevents WHERE inputevents.itemid IN (SELECT d_items.itemid "
                    "FROM d_items WHERE d_items.label = 'free water' AND d_items.linksto = 'inputevents')")
    index.add(1, "Did anyone get an input of free water?", code)
    match = index.match("Did anyone get an input of foley?")
    adaptation = adapt(match.best.template, match.best.values, index.detector.vocabulary)
    with pytest.raises(AdaptationError, match="finds no row"):
        check_context(ehr, adaptation, match.best.template, match.best.values)


def test_values_missing_a_rendering_are_refused(index) -> None:
    template = index.add(1, "What was the last RDW of patient 10004235?", LAST_LAB)
    with pytest.raises(AdaptationError):
        adapt(template, template.slots[:1] and [template.slots[0].value])  # one value for two slots


# -- a check that cannot run ---------------------------------------------------------------------

FREE_WATER = sql_cell("SELECT COUNT(*) > 0 FROM inputevents WHERE inputevents.itemid IN (SELECT d_items.itemid "
                      "FROM d_items WHERE d_items.label = 'free water' AND d_items.linksto = 'inputevents')")


def break_context_check(monkeypatch: pytest.MonkeyPatch, ehr, error: Exception) -> list[str]:
    """Make the query of ``check_context`` (``SELECT 1 FROM d_items WHERE ... linksto ...``) raise
    ``error``; every other query runs. Returns the check queries that were tried."""
    tried: list[str] = []
    sql = ehr.sql

    def failing(query: str, params=None):
        if query.startswith("SELECT 1 FROM d_items") and "linksto" in query:
            tried.append(query)
            raise error
        return sql(query, params)

    monkeypatch.setattr(ehr, "sql", failing)
    return tried


def test_a_context_check_that_cannot_run_declines_the_reuse_with_the_reason(ehr, monkeypatch) -> None:
    from ehr_magic.engines import QueryError
    from ehr_magic.reuse import Reuser

    reuser = Reuser(ehr)
    reuser.add(1, "Did anyone get an input of free water?", FREE_WATER)
    question = "Did anyone get an input of propofol?"
    assert reuser.answer(question).answered  # the check runs and finds propofol among the inputs
    tried = break_context_check(monkeypatch, ehr, QueryError("DuckDB", "the server went away mid-check", "SELECT 1"))
    result = reuser.answer(question)
    assert tried and "d_items.label = 'propofol'" in tried[0]
    assert not result.answered and result.answer is None
    assert result.reason.startswith("cannot adapt cell #1: the check that d_items.label = 'propofol' and "
                                    "d_items.linksto = 'inputevents' finds a row cannot run")
    assert "the server went away mid-check" in result.reason


def test_a_bug_in_a_context_check_is_not_read_as_a_failed_check(ehr, monkeypatch) -> None:
    from ehr_magic.reuse import Reuser

    reuser = Reuser(ehr)
    reuser.add(1, "Did anyone get an input of free water?", FREE_WATER)
    tried = break_context_check(monkeypatch, ehr, TypeError("a bug of ours"))
    with pytest.raises(TypeError, match="a bug of ours"):
        reuser.answer("Did anyone get an input of propofol?")
    assert tried
