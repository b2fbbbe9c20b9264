"""The public API: catalog, get, card, search, prompt_section, namespace, and errors."""

from __future__ import annotations

import pytest

from ehr_magic import skills
from ehr_magic.errors import EhrMagicError
from ehr_magic.skills import SkillError
from ehr_magic.skills.testing import build, icu_patient

REQUIRED = ("name", "title", "purpose", "eligibility", "inputs", "output", "interpretation", "source")
EXPECTED = {"sofa", "sofa_hourly", "qsofa", "sirs", "sepsis3", "suspected_infection", "kdigo_aki", "gcs",
            "mean_arterial_pressure", "pf_ratio", "shock_index", "anion_gap", "corrected_calcium", "egfr", "bmi",
            "curb65", "has_bled", "cha2ds2_vasc", "charlson", "measurement"}


def test_catalog_has_every_required_skill_with_a_full_card():
    cards = skills.catalog()
    names = [c.name for c in cards]
    assert len(names) == len(set(names))
    assert EXPECTED <= set(names)
    for card in cards:
        for field in REQUIRED:
            assert getattr(card, field).strip(), (card.name, field)
        assert card.vectors, card.name
        assert card.signature.startswith("(")
    ehr_cards = skills.catalog(kind="ehr")
    assert {c.name for c in ehr_cards} == EXPECTED
    assert all(c.signature.startswith("(ehr, ") for c in ehr_cards)
    assert all(any(ch.isdigit() for ch in c.source) for c in ehr_cards)  # cited with year/pages


def test_catalog_by_schema_leaves_out_what_ehrsql_cannot_do():
    names = {c.name for c in skills.catalog(schema="ehrsql_mimic_iv")}
    assert "gcs" not in names and "charlson" in names and "sofa" in names


def test_get_and_card():
    assert skills.get("sofa") is skills.get("skills.sofa")
    assert skills.card("kdigo_aki").title.startswith("KDIGO")
    assert skills.get("calc.bmi")(70, 175) == pytest.approx(22.857, abs=1e-3)
    with pytest.raises(SkillError, match="Did you mean 'sofa'") as info:
        skills.get("sofaa")
    assert isinstance(info.value, EhrMagicError)
    text = skills.card("sofa").text()
    assert "Vincent" in text and "Reference cases:" in text and "Call: skills.sofa(ehr, *" in text
    assert repr(skills.card("sofa")) == "<Card skills.sofa: SOFA score (first day)>"


@pytest.mark.parametrize(("text", "name"), [
    ("first-day SOFA score", "sofa"), ("acute kidney injury stage", "kdigo_aki"), ("sepsis onset", "sepsis3"),
    ("Charlson comorbidity index", "charlson"), ("stroke risk in atrial fibrillation", "cha2ds2_vasc"),
    ("bleeding risk on anticoagulation", "has_bled"), ("estimated GFR", "egfr"), ("body mass index", "bmi"),
    ("pneumonia severity", "curb65"), ("glasgow coma scale", "gcs"), ("last creatinine value", "measurement"),
    ("highest heart rate in the first 24 hours", "measurement"), ("P/F ratio", "pf_ratio"),
    ("anion gap", "anion_gap"), ("albumin corrected calcium", "corrected_calcium"), ("qsofa", "qsofa"),
    ("SIRS criteria", "sirs"), ("shock index", "shock_index"), ("mean arterial pressure", "mean_arterial_pressure"),
    ("rolling hourly sofa", "sofa_hourly"), ("antibiotics and cultures", "suspected_infection"),
])
def test_search_finds_the_skill(text, name):
    assert skills.search(text, k=5, kind="ehr")[0].name == name


def test_prompt_section_lists_only_relevant_skills():
    section = skills.prompt_section("What was the first-day SOFA of ICU stay 39553978?", "mimic_iv", k=3)
    lines = [line for line in section.splitlines() if line.startswith("- skills.")]
    assert lines[0].startswith("- skills.sofa(ehr, *, stay_ids=None")
    assert 1 <= len(lines) <= 3
    assert "Returns:" in section and "as_of" in section
    assert skills.prompt_section("How many patients were admitted in 2100?", "mimic_iv") == ""
    assert "skills.gcs(" not in skills.prompt_section("lowest glasgow coma scale", "ehrsql_mimic_iv")
    assert "skills.gcs(" in skills.prompt_section("lowest glasgow coma scale", "mimic_iv")


@pytest.fixture
def tiny(tmp_path):
    ehr = build(tmp_path / "tiny.duckdb", icu_patient(labs=[(51265, 2, 45.0), (50912, 2, 2.1)]))
    yield ehr
    ehr.close()


def test_namespace_for_generated_code(tiny):
    ns = skills.namespace(tiny)
    s = ns["skills"]
    with_ehr = s.sofa(tiny, stay_ids=[100])
    without = s.sofa(stay_ids=[100])
    assert with_ehr.equals(without) and with_ehr["coagulation"][0] == 3
    assert s.calc.anion_gap(140, 104, 24) == 12
    assert s.search("kidney injury")[0].name == "kdigo_aki"
    assert "Output:" in str(s.card("kdigo_aki"))
    assert "sofa" in dir(s) and "calc" in dir(s)
    with pytest.raises(AttributeError, match="No skill named"):
        s.no_such_skill  # noqa: B018
    assert "skills.search" in repr(s)


def test_generated_code_calls_skills_through_the_executor(tiny):
    from ehr_magic.runtime.executor import Executor, base_namespace

    names = base_namespace(tiny)
    names.update(skills.namespace(tiny))
    code = "s = skills.sofa(ehr, stay_ids=[100])\nanswer = int(s['sofa'][0])"
    run = Executor(tiny).run(code, names)
    assert run.ok, run.error
    assert run.answer == 3 + 2  # coagulation 3 (platelets 45) + renal 2 (creatinine 2.1)
    failing = Executor(tiny).run("x = skills.sofa(ehr, components=('lungs',))", names)
    assert not failing.ok and failing.error.line == 1 and "Unknown SOFA component" in failing.error.message


def test_docs_list_every_skill():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "skills.md").read_text(encoding="utf-8")
    for card in skills.catalog():
        assert f"`skills.{card.name}" in text or f"`{card.name.removeprefix('calc.')}(" in text, card.name
