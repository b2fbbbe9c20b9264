"""Derived laboratory values (anion gap, corrected calcium) and body mass index."""

from __future__ import annotations

from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, in_list, pick, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.events import with_ctes
from ehr_magic.skills.items import CONCEPTS
from ehr_magic.skills.registry import register
from ehr_magic.skills.testing import icu_patient
from ehr_magic.skills.timeline import LEVELS, cohort_cte, concept_values, level_for, wide

WHICH_DOC = ("which='all' (default) gives every value; 'first', 'last', 'min', 'max' one row per admission "
             "(or stay); 'summary' first/last/min/max/mean/n.")
LEVEL_DOC = "Admissions by default (labs from 6 h before admission); by='stay' for ICU stays."


@register(Card(
    name="anion_gap",
    title="Anion gap",
    purpose="Serum anion gap, Na - (Cl + HCO3), at each chemistry panel (also with K), per admission or "
            "ICU stay.",
    eligibility="Admissions (or ICU stays) with sodium, chloride and bicarbonate measured together. " + LEVEL_DOC,
    inputs="labevents: sodium 50983, chloride 50902, bicarbonate 50882, potassium 50971 (same charttime).",
    output="subject_id, hadm_id[, stay_id], charttime, anion_gap, anion_gap_with_k, sodium, chloride, "
           "bicarbonate, potassium (mEq/L). " + WHICH_DOC,
    interpretation="Normal about 8-12 mEq/L without potassium (12-16 with); > 12 suggests a high anion gap "
                   "metabolic acidosis (lactate, ketones, renal failure, toxins). Low albumin lowers it "
                   "(~2.5 mEq/L per 1 g/dL).",
    source="Kraut JA, Madias NE. Serum anion gap: its uses and limitations in clinical medicine. Clin J Am Soc "
           "Nephrol 2007;2:162-74.",
    limits="Measurements are paired by identical charttime (same panel). MIMIC also reports a laboratory anion "
           "gap (50868); this skill recomputes it. Not albumin-corrected.",
    level="chemistry panel",
    keywords=("anion gap", "agap", "metabolic acidosis", "high anion gap", "electrolytes"),
    vectors=(
        Vector("Na 140, Cl 104, HCO3 24, K 4: gap 12, with K 16",
               {"anion_gap": 12.0, "anion_gap_with_k": 16.0},
               data=icu_patient(labs=[(50983, 2, 140.0), (50902, 2, 104.0), (50882, 2, 24.0), (50971, 2, 4.0)])),
        Vector("Highest of two panels (12 and 20)", {"anion_gap": 20.0}, call={"which": "max"},
               data=icu_patient(labs=[(50983, 2, 140.0), (50902, 2, 104.0), (50882, 2, 24.0),
                                      (50983, 9, 138.0), (50902, 9, 100.0), (50882, 9, 18.0)])),
    ),
))
def anion_gap(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
              hours: float | None = None, which: str = "all", by: str | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "anion_gap")
    level = level_for(ctx, by, "admission")
    ids = LEVELS[level][3]
    names = ["sodium", "chloride", "bicarbonate", "potassium"]
    frame = wide(concept_values(ctx, [CONCEPTS[n] for n in names], level, hours), ids, names)
    c = pl.col
    frame = frame.with_columns(
        calc.anion_gap(c("sodium"), c("chloride"), c("bicarbonate")).alias("anion_gap"),
        calc.anion_gap(c("sodium"), c("chloride"), c("bicarbonate"), c("potassium")).alias("anion_gap_with_k"),
    ).filter(c("anion_gap").is_not_null())
    return pick(frame.select(*ids, "charttime", "anion_gap", "anion_gap_with_k", *names), ids, "anion_gap", which,
                "max")


@register(Card(
    name="corrected_calcium",
    title="Albumin-corrected calcium",
    purpose="Total calcium corrected for low albumin (Payne), at each calcium measurement, using the latest "
            "albumin of the previous 24 h.",
    eligibility="Admissions (or ICU stays) with total calcium and albumin. " + LEVEL_DOC,
    inputs="labevents: calcium total 50893 (mg/dL), albumin 50862 (g/dL).",
    output="subject_id, hadm_id[, stay_id], charttime, corrected_calcium, calcium, albumin, albumin_time. "
           + WHICH_DOC,
    interpretation="Corrected Ca = Ca + 0.8 x (4.0 - albumin); normal 8.5-10.5 mg/dL. Ionised calcium is "
                   "more reliable in critical illness.",
    source="Payne RB et al. Interpretation of serum calcium in patients with abnormal serum proteins. Br Med J "
           "1973;4:643-6.",
    limits="Albumin from the same time or the previous 24 h (never later); without albumin no value.",
    level="calcium measurement",
    keywords=("corrected calcium", "albumin corrected calcium", "calcium correction", "hypocalcemia",
              "hypercalcemia", "payne"),
    vectors=(
        Vector("Calcium 8.0 with albumin 2.5 measured 3 h before: 9.2", {"corrected_calcium": 9.2, "albumin": 2.5},
               data=icu_patient(labs=[(50862, 1, 2.5), (50893, 4, 8.0)])),
        Vector("Albumin measured only after the calcium: no value", [],
               data=icu_patient(labs=[(50893, 4, 8.0), (50862, 6, 2.5)])),
    ),
))
def corrected_calcium(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None,
                      as_of: Any = None, hours: float | None = None, which: str = "all",
                      by: str | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "corrected_calcium")
    level = level_for(ctx, by, "admission")
    ids = LEVELS[level][3]
    long = concept_values(ctx, [CONCEPTS["calcium"], CONCEPTS["albumin"]], level, hours, lookback=30)
    ca = long.filter(pl.col("concept") == "calcium").select(*ids, "charttime", pl.col("value").alias("calcium"))
    alb = long.filter(pl.col("concept") == "albumin").select(*ids, pl.col("charttime").alias("albumin_time"),
                                                             pl.col("value").alias("albumin"))
    frame = ca.sort("charttime").join_asof(alb.sort("albumin_time"), left_on="charttime", right_on="albumin_time",
                                           by=ids, strategy="backward", tolerance="24h",
                                           check_sortedness=False)
    frame = frame.with_columns(calc.corrected_calcium(pl.col("calcium"), pl.col("albumin")).alias("corrected_calcium"))
    frame = frame.filter(pl.col("corrected_calcium").is_not_null())
    # albumin is looked up 24 h further back; the calcium itself keeps the usual 6 h lookback
    start = LEVELS[level][1]
    starts = ctx.sql(f"{with_ctes(cohort_cte(ctx, level))} SELECT {ids[-1]}, {start} AS t0 FROM cohort")
    frame = frame.join(starts, on=ids[-1]).filter(pl.col("charttime") >= pl.col("t0") - pl.duration(hours=6))
    return pick(frame.select(*ids, "charttime", "corrected_calcium", "calcium", "albumin", "albumin_time"),
                ids, "corrected_calcium", which, None)


@register(Card(
    name="bmi",
    title="Body mass index (BMI)",
    purpose="Body mass index per ICU stay from the first weight and height charted in the stay (else the latest "
            "outpatient values before it), or per patient from outpatient records (by='subject').",
    eligibility="Adults (BMI categories do not apply to children).",
    inputs="chartevents: weight 226512/224639/226531 (lbs), height 226730/226707 (in); omr: 'Weight (Lbs)', "
           "'Height (Inches)' (mimic_iv only).",
    output="by='stay': subject_id, hadm_id, stay_id, bmi, weight_kg, height_cm, weight_source, height_source "
           "('icu' or 'omr'); by='subject': subject_id, bmi, weight_kg, height_cm (latest outpatient values).",
    interpretation="WHO: < 18.5 underweight, 18.5-24.9 normal, 25-29.9 overweight, >= 30 obese (>= 40 class III).",
    source="World Health Organization. Obesity: preventing and managing the global epidemic. WHO Technical "
           "Report Series 894, 2000.",
    limits="Weights outside 20-400 kg and heights outside 100-250 cm are dropped. Outpatient values count only "
           "once their day has passed (dates without time) and before the ICU stay.",
    level="ICU stay or patient",
    keywords=("bmi", "body mass index", "obesity", "weight height", "obese", "underweight"),
    vectors=(
        Vector("70 kg and 175 cm charted in the ICU: BMI 22.86", {"bmi": 22.86, "weight_source": "icu"},
               data=icu_patient(chart=[(226512, 1, 70.0), (226730, 2, 175.0)])),
        Vector("Weight 154 lbs in the ICU (69.85 kg), height 69 in from the clinic 10 days before (175.26 cm): 22.74",
               {"bmi": 22.74, "height_source": "omr"},
               data=icu_patient(chart=[(226531, 1, 154.0)], omr=[(-10, "Height (Inches)", 69)])),
        Vector("by='subject': latest clinic weight 154 lbs and height 69 in: 22.74 (a later weight not yet known)",
               {"bmi": 22.74}, call={"by": "subject", "as_of": "2180-01-05 00:00:00"},
               data=icu_patient(omr=[(-10, "Height (Inches)", 69), (-10, "Weight (Lbs)", 154),
                                     (30, "Weight (Lbs)", 300)])),
    ),
))
def bmi(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
        by: str = "stay") -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "bmi")
    if by not in ("stay", "subject"):
        raise SkillError("by must be 'stay' or 'subject'.")
    omr = ctx.can("omr") and ctx.has("omr", "subject_id", "chartdate", "result_name", "result_value")

    def omr_sql(name: str, factor: float, before: str) -> str:
        return (f"(SELECT arg_max(TRY_CAST(o.result_value AS DOUBLE) * {factor}, o.chartdate) FROM omr o "
                f"WHERE o.subject_id = k.subject_id AND o.result_name = '{name}' "
                f"AND CAST(o.chartdate AS TIMESTAMP) + INTERVAL 1 DAY <= {before})")

    if by == "subject":
        if not omr:
            raise SkillError("bmi(by='subject') needs the omr table (outpatient weight and height), which this "
                             "dataset lacks; use by='stay'.")
        sc = ctx.scope
        if sc.stay_ids is None and sc.hadm_ids is None:
            subjects = "SELECT DISTINCT subject_id FROM omr WHERE " + in_list("subject_id", sc.subject_ids)
        else:
            subjects = f"SELECT DISTINCT subject_id FROM ({ctx.admissions_sql()})"
        frame = ctx.sql(f"WITH k AS ({subjects}) SELECT k.subject_id, "
                        f"{omr_sql('Weight (Lbs)', 0.45359237, ctx.cutoff)} AS weight_kg, "
                        f"{omr_sql('Height (Inches)', 2.54, ctx.cutoff)} AS height_cm FROM k ORDER BY 1")
        return frame.with_columns(calc.bmi(pl.col("weight_kg"), pl.col("height_cm")).alias("bmi")).select(
            "subject_id", "bmi", "weight_kg", "height_cm")
    ctx.require("chartevents", "stay_id", "itemid", "charttime", "valuenum", why="weight and height")
    before = f"least(k.intime, {ctx.cutoff})"
    omr_w = omr_sql("Weight (Lbs)", 0.45359237, before) if omr else "NULL::DOUBLE"
    omr_h = omr_sql("Height (Inches)", 2.54, before) if omr else "NULL::DOUBLE"
    return _bmi_stays(ctx, omr_w, omr_h)


def _bmi_stays(ctx: Context, omr_w: str, omr_h: str) -> pl.DataFrame:
    w, h = CONCEPTS["weight"], CONCEPTS["height"]
    values = " UNION ALL ".join(
        f"SELECT '{name}' AS concept, key, charttime, value FROM "
        f"({ctx.values_sql(c, 'cohort', 'stay_id', 'k.intime - INTERVAL 1 DAY', 'k.outtime')}) WHERE {ctx.valid(c)}"
        for name, c in (("weight", w), ("height", h)))
    frame = ctx.sql(f"""{with_ctes(cohort_cte(ctx, 'stay'), ('v', values))}
        SELECT k.subject_id, k.hadm_id, k.stay_id,
               (SELECT arg_min(v.value, v.charttime) FROM v
                WHERE v.key = k.stay_id AND v.concept = 'weight') AS icu_weight,
               (SELECT arg_min(v.value, v.charttime) FROM v
                WHERE v.key = k.stay_id AND v.concept = 'height') AS icu_height,
               {omr_w} AS omr_weight, {omr_h} AS omr_height
        FROM cohort k ORDER BY k.stay_id""")
    c = pl.col
    omr_weight = pl.when(c("omr_weight").is_between(w.low, w.high)).then(c("omr_weight"))
    omr_height = pl.when(c("omr_height").is_between(h.low, h.high)).then(c("omr_height"))
    frame = frame.with_columns(
        pl.coalesce(c("icu_weight"), omr_weight).alias("weight_kg"),
        pl.coalesce(c("icu_height"), omr_height).alias("height_cm"),
        pl.when(c("icu_weight").is_not_null()).then(pl.lit("icu")).when(omr_weight.is_not_null()).then(pl.lit("omr"))
        .alias("weight_source"),
        pl.when(c("icu_height").is_not_null()).then(pl.lit("icu")).when(omr_height.is_not_null()).then(pl.lit("omr"))
        .alias("height_source"),
    )
    return frame.with_columns(calc.bmi(c("weight_kg"), c("height_cm")).alias("bmi")).select(
        "subject_id", "hadm_id", "stay_id", "bmi", "weight_kg", "height_cm", "weight_source", "height_source")
