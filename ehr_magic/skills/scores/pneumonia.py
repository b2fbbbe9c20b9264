"""CURB-65 pneumonia severity."""

from __future__ import annotations

from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.registry import register
from ehr_magic.skills.scores._icd import condition_flags
from ehr_magic.skills.testing import icu_patient
from ehr_magic.skills.timeline import aggregate, gcs_worst

PARTS = ("confusion", "urea", "resp_rate", "blood_pressure", "age_65")
PNEUMONIA = {9: tuple(str(c) for c in range(480, 487)), 10: tuple(f"J{c}" for c in range(12, 19))}


@register(Card(
    name="curb65",
    title="CURB-65 pneumonia severity score",
    purpose="CURB-65 over the first `hours` (default 24) of each ICU stay: confusion, urea > 7 mmol/L, "
            "respiratory rate >= 30, low blood pressure, age >= 65.",
    eligibility="Adults with community-acquired pneumonia (the pneumonia column flags admissions coded ICD-9 "
                "480-486 / ICD-10 J12-J18).",
    inputs="chartevents: GCS (confusion), respiratory rate 220210/224690, SBP/DBP; labevents: BUN 51006; "
           "patients/admissions: age; diagnoses_icd: pneumonia.",
    output="One row per ICU stay: subject_id, hadm_id, stay_id, curb65 (0-5), the five criteria (bool), "
           "gcs_min, bun_max, resp_rate_max, sbp_min, dbp_min, age, pneumonia (0/1).",
    interpretation="0-1: low risk (30-day mortality < 3%, outpatient care); 2: moderate (~9%, consider admission); "
                   "3-5: severe (15-40%, consider ICU).",
    source="Lim WS et al. Defining community acquired pneumonia severity on presentation to hospital: an "
           "international derivation and validation study. Thorax 2003;58:377-82.",
    limits="Confusion is approximated by GCS < 15 (no mental test score). Worst values over the window. BUN "
           "> 19 mg/dL stands for urea > 7 mmol/L. On ehrsql_mimic_iv (no GCS) pass components without "
           "'confusion'.",
    level="ICU stay",
    keywords=("curb 65", "curb-65", "curb65", "pneumonia severity", "community acquired pneumonia"),
    vectors=(
        Vector("Age 70, GCS 14, BUN 25, RR 32, BP 100/55 with pneumonia J18.9: 5",
               {"curb65": 5, "pneumonia": 1},
               data=icu_patient(age=70, chart=[(220739, 1, 4), (223900, 1, 4), (223901, 1, 6), (220210, 2, 32.0),
                                               (220179, 3, 100.0), (220180, 3, 55.0)],
                                labs=[(51006, 2, 25.0)], diagnoses=[("J189", 10)])),
        Vector("Age 50, GCS 15, BUN 15, RR 20, BP 120/80: 0", {"curb65": 0, "urea": False},
               data=icu_patient(age=50, chart=[(220739, 1, 4), (223900, 1, 5), (223901, 1, 6), (220210, 2, 20.0),
                                               (220179, 3, 120.0), (220180, 3, 80.0)], labs=[(51006, 2, 15.0)])),
    ),
))
def curb65(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
           hours: float = 24, components: tuple[str, ...] | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "curb65")
    chosen = PARTS if components is None else tuple(components)
    if set(chosen) - set(PARTS):
        raise SkillError(f"CURB-65 components are {PARTS}.")
    if "confusion" in chosen and not ctx.can("gcs"):
        others = tuple(p for p in PARTS if p != "confusion")
        raise SkillError(f"CURB-65 needs GCS for confusion, which {ctx.items.name} does not record "
                         f"({ctx.items.missing['gcs']}). Pass components={others}.")
    frame = aggregate(ctx, {"bun_max": ("bun", "max"), "resp_rate_max": ("resp_rate", "max"),
                            "sbp_min": ("sbp", "min"), "dbp_min": ("dbp", "min")}, "stay", hours)
    if "confusion" in chosen:
        frame = frame.join(gcs_worst(ctx, hours), on="stay_id", how="left")
    else:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("gcs_min"))
    ages = ctx.sql(ctx.age_sql())
    flags = condition_flags(ctx, {"pneumonia": PNEUMONIA}, history=False).select("hadm_id", "pneumonia") \
        if ctx.has("diagnoses_icd") else pl.DataFrame(schema={"hadm_id": pl.Int64, "pneumonia": pl.Int32})
    frame = frame.join(ages.select("hadm_id", "age"), on="hadm_id", how="left").join(flags, on="hadm_id", how="left")
    c = pl.col
    criteria = calc.curb65_criteria(c("gcs_min") < 15, c("bun_max"), c("resp_rate_max"), c("sbp_min"), c("dbp_min"),
                                    c("age"))
    criteria = {k: (v if k in chosen else pl.lit(False)) for k, v in criteria.items()}
    return frame.with_columns(**criteria).with_columns(
        pl.sum_horizontal([c(k).cast(pl.Int64) for k in PARTS]).alias("curb65")).select(
        "subject_id", "hadm_id", "stay_id", "curb65", *PARTS, "gcs_min", "bun_max", "resp_rate_max", "sbp_min",
        "dbp_min", "age", "pneumonia")
