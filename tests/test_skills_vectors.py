"""Every EHR skill reproduces its card's hand-computed vectors on tiny made-up patients,
on MIMIC-IV-shaped and (where the skill applies) EHRSQL-shaped databases; and a value
charted after ``as_of`` never changes a result."""

from __future__ import annotations

import copy
import datetime as dt

import polars as pl
import pytest

from ehr_magic.skills.registry import builtin
from ehr_magic.skills.testing import T0, VectorSuite, at, build, check, icu_patient

SKILLS = {n: s for n, s in builtin().items() if s.card.kind == "ehr"}
VECTORS = [(name, v) for name, s in SKILLS.items() for v in s.card.vectors]
IDS = [f"{n}: {v.description[:60]}" for n, v in VECTORS]


@pytest.fixture(scope="module")
def mimic_suite(tmp_path_factory):
    suite = VectorSuite([(id_, v.data) for id_, (_, v) in zip(IDS, VECTORS)],
                        tmp_path_factory.mktemp("vectors") / "mimic.duckdb")
    yield suite
    suite.close()


@pytest.mark.parametrize(("name", "vector"), VECTORS, ids=IDS)
def test_vector_mimic_iv(name, vector, mimic_suite, request):
    key = request.node.callspec.id
    assert check(mimic_suite.run(key, SKILLS[name].fn, vector.call), vector.expected) == []


# EHRSQL keeps fewer items: vectors that need GCS, ventilation, vasopressor rates, specimen
# types, non-invasive BP, procedures or omr do not apply there.
_EHRSQL_ITEMS_MISSING = {220739, 223900, 223901, 223835, 220179, 220180, 220181, 225309, 225310, 225312,
                         226512, 226531, 226707, 52033, 220210}
_EHRSQL_TABLES_MISSING = {"procedureevents", "inputevents", "omr"}


def _fits_ehrsql(name, vector):
    need_components = {"sofa", "sofa_hourly", "sepsis3", "qsofa", "curb65"}
    if "ehrsql_mimic_iv" not in SKILLS[name].card.schemas or name in need_components:
        return False
    data = vector.data or {}
    if any(data.get(t) for t in _EHRSQL_TABLES_MISSING):
        return False
    items = {r["itemid"] for t in ("chartevents", "labevents") for r in data.get(t, [])}
    return not items & _EHRSQL_ITEMS_MISSING


EHRSQL_VECTORS = [(n, v) for n, v in VECTORS if _fits_ehrsql(n, v)]
EHRSQL_IDS = [f"{n}: {v.description[:60]}" for n, v in EHRSQL_VECTORS]


@pytest.fixture(scope="module")
def ehrsql_suite(tmp_path_factory):
    suite = VectorSuite([(id_, v.data) for id_, (_, v) in zip(EHRSQL_IDS, EHRSQL_VECTORS)],
                        tmp_path_factory.mktemp("vectors") / "ehrsql.duckdb", schema="ehrsql_mimic_iv")
    yield suite
    suite.close()


@pytest.mark.parametrize(("name", "vector"), EHRSQL_VECTORS, ids=EHRSQL_IDS)
def test_vector_ehrsql(name, vector, ehrsql_suite, request):
    key = request.node.callspec.id
    assert check(ehrsql_suite.run(key, SKILLS[name].fn, vector.call), vector.expected) == []


def test_ehrsql_vectors_cover_the_code_list_and_lab_skills():
    covered = {n for n, _ in EHRSQL_VECTORS}
    assert {"charlson", "cha2ds2_vasc", "has_bled", "kdigo_aki", "egfr", "anion_gap", "suspected_infection",
            "measurement", "corrected_calcium"} <= covered


def test_every_ehr_skill_has_vectors():
    assert len(SKILLS) >= 20
    for name, s in SKILLS.items():
        assert s.card.vectors, name
        assert all(v.data is not None for v in s.card.vectors), name


def test_sofa_partial_components_on_ehrsql(tmp_path):
    data = icu_patient(labs=[(51265, 2, 45.0), (50885, 2, 2.5), (50912, 2, 1.5)])
    ehr = build(tmp_path / "e.duckdb", data, schema="ehrsql_mimic_iv")
    out = SKILLS["sofa"].fn(ehr, components=("coagulation", "liver", "renal"))
    assert out.select("sofa", "coagulation", "liver", "renal", "cns").row(0) == (6, 3, 2, 1, None)


# -- no look-ahead -----------------------------------------------------------------------------

# Extreme values charted just after as_of: any leak would change the result.
def _future_shock(when: float) -> dict:
    return icu_patient(
        chart=[(220052, when, 20.0), (220181, when, 20.0), (220179, when, 40.0), (220180, when, 20.0),
               (220045, when, 190.0), (220210, when, 60.0), (223762, when, 41.0), (220739, when, 1),
               (223900, when, 1), (223901, when, 1), (223835, when, 100.0), (226512, when, 300.0),
               (226730, when, 120.0)],
        labs=[(51265, when, 1.0), (50885, when, 40.0), (50912, when, 12.0), (50821, when, 20.0),
              (50816, when, 100.0), (51006, when, 200.0), (50983, when, 170.0), (50902, when, 60.0),
              (50882, when, 5.0), (50893, when, 2.0), (50862, when, 1.0), (51301, when, 90.0), (50818, when, 10.0),
              (51144, when, 50.0), (50878, when, 5000.0), (50861, when, 5000.0)],
        inputs=[(221906, when, when + 10, 2.0, "mcg/kg/min")],
        outputs=[(226559, when + h, 0) for h in range(0, 30)],
        procedures=[(225792, when, when + 20), (225802, when, when + 20)],
        prescriptions=[("Vancomycin", when), ("Aspirin", when, "PO")],
        micro=[(when, "BLOOD CULTURE")],
    )


def _merge_rows(data: dict, extra: dict) -> dict:
    out = copy.deepcopy(data)
    for table, rows in extra.items():
        if table in {"patients", "admissions", "icustays"}:
            continue
        out.setdefault(table, []).extend(rows)
    return out


def _truncate(data: dict, cutoff: dt.datetime) -> dict:
    """What was known at ``cutoff``: later rows dropped, open intervals clipped."""
    out = copy.deepcopy(data)
    for table in ("chartevents", "labevents", "outputevents", "microbiologyevents"):
        out[table] = [r for r in out.get(table, []) if r["charttime"] <= cutoff]
    for table, end in (("inputevents", "endtime"), ("procedureevents", "endtime"), ("prescriptions", "stoptime")):
        out[table] = [{**r, end: min(r[end], cutoff)} for r in out.get(table, []) if r["starttime"] <= cutoff]
    out["omr"] = [r for r in out.get("omr", [])
                  if dt.datetime.combine(r["chartdate"], dt.time()) + dt.timedelta(days=1) <= cutoff]
    discharged = {a["hadm_id"] for a in out["admissions"] if a["dischtime"] <= cutoff}
    out["diagnoses_icd"] = [r for r in out.get("diagnoses_icd", []) if r["hadm_id"] in discharged]
    for a in out["admissions"]:
        a["dischtime"] = min(a["dischtime"], cutoff)
    for s in out["icustays"]:
        s["outtime"] = min(s["outtime"], cutoff)
    return out


CASES = [(name, v, hours) for name, s in SKILLS.items() for v in s.card.vectors[:1] for hours in (2.5, 30.0)]
CASE_IDS = [f"{n} as of +{h} h" for n, _, h in CASES]


@pytest.fixture(scope="module")
def look_ahead_suites(tmp_path_factory):
    """Each case's patient with extreme values charted 30 min after its as_of (``full``) and the
    same patient cut to what was known at as_of (``known``)."""
    folder = tmp_path_factory.mktemp("look-ahead")
    full = [(i, _merge_rows(v.data, _future_shock(h + 0.5))) for i, (_, v, h) in zip(CASE_IDS, CASES)]
    cutoffs = {i: at(h) for i, (_, _, h) in zip(CASE_IDS, CASES)}
    suites = (VectorSuite(full, folder / "full.duckdb"),
              VectorSuite(full, folder / "known.duckdb", transform=lambda key, data: _truncate(data, cutoffs[key])))
    yield suites
    for s in suites:
        s.close()


@pytest.mark.parametrize(("name", "vector", "hours"), CASES, ids=CASE_IDS)
def test_no_look_ahead(name, vector, hours, look_ahead_suites, request):
    key = request.node.callspec.id
    call = {**{k: v for k, v in vector.call.items() if k != "as_of"}, "as_of": at(hours)}
    full, known = look_ahead_suites
    seen = full.run(key, SKILLS[name].fn, call)
    then = known.run(key, SKILLS[name].fn, call)
    assert seen.equals(then), f"{name} as of {at(hours)}:\n{seen}\nvs data known then:\n{then}"
    if hours == 2.5:  # the shock (at 3 h) is really in the full data: without as_of it shows
        assert not full.run(key, SKILLS[name].fn, {k: v for k, v in call.items() if k != "as_of"}).equals(seen) \
            or name in _UNCHANGED_BY_SHOCK, name


# Skills whose result the shock cannot change: codes and age only; bmi takes the first weight and height.
_UNCHANGED_BY_SHOCK = {"charlson", "cha2ds2_vasc", "bmi"}


def test_stays_after_as_of_are_left_out(tmp_path):
    data = icu_patient(labs=[(51265, 2, 45.0)])
    with build(tmp_path / "e.duckdb", data) as ehr:
        assert SKILLS["sofa"].fn(ehr, as_of=T0 - dt.timedelta(hours=1)).height == 0
        assert SKILLS["sofa"].fn(ehr, as_of=T0).height == 1


def test_ids_select_rows(tmp_path):
    from ehr_magic.skills.testing import merge

    data = merge(icu_patient(labs=[(51265, 2, 45.0)]),
                 icu_patient(subject_id=2, hadm_id=20, stay_id=200, labs=[(51265, 2, 120.0)]))
    with build(tmp_path / "e.duckdb", data) as ehr:
        sofa = SKILLS["sofa"].fn
        assert sofa(ehr)["stay_id"].to_list() == [100, 200]
        assert sofa(ehr, stay_ids=[200])["coagulation"].to_list() == [1]
        assert sofa(ehr, hadm_ids=[10])["coagulation"].to_list() == [3]
        assert sofa(ehr, subject_ids=2)["stay_id"].to_list() == [200]
        assert sofa(ehr, stay_ids=pl.Series([100]))["stay_id"].to_list() == [100]
        assert sofa(ehr, stay_ids=[])["stay_id"].to_list() == []
