"""Vocabularies of the synthetic generator: demographics, care units, clinical
categories, and the clinical flags that tie diagnoses to lab and vital values.

Everything here is plain data written for ehr_magic; the category and unit names
follow MIMIC-IV's spelling so queries written for MIMIC-IV work unchanged.
Item dictionaries live in ``synthetic_items``, ICD codes in ``synthetic_icd``,
drugs and microbiology in ``synthetic_drugs``.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- demographics ---------------------------------------------------------------------

GENDERS = [("F", 0.52), ("M", 0.48)]

ANCHOR_YEAR_GROUPS = [("2008 - 2010", 0.22), ("2011 - 2013", 0.22), ("2014 - 2016", 0.22),
                      ("2017 - 2019", 0.21), ("2020 - 2022", 0.13)]

RACES = [
    ("WHITE", 0.62), ("BLACK/AFRICAN AMERICAN", 0.11), ("UNKNOWN", 0.05), ("OTHER", 0.03),
    ("WHITE - OTHER EUROPEAN", 0.02), ("HISPANIC/LATINO - PUERTO RICAN", 0.02),
    ("HISPANIC OR LATINO", 0.015), ("ASIAN", 0.015), ("ASIAN - CHINESE", 0.015),
    ("HISPANIC/LATINO - DOMINICAN", 0.012), ("WHITE - RUSSIAN", 0.01), ("BLACK/CAPE VERDEAN", 0.01),
    ("UNABLE TO OBTAIN", 0.01), ("PATIENT DECLINED TO ANSWER", 0.008), ("PORTUGUESE", 0.007),
    ("BLACK/AFRICAN", 0.006), ("WHITE - BRAZILIAN", 0.005), ("ASIAN - SOUTH EAST ASIAN", 0.005),
    ("HISPANIC/LATINO - SALVADORAN", 0.004), ("HISPANIC/LATINO - GUATEMALAN", 0.004),
    ("ASIAN - ASIAN INDIAN", 0.004), ("WHITE - EASTERN EUROPEAN", 0.004), ("BLACK/CARIBBEAN ISLAND", 0.004),
    ("MULTIPLE RACE/ETHNICITY", 0.003), ("AMERICAN INDIAN/ALASKA NATIVE", 0.003),
    ("NATIVE HAWAIIAN OR OTHER PACIFIC ISLANDER", 0.001), ("SOUTH AMERICAN", 0.002),
]

LANGUAGES = [("ENGLISH", 0.9), ("?", 0.1)]

MARITAL_STATUSES = ["SINGLE", "MARRIED", "WIDOWED", "DIVORCED", None]
# Weights by age band: <40, 40-64, 65-79, 80+.
MARITAL_WEIGHTS = [
    [0.62, 0.28, 0.01, 0.05, 0.04],
    [0.30, 0.45, 0.05, 0.15, 0.05],
    [0.18, 0.45, 0.18, 0.15, 0.04],
    [0.10, 0.30, 0.48, 0.09, 0.03],
]

INSURANCES = ["Medicare", "Medicaid", "Other"]
INSURANCE_UNDER_65 = [0.12, 0.28, 0.60]
INSURANCE_65_PLUS = [0.86, 0.04, 0.10]

ADMISSION_TYPES = [
    "EW EMER.", "EU OBSERVATION", "OBSERVATION ADMIT", "URGENT", "DIRECT EMER.",
    "DIRECT OBSERVATION", "ELECTIVE", "SURGICAL SAME DAY ADMISSION", "AMBULATORY OBSERVATION",
]
OBSERVATION_TYPES = {"EU OBSERVATION", "OBSERVATION ADMIT", "DIRECT OBSERVATION", "AMBULATORY OBSERVATION"}

ADMISSION_LOCATIONS = [
    "EMERGENCY ROOM", "PHYSICIAN REFERRAL", "TRANSFER FROM HOSPITAL", "CLINIC REFERRAL",
    "WALK-IN/SELF REFERRAL", "PROCEDURE SITE", "TRANSFER FROM SKILLED NURSING FACILITY", "PACU",
    "INFORMATION NOT AVAILABLE", "INTERNAL TRANSFER TO OR FROM PSYCH",
]
# admission type -> weights over ADMISSION_LOCATIONS
LOCATION_BY_TYPE: dict[str, list[float]] = {
    "EW EMER.": [0.84, 0, 0.05, 0, 0.05, 0, 0.05, 0, 0.01, 0],
    "EU OBSERVATION": [0.90, 0, 0.02, 0, 0.06, 0, 0.02, 0, 0, 0],
    "OBSERVATION ADMIT": [0.60, 0.20, 0, 0.10, 0.10, 0, 0, 0, 0, 0],
    "URGENT": [0.10, 0.30, 0.50, 0.08, 0, 0, 0.01, 0, 0, 0.01],
    "DIRECT EMER.": [0, 0.60, 0.15, 0.25, 0, 0, 0, 0, 0, 0],
    "DIRECT OBSERVATION": [0, 0.70, 0, 0.30, 0, 0, 0, 0, 0, 0],
    "ELECTIVE": [0, 0.90, 0, 0.10, 0, 0, 0, 0, 0, 0],
    "SURGICAL SAME DAY ADMISSION": [0, 0.85, 0, 0, 0, 0.15, 0, 0, 0, 0],
    "AMBULATORY OBSERVATION": [0, 0, 0, 0, 0, 0.60, 0, 0.40, 0, 0],
}
ED_LOCATIONS = {"EMERGENCY ROOM", "WALK-IN/SELF REFERRAL"}

# Discharge locations of survivors; weights for age <65 and 65+. The dead go to "DIED".
DISCHARGE_LOCATIONS = [
    "HOME", "HOME HEALTH CARE", "SKILLED NURSING FACILITY", "REHAB", None,
    "CHRONIC/LONG TERM ACUTE CARE", "HOSPICE", "AGAINST ADVICE", "PSYCH FACILITY",
    "ACUTE HOSPITAL", "OTHER FACILITY", "ASSISTED LIVING", "HEALTHCARE FACILITY",
]
DISCHARGE_UNDER_65 = [0.52, 0.22, 0.05, 0.04, 0.10, 0.01, 0.005, 0.025, 0.01, 0.01, 0.005, 0.0, 0.005]
DISCHARGE_65_PLUS = [0.25, 0.30, 0.22, 0.07, 0.08, 0.025, 0.02, 0.005, 0.002, 0.008, 0.008, 0.007, 0.005]
DIED = "DIED"

# --- care units -----------------------------------------------------------------------

ED_UNIT = "Emergency Department"
ED_OBSERVATION_UNIT = "Emergency Department Observation"
MICU = "Medical Intensive Care Unit (MICU)"
SICU = "Surgical Intensive Care Unit (SICU)"
MSICU = "Medical/Surgical Intensive Care Unit (MICU/SICU)"
CVICU = "Cardiac Vascular Intensive Care Unit (CVICU)"
CCU = "Coronary Care Unit (CCU)"
TSICU = "Trauma SICU (TSICU)"
NSICU = "Neuro Surgical Intensive Care Unit (Neuro SICU)"
ICU_UNITS = [MICU, SICU, MSICU, CVICU, CCU, TSICU, NSICU]


@dataclass(frozen=True)
class Category:
    """A kind of hospitalisation: who cares for it, where, how long, and why."""

    key: str
    weight: float
    service: str
    wards: tuple[str, ...]
    icus: tuple[str, ...]
    p_icu: float
    los_days: float  # median length of stay
    admission_types: dict[str, float]
    principal: dict[str, float]  # principal diagnosis key -> weight
    flags: tuple[str, ...] = ()
    female_only: bool = False
    max_age: int = 200


CATEGORIES: list[Category] = [
    Category("medicine", 0.36, "MED", ("Medicine", "Med/Surg", "Medicine/Cardiology", "Observation"),
             (MICU, MSICU), 0.15, 3.5,
             {"EW EMER.": 0.52, "EU OBSERVATION": 0.12, "OBSERVATION ADMIT": 0.13, "URGENT": 0.10,
              "DIRECT EMER.": 0.07, "DIRECT OBSERVATION": 0.04, "AMBULATORY OBSERVATION": 0.02},
             {"sepsis": 0.12, "pneumonia": 0.13, "uti": 0.08, "copd_exac": 0.07, "gi_bleed": 0.09, "dka": 0.03,
              "etoh_withdrawal": 0.05, "cellulitis": 0.06, "pe": 0.04, "resp_failure": 0.04, "pancreatitis": 0.04,
              "syncope": 0.05, "c_diff": 0.03, "liver_failure": 0.03, "aki_primary": 0.04, "hypoNa_primary": 0.03,
              "pyelonephritis": 0.03}),
    Category("cardiology", 0.12, "CMED", ("Medicine/Cardiology", "Cardiology", "Medicine/Cardiology Intermediate"),
             (CCU,), 0.2, 3.0,
             {"EW EMER.": 0.5, "URGENT": 0.2, "OBSERVATION ADMIT": 0.15, "DIRECT EMER.": 0.1, "ELECTIVE": 0.05},
             {"nstemi": 0.22, "stemi": 0.06, "chf_dias_exac": 0.16, "chf_sys_exac": 0.14, "af_rvr": 0.14,
              "chest_pain": 0.14, "unstable_angina": 0.08, "complete_block": 0.06}),
    Category("cardiac_surgery", 0.05, "CSURG", ("Cardiac Surgery", "Cardiology Surgery Intermediate"),
             (CVICU,), 0.92, 6.5,
             {"SURGICAL SAME DAY ADMISSION": 0.5, "ELECTIVE": 0.2, "URGENT": 0.3},
             {"cad_surgical": 0.6, "aortic_stenosis": 0.28, "mitral_regurg": 0.12}, ("surgical", "cardiac_surgery")),
    Category("surgery", 0.12, "SURG", ("Surgery", "Med/Surg", "Surgery/Trauma"), (SICU, MSICU), 0.14, 4.0,
             {"EW EMER.": 0.45, "SURGICAL SAME DAY ADMISSION": 0.3, "URGENT": 0.15, "ELECTIVE": 0.1},
             {"appendicitis": 0.2, "cholecystitis": 0.2, "sbo": 0.18, "diverticulitis": 0.14, "colon_ca": 0.1,
              "incisional_hernia": 0.1, "morbid_obesity": 0.08}, ("surgical",)),
    Category("neurology", 0.06, "NMED", ("Neurology", "Neuro Stepdown", "Neuro Intermediate"), (NSICU,), 0.35, 4.5,
             {"EW EMER.": 0.7, "URGENT": 0.15, "DIRECT EMER.": 0.1, "ELECTIVE": 0.05},
             {"isch_stroke": 0.45, "seizure": 0.35, "ich": 0.2}, ("neuro",)),
    Category("neurosurgery", 0.03, "NSURG", ("Neuro Stepdown", "Neuro Intermediate"), (NSICU, TSICU), 0.6, 6.0,
             {"EW EMER.": 0.4, "URGENT": 0.3, "ELECTIVE": 0.15, "SURGICAL SAME DAY ADMISSION": 0.15},
             {"sah": 0.35, "brain_tumor": 0.35, "ich": 0.3}, ("neuro", "surgical")),
    Category("trauma", 0.05, "TRAUM", ("Surgery/Trauma", "Med/Surg/Trauma"), (TSICU,), 0.4, 5.0,
             {"EW EMER.": 0.85, "URGENT": 0.15},
             {"sdh_trauma": 0.4, "rib_fractures": 0.35, "hip_fracture": 0.25}, ("trauma",)),
    Category("orthopaedics", 0.04, "ORTHO", ("Med/Surg", "Surgery/Trauma"), (TSICU, SICU), 0.05, 3.5,
             {"SURGICAL SAME DAY ADMISSION": 0.55, "EW EMER.": 0.3, "ELECTIVE": 0.15},
             {"hip_fracture": 0.45, "hip_oa": 0.55}, ("surgical",)),
    Category("oncology", 0.07, "OMED", ("Hematology/Oncology", "Hematology/Oncology Intermediate"), (MICU,), 0.1, 5.5,
             {"EW EMER.": 0.45, "URGENT": 0.25, "ELECTIVE": 0.2, "DIRECT EMER.": 0.1},
             {"neutropenic_fever": 0.25, "lung_ca": 0.15, "lymphoma": 0.15, "aml": 0.15, "myeloma": 0.12,
              "pancreas_ca": 0.18}, ("onc",)),
    Category("transplant", 0.02, "TSURG", ("Transplant",), (SICU,), 0.35, 6.0,
             {"URGENT": 0.4, "ELECTIVE": 0.3, "EW EMER.": 0.3},
             {"kidney_tx_comp": 0.35, "esrd_primary": 0.35, "alcoholic_cirrhosis": 0.3}, ("surgical",)),
    Category("vascular", 0.02, "VSURG", ("Vascular",), (CVICU, SICU), 0.3, 4.0,
             {"ELECTIVE": 0.3, "SURGICAL SAME DAY ADMISSION": 0.4, "URGENT": 0.3},
             {"aaa": 0.35, "claudication": 0.35, "carotid_stenosis": 0.3}, ("surgical",)),
    Category("gynaecology", 0.02, "GYN", ("Med/Surg/GYN",), (SICU,), 0.03, 2.5,
             {"SURGICAL SAME DAY ADMISSION": 0.6, "ELECTIVE": 0.2, "URGENT": 0.2},
             {"fibroids": 0.65, "ovarian_ca": 0.35}, ("surgical",), female_only=True),
    Category("obstetrics", 0.03, "OBS", ("Labor & Delivery", "Obstetrics Postpartum"), (SICU,), 0.01, 2.5,
             {"URGENT": 0.5, "EW EMER.": 0.3, "DIRECT EMER.": 0.2},
             {"delivery": 1.0}, (), female_only=True, max_age=45),
    Category("psychiatry", 0.02, "PSYCH", ("Psychiatry",), (MICU,), 0.0, 7.0,
             {"EW EMER.": 0.7, "URGENT": 0.3},
             {"severe_depression": 0.45, "schizophrenia": 0.3, "bipolar": 0.25}),
]

# Procedures that follow a principal diagnosis: key -> {procedure key: probability}.
PRINCIPAL_PROCEDURES: dict[str, dict[str, float]] = {
    "gi_bleed": {"egd": 0.75, "colonoscopy": 0.3, "transfusion_rbc": 0.55},
    "liver_failure": {"paracentesis": 0.5, "egd": 0.2},
    "alcoholic_cirrhosis": {"paracentesis": 0.4, "liver_transplant": 0.35},
    "pneumonia": {"bronchoscopy": 0.05},
    "resp_failure": {"bronchoscopy": 0.1},
    "nstemi": {"left_heart_cath": 0.7, "coronary_angio": 0.6, "pci_stent": 0.45},
    "stemi": {"left_heart_cath": 0.9, "coronary_angio": 0.8, "pci_stent": 0.8},
    "unstable_angina": {"left_heart_cath": 0.6, "coronary_angio": 0.5, "pci_stent": 0.3},
    "af_rvr": {"cardioversion": 0.25},
    "complete_block": {"pacemaker_insertion": 0.85},
    "cad_surgical": {"cabg": 0.9, "lima": 0.85, "cardiopulmonary_bypass": 0.9, "transfusion_rbc": 0.35},
    "aortic_stenosis": {"avr": 0.95, "cardiopulmonary_bypass": 0.95, "transfusion_rbc": 0.35},
    "mitral_regurg": {"mitral_repair": 0.95, "cardiopulmonary_bypass": 0.95},
    "appendicitis": {"appendectomy": 0.92},
    "cholecystitis": {"cholecystectomy": 0.85},
    "sbo": {"adhesiolysis": 0.4},
    "diverticulitis": {"sigmoidectomy": 0.3},
    "colon_ca": {"sigmoidectomy": 0.8},
    "incisional_hernia": {"hernia_repair": 0.9},
    "morbid_obesity": {"gastric_bypass": 0.9},
    "isch_stroke": {"thrombolysis": 0.12, "thrombectomy": 0.1, "peg": 0.05},
    "ich": {"evd": 0.15},
    "sah": {"evd": 0.5, "lumbar_puncture": 0.1},
    "seizure": {"lumbar_puncture": 0.15},
    "brain_tumor": {"craniotomy_sdh": 0.5},
    "sdh_trauma": {"craniotomy_sdh": 0.4},
    "hip_fracture": {"hip_orif": 0.8},
    "hip_oa": {"hip_replacement": 0.95},
    "neutropenic_fever": {"transfusion_rbc": 0.3},
    "lung_ca": {"lung_biopsy": 0.3, "thoracentesis": 0.2},
    "lymphoma": {"chemotherapy": 0.5, "bm_biopsy": 0.3},
    "aml": {"chemotherapy": 0.6, "bm_biopsy": 0.5, "transfusion_rbc": 0.6},
    "myeloma": {"chemotherapy": 0.4, "bm_biopsy": 0.3},
    "pancreas_ca": {"chemotherapy": 0.25, "paracentesis": 0.15},
    "esrd_primary": {"hemodialysis": 0.6, "kidney_transplant": 0.4},
    "kidney_tx_comp": {"hemodialysis": 0.2},
    "aaa": {"evar": 0.85},
    "claudication": {"peripheral_angioplasty": 0.8},
    "carotid_stenosis": {"carotid_endarterectomy": 0.85},
    "fibroids": {"hysterectomy": 0.85},
    "ovarian_ca": {"hysterectomy": 0.5, "chemotherapy": 0.2},
    "delivery": {"cesarean": 0.3, "assisted_delivery": 0.55},
    "severe_depression": {"ect": 0.12},
}

# Chronic conditions: key -> (base prevalence at age 60, relative change per decade, sex or None).
CHRONIC_PREVALENCE: dict[str, tuple[float, float, str | None]] = {
    "htn": (0.42, 1.35, None), "dm2": (0.22, 1.2, None), "hld": (0.35, 1.2, None), "cad": (0.16, 1.45, None),
    "chf": (0.11, 1.6, None), "afib": (0.11, 1.7, None), "ckd": (0.09, 1.5, None), "esrd": (0.015, 1.1, None),
    "copd": (0.10, 1.3, None), "asthma": (0.07, 0.9, None), "hypothyroid": (0.09, 1.2, "F"),
    "depression": (0.15, 0.95, None), "anxiety": (0.12, 0.85, None), "obesity": (0.13, 0.9, None),
    "osa": (0.07, 1.1, None), "gerd": (0.14, 1.1, None), "tobacco_hx": (0.18, 1.1, None),
    "smoker": (0.09, 0.8, None), "alcohol": (0.06, 0.8, "M"), "cirrhosis": (0.03, 1.0, None),
    "anemia": (0.10, 1.2, None), "gout": (0.04, 1.3, "M"), "bph": (0.12, 1.6, "M"),
    "osteoporosis": (0.06, 1.8, "F"), "dementia": (0.03, 2.6, None), "pvd": (0.04, 1.5, None),
    "hx_stroke": (0.05, 1.5, None), "hx_breast_ca": (0.04, 1.3, "F"), "hx_prostate_ca": (0.04, 1.6, "M"),
    "old_mi": (0.05, 1.4, None), "pacemaker": (0.03, 1.8, None), "chronic_pain": (0.06, 1.0, None),
    "insomnia": (0.05, 1.0, None), "hx_dvt": (0.04, 1.2, None), "vit_d_def": (0.05, 1.0, None),
}

# --- clinical flags ---------------------------------------------------------------------
# A flag is a clinical state of an admission. Diagnoses set flags; flags shift lab and
# vital values (in units of the item's spread) and make drugs and ICU inputs likelier.

CONCEPT_FLAGS: dict[str, tuple[str, ...]] = {
    "htn": ("htn",), "htn_ckd": ("htn", "ckd"), "dm2": ("dm",), "chf": ("chf",), "afib": ("afib", "anticoag"),
    "cad": ("cad",), "old_mi": ("cad",), "ckd": ("ckd",), "esrd": ("esrd",), "copd": ("copd",),
    "hypothyroid": ("hypothyroid",), "alcohol": ("alcohol",), "cirrhosis": ("liver",), "anemia": ("anemia",),
    "obesity": ("obese",), "hx_dvt": ("anticoag",), "depression": ("psych",), "anxiety": ("psych",),
    "chronic_pain": ("pain",),
    "sepsis": ("infection", "sepsis"), "pneumonia": ("infection", "resp"), "uti": ("infection", "uti"),
    "pyelonephritis": ("infection", "uti"), "cellulitis": ("infection",), "c_diff": ("infection", "dehydration", "cdiff"),
    "copd_exac": ("copd", "resp"), "gi_bleed": ("gi_bleed", "bleeding"), "dka": ("dm", "dka"),
    "etoh_withdrawal": ("alcohol", "withdrawal"), "pe": ("pe", "anticoag"), "resp_failure": ("resp",),
    "pancreatitis": ("pancreatitis",), "liver_failure": ("liver", "coag"), "aki_primary": ("aki",),
    "hypoNa_primary": ("hypoNa",), "nstemi": ("acs", "cad"), "stemi": ("acs", "cad"),
    "unstable_angina": ("acs", "cad"), "chf_dias_exac": ("chf", "chf_exac"), "chf_sys_exac": ("chf", "chf_exac"),
    "af_rvr": ("afib", "anticoag"), "complete_block": ("brady",), "cad_surgical": ("cad",),
    "isch_stroke": ("neuro",), "ich": ("neuro", "bleeding"), "sah": ("neuro",), "seizure": ("neuro",),
    "brain_tumor": ("neuro", "onc"), "sdh_trauma": ("neuro", "trauma"), "rib_fractures": ("trauma", "pain"),
    "hip_fracture": ("trauma", "pain"), "hip_oa": ("pain",), "neutropenic_fever": ("onc", "heme_onc", "neutropenia", "infection"),
    "lung_ca": ("onc",), "lymphoma": ("onc", "heme_onc"), "aml": ("onc", "heme_onc", "lowplt"),
    "myeloma": ("onc", "heme_onc", "anemia"), "pancreas_ca": ("onc",), "colon_ca": ("onc",), "ovarian_ca": ("onc",),
    "kidney_tx_comp": ("ckd", "transplant"), "esrd_primary": ("esrd",), "alcoholic_cirrhosis": ("liver", "alcohol"),
    "appendicitis": ("infection",), "cholecystitis": ("infection",), "diverticulitis": ("infection",),
    "severe_depression": ("psych",), "schizophrenia": ("psych",), "bipolar": ("psych",), "delivery": ("obstetric",),
    "aki": ("aki",), "hyponatremia": ("hypoNa",), "hypokalemia": ("hypoK",), "hyperkalemia": ("hyperK",),
    "acidosis": ("acidosis",), "thrombocytopenia": ("lowplt",), "blood_loss_anemia": ("bleeding",),
    "delirium": ("delirium",), "hypotension": ("hypotension",), "dehydration": ("dehydration",),
    "leukocytosis": ("leukocytosis",), "hypomagnesemia": ("hypoMg",), "hypoglycemia": ("hypoglycemia",),
    "encephalopathy": ("delirium",), "severe_sepsis": ("sepsis", "infection"), "septic_shock": ("sepsis", "shock", "infection"),
    "resp_failure_2": ("resp",), "hypoxemia": ("hypoxemia",), "hyperglycemia": ("hyperglycemia",), "fever": ("fever",),
    "bacteremia": ("infection", "bacteremia"), "coagulopathy": ("coag",), "shock": ("shock",), "cardiac_arrest": ("shock",),
    "hypocalcemia": ("hypoCa",), "hypernatremia": ("hyperNa",), "alkalosis": ("alkalosis",),
    "transaminitis": ("transaminitis",), "pleural_effusion": ("resp",),
    "sbo": ("bowel",), "nausea_vomiting": ("bowel",),
}

# Lab effects: flag -> {lab itemid: shift in spreads}.
LAB_EFFECTS: dict[str, dict[int, float]] = {
    "infection": {51301: 1.2, 51256: 1.0, 50889: 1.5, 50813: 0.3},
    "sepsis": {51301: 1.8, 50813: 2.0, 50912: 0.8, 51265: -0.8, 50882: -0.8, 50862: -0.8, 50885: 0.5, 51237: 0.5},
    "shock": {50813: 2.2, 50882: -1.2, 50912: 1.0, 50861: 1.0, 50878: 1.2, 51237: 0.7},
    "resp": {50818: 0.6, 50821: -1.0},
    "copd": {50818: 0.9, 50882: 0.8},
    "dm": {50931: 1.5, 50852: 2.5},
    "dka": {50931: 4.5, 50882: -4.5, 50971: 1.2, 51006: 0.6, 50912: 0.6, 50970: 0.8},
    "chf": {50963: 2.0, 50983: -0.4, 51006: 0.4, 50912: 0.4},
    "chf_exac": {50963: 1.0, 50983: -0.4},
    "acs": {51003: 3.0, 50910: 1.3, 50911: 2.0},
    "ckd": {50912: 2.5, 51006: 1.5, 51222: -0.8, 50971: 0.5, 50970: 0.8, 50882: -0.5, 50893: -0.3},
    "esrd": {50912: 5.5, 51006: 2.5, 51222: -1.2, 50971: 1.0, 50970: 1.8, 50882: -0.8, 50963: 1.5},
    "aki": {50912: 2.5, 51006: 1.5, 50971: 0.8, 50882: -0.6, 50970: 0.6},
    "gi_bleed": {51222: -1.6, 51006: 1.2},
    "bleeding": {51222: -1.4, 51265: -0.3},
    "liver": {50885: 2.5, 50862: -1.5, 51237: 1.5, 51265: -1.5, 50861: 0.5, 50878: 1.0, 50983: -0.5, 50863: 0.8},
    "coag": {51237: 2.0, 51275: 2.0, 51265: -0.5},
    "anticoag": {51237: 1.6, 51275: 0.8},
    "neutropenia": {51301: -4.5, 51256: -2.5, 51265: -1.5, 51222: -1.0},
    "heme_onc": {51265: -1.0, 51222: -1.0, 50954: 1.5, 51277: 1.0},
    "onc": {51222: -0.6, 50862: -0.8, 50954: 0.8},
    "surgical": {51301: 0.8, 51222: -0.6},
    "cardiac_surgery": {51222: -1.5, 51265: -0.8, 51301: 1.0, 50931: 0.6, 50813: 0.8, 50960: 0.5},
    "trauma": {51222: -1.0, 50910: 1.5, 51301: 0.8},
    "alcohol": {51250: 1.2, 50878: 1.0, 50861: 0.3, 51265: -0.6, 50960: -0.6, 50970: -0.5},
    "hypothyroid": {50993: 2.0},
    "hypoNa": {50983: -3.5, 50902: -1.5},
    "hyperNa": {50983: 3.0, 50902: 1.5},
    "hypoK": {50971: -2.2},
    "hyperK": {50971: 2.5},
    "acidosis": {50882: -2.5, 50813: 0.5},
    "alkalosis": {50882: 2.0},
    "lowplt": {51265: -2.5},
    "anemia": {51222: -1.5, 51250: -0.3, 51277: 1.0},
    "dehydration": {51006: 1.0, 50912: 0.5, 50983: 0.8},
    "leukocytosis": {51301: 2.0},
    "hypoMg": {50960: -2.5},
    "hypoCa": {50893: -2.0},
    "hypoglycemia": {50931: -2.5},
    "hyperglycemia": {50931: 2.0},
    "pancreatitis": {50956: 3.5, 51301: 1.0, 50931: 0.5, 50893: -0.6},
    "pe": {51003: 1.0, 50813: 0.5},
    "transaminitis": {50861: 2.0, 50878: 2.0},
    "dying": {50813: 1.5, 50882: -1.0, 50912: 0.7, 51237: 0.5},
    "vent": {50821: 0.8},
}

# Vital-sign effects: flag -> {vital: shift in spreads}. Vitals: hr, sbp, rr, spo2, temp, gcs, glucose.
VITAL_EFFECTS: dict[str, dict[str, float]] = {
    "sepsis": {"hr": 1.5, "sbp": -1.0, "rr": 1.0, "temp": 1.5},
    "infection": {"hr": 0.6, "temp": 1.0, "rr": 0.4},
    "shock": {"hr": 1.0, "sbp": -1.6},
    "resp": {"rr": 1.5, "spo2": -1.5, "hr": 0.5},
    "copd": {"spo2": -1.0, "rr": 0.8},
    "afib": {"hr": 1.2},
    "brady": {"hr": -2.5},
    "chf": {"spo2": -0.6, "rr": 0.5},
    "chf_exac": {"spo2": -0.8, "rr": 0.8},
    "acs": {"hr": 0.3},
    "neuro": {"gcs": -1.2, "sbp": 0.8},
    "trauma": {"hr": 0.6},
    "gi_bleed": {"hr": 1.0, "sbp": -0.6},
    "dka": {"rr": 1.5, "hr": 1.0, "glucose": 3.0},
    "dm": {"glucose": 1.5},
    "hypoglycemia": {"glucose": -1.5},
    "withdrawal": {"hr": 1.2, "sbp": 0.8},
    "htn": {"sbp": 0.8},
    "fever": {"temp": 1.5},
    "hypotension": {"sbp": -1.2},
    "hypoxemia": {"spo2": -1.5},
    "pe": {"hr": 1.2, "spo2": -1.2, "rr": 1.0},
    "delirium": {"gcs": -0.8},
    "dying": {"gcs": -1.5, "sbp": -0.8, "spo2": -0.8, "hr": 0.5},
    "vent": {"gcs": -2.0},
    "cardiac_surgery": {"hr": 0.5, "temp": -0.5},
    "pain": {"hr": 0.3, "sbp": 0.3},
}

# Flags that describe a lasting state rather than the acute illness of this stay.
CHRONIC_FLAGS = {"htn", "dm", "chf", "afib", "cad", "ckd", "esrd", "copd", "hypothyroid", "alcohol", "liver",
                 "anemia", "obese", "anticoag", "psych", "pain"}

FLAGS: list[str] = sorted(
    {f for fs in CONCEPT_FLAGS.values() for f in fs}
    | set(LAB_EFFECTS) | set(VITAL_EFFECTS)
    | {f for c in CATEGORIES for f in c.flags}
    | {"vent", "dying"}
)

# Secondary diagnoses: key -> (weight, required flag or None, weight factor on wards, in ICU).
SECONDARY_WEIGHTS: dict[str, tuple[float, str | None, float, float]] = {
    "aki": (3.5, None, 1, 2), "hyponatremia": (3, None, 1, 1.5), "hypokalemia": (3, None, 1, 1.5),
    "hyperkalemia": (3, None, 1, 1.5), "acidosis": (2.5, None, 0.6, 3), "thrombocytopenia": (2, None, 1, 2),
    "blood_loss_anemia": (2, None, 1, 2), "delirium": (3, None, 0.8, 3), "hypotension": (3, None, 0.7, 3),
    "dehydration": (3, None, 1, 1), "leukocytosis": (2, None, 1, 1.5), "malnutrition": (2, None, 1, 2),
    "constipation": (3, None, 1, 1), "urinary_retention": (2, None, 1, 1), "hypomagnesemia": (1.5, None, 1, 1.5),
    "hypoglycemia": (2, "dm", 1, 1.5), "encephalopathy": (1.5, None, 0.6, 3), "severe_sepsis": (3, "infection", 0.5, 3),
    "septic_shock": (2, "infection", 0.05, 6), "resp_failure_2": (1.5, None, 0.3, 6), "pressure_ulcer": (1, None, 0.7, 3),
    "hypoxemia": (2, None, 1, 2), "hyperglycemia": (2, None, 1, 1.5), "nausea_vomiting": (2, None, 1, 0.5),
    "dysphagia": (1, None, 1, 1.5), "fever": (2, None, 1, 1.5), "pleural_effusion": (2, None, 1, 2),
    "atelectasis": (1.5, None, 0.7, 2), "bacteremia": (1, "infection", 1, 2), "coagulopathy": (1.5, None, 0.5, 3),
    "shock": (0.5, None, 0.0, 8), "cardiac_arrest": (0.3, None, 0.0, 3), "fall": (1, None, 1, 1),
    "hospital_place": (0.5, None, 1, 1.5), "hypocalcemia": (1.5, None, 1, 2), "hypernatremia": (1, None, 0.5, 3),
    "alkalosis": (0.7, None, 1, 1), "transaminitis": (1, None, 1, 1.5),
}
