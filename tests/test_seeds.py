"""The packaged seed examples (ehr_magic/seeds/<schema>.jsonl): well formed, and every
one runs through the real executor on the real open data and gives a non-empty answer.
A handful are also checked against a value computed another way (mostly polars instead
of SQL), so a seed that runs but answers wrongly is caught too."""

from __future__ import annotations

import ast
import datetime as dt
import json
import re
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import ehr_magic
from ehr_magic.runtime.executor import Executor, is_empty_answer
from ehr_magic.memory.fewshot import SeedExamples, seed_examples
from ehr_magic.text import normalise
DATABASES = {"ehrsql_mimic_iv": "ehrsql_db", "mimic_iv": "mimic_demo_db", "mimic_iii": "mimic_iii_demo_db",
             "eicu": "eicu_demo_db"}
# How many seeds each file holds (the MIMIC-IV ones came first and cover the most).
SIZES = {"ehrsql_mimic_iv": (30, 50), "mimic_iv": (30, 50), "mimic_iii": (10, 15), "eicu": (10, 15)}
CALENDAR_TAGS = {"demographics", "admissions", "icu", "diagnoses", "procedures", "labs", "vitals", "intake-output",
                 "prescriptions", "time", "lookup", "polars", "cohort", "top-n"}
WANTED_TAGS = {
    "ehrsql_mimic_iv": CALENDAR_TAGS | {"microbiology", "costs"},
    "mimic_iv": CALENDAR_TAGS | {"microbiology"},
    "mimic_iii": CALENDAR_TAGS | {"carevue-metavision"},
    "eicu": {"demographics", "mortality", "diagnoses", "medications", "infusions", "intake-output", "vitals",
             "first-24h", "apache", "length-of-stay", "time", "polars", "top-n", "first-last"},
}
CLOCK_CALL = re.compile(r"ehr\.(now|ago|period|start_of)\b")
OFFSET_CALL = re.compile(r"ehr\.(minutes|in_first|during_stay|chronological)\(")

WALL_CLOCK = re.compile(
    r"datetime\.now|\.today\s*\(|\butcnow\b|\btime\.time\s*\(|\bnow\s*\(|"
    r"current_date|current_timestamp|localtimestamp|get_current_time",
    re.IGNORECASE,
)
PATIENT_ID = re.compile(r"\b\d{8}\b")  # subject_id, hadm_id or stay_id literals of the MIMIC-IV demo


def load_seeds(schema: str) -> list[tuple[int, dict[str, Any]]]:
    text = resources.files("ehr_magic").joinpath("seeds", f"{schema}.jsonl").read_text(encoding="utf-8")
    return [(number, json.loads(line)) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]


SEEDS = {schema: load_seeds(schema) for schema in DATABASES}
CASES = [pytest.param(schema, number, seed, id=f"{schema}:{number}")
         for schema, seeds in SEEDS.items() for number, seed in seeds]


def seed_by_question(schema: str, question: str) -> dict[str, Any]:
    matches = [seed for _, seed in SEEDS[schema] if seed["question"] == question]
    assert len(matches) == 1, f"no seed {question!r} in {schema}"
    return matches[0]


@pytest.fixture(scope="session")
def seed_ehrs(request: pytest.FixtureRequest) -> Iterator[Callable[[str], Any]]:
    """schema -> connected EHR, each database built and opened once per session."""
    opened: dict[str, Any] = {}

    def get(schema: str):
        if schema not in opened:
            path: Path = request.getfixturevalue(DATABASES[schema])
            opened[schema] = ehr_magic.connect(path)
        return opened[schema]

    yield get
    for handle in opened.values():
        handle.close()


def run_seed(ehr, code: str):
    result = Executor(ehr, timeout=30).run(code)
    assert result.ok, result.error.describe() if result.error else "failed"
    assert result.has_answer, "the code does not set `answer`"
    return result


# -- format -------------------------------------------------------------------------------

@pytest.mark.parametrize("schema", list(DATABASES))
def test_seed_file_is_well_formed(schema: str) -> None:
    seeds = SEEDS[schema]
    low, high = SIZES[schema]
    assert low <= len(seeds) <= high
    questions = []
    for number, seed in seeds:
        where = f"{schema}:{number}"
        for key in ("question", "knowledge", "code"):
            assert isinstance(seed.get(key), str) and seed[key].strip(), f"{where} lacks {key}"
        assert set(seed) <= {"question", "knowledge", "code", "tags"}, where
        assert isinstance(seed.get("tags"), list) and seed["tags"], f"{where} has no tags"
        assert all(isinstance(t, str) and t == t.lower() for t in seed["tags"]), where
        assert all(line.startswith("- ") for line in seed["knowledge"].splitlines()), f"{where}: knowledge bullets"
        tree = ast.parse(seed["code"])  # valid Python
        targets = [t for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
                   for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
        assert any(isinstance(t, ast.Name) and t.id == "answer" for t in targets), f"{where} never sets answer"
        assert not WALL_CLOCK.search(seed["code"]), f"{where} reads the wall clock"
        assert "import " not in seed["code"], f"{where} imports; the namespace already has pl, dt, ..."
        questions.append(normalise(seed["question"]))
    duplicates = {q for q in questions if questions.count(q) > 1}
    assert not duplicates, f"duplicate questions: {duplicates}"


@pytest.mark.parametrize("schema", list(DATABASES))
def test_seed_ids_follow_line_numbers(schema: str) -> None:
    seed_examples.cache_clear()
    examples = seed_examples(schema)
    assert [e.id for e in examples] == [f"seed:{schema}:{n}" for n, _ in SEEDS[schema]]
    assert [e.question for e in examples] == [s["question"] for _, s in SEEDS[schema]]


def test_seeds_span_the_categories() -> None:
    for schema, seeds in SEEDS.items():
        tags = {t for _, seed in seeds for t in seed["tags"]}
        assert WANTED_TAGS[schema] <= tags, f"{schema} lacks {WANTED_TAGS[schema] - tags}"
    for schema, seeds in SEEDS.items():
        clock = [s for _, s in seeds if CLOCK_CALL.search(s["code"])]
        offsets = [s for _, s in seeds if OFFSET_CALL.search(s["code"])]
        if schema == "eicu":  # offset time: the clock helpers would raise
            assert not clock and len(offsets) >= 3, f"{schema}: seeds should use the offset helpers"
        else:
            assert len(clock) >= 3, f"{schema}: too few seeds use the dataset clock"


# -- every seed runs ------------------------------------------------------------------------

@pytest.mark.parametrize(("schema", "number", "seed"), CASES)
def test_seed_runs_and_answers(seed_ehrs, schema: str, number: int, seed: dict[str, Any]) -> None:
    result = run_seed(seed_ehrs(schema), seed["code"])
    assert is_empty_answer(result.answer) is None, is_empty_answer(result.answer)
    assert isinstance(result.answer, (int, float, str, bool, list, dt.datetime, dt.date, pl.DataFrame)), \
        type(result.answer)


# -- a few answers against independent computations ------------------------------------------

def _ehrsql_visit_count(ehr, answer) -> None:
    expected = (ehr.table("admissions")
                .filter((pl.col("subject_id") == 10007795) & (pl.col("admittime").dt.year() == 2100))
                .collect().height)
    assert answer == expected == 5


def _ehrsql_last_visit_cost(ehr, answer) -> None:
    visits = (ehr.table("admissions").filter((pl.col("subject_id") == 10007795) & pl.col("dischtime").is_not_null())
              .sort("admittime").collect())
    last = visits["hadm_id"][-1]
    total = ehr.table("cost").filter(pl.col("hadm_id") == last).select(pl.col("cost").sum()).collect().item()
    assert answer == pytest.approx(total, abs=0.01)


def _ehrsql_top_diagnoses(ehr, answer) -> None:
    start, end = ehr.period("year")
    counts = (ehr.table("diagnoses_icd").filter(pl.col("charttime").is_between(start, end, closed="left"))
              .join(ehr.table("d_icd_diagnoses").select("icd_code", "long_title"), on="icd_code")
              .group_by("long_title").len()
              .with_columns(pl.col("len").rank("dense", descending=True).alias("rank"))
              .filter(pl.col("rank") <= 4).collect())
    assert set(answer["long_title"]) == set(counts["long_title"])
    assert answer.height >= 4


def _ehrsql_in_icu_now(ehr, answer) -> None:
    current = ehr.table("icustays").filter(pl.col("outtime").is_null()).collect()
    assert sorted(answer["subject_id"]) == sorted(current["subject_id"])


def _ehrsql_lowest_heart_rate_today(ehr, answer) -> None:
    today = ehr.now.date()
    rates = (ehr.table("chartevents").filter(pl.col("subject_id") == 10018081)
             .join(ehr.table("d_items").filter(pl.col("label") == "heart rate"), on="itemid")
             .filter(pl.col("charttime").dt.date() == today).collect())
    assert answer == rates["valuenum"].min()


def _ehrsql_furosemide_routes(ehr, answer) -> None:
    routes = ehr.table("prescriptions").filter(pl.col("drug") == "furosemide").select("route").unique().collect()
    assert answer == sorted(routes["route"])


def _mimic_readmissions(ehr, answer) -> None:
    counted = (ehr.table("admissions").sort("subject_id", "admittime")
               .with_columns(pl.col("admittime").shift(-1).over("subject_id").alias("next_admit"))
               .filter(pl.col("next_admit") <= pl.col("dischtime") + pl.duration(days=30))
               .collect().height)
    assert answer == counted


def _mimic_in_hospital_deaths(ehr, answer) -> None:
    flags = ehr.table("admissions").select("hospital_expire_flag").collect()["hospital_expire_flag"]
    assert answer == pytest.approx(round(100 * flags.mean(), 2))


def _mimic_age_at_first_admission(ehr, answer) -> None:
    patient = ehr.table("patients").filter(pl.col("subject_id") == 10002428).collect().row(0, named=True)
    first = ehr.table("admissions").filter(pl.col("subject_id") == 10002428).select(pl.col("admittime").min()).collect()
    assert answer == patient["anchor_age"] + first.item().year - patient["anchor_year"]


def _mimic_ventilation_hours(ehr, answer) -> None:
    periods = ehr.table("procedureevents").filter(
        (pl.col("subject_id") == 10007818) & (pl.col("itemid") == 225792)).collect()
    hours = sum((end - start).total_seconds() for start, end in zip(periods["starttime"], periods["endtime"])) / 3600
    assert answer == pytest.approx(hours, abs=0.06)


def _mimic_cultures(ehr, answer) -> None:
    blood = ehr.table("microbiologyevents").filter(pl.col("spec_type_desc") == "BLOOD CULTURE").collect()
    row = answer.filter(pl.col("spec_type_desc") == "BLOOD CULTURE").row(0, named=True)
    assert row["specimens"] == blood["micro_specimen_id"].n_unique()
    assert row["positive"] == blood.filter(pl.col("org_name").is_not_null())["micro_specimen_id"].n_unique()


def _mimic_norepinephrine(ehr, answer) -> None:
    doses = ehr.table("inputevents").filter((pl.col("subject_id") == 10005817) & (pl.col("itemid") == 221906)).collect()
    assert answer["total"].item() == pytest.approx(doses["amount"].sum(), abs=0.001)
    assert answer["unit"].item() == "mg"


def _age_over_89(ehr, answer) -> None:
    born = ehr.table("patients").filter(pl.col("subject_id") == 10094).collect()["dob"].item()
    first = ehr.table("admissions").filter(pl.col("subject_id") == 10094).collect()["admittime"].min()
    assert (first - born).days / 365.2425 > 89 and answer == "> 89"
    # the same cell on a patient under 90 gives the plain age
    code = seed_by_question("mimic_iii", "How old was patient 10094 at their first hospital admission?")["code"]
    born = ehr.table("patients").filter(pl.col("subject_id") == 10006).collect()["dob"].item()
    first = ehr.table("admissions").filter(pl.col("subject_id") == 10006).collect()["admittime"].min()
    years = first.year - born.year - ((first.month, first.day) < (born.month, born.day))
    assert run_seed(ehr, code.replace("10094", "10006")).answer == years < 90


def _acute_kidney_failure(ehr, answer) -> None:
    coded = ehr.table("diagnoses_icd").filter(pl.col("icd9_code").str.starts_with("584")).collect()
    titles = (ehr.table("d_icd_diagnoses").filter(pl.col("long_title").str.contains("(?i)acute kidney failure"))
              .collect())
    assert set(titles["icd9_code"]) >= set(coded["icd9_code"])
    assert answer == coded["subject_id"].n_unique() > 0


def _icu_systems(ehr, answer) -> None:
    stays = ehr.table("icustays").collect()
    for system in ("carevue", "metavision"):
        mine = stays.filter(pl.col("dbsource") == system)
        row = answer.filter(pl.col("dbsource") == system).row(0, named=True)
        assert row["stays"] == mine.height and row["median_los_days"] == pytest.approx(mine["los"].median(), abs=0.01)


def _first_day_heart_rate(ehr, answer) -> None:
    stays = ehr.table("icustays").filter(pl.col("subject_id") == 10126).collect()
    for stay in stays.iter_rows(named=True):
        rates = ehr.table("chartevents").filter(
            (pl.col("icustay_id") == stay["icustay_id"]) & pl.col("itemid").is_in([211, 220045])
            & (pl.col("error").fill_null(0) == 0) & pl.col("valuenum").is_not_null()
            & (pl.col("charttime") >= stay["intime"])
            & (pl.col("charttime") < stay["intime"] + dt.timedelta(hours=24))).collect()
        row = answer.filter(pl.col("icustay_id") == stay["icustay_id"]).row(0, named=True)
        assert row["measurements"] == rates.height and row["mean_heart_rate"] == pytest.approx(
            rates["valuenum"].mean(), abs=0.05)


def _norepinephrine_both_systems(ehr, answer) -> None:
    carevue = ehr.table("inputevents_cv").filter(pl.col("itemid").is_in([30047, 30120])).collect()
    metavision = ehr.table("inputevents_mv").filter(
        (pl.col("itemid") == 221906) & (pl.col("statusdescription") != "Rewritten")).collect()
    assert answer["total"].sum() == pytest.approx(carevue["amount"].sum() + metavision["amount"].sum(), abs=0.5)
    assert set(answer["system"]) == {"carevue", "metavision"}
    assert set(answer["icustay_id"]) == set(carevue.drop_nulls("amount")["icustay_id"]) | set(
        metavision["icustay_id"])
def _eicu_hospital_deaths(ehr, answer) -> None:
    status = ehr.table("patient").select("hospitaldischargestatus").drop_nulls().collect().to_series()
    assert answer == pytest.approx(round(100 * (status == "Expired").mean(), 2))
    assert answer == pytest.approx(8.51)


def _eicu_vancomycin_first_day(ehr, answer) -> None:
    orders = (ehr.table("medication")
              .filter(pl.col("drugname").str.to_lowercase().str.contains("vancomycin")
                      & ~pl.col("drugordercancelled").fill_null(False)
                      & (pl.col("drugstartoffset") >= 0) & (pl.col("drugstartoffset") < 1440))
              .collect())
    assert answer == orders["patientunitstayid"].n_unique() > 0


def _eicu_last_systolic(ehr, answer) -> None:
    stays = ehr.table("patient").filter(pl.col("uniquepid") == "002-10148").collect()
    assert stays["patienthealthsystemstayid"].n_unique() == 1  # one visit: unitvisitnumber orders the stays
    rows = (ehr.table("vitalaperiodic").drop_nulls("noninvasivesystolic")
            .join(ehr.table("patient").select("patientunitstayid", "unitvisitnumber"), on="patientunitstayid")
            .filter(pl.col("patientunitstayid").is_in(stays["patientunitstayid"].to_list()))
            .sort("unitvisitnumber", "observationoffset").collect())
    assert answer["patientunitstayid"].item() == rows["patientunitstayid"][-1]
    assert answer["observationoffset"].item() == rows["observationoffset"][-1]


def _eicu_lengths_of_stay(ehr, answer) -> None:
    stays = ehr.table("patient").collect()
    assert answer["icu_days"].item() == pytest.approx(round(stays["unitdischargeoffset"].median() / 1440, 2))
    hospital = (stays["hospitaldischargeoffset"] - stays["hospitaladmitoffset"]).median() / 1440
    assert answer["hospital_days"].item() == pytest.approx(round(hospital, 2))


def _eicu_apache_calibration(ehr, answer) -> None:
    rows = (ehr.table("apachepatientresult")
            .filter((pl.col("apacheversion") == "IVa") & (pl.col("predictedhospitalmortality") >= 0)).collect())
    assert rows["patientunitstayid"].n_unique() == rows.height == answer["stays"].item()
    assert answer["predicted_pct"].item() == pytest.approx(round(100 * rows["predictedhospitalmortality"].mean(), 2))


CHECKS: dict[str, dict[str, Callable[[Any, Any], None]]] = {
    "ehrsql_mimic_iv": {
        "How many separate hospital admissions did patient 10007795 have in 2100?": _ehrsql_visit_count,
        "How much did patient 10007795's most recent completed hospital visit cost in total?": _ehrsql_last_visit_cost,
        "What were the four most frequently coded diagnoses this year?": _ehrsql_top_diagnoses,
        "Which patients are in an intensive care unit right now?": _ehrsql_in_icu_now,
        "What was the lowest heart rate of patient 10018081 today?": _ehrsql_lowest_heart_rate_today,
        "By which routes has furosemide been given?": _ehrsql_furosemide_routes,
    },
    "mimic_iv": {
        "How many admissions were followed by another admission of the same patient within 30 days of discharge?":
            _mimic_readmissions,
        "What percentage of hospital admissions ended with the patient dying in hospital?": _mimic_in_hospital_deaths,
        "How old was patient 10002428 at their first hospital admission?": _mimic_age_at_first_admission,
        "For how many hours was patient 10007818 on invasive mechanical ventilation?": _mimic_ventilation_hours,
        "How many cultures of each specimen type were sent, and how many grew an organism?": _mimic_cultures,
        "How much norepinephrine did patient 10005817 receive in total?": _mimic_norepinephrine,
    },
    "mimic_iii": {
        "How old was patient 10094 at their first hospital admission?": _age_over_89,
        "How many patients were ever diagnosed with acute kidney failure?": _acute_kidney_failure,
        "How many ICU stays were recorded by CareVue and by MetaVision, and what was their median length of stay?":
            _icu_systems,
        "What was the mean heart rate of patient 10126 in the first 24 hours of each ICU stay?": _first_day_heart_rate,
        "How much norepinephrine did each ICU stay receive in total, on either ICU system?":
            _norepinephrine_both_systems,
    },
    "eicu": {
        "What percentage of ICU stays ended with the patient dying in hospital?": _eicu_hospital_deaths,
        "How many ICU stays had vancomycin ordered in the first 24 hours of the ICU stay?": _eicu_vancomycin_first_day,
        "What was the last non-invasive systolic blood pressure recorded for patient 002-10148?": _eicu_last_systolic,
        "What are the median ICU and hospital lengths of stay in days?": _eicu_lengths_of_stay,
        "How does APACHE IVa predicted hospital mortality compare with the observed mortality?":
            _eicu_apache_calibration,
    },
}


@pytest.mark.parametrize(("schema", "question"),
                         [pytest.param(s, q, id=f"{s}:{q[:40]}") for s, checks in CHECKS.items() for q in checks])
def test_seed_answer_matches_independent_computation(seed_ehrs, schema: str, question: str) -> None:
    ehr = seed_ehrs(schema)
    result = run_seed(ehr, seed_by_question(schema, question)["code"])
    CHECKS[schema][question](ehr, result.answer)


# -- retrieval of seeds as few-shot examples -------------------------------------------------

RETRIEVAL = [
    ("ehrsql_mimic_iv", "What was the last magnesium value of patient 10019172 on their first hospital visit?", "labs"),
    ("ehrsql_mimic_iv", "What was the maximum respiratory rate of patient 10019172 yesterday?", "vitals"),
    ("ehrsql_mimic_iv", "Which organisms grew in the urine samples of patient 10019172?", "microbiology"),
    ("ehrsql_mimic_iv", "How many patients have been diagnosed with hypertension since 3 months ago?", "diagnoses"),
    ("mimic_iv", "What was the mean respiratory rate of patient 10019172 in the first 24 hours of the ICU stay?",
     "vitals"),
    ("mimic_iv", "How many patients have ever been diagnosed with pneumonia?", "diagnoses"),
    ("mimic_iv", "What was the highest blood potassium of patient 10019172 during the admission?", "labs"),
    ("mimic_iii", "What was the lowest blood sodium of patient 10019 during the admission?", "labs"),
    ("mimic_iii", "How much vasopressin did each ICU stay receive on either ICU system?", "carevue-metavision"),
    ("mimic_iii", "What are the five most common diagnoses?", "diagnoses"),
    ("eicu", "What was the highest non-invasive diastolic blood pressure of ICU stay 141765?", "vitals"),
    ("eicu", "How many ICU stays had a diagnosis of pneumonia?", "diagnoses"),
    ("eicu", "How many stays received a propofol infusion?", "infusions"),
]


@pytest.mark.parametrize(("schema", "question", "tag"), RETRIEVAL)
def test_seed_examples_retrieve_relevant_cases(schema: str, question: str, tag: str) -> None:
    seed_examples.cache_clear()
    examples = SeedExamples().examples(question, schema, 4)
    assert len(examples) == 4
    assert len({e.id for e in examples}) == 4
    assert all(e.code and e.knowledge for e in examples)
    first = seed_by_question(schema, examples[0].question)
    assert tag in first["tags"], f"first example for {question!r} is {examples[0].question!r}"


# -- the mimic_iv seeds on the synthetic MIMIC-IV-shaped data ----------------------------------

def _empty_result_failure(error) -> bool:
    """A failure caused only by a query finding no rows (``.item()`` or ``[0]`` on nothing)."""
    return (error.type == "ValueError" and "shape=(0," in error.message) or error.type == "IndexError"


@pytest.fixture(scope="session")
def synthetic_ehr(tmp_path_factory: pytest.TempPathFactory):
    from ehr_magic.sources import synthetic

    out = tmp_path_factory.mktemp("synthetic") / "synthetic.duckdb"
    synthetic.generate(out, patients=200, seed=0)
    with ehr_magic.connect(out) as handle:
        yield handle


@pytest.fixture(scope="session")
def synthetic_stand_ins(synthetic_ehr, seed_ehrs) -> dict[str, list[int]]:
    """Synthetic ids to put in place of a demo patient or admission named by a seed: the
    patients with the most ICU and lab rows, the admissions with the most movements."""
    demo_subjects = set(seed_ehrs("mimic_iv").sql("SELECT subject_id FROM patients")["subject_id"])
    subjects = synthetic_ehr.sql(
        "SELECT p.subject_id FROM patients p "
        "LEFT JOIN (SELECT subject_id, COUNT(*) AS n FROM chartevents GROUP BY ALL) c USING (subject_id) "
        "LEFT JOIN (SELECT subject_id, COUNT(*) AS n FROM labevents GROUP BY ALL) l USING (subject_id) "
        "ORDER BY coalesce(c.n, 0) + coalesce(l.n, 0) DESC, p.subject_id LIMIT 25")["subject_id"].to_list()
    admissions = synthetic_ehr.sql(
        "SELECT a.hadm_id FROM admissions a "
        "LEFT JOIN (SELECT hadm_id, COUNT(*) AS n FROM services GROUP BY ALL) s USING (hadm_id) "
        "LEFT JOIN (SELECT hadm_id, COUNT(*) AS n FROM transfers GROUP BY ALL) t USING (hadm_id) "
        "ORDER BY coalesce(s.n, 0) + coalesce(t.n, 0) DESC, a.hadm_id LIMIT 25")["hadm_id"].to_list()
    return {"demo_subjects": sorted(demo_subjects), "subject": subjects, "hadm": admissions}


@pytest.mark.parametrize(("number", "seed"),
                         [pytest.param(n, s, id=f"mimic_iv:{n}") for n, s in SEEDS["mimic_iv"]])
def test_mimic_iv_seed_on_synthetic_data(synthetic_ehr, synthetic_stand_ins, seed_ehrs, number: int,
                                         seed: dict[str, Any]) -> None:
    """Seeds must fit the synthetic data's schema and vocabulary too. A seed about a named
    demo patient (or admission) runs with synthetic stand-ins in its place until one answers."""
    code = seed["code"]
    missing = {t for t in seed_ehrs("mimic_iv").tables() if re.search(rf"\b{t}\b", code)} - set(synthetic_ehr.tables())
    if missing:
        pytest.skip(f"the synthetic data has no {', '.join(sorted(missing))}")
    literals = set(PATIENT_ID.findall(code))
    assert len(literals) <= 1, "a seed names at most one patient or admission"
    variants = [code]
    if literals:
        literal = literals.pop()
        kind = "subject" if int(literal) in synthetic_stand_ins["demo_subjects"] else "hadm"
        variants = [code.replace(literal, str(stand_in)) for stand_in in synthetic_stand_ins[kind]]
    executor = Executor(synthetic_ehr, timeout=30)
    for variant in variants:
        result = executor.run(variant)
        assert result.ok or _empty_result_failure(result.error), result.error.describe()
        if result.ok and result.has_answer and is_empty_answer(result.answer) is None:
            return
    pytest.fail(f"no answer on the synthetic data ({len(variants)} tried): {is_empty_answer(result.answer)}")
