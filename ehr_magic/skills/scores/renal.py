"""Kidney function: eGFR by the race-free CKD-EPI 2021 creatinine equation."""

from __future__ import annotations

from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, pick, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.items import CONCEPTS
from ehr_magic.skills.registry import register
from ehr_magic.skills.testing import icu_patient
from ehr_magic.skills.timeline import LEVELS, concept_values, level_for


@register(Card(
    name="egfr",
    title="eGFR (CKD-EPI 2021, race-free)",
    purpose="Estimated glomerular filtration rate from each serum creatinine, by the 2021 CKD-EPI creatinine "
            "equation without race, per admission (or ICU stay).",
    eligibility="Adults (>= 18 y) with a stable creatinine; admissions by default (labs from 6 h before), "
                "by='stay' for ICU stays.",
    inputs="labevents: creatinine 50912 (mg/dL); patients/admissions: age at admission, gender.",
    output="subject_id, hadm_id[, stay_id], charttime, egfr (mL/min/1.73 m2), creatinine, age, gender. "
           "which='all' (default) every value; 'first'/'last'/'min'/'max'/'worst' (= min) one row per admission; "
           "'summary'.",
    interpretation="CKD G1 >= 90, G2 60-89, G3a 45-59, G3b 30-44, G4 15-29, G5 < 15 mL/min/1.73 m2 (KDIGO 2012 "
                   "CKD); drug dosing often uses < 30 or < 60 thresholds.",
    source="Inker LA et al. New creatinine- and cystatin C-based equations to estimate GFR without race. N Engl "
           "J Med 2021;385:1737-49.",
    limits="Not valid when creatinine is changing (AKI), in children, or at extremes of muscle mass. Age is "
           "the age at admission.",
    level="creatinine measurement",
    keywords=("egfr", "gfr", "ckd epi", "glomerular filtration rate", "kidney function", "renal function",
              "creatinine clearance", "ckd"),
    vectors=(
        Vector("Woman of 50, creatinine 0.7: 142 x 0.9938^50 x 1.012 = 105.30", {"egfr": 105.30},
               data=icu_patient(age=50, gender="F", labs=[(50912, 2, 0.7)])),
        Vector("Man of 60, creatinine 1.0 and later 2.0: lowest eGFR (2.0: 142 x (2.0/0.9)^-1.2 x 0.9938^60 = 37.50)",
               {"egfr": 37.50},
               call={"which": "worst"},
               data=icu_patient(age=60, gender="M", labs=[(50912, 2, 1.0), (50912, 20, 2.0)])),
    ),
))
def egfr(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
         hours: float | None = None, which: str = "all", by: str | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "egfr")
    level = level_for(ctx, by, "admission")
    ids = LEVELS[level][3]
    frame = concept_values(ctx, [CONCEPTS["creatinine"]], level, hours).select(
        *ids, "charttime", pl.col("value").alias("creatinine"))
    frame = frame.join(ctx.sql(ctx.age_sql()), on="hadm_id", how="left").filter(pl.col("age") >= 18)
    frame = frame.with_columns(
        calc.egfr_ckd_epi_2021(pl.col("creatinine"), pl.col("age"), pl.col("gender")).alias("egfr"))
    return pick(frame.select(*ids, "charttime", "egfr", "creatinine", "age", "gender"), ids, "egfr", which, "min")
