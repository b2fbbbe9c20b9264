"""Cards of the pure calculators (``skills.calc.<name>(...)``), with hand-computed vectors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ehr_magic.skills import calculators as calc
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.registry import register

SOFA = "Vincent JL et al. Intensive Care Med 1996;22:707-10."


def _add(fn: Callable[..., Any], title: str, purpose: str, interpretation: str, source: str,
         keywords: tuple[str, ...], vectors: list[tuple[str, dict[str, Any], Any]], output: str = "a number") -> None:
    register(Card(
        name=f"calc.{fn.__name__}", title=f"{title} (calculator)", purpose=purpose,
        eligibility="Any values you already have (no database access).",
        inputs="The arguments (None = not measured; polars expressions also accepted).",
        output=output, interpretation=interpretation, source=source, keywords=keywords, kind="calculator",
        level="value",
        vectors=tuple(Vector(d, e if isinstance(e, dict) else {"value": e}, call=c) for d, c, e in vectors),
    ))(fn)


_add(calc.egfr_ckd_epi_2021, "eGFR CKD-EPI 2021",
     "eGFR (mL/min/1.73 m2) from creatinine (mg/dL), age and sex, CKD-EPI 2021 without race.",
     "CKD G1 >= 90, G2 60-89, G3a 45-59, G3b 30-44, G4 15-29, G5 < 15.",
     "Inker LA et al. N Engl J Med 2021;385:1737-49.", ("egfr", "ckd epi", "gfr calculator"),
     [("Woman 50 y, Scr 0.7", {"creatinine": 0.7, "age": 50, "sex": "F"}, 105.30),
      ("Man 60 y, Scr 1.0: 142 x (1/0.9)^-1.2 x 0.9938^60", {"creatinine": 1.0, "age": 60, "sex": "M"}, 86.16),
      ("Woman 80 y, Scr 0.5 (below kappa): 142 x (0.5/0.7)^-0.241 x 0.9938^80 x 1.012",
       {"creatinine": 0.5, "age": 80, "sex": "F"}, 94.76)])
_add(calc.anion_gap, "Anion gap", "Na - (Cl + HCO3) [+ K] in mEq/L.", "Normal about 8-12 (without K).",
     "Kraut JA, Madias NE. Clin J Am Soc Nephrol 2007;2:162-74.", ("anion gap calculator",),
     [("140, 104, 24", {"sodium": 140, "chloride": 104, "bicarbonate": 24}, 12),
      ("with K 4", {"sodium": 140, "chloride": 104, "bicarbonate": 24, "potassium": 4}, 16)])
_add(calc.corrected_calcium, "Corrected calcium", "Ca + 0.8 x (4.0 - albumin), mg/dL and g/dL.",
     "Normal 8.5-10.5 mg/dL.", "Payne RB et al. Br Med J 1973;4:643-6.", ("corrected calcium calculator",),
     [("Ca 8.0, albumin 2.5", {"calcium": 8.0, "albumin": 2.5}, 9.2),
      ("Ca 10.0, albumin 4.5", {"calcium": 10.0, "albumin": 4.5}, 9.6)])
_add(calc.bmi, "Body mass index", "Weight (kg) / height (m)^2.", "< 18.5 under, 18.5-24.9 normal, 25-29.9 over, "
     ">= 30 obese.", "WHO Technical Report Series 894, 2000.", ("bmi calculator",),
     [("70 kg, 175 cm", {"weight_kg": 70, "height_cm": 175}, 22.86), ("100 kg, 160 cm", {"weight_kg": 100,
                                                                                          "height_cm": 160}, 39.06)])
_add(calc.mean_arterial_pressure, "Mean arterial pressure", "(SBP + 2 x DBP) / 3 in mmHg.", "Normal 70-100 mmHg.",
     "Guyton & Hall, Textbook of Medical Physiology.", ("map calculator",),
     [("120/80", {"sbp": 120, "dbp": 80}, 93.33), ("90/45", {"sbp": 90, "dbp": 45}, 60.0)])
_add(calc.shock_index, "Shock index", "Heart rate / systolic BP.", "> 1 suggests shock.",
     "Allgower M, Burri C. Dtsch Med Wochenschr 1967;92:1947-50.", ("shock index calculator",),
     [("HR 110, SBP 100", {"heart_rate": 110, "sbp": 100}, 1.1)])
_add(calc.pf_ratio, "P/F ratio", "PaO2 (mmHg) / FiO2 (fraction, or percent 21-100).", "< 300 mild, < 200 moderate, "
     "<= 100 severe ARDS (Berlin).", "ARDS Definition Task Force. JAMA 2012;307:2526-33.", ("pf ratio calculator",),
     [("PaO2 80, FiO2 0.4", {"pao2": 80, "fio2": 0.4}, 200.0), ("PaO2 80, FiO2 40%", {"pao2": 80, "fio2": 40}, 200.0)])
_add(calc.gcs_total, "GCS total", "Eye (1-4) + verbal (1-5) + motor (1-6).", "3-15; <= 8 coma.",
     "Teasdale G, Jennett B. Lancet 1974;2:81-4.", ("gcs calculator",), [("3 + 4 + 5", {"eye": 3, "verbal": 4,
                                                                                        "motor": 5}, 12)])
_add(calc.sofa_points_respiration, "SOFA respiration points", "SOFA respiration points from P/F ratio and "
     "respiratory support.", "0-4.", SOFA, ("sofa respiration",),
     [("P/F 160 ventilated", {"pf_ratio": 160, "ventilated": True}, 3), ("P/F 160 not ventilated",
                                                                          {"pf_ratio": 160}, 2),
      ("P/F 90 ventilated", {"pf_ratio": 90, "ventilated": True}, 4), ("P/F 450", {"pf_ratio": 450}, 0),
      ("P/F 350", {"pf_ratio": 350}, 1)])
_add(calc.sofa_points_coagulation, "SOFA coagulation points", "SOFA coagulation points from platelets (10^3/uL).",
     "0-4.", SOFA, ("sofa coagulation",), [("150", {"platelets": 150}, 0), ("149", {"platelets": 149}, 1),
                                           ("99", {"platelets": 99}, 2), ("45", {"platelets": 45}, 3),
                                           ("19", {"platelets": 19}, 4), ("missing", {"platelets": None}, None)])
_add(calc.sofa_points_liver, "SOFA liver points", "SOFA liver points from bilirubin (mg/dL).", "0-4.", SOFA,
     ("sofa liver",), [("1.1", {"bilirubin": 1.1}, 0), ("1.2", {"bilirubin": 1.2}, 1), ("2.0", {"bilirubin": 2.0}, 2),
                       ("6.0", {"bilirubin": 6.0}, 3), ("12", {"bilirubin": 12}, 4)])
_add(calc.sofa_points_cardiovascular, "SOFA cardiovascular points", "SOFA cardiovascular points from MAP and "
     "vasopressor doses (mcg/kg/min).", "0-4.", SOFA, ("sofa cardiovascular",),
     [("MAP 75", {"map_min": 75}, 0), ("MAP 65", {"map_min": 65}, 1), ("dopamine 5", {"map_min": 60, "dopamine": 5}, 2),
      ("dobutamine 2", {"map_min": 75, "dobutamine": 2}, 2), ("norepinephrine 0.1", {"map_min": 60,
                                                                                    "norepinephrine": 0.1}, 3),
      ("epinephrine 0.11", {"map_min": 60, "epinephrine": 0.11}, 4),
      ("dopamine 16", {"map_min": 60, "dopamine": 16}, 4)])
_add(calc.sofa_points_cns, "SOFA CNS points", "SOFA CNS points from GCS.", "0-4.", SOFA, ("sofa cns",),
     [("15", {"gcs": 15}, 0), ("13", {"gcs": 13}, 1), ("10", {"gcs": 10}, 2), ("6", {"gcs": 6}, 3),
      ("5", {"gcs": 5}, 4)])
_add(calc.sofa_points_renal, "SOFA renal points", "SOFA renal points from creatinine (mg/dL) and urine output "
     "(mL/day).", "0-4.", SOFA, ("sofa renal",),
     [("Cr 1.1", {"creatinine": 1.1}, 0), ("Cr 1.9", {"creatinine": 1.9}, 1), ("Cr 3.4", {"creatinine": 3.4}, 2),
      ("Cr 3.5", {"creatinine": 3.5}, 3), ("Cr 5.0", {"creatinine": 5.0}, 4),
      ("Cr 1.0, urine 450", {"creatinine": 1.0, "urine_output_24h": 450}, 3),
      ("urine 150 only", {"creatinine": None, "urine_output_24h": 150}, 4)])
_add(calc.qsofa, "qSOFA", "Count of RR >= 22, SBP <= 100, GCS < 15.", ">= 2 high risk.",
     "Seymour CW et al. JAMA 2016;315:762-74.", ("qsofa calculator",),
     [("RR 22, SBP 100, GCS 15", {"resp_rate": 22, "sbp": 100, "gcs": 15}, 2),
      ("RR 30, SBP 90, GCS 10", {"resp_rate": 30, "sbp": 90, "gcs": 10}, 3)])
_add(calc.sirs, "SIRS", "Count of SIRS criteria (keyword arguments as sirs_criteria).", ">= 2 SIRS.",
     "Bone RC et al. Chest 1992;101:1644-55.", ("sirs calculator",),
     [("T 38.5, HR 95, RR 18, WBC 8", {"temperature_max": 38.5, "heart_rate_max": 95, "resp_rate_max": 18,
                                       "wbc_max": 8, "wbc_min": 8}, 2)])
_add(calc.kdigo_creatinine_stage, "KDIGO creatinine stage", "AKI stage from creatinine, 7-day baseline and 48 h "
     "lowest (mg/dL).", "0-3.", "KDIGO AKI guideline. Kidney Int Suppl 2012;2:1-138.", ("kdigo creatinine",),
     [("1.1 vs 0.8 (+0.3 in 48 h)", {"creatinine": 1.1, "baseline_7d": 0.8, "lowest_48h": 0.8}, 1),
      ("1.6 vs 0.8 (2.0x)", {"creatinine": 1.6, "baseline_7d": 0.8}, 2),
      ("2.4 vs 0.8 (3x)", {"creatinine": 2.4, "baseline_7d": 0.8}, 3),
      ("4.1 vs 48 h low 3.7 and baseline 3.0", {"creatinine": 4.1, "baseline_7d": 3.0, "lowest_48h": 3.7}, 3),
      ("1.2 vs 1.0", {"creatinine": 1.2, "baseline_7d": 1.0, "lowest_48h": 1.0}, 0)])
_add(calc.kdigo_urine_output_stage, "KDIGO urine output stage", "AKI stage from 6/12/24 h urine rates (mL/kg/h) and "
     "12 h volume.", "0-3.", "KDIGO AKI guideline. Kidney Int Suppl 2012;2:1-138.", ("kdigo urine",),
     [("6 h rate 0.4", {"rate_6h": 0.4, "rate_12h": 0.6}, 1), ("12 h rate 0.4", {"rate_6h": 0.4, "rate_12h": 0.4}, 2),
      ("24 h rate 0.2", {"rate_24h": 0.2}, 3), ("anuria 12 h", {"volume_12h": 0}, 3), ("0.6", {"rate_6h": 0.6}, 0)])
_add(calc.curb65, "CURB-65", "CURB-65 from confusion, BUN (mg/dL), RR, SBP, DBP, age.", "0-1 low, 2 moderate, "
     ">= 3 severe.", "Lim WS et al. Thorax 2003;58:377-82.", ("curb65 calculator",),
     [("confused, BUN 20, RR 30, BP 85/50, 70 y", {"confusion": True, "bun": 20, "resp_rate": 30, "sbp": 85,
                                                   "dbp": 50, "age": 70}, 5),
      ("BUN 19, RR 29, BP 120/61, 64 y", {"confusion": False, "bun": 19, "resp_rate": 29, "sbp": 120, "dbp": 61,
                                          "age": 64}, 0)])
_add(calc.cha2ds2_vasc, "CHA2DS2-VASc", "CHA2DS2-VASc from conditions (bool), age and female (bool).", "0-9.",
     "Lip GYH et al. Chest 2010;137:263-72.", ("cha2ds2 vasc calculator",),
     [("woman 76, CHF, HTN", {"chf": 1, "hypertension": 1, "age": 76, "diabetes": 0, "stroke": 0, "vascular": 0,
                              "female": True}, 5),
      ("man 70, prior stroke", {"chf": 0, "hypertension": 0, "age": 70, "diabetes": 0, "stroke": 1, "vascular": 0,
                                "female": False}, 3)])
_add(calc.has_bled, "HAS-BLED", "HAS-BLED from the nine items (bool) and age.", ">= 3 high risk.",
     "Pisters R et al. Chest 2010;138:1093-100.", ("has bled calculator",),
     [("all present, 70 y", {"hypertension": 1, "abnormal_renal": 1, "abnormal_liver": 1, "stroke": 1,
                             "bleeding": 1, "labile_inr": 1, "age": 70, "drugs": 1, "alcohol": 1}, 9),
      ("65 y, nothing else", {"hypertension": 0, "abnormal_renal": 0, "abnormal_liver": 0, "stroke": 0,
                              "bleeding": 0, "labile_inr": 0, "age": 65, "drugs": 0, "alcohol": 0}, 0)])
_add(calc.charlson_index, "Charlson index", "Charlson index from condition flags (dict) and optional age.",
     "Higher = more comorbidity.", "Charlson ME et al. J Chronic Dis 1987;40:373-83.", ("charlson calculator",),
     [("MI + metastatic + malignant, age 72", {"conditions": {"myocardial_infarct": 1, "metastatic_solid_tumor": 1,
                                                              "malignant_cancer": 1}, "age": 72}, 10),
      ("diabetes with and without cc", {"conditions": {"diabetes_without_cc": 1, "diabetes_with_cc": 1}}, 2)])
