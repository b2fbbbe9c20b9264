"""Atrial fibrillation risk scores: CHA2DS2-VASc (stroke) and HAS-BLED (bleeding)."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.codes import (
    ALCOHOL, ANTIPLATELETS_NSAIDS, ATRIAL_FIBRILLATION, BLEEDING, CHF, DIABETES, HYPERTENSION, LIVER_ABNORMAL,
    RENAL_ABNORMAL, STROKE_ANY, STROKE_TIA_TE, VASCULAR,
)
from ehr_magic.skills.events import with_ctes
from ehr_magic.skills.items import CONCEPTS
from ehr_magic.skills.registry import register
from ehr_magic.skills.scores._icd import condition_flags, with_age
from ehr_magic.skills.testing import icu_patient
from ehr_magic.skills.timeline import cohort_cte

ADM_IDS = ["subject_id", "hadm_id"]
HISTORY_NOTE = ("Conditions come from ICD codes of the admission and (history=True, default) the patient's "
                "earlier admissions; MIMIC-IV codes are known only at discharge, so an as_of before discharge "
                "uses earlier admissions only.")


@register(Card(
    name="cha2ds2_vasc",
    title="CHA2DS2-VASc stroke risk score",
    purpose="CHA2DS2-VASc stroke risk per admission (for atrial fibrillation) from ICD codes, age and sex.",
    eligibility="Adults with (non-valvular) atrial fibrillation: the atrial_fibrillation column flags them "
                "(ICD-9 427.31, ICD-10 I48).",
    inputs="diagnoses_icd (CHF, hypertension, diabetes, stroke/TIA/thromboembolism, MI/PAD/aortic plaque, AF), "
           "patients/admissions (age, gender).",
    output="One row per admission: subject_id, hadm_id, age, gender, atrial_fibrillation, chf, hypertension, "
           "diabetes, stroke_tia_te, vascular (0/1), cha2ds2_vasc (0-9).",
    interpretation="0 (men) / 1 (women): low risk, no anticoagulation; 1 (men) / 2 (women): consider; >= 2 "
                   "(men) / >= 3 (women): oral anticoagulation recommended (ESC 2020).",
    source="Lip GYH et al. Refining clinical risk stratification for predicting stroke and thromboembolism in "
           "atrial fibrillation using a novel risk factor-based approach. Chest 2010;137:263-72.",
    limits=HISTORY_NOTE + " Hypertension and diabetes are coded diagnoses, not measurements.",
    level="admission",
    keywords=("cha2ds2 vasc", "chads vasc", "cha2ds2-vasc", "chads2", "stroke risk", "atrial fibrillation stroke",
              "anticoagulation"),
    vectors=(
        Vector("Woman of 76 with AF (I48.91), heart failure (I50.9), hypertension (I10): 1+1+2+1 = 5",
               {"atrial_fibrillation": 1, "cha2ds2_vasc": 5},
               data=icu_patient(age=76, gender="F", diagnoses=[("I4891", 10), ("I509", 10), ("I10", 10)])),
        Vector("Man of 68, ICD-9 427.31, prior stroke V12.54, diabetes 250.00, old MI 412: 1+2+1+1 = 5",
               {"stroke_tia_te": 1, "vascular": 1, "cha2ds2_vasc": 5},
               data=icu_patient(age=68, gender="M", diagnoses=[("42731", 9), ("V1254", 9), ("25000", 9), ("412", 9)])),
    ),
))
def cha2ds2_vasc(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None,
                 as_of: Any = None, history: bool = True) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "cha2ds2_vasc")
    conditions = {"atrial_fibrillation": ATRIAL_FIBRILLATION, "chf": CHF, "hypertension": HYPERTENSION,
                  "diabetes": DIABETES, "stroke_tia_te": STROKE_TIA_TE, "vascular": VASCULAR}
    frame = with_age(ctx, condition_flags(ctx, conditions, history=history))
    c = pl.col
    return frame.with_columns(calc.cha2ds2_vasc(c("chf"), c("hypertension"), c("age"), c("diabetes"),
                                                c("stroke_tia_te"), c("vascular"), c("gender") == "F")
                              .alias("cha2ds2_vasc")).select(*ADM_IDS, "age", "gender", *conditions, "cha2ds2_vasc")


def _labs_and_drugs(ctx: Context) -> pl.DataFrame:
    """Per admission: max creatinine, bilirubin, AST, ALT (by as_of) and any antiplatelet/NSAID."""
    labs = {n: CONCEPTS[n] for n in ("creatinine", "bilirubin", "ast", "alt")}
    cols = ", ".join(f"max(l.valuenum) FILTER (WHERE l.itemid IN ({', '.join(map(str, c.itemids))})) AS {n}_max"
                     for n, c in labs.items())
    ids = ", ".join(str(i) for c in labs.values() for i in c.itemids)
    ctx.require("labevents", "hadm_id", "itemid", "charttime", "valuenum", why="renal and liver labs")
    frame = ctx.sql(f"""{with_ctes(cohort_cte(ctx, 'admission'))}
        SELECT k.hadm_id, {cols} FROM cohort k LEFT JOIN labevents l ON l.hadm_id = k.hadm_id
          AND l.itemid IN ({ids}) AND l.charttime <= {ctx.cutoff} GROUP BY 1""")
    if ctx.has("prescriptions", "hadm_id", "starttime", "drug"):
        names = "|".join(re.escape(n) for n in ANTIPLATELETS_NSAIDS)
        drugs = ctx.sql(f"""{with_ctes(cohort_cte(ctx, 'admission'))}
            SELECT k.hadm_id, count(p.drug) > 0 AS drugs FROM cohort k LEFT JOIN prescriptions p
              ON p.hadm_id = k.hadm_id AND p.starttime <= {ctx.cutoff} AND regexp_matches(lower(p.drug), '{names}')
            GROUP BY 1""")
        frame = frame.join(drugs, on="hadm_id", how="left")
    else:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Boolean).alias("drugs"))
    return frame


@register(Card(
    name="has_bled",
    title="HAS-BLED bleeding risk score",
    purpose="HAS-BLED major bleeding risk per admission (anticoagulated atrial fibrillation) from ICD codes, "
            "labs, prescriptions and age.",
    eligibility="Adults with atrial fibrillation on or considered for anticoagulation (atrial_fibrillation flags "
                "them).",
    inputs="diagnoses_icd (hypertension, dialysis/transplant/ESRD, cirrhosis, stroke, bleeding or predisposition, "
           "alcohol, AF); labevents (creatinine 50912, bilirubin 50885, AST 50878, ALT 50861); prescriptions "
           "(antiplatelets, NSAIDs); age.",
    output="One row per admission: subject_id, hadm_id, age, atrial_fibrillation, hypertension, abnormal_renal, "
           "abnormal_liver, stroke, bleeding, labile_inr (always null: not derivable), elderly, drugs, alcohol "
           "(bool), has_bled (0-9).",
    interpretation=">= 3: high bleeding risk: address modifiable risk factors and review more often (not by "
                   "itself a reason to withhold anticoagulation).",
    source="Pisters R et al. A novel user-friendly score (HAS-BLED) to assess 1-year risk of major bleeding in "
           "patients with atrial fibrillation. Chest 2010;138:1093-100.",
    limits=HISTORY_NOTE + " Hypertension is coded hypertension (not uncontrolled SBP > 160). Abnormal renal: "
           "codes or creatinine >= 2.26 mg/dL (200 umol/L); abnormal liver: codes or bilirubin > 2.4 mg/dL with "
           "AST/ALT > 120 U/L (2x / 3x upper normal). Labile INR (time in range < 60%) cannot be derived and "
           "counts 0.",
    level="admission",
    keywords=("has bled", "has-bled", "hasbled", "bleeding risk", "anticoagulation bleeding",
              "major bleeding risk"),
    vectors=(
        Vector("Age 70, hypertension I10, creatinine 2.5, aspirin: H + A(renal) + E + D = 4",
               {"hypertension": True, "abnormal_renal": True, "abnormal_liver": False, "elderly": True,
                "drugs": True, "has_bled": 4},
               data=icu_patient(age=70, diagnoses=[("I10", 10), ("I4891", 10)], labs=[(50912, 5, 2.5)],
                                prescriptions=[("Aspirin", 3, "PO")])),
        Vector("Age 60, cirrhosis 571.5, GI bleed 578.9, alcohol 303.90: liver + bleeding + alcohol = 3",
               {"abnormal_liver": True, "bleeding": True, "alcohol": True, "elderly": False, "has_bled": 3},
               data=icu_patient(age=60, diagnoses=[("5715", 9), ("5789", 9), ("30390", 9)])),
    ),
))
def has_bled(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
             history: bool = True) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "has_bled")
    conditions = {"atrial_fibrillation": ATRIAL_FIBRILLATION, "htn": HYPERTENSION, "renal_codes": RENAL_ABNORMAL,
                  "liver_codes": LIVER_ABNORMAL, "stroke_codes": STROKE_ANY, "bleeding_codes": BLEEDING,
                  "alcohol_codes": ALCOHOL}
    frame = with_age(ctx, condition_flags(ctx, conditions, history=history)).join(
        _labs_and_drugs(ctx), on="hadm_id", how="left")
    c = pl.col
    frame = frame.with_columns(
        (c("htn") == 1).alias("hypertension"),
        ((c("renal_codes") == 1) | (c("creatinine_max") >= 2.26).fill_null(False)).alias("abnormal_renal"),
        ((c("liver_codes") == 1) | ((c("bilirubin_max") > 2.4)
                                    & (pl.max_horizontal(c("ast_max"), c("alt_max")) > 120)).fill_null(False))
        .alias("abnormal_liver"),
        (c("stroke_codes") == 1).alias("stroke"), (c("bleeding_codes") == 1).alias("bleeding"),
        pl.lit(None, dtype=pl.Boolean).alias("labile_inr"), (c("age") > 65).fill_null(False).alias("elderly"),
        c("drugs").fill_null(False), (c("alcohol_codes") == 1).alias("alcohol"),
    )
    return frame.with_columns(calc.has_bled(c("hypertension"), c("abnormal_renal"), c("abnormal_liver"), c("stroke"),
                                            c("bleeding"), c("labile_inr"), c("age"), c("drugs"), c("alcohol"))
                              .alias("has_bled")).select(
        *ADM_IDS, "age", "atrial_fibrillation", "hypertension", "abnormal_renal", "abnormal_liver", "stroke",
        "bleeding", "labile_inr", "elderly", "drugs", "alcohol", "has_bled")
