"""Charlson comorbidity index from ICD-9-CM / ICD-10 codes (Quan 2005 coding algorithms)."""

from __future__ import annotations

from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.codes import CHARLSON
from ehr_magic.skills.registry import register
from ehr_magic.skills.scores._icd import condition_flags, with_age
from ehr_magic.skills.testing import icu_patient

CONDITIONS = list(CHARLSON)


@register(Card(
    name="charlson",
    title="Charlson comorbidity index",
    purpose="Charlson comorbidity index per hospital admission from its ICD-9-CM/ICD-10 diagnosis codes "
            "(Quan 2005 coding algorithms), with the 17 comorbidity flags and age points.",
    eligibility="Hospital admissions with coded diagnoses (adults).",
    inputs="diagnoses_icd (icd_code, icd_version; EHRSQL 'icd9|...' codes), patients/admissions for age.",
    output="One row per admission: subject_id, hadm_id, age, age_score, the 17 condition flags (0/1: "
           "myocardial_infarct, congestive_heart_failure, peripheral_vascular_disease, cerebrovascular_disease, "
           "dementia, chronic_pulmonary_disease, rheumatic_disease, peptic_ulcer_disease, mild_liver_disease, "
           "diabetes_without_cc, diabetes_with_cc, paraplegia, renal_disease, malignant_cancer, "
           "severe_liver_disease, metastatic_solid_tumor, aids), charlson_without_age and "
           "charlson_comorbidity_index (with age).",
    interpretation="Weights 1 (MI, CHF, PVD, CVD, dementia, COPD, rheumatic, ulcer, mild liver, diabetes), 2 "
                   "(diabetes with complications, paraplegia, renal, cancer), 3 (severe liver), 6 (metastases, "
                   "AIDS); milder forms are not counted with their severe form. Higher = more comorbidity "
                   "and mortality; 10-year survival ~ 0.983^exp(0.9 x index).",
    source="Quan H et al. Coding algorithms for defining comorbidities in ICD-9-CM and ICD-10 administrative "
           "data. Med Care 2005;43:1130-9; Charlson ME et al. J Chronic Dis 1987;40:373-83; age points: "
           "Charlson M et al. J Clin Epidemiol 1994;47:1245-51.",
    limits="Codes are those of the admission (history=True adds earlier admissions). MIMIC-IV codes are "
           "assigned at discharge, so with as_of before discharge the admission's own codes are not used. Age "
           "points: < 50: 0, 50-59: 1, 60-69: 2, 70-79: 3, >= 80: 4 (mimic-code uses <= 50, 51-60, ...).",
    level="admission",
    keywords=("charlson", "charlson comorbidity index", "cci", "comorbidity", "comorbidities",
              "comorbidity burden", "quan"),
    vectors=(
        Vector("Age 70, ICD-10 I21.4 (MI), E11.22 (diabetes with complications), C78.0 (metastases) and C34.1 "
               "(lung cancer, not counted with metastases): 1 + 2 + 6 + age 3 = 12",
               {"myocardial_infarct": 1, "diabetes_with_cc": 1, "diabetes_without_cc": 0, "malignant_cancer": 1,
                "metastatic_solid_tumor": 1, "charlson_without_age": 9, "age_score": 3,
                "charlson_comorbidity_index": 12},
               data=icu_patient(age=70, diagnoses=[("I214", 10), ("E1122", 10), ("C780", 10), ("C341", 10)])),
        Vector("Age 45, ICD-9 428.0 (CHF), 571.5 (cirrhosis: mild liver) and 572.3 (portal hypertension: "
               "severe liver): 1 + 3 = 4",
               {"congestive_heart_failure": 1, "mild_liver_disease": 1, "severe_liver_disease": 1, "age_score": 0,
                "charlson_comorbidity_index": 4},
               data=icu_patient(age=45, diagnoses=[("4280", 9), ("5715", 9), ("5723", 9)])),
        Vector("As of a time before discharge the codes are not yet known: index = age points only",
               {"charlson_comorbidity_index": 3}, call={"as_of": "2180-01-03 00:00:00"},
               data=icu_patient(age=70, diagnoses=[("I214", 10)])),
    ),
))
def charlson(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
             history: bool = False) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "charlson")
    frame = with_age(ctx, condition_flags(ctx, CHARLSON, history=history))
    flags = {name: pl.col(name) for name in CONDITIONS}
    return frame.with_columns(
        calc.charlson_age_points(pl.col("age")).alias("age_score"),
        calc.charlson_index(flags).alias("charlson_without_age"),
    ).with_columns(
        (pl.col("charlson_without_age") + pl.col("age_score").fill_null(0)).alias("charlson_comorbidity_index"),
    ).select("subject_id", "hadm_id", "age", "age_score", *CONDITIONS, "charlson_without_age",
             "charlson_comorbidity_index")
