"""Sepsis: qSOFA, SIRS, suspected infection (antibiotics + cultures) and Sepsis-3."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.codes import ANTIBIOTIC_EXCLUDED_FORMS, ANTIBIOTIC_EXCLUDED_ROUTES, ANTIBIOTICS
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.events import with_ctes
from ehr_magic.skills.registry import register
from ehr_magic.skills.scores._sofa_sql import components_for, hourly_windows, sofa_points, sofa_values
from ehr_magic.skills.testing import icu_patient
from ehr_magic.skills.timeline import aggregate, cohort_cte, gcs_worst

STAY_IDS = ["subject_id", "hadm_id", "stay_id"]
QSOFA_PARTS = ("resp_rate", "sbp", "gcs")


@register(Card(
    name="qsofa",
    title="qSOFA (quick SOFA)",
    purpose="Quick SOFA over the first `hours` (default 24) of each ICU stay: respiratory rate >= 22, "
            "systolic BP <= 100, altered mentation (GCS < 15).",
    eligibility="ICU stays (adults with suspected infection, for its intended use).",
    inputs="chartevents: respiratory rate 220210/224690, SBP 220050/220179/225309, GCS 220739/223900/223901.",
    output="One row per ICU stay: subject_id, hadm_id, stay_id, qsofa (0-3), resp_rate_max, sbp_min, gcs_min and "
           "the criteria resp_rate_ge_22, sbp_le_100, gcs_lt_15.",
    interpretation="qSOFA >= 2 flags infected patients at higher risk of death or prolonged ICU stay.",
    source="Seymour CW et al. Assessment of clinical criteria for sepsis (Sepsis-3). JAMA 2016;315:762-74; "
           "Singer M et al. The Third International Consensus Definitions for Sepsis and Septic Shock. JAMA "
           "2016;315:801-10.",
    limits="Worst values over the whole window (not simultaneous); GCS < 15 stands for altered mentation. On "
           "ehrsql_mimic_iv (no GCS) pass components=('resp_rate', 'sbp').",
    level="ICU stay",
    keywords=("qsofa", "quick sofa", "q sofa", "sepsis screening", "bedside sepsis score"),
    vectors=(
        Vector("RR 24 at 1 h, SBP 95 at 2 h, GCS 15: qSOFA 2", {"qsofa": 2, "resp_rate_ge_22": True,
               "gcs_lt_15": False},
               data=icu_patient(chart=[(220210, 1, 24.0), (220179, 2, 95.0), (220739, 1, 4), (223900, 1, 5),
                                       (223901, 1, 6)])),
        Vector("As of 1:30 the low SBP is not yet charted: qSOFA 1", {"qsofa": 1},
               call={"as_of": "2180-01-02 01:30:00"},
               data=icu_patient(chart=[(220210, 1, 24.0), (220179, 2, 95.0)])),
    ),
))
def qsofa(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
          hours: float = 24, components: tuple[str, ...] | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "qsofa")
    chosen = QSOFA_PARTS if components is None else tuple(components)
    if set(chosen) - set(QSOFA_PARTS):
        raise SkillError(f"qSOFA components are {QSOFA_PARTS}.")
    if "gcs" in chosen and not ctx.can("gcs"):
        raise SkillError(f"qSOFA needs GCS for altered mentation, which {ctx.items.name} does not record "
                         f"({ctx.items.missing['gcs']}). Pass components=('resp_rate', 'sbp').")
    frame = aggregate(ctx, {"resp_rate_max": ("resp_rate", "max"), "sbp_min": ("sbp", "min")}, "stay", hours)
    gcs_min = pl.lit(None, dtype=pl.Float64)
    if "gcs" in chosen:
        frame = frame.join(gcs_worst(ctx, hours), on="stay_id", how="left")
        gcs_min = pl.col("gcs_min")
    else:
        frame = frame.with_columns(gcs_min.alias("gcs_min"))
    criteria = calc.qsofa_criteria(pl.col("resp_rate_max") if "resp_rate" in chosen else None,
                                   pl.col("sbp_min") if "sbp" in chosen else None, gcs_min)
    return frame.with_columns(**criteria).with_columns(
        calc.qsofa(pl.col("resp_rate_max") if "resp_rate" in chosen else None,
                   pl.col("sbp_min") if "sbp" in chosen else None, gcs_min).alias("qsofa"),
    ).select(*STAY_IDS, "qsofa", "resp_rate_max", "sbp_min", "gcs_min", *criteria)


@register(Card(
    name="sirs",
    title="SIRS criteria",
    purpose="Systemic inflammatory response syndrome criteria met over the first `hours` (default 24) of each "
            "ICU stay: temperature, heart rate, respiration (rate or PaCO2), white cells (count or bands).",
    eligibility="ICU stays.",
    inputs="chartevents: temperature 223761 (F)/223762 (C), heart rate 220045, respiratory rate 220210/224690; "
           "labevents: PaCO2 50818, WBC 51301/51300, bands 51144.",
    output="One row per ICU stay: subject_id, hadm_id, stay_id, sirs (0-4), the four criteria (bool) and the "
           "worst values (temperature_min/max, heart_rate_max, resp_rate_max, paco2_min, wbc_min/max, bands_max).",
    interpretation="SIRS >= 2 met the 1991/2001 sepsis definition with infection; it is sensitive but not "
                   "specific (Kaukonen 2015).",
    source="Bone RC et al. Definitions for sepsis and organ failure (ACCP/SCCM Consensus Conference). Chest "
           "1992;101:1644-55.",
    limits="Worst values over the window, not simultaneous. Labs from 6 h before ICU admission.",
    level="ICU stay",
    keywords=("sirs", "systemic inflammatory response syndrome", "sirs criteria", "inflammation"),
    vectors=(
        Vector("Temp 38.5, HR 95, RR 18 but PaCO2 30, WBC 13: SIRS 4", {"sirs": 4, "respiration": True},
               data=icu_patient(chart=[(223762, 1, 38.5), (220045, 1, 95.0), (220210, 1, 18.0)],
                                labs=[(50818, 2, 30.0), (51301, 2, 13.0)])),
        Vector("Temp 37, HR 80, RR 18, WBC 8 with bands 12%: SIRS 1 (white cells)",
               {"sirs": 1, "wbc": True, "temperature": False},
               data=icu_patient(chart=[(223762, 1, 37.0), (220045, 1, 80.0), (220210, 1, 18.0)],
                                labs=[(51301, 2, 8.0), (51144, 2, 12.0)])),
    ),
))
def sirs(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
         hours: float = 24) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "sirs")
    specs = {"temperature_min": ("temperature", "min"), "temperature_max": ("temperature", "max"),
             "heart_rate_max": ("heart_rate", "max"), "resp_rate_max": ("resp_rate", "max"),
             "paco2_min": ("paco2", "min"), "wbc_min": ("wbc", "min"), "wbc_max": ("wbc", "max"),
             "bands_max": ("bands", "max")}
    frame = aggregate(ctx, specs, "stay", hours)
    values = {k: pl.col(k) for k in specs}
    criteria = calc.sirs_criteria(**values)
    return frame.with_columns(**criteria).with_columns(calc.sirs(**values).alias("sirs")).select(
        *STAY_IDS, "sirs", *criteria, *specs)


def _antibiotic_filter(ctx: Context) -> str:
    names = "|".join(re.escape(n) for n in ANTIBIOTICS)
    forms = "|".join(re.escape(n) for n in ANTIBIOTIC_EXCLUDED_FORMS)
    routes = ", ".join(f"'{r}'" for r in ANTIBIOTIC_EXCLUDED_ROUTES)
    route = ("lower(coalesce(p.route, '')) NOT IN (" + routes + ")") if ctx.has("prescriptions", "route") else "TRUE"
    return (f"regexp_matches(lower(p.drug), '{names}') AND NOT regexp_matches(lower(p.drug), '{forms}') "
            f"AND {route}")


def suspected_infection_sql(ctx: Context) -> str:
    """CTEs (over an admissions ``cohort``) ending in ``si``: one row per antibiotic start with a
    culture within 72 h before or 24 h after it."""
    ctx.require("prescriptions", "subject_id", "hadm_id", "starttime", "drug", why="antibiotics")
    ctx.require("microbiologyevents", "subject_id", "charttime", why="cultures")
    when = ("coalesce(m.charttime, CAST(m.chartdate AS TIMESTAMP))" if ctx.has("microbiologyevents", "chartdate")
            else "m.charttime")
    spec = "m.spec_type_desc" if ctx.has("microbiologyevents", "spec_type_desc") else "NULL"
    return f"""
    abx AS (SELECT p.subject_id, p.hadm_id, p.drug AS antibiotic, p.starttime AS antibiotic_time
            FROM prescriptions p JOIN cohort k ON p.hadm_id = k.hadm_id
            WHERE {_antibiotic_filter(ctx)} AND p.starttime <= {ctx.cutoff}),
    cx AS (SELECT m.subject_id, {when} AS culture_time, min({spec}) AS specimen
           FROM microbiologyevents m WHERE m.subject_id IN (SELECT subject_id FROM cohort)
             AND {when} <= {ctx.cutoff} GROUP BY 1, 2),
    pairs AS (
      SELECT a.*,
        (SELECT max(c.culture_time) FROM cx c WHERE c.subject_id = a.subject_id
           AND c.culture_time BETWEEN a.antibiotic_time - INTERVAL 72 HOUR AND a.antibiotic_time) AS before,
        (SELECT min(c.culture_time) FROM cx c WHERE c.subject_id = a.subject_id
           AND c.culture_time > a.antibiotic_time AND c.culture_time <= a.antibiotic_time + INTERVAL 24 HOUR) AS after
      FROM abx a),
    si AS (
      SELECT p.subject_id, p.hadm_id, p.antibiotic, p.antibiotic_time, coalesce(p.before, p.after) AS culture_time,
             CASE WHEN p.before IS NOT NULL THEN p.before ELSE p.antibiotic_time END AS suspected_infection_time,
             (SELECT min(c.specimen) FROM cx c WHERE c.subject_id = p.subject_id
                AND c.culture_time = coalesce(p.before, p.after)) AS specimen
      FROM pairs p WHERE coalesce(p.before, p.after) IS NOT NULL)"""


@register(Card(
    name="suspected_infection",
    title="Suspected infection (antibiotics + cultures)",
    purpose="Suspicion of infection events per admission: a systemic antibiotic started with a body-fluid "
            "culture taken within 72 h before or 24 h after it (Sepsis-3 operationalisation).",
    eligibility="Hospital admissions with prescriptions and microbiology.",
    inputs="prescriptions (drug names of systemic antibiotics; eye/ear/topical routes and forms excluded), "
           "microbiologyevents (any culture: charttime, else chartdate).",
    output="One row per qualifying antibiotic start: subject_id, hadm_id, antibiotic, antibiotic_time, "
           "culture_time, specimen, suspected_infection_time (culture time if it came first, else antibiotic "
           "time).",
    interpretation="Suspected infection time anchors the Sepsis-3 SOFA window (48 h before to 24 h after).",
    source="Seymour CW et al. JAMA 2016;315:762-74 (supplement: suspected infection); antibiotic list after "
           "mimic-code antibiotic.sql (Johnson AEW et al., JAMIA 2018).",
    limits="Antibiotics matched by drug name; any culture counts (incl. screening swabs). An event needs both "
           "the antibiotic and the culture charted by as_of.",
    level="antibiotic start",
    keywords=("suspected infection", "suspicion of infection", "antibiotics and cultures", "infection",
              "blood culture antibiotic"),
    vectors=(
        Vector("Blood culture at 1 h, vancomycin at 2 h: suspected infection at 1 h",
               {"suspected_infection_time": "2180-01-02 01:00:00", "culture_time": "2180-01-02 01:00:00"},
               data=icu_patient(prescriptions=[("Vancomycin", 2)], micro=[(1, "BLOOD CULTURE")])),
        Vector("Cefepime at 2 h, urine culture at 20 h (within 24 h): suspected infection at 2 h",
               {"suspected_infection_time": "2180-01-02 02:00:00", "culture_time": "2180-01-02 20:00:00"},
               data=icu_patient(prescriptions=[("Cefepime", 2)], micro=[(20, "URINE")])),
        Vector("Culture 98 h before the antibiotic, or an eye ointment: no event", [],
               data=icu_patient(prescriptions=[("Cefepime", 100), ("Erythromycin Ophth Oint", 2, "BOTH EYES")],
                                micro=[(2, "URINE")], los_hours=120)),
    ),
))
def suspected_infection(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None,
                        as_of: Any = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "suspected_infection")
    return ctx.sql(f"{with_ctes(cohort_cte(ctx, 'admission'))}, {suspected_infection_sql(ctx)} "
                   f"SELECT subject_id, hadm_id, antibiotic, antibiotic_time, culture_time, specimen, "
                   f"suspected_infection_time FROM si ORDER BY subject_id, hadm_id, suspected_infection_time")


@register(Card(
    name="sepsis3",
    title="Sepsis-3",
    purpose="Sepsis-3 per ICU stay: suspected infection (antibiotic + culture) with an acute rise of SOFA >= 2 "
            "(rolling 24 h SOFA, baseline 0) from 48 h before to 24 h after the suspicion.",
    eligibility="ICU stays; suspicions from 24 h before ICU admission to 48 h after discharge.",
    inputs="As suspected_infection and sofa_hourly.",
    output="One row per ICU stay: subject_id, hadm_id, stay_id, sepsis3 (bool), suspected_infection (bool), "
           "suspected_infection_time, antibiotic, antibiotic_time, culture_time, sofa_time (end of the first "
           "hour with SOFA >= 2 in the window), sofa_24hours.",
    interpretation="Sepsis = life-threatening organ dysfunction caused by a dysregulated host response to "
                   "infection; in-hospital mortality > 10%.",
    source="Singer M et al. The Third International Consensus Definitions for Sepsis and Septic Shock "
           "(Sepsis-3). JAMA 2016;315:801-10; Seymour CW et al. JAMA 2016;315:762-74; after mimic-code sepsis3.",
    limits="Baseline SOFA assumed 0 (as in mimic-code), so chronic organ dysfunction counts. The earliest "
           "suspicion that meets the criterion is reported (else the earliest suspicion). On ehrsql_mimic_iv "
           "pass sofa_components=('coagulation', 'liver', 'renal').",
    level="ICU stay",
    keywords=("sepsis", "sepsis 3", "sepsis-3", "septic", "sepsis onset", "infection organ dysfunction"),
    vectors=(
        Vector("Blood culture 1 h, vancomycin 2 h, platelets 45 at 3 h (SOFA 3): sepsis", {
               "sepsis3": True, "suspected_infection_time": "2180-01-02 01:00:00",
               "sofa_time": "2180-01-02 03:00:00", "sofa_24hours": 3},
               data=icu_patient(prescriptions=[("Vancomycin", 2)], micro=[(1, "BLOOD CULTURE")],
                                labs=[(51265, 3, 45.0)])),
        Vector("Suspected infection but platelets 120 (SOFA 1): no sepsis", {"sepsis3": False,
               "suspected_infection": True},
               data=icu_patient(prescriptions=[("Vancomycin", 2)], micro=[(1, "BLOOD CULTURE")],
                                labs=[(51265, 3, 120.0)])),
        Vector("As of 10 h the culture (20 h) is not yet taken: no suspected infection",
               {"sepsis3": False, "suspected_infection": False}, call={"as_of": "2180-01-02 10:00:00"},
               data=icu_patient(prescriptions=[("Cefepime", 2)], micro=[(20, "URINE")], labs=[(51265, 3, 45.0)])),
    ),
))
def sepsis3(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
            sofa_components: tuple[str, ...] | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "sepsis3")
    chosen = components_for(ctx, sofa_components, "Sepsis-3 (SOFA)")
    hourly = sofa_points(sofa_values(ctx, hourly_windows(ctx), chosen), chosen, total="sofa_24hours")
    stays = ctx.sql(f"{with_ctes(cohort_cte(ctx, 'stay'))} SELECT subject_id, hadm_id, stay_id, intime, outtime "
                    "FROM cohort ORDER BY stay_id")
    adm = Context(ehr, scope(None, stays["hadm_id"].unique().to_list(), None, as_of), "sepsis3")
    si = adm.sql(f"{with_ctes(cohort_cte(adm, 'admission'))}, {suspected_infection_sql(adm)} "
                 "SELECT hadm_id, antibiotic, antibiotic_time, culture_time, suspected_infection_time FROM si")
    hours24, hours48 = pl.duration(hours=24), pl.duration(hours=48)
    events = stays.join(si, on="hadm_id", how="inner").filter(
        (pl.col("suspected_infection_time") >= pl.col("intime") - hours24)
        & (pl.col("suspected_infection_time") <= pl.col("outtime") + hours48))
    keys = ["stay_id", "suspected_infection_time", "antibiotic_time"]
    rises = (events.join(hourly.filter(pl.col("sofa_24hours") >= 2).select("stay_id", "window_end", "sofa_24hours"),
                         on="stay_id", how="inner")
             .filter((pl.col("window_end") >= pl.col("suspected_infection_time") - hours48)
                     & (pl.col("window_end") <= pl.col("suspected_infection_time") + hours24))
             .sort([*keys, "window_end"]).group_by(keys, maintain_order=True)
             .agg(pl.col("window_end").first().alias("sofa_time"), pl.col("sofa_24hours").first()))
    per_si = events.join(rises, on=keys, how="left")
    best = (per_si.with_columns(pl.col("sofa_time").is_not_null().alias("sepsis3"))
            .sort("stay_id", pl.col("sepsis3").not_(), "suspected_infection_time")
            .group_by("stay_id", maintain_order=True).first()
            .select("stay_id", "sepsis3", "suspected_infection_time", "antibiotic", "antibiotic_time", "culture_time",
                    "sofa_time", pl.when(pl.col("sofa_time").is_not_null()).then(pl.col("sofa_24hours"))
                    .alias("sofa_24hours")))
    out = stays.select("subject_id", "hadm_id", "stay_id").join(best, on="stay_id", how="left")
    return out.with_columns(pl.col("sepsis3").fill_null(False),
                            pl.col("suspected_infection_time").is_not_null().alias("suspected_infection")).select(
        *STAY_IDS, "sepsis3", "suspected_infection", "suspected_infection_time", "antibiotic", "antibiotic_time",
        "culture_time", "sofa_time", "sofa_24hours")
