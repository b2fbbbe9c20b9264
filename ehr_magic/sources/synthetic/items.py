"""Item dictionaries of the synthetic generator: lab tests (d_labitems) and ICU
items (d_items: charted vitals, inputs, outputs), with the value models used to
draw them. Item ids and labels follow MIMIC-IV so that known itemids work.
"""

from __future__ import annotations

from typing import NamedTuple


class Lab(NamedTuple):
    """A numeric lab test and how its values are drawn.

    Values are ``center + spread * z`` (or ``center * exp(spread * z)`` when ``log``),
    clipped to ``[vmin, vmax]`` and rounded to ``dec`` decimals; ``z`` collects the
    patient's baseline, clinical flags and noise. ``lo``/``hi`` is the reference range.
    """

    itemid: int
    label: str
    fluid: str
    category: str
    unit: str | None
    lo: float | None
    hi: float | None
    center: float
    spread: float
    log: bool
    vmin: float
    vmax: float
    dec: int


B, U = "Blood", "Urine"
HEM, CHEM, BG = "Hematology", "Chemistry", "Blood Gas"

LABS: list[Lab] = [
    # complete blood count (Hct, RBC, MCH, MCHC are derived from Hgb and MCV)
    Lab(51301, "White Blood Cells", B, HEM, "K/uL", 4.0, 11.0, 8.0, 0.35, True, 0.1, 150.0, 1),
    Lab(51222, "Hemoglobin", B, HEM, "g/dL", 12.0, 16.0, 11.2, 1.7, False, 3.5, 20.0, 1),
    Lab(51221, "Hematocrit", B, HEM, "%", 36.0, 48.0, 33.6, 5.0, False, 11.0, 60.0, 1),
    Lab(51279, "Red Blood Cells", B, HEM, "m/uL", 3.9, 5.5, 3.7, 0.6, False, 1.2, 7.0, 2),
    Lab(51250, "MCV", B, HEM, "fL", 82.0, 98.0, 90.0, 5.5, False, 60.0, 130.0, 0),
    Lab(51248, "MCH", B, HEM, "pg", 27.0, 32.0, 30.0, 2.0, False, 18.0, 42.0, 1),
    Lab(51249, "MCHC", B, HEM, "g/dL", 32.0, 37.0, 33.0, 1.2, False, 26.0, 38.0, 1),
    Lab(51277, "RDW", B, HEM, "%", 10.5, 15.5, 14.3, 1.5, False, 10.0, 32.0, 1),
    Lab(51265, "Platelet Count", B, HEM, "K/uL", 150.0, 400.0, 215.0, 0.38, True, 3.0, 1400.0, 0),
    # differential (lymphocytes are the remainder)
    Lab(51256, "Neutrophils", B, HEM, "%", 34.0, 71.0, 68.0, 9.0, False, 1.0, 98.0, 1),
    Lab(51244, "Lymphocytes", B, HEM, "%", 18.0, 53.0, 20.0, 8.0, False, 0.5, 90.0, 1),
    Lab(51254, "Monocytes", B, HEM, "%", 2.0, 13.0, 7.0, 2.2, False, 0.0, 30.0, 1),
    Lab(51200, "Eosinophils", B, HEM, "%", 0.0, 7.0, 1.5, 1.3, False, 0.0, 25.0, 1),
    Lab(51146, "Basophils", B, HEM, "%", 0.0, 2.0, 0.4, 0.25, False, 0.0, 5.0, 1),
    # basic metabolic panel (anion gap is derived)
    Lab(50983, "Sodium", B, CHEM, "mEq/L", 133.0, 145.0, 138.5, 3.3, False, 105.0, 175.0, 0),
    Lab(50971, "Potassium", B, CHEM, "mEq/L", 3.3, 5.1, 4.1, 0.45, False, 1.8, 8.5, 1),
    Lab(50902, "Chloride", B, CHEM, "mEq/L", 96.0, 108.0, 102.0, 4.0, False, 70.0, 135.0, 0),
    Lab(50882, "Bicarbonate", B, CHEM, "mEq/L", 22.0, 32.0, 25.0, 2.8, False, 4.0, 50.0, 0),
    Lab(51006, "Urea Nitrogen", B, CHEM, "mg/dL", 6.0, 20.0, 17.0, 0.5, True, 2.0, 250.0, 0),
    Lab(50912, "Creatinine", B, CHEM, "mg/dL", 0.5, 1.2, 0.95, 0.3, True, 0.2, 18.0, 1),
    Lab(50931, "Glucose", B, CHEM, "mg/dL", 70.0, 100.0, 118.0, 0.25, True, 25.0, 1200.0, 0),
    Lab(50868, "Anion Gap", B, CHEM, "mEq/L", 8.0, 20.0, 13.5, 2.5, False, 3.0, 45.0, 0),
    Lab(50893, "Calcium, Total", B, CHEM, "mg/dL", 8.4, 10.3, 8.8, 0.55, False, 4.5, 15.0, 1),
    Lab(50960, "Magnesium", B, CHEM, "mg/dL", 1.6, 2.6, 2.0, 0.25, False, 0.6, 5.5, 1),
    Lab(50970, "Phosphate", B, CHEM, "mg/dL", 2.7, 4.5, 3.4, 0.25, True, 0.5, 14.0, 1),
    # liver panel and other chemistry
    Lab(50861, "Alanine Aminotransferase (ALT)", B, CHEM, "IU/L", 0.0, 40.0, 24.0, 0.7, True, 3.0, 6000.0, 0),
    Lab(50878, "Asparate Aminotransferase (AST)", B, CHEM, "IU/L", 0.0, 40.0, 30.0, 0.7, True, 5.0, 9000.0, 0),
    Lab(50863, "Alkaline Phosphatase", B, CHEM, "IU/L", 35.0, 130.0, 88.0, 0.45, True, 15.0, 2000.0, 0),
    Lab(50885, "Bilirubin, Total", B, CHEM, "mg/dL", 0.0, 1.5, 0.6, 0.65, True, 0.1, 45.0, 1),
    Lab(50862, "Albumin", B, CHEM, "g/dL", 3.5, 5.2, 3.5, 0.5, False, 1.0, 5.5, 1),
    Lab(50954, "Lactate Dehydrogenase (LD)", B, CHEM, "IU/L", 94.0, 250.0, 230.0, 0.4, True, 80.0, 9000.0, 0),
    Lab(50956, "Lipase", B, CHEM, "IU/L", 0.0, 60.0, 32.0, 0.6, True, 3.0, 9000.0, 0),
    Lab(50993, "Thyroid Stimulating Hormone", B, CHEM, "uIU/mL", 0.27, 4.2, 1.8, 0.6, True, 0.01, 150.0, 2),
    Lab(50852, "% Hemoglobin A1c", B, CHEM, "%", 4.0, 6.0, 6.0, 0.15, True, 4.0, 17.0, 1),
    Lab(50889, "C-Reactive Protein", B, CHEM, "mg/L", 0.0, 5.0, 12.0, 1.1, True, 0.3, 400.0, 1),
    Lab(51003, "Troponin T", B, CHEM, "ng/mL", 0.0, 0.01, 0.015, 0.8, True, 0.01, 25.0, 2),
    Lab(50910, "Creatine Kinase (CK)", B, CHEM, "IU/L", 39.0, 308.0, 110.0, 0.8, True, 10.0, 60000.0, 0),
    Lab(50911, "Creatine Kinase, MB Isoenzyme", B, CHEM, "ng/mL", 0.0, 10.0, 3.0, 0.7, True, 1.0, 500.0, 0),
    Lab(50963, "NTproBNP", B, CHEM, "pg/mL", 0.0, 353.0, 450.0, 1.0, True, 5.0, 70000.0, 0),
    # coagulation (PT is derived from INR)
    Lab(51237, "INR(PT)", B, HEM, None, 0.9, 1.1, 1.15, 0.15, True, 0.8, 12.0, 1),
    Lab(51274, "PT", B, HEM, "sec", 9.4, 12.5, 12.6, 1.5, False, 9.0, 130.0, 1),
    Lab(51275, "PTT", B, HEM, "sec", 25.0, 36.5, 31.0, 0.18, True, 18.0, 150.0, 1),
    # blood gas (pH, base excess and total CO2 are derived)
    Lab(50820, "pH", B, BG, "units", 7.35, 7.45, 7.39, 0.05, False, 6.8, 7.7, 2),
    Lab(50818, "pCO2", B, BG, "mm Hg", 35.0, 45.0, 39.5, 0.14, True, 15.0, 130.0, 0),
    Lab(50821, "pO2", B, BG, "mm Hg", 85.0, 105.0, 105.0, 0.45, True, 25.0, 550.0, 0),
    Lab(50802, "Base Excess", B, BG, "mEq/L", None, None, 0.0, 3.0, False, -30.0, 25.0, 0),
    Lab(50804, "Calculated Total CO2", B, BG, "mEq/L", 21.0, 30.0, 25.0, 3.0, False, 5.0, 50.0, 0),
    Lab(50813, "Lactate", B, BG, "mmol/L", 0.5, 2.0, 1.4, 0.4, True, 0.3, 25.0, 1),
    # urinalysis, numeric part
    Lab(51491, "pH", U, HEM, "units", 5.0, 8.0, 6.0, 0.7, False, 5.0, 9.0, 1),
    Lab(51498, "Specific Gravity", U, HEM, None, 1.001, 1.035, 1.016, 0.007, False, 1.001, 1.050, 3),
]

LAB_INDEX = {lab.itemid: i for i, lab in enumerate(LABS)}


class TextLab(NamedTuple):
    """A lab test reported as text; ``flag`` (a clinical flag) makes abnormal results likely."""

    itemid: int
    label: str
    fluid: str
    category: str
    unit: str | None
    choices: tuple[str, ...]
    abnormal: tuple[bool, ...]
    normal_weights: tuple[float, ...]
    flagged_weights: tuple[float, ...]
    flag: str


TEXT_LABS: list[TextLab] = [
    TextLab(51508, "Urine Color", U, HEM, None, ("Yellow", "Straw", "Amber", "Red", "Brown"),
            (False, False, True, True, True), (0.6, 0.3, 0.08, 0.01, 0.01), (0.5, 0.2, 0.2, 0.05, 0.05), "infection"),
    TextLab(51506, "Urine Appearance", U, HEM, None, ("Clear", "Hazy", "Cloudy"),
            (False, True, True), (0.75, 0.18, 0.07), (0.35, 0.35, 0.3), "infection"),
    TextLab(51487, "Nitrite", U, HEM, None, ("NEG", "POS"), (False, True), (0.93, 0.07), (0.6, 0.4), "infection"),
    TextLab(51486, "Leukocytes", U, HEM, None, ("NEG", "TR", "SM", "MOD", "LG"),
            (False, True, True, True, True), (0.7, 0.1, 0.1, 0.06, 0.04), (0.2, 0.1, 0.2, 0.25, 0.25), "infection"),
    TextLab(51466, "Blood", U, HEM, None, ("NEG", "TR", "SM", "MOD", "LG"),
            (False, True, True, True, True), (0.7, 0.12, 0.1, 0.05, 0.03), (0.45, 0.15, 0.15, 0.15, 0.1), "aki"),
    TextLab(51492, "Protein", U, HEM, "mg/dL", ("NEG", "TR", "30", "100", "300"),
            (False, True, True, True, True), (0.65, 0.15, 0.12, 0.06, 0.02), (0.25, 0.15, 0.25, 0.2, 0.15), "ckd"),
]

# Lab panels: (name, itemids, p first draw, p later ward draw, p ICU draw, {flag: extra p on first draw}).
PANELS: list[tuple[str, tuple[int, ...], float, float, float, dict[str, float]]] = [
    ("cbc", (51301, 51222, 51221, 51279, 51250, 51248, 51249, 51277, 51265), 0.95, 0.6, 0.9, {}),
    ("diff", (51256, 51244, 51254, 51200, 51146), 0.35, 0.06, 0.15, {"infection": 0.4, "heme_onc": 0.4}),
    ("bmp", (50983, 50971, 50902, 50882, 51006, 50912, 50931, 50868), 0.97, 0.65, 0.95, {}),
    ("ca_mg_phos", (50893, 50960, 50970), 0.6, 0.3, 0.7, {}),
    ("lft", (50861, 50878, 50863, 50885, 50862), 0.4, 0.08, 0.25, {"liver": 0.5, "pancreatitis": 0.5, "sepsis": 0.3}),
    ("coag", (51237, 51274, 51275), 0.4, 0.1, 0.35, {"anticoag": 0.5, "liver": 0.5, "bleeding": 0.4, "surgical": 0.3}),
    ("blood_gas", (50820, 50818, 50821, 50802, 50804), 0.04, 0.0, 0.45, {"resp": 0.3, "dka": 0.6}),
    ("lactate", (50813,), 0.2, 0.02, 0.35, {"sepsis": 0.7, "shock": 0.7}),
    ("cardiac", (51003, 50910, 50911), 0.12, 0.03, 0.1, {"acs": 0.85, "chf_exac": 0.4, "pe": 0.4}),
    ("bnp", (50963,), 0.05, 0.0, 0.0, {"chf_exac": 0.7, "chf": 0.15}),
    ("lipase", (50956,), 0.12, 0.0, 0.0, {"pancreatitis": 0.85}),
    ("ldh", (50954,), 0.05, 0.02, 0.02, {"heme_onc": 0.6}),
    ("tsh", (50993,), 0.08, 0.0, 0.0, {"hypothyroid": 0.4, "afib": 0.2}),
    ("a1c", (50852,), 0.05, 0.0, 0.0, {"dm": 0.4}),
    ("crp", (50889,), 0.06, 0.0, 0.02, {"infection": 0.15}),
    ("urinalysis", (51491, 51498, 51508, 51506, 51487, 51486, 51466, 51492), 0.2, 0.01, 0.02, {"infection": 0.3}),
]
# Panels drawn STAT (priority) rather than ROUTINE; blood gases carry no priority, as in MIMIC-IV.
STAT_PANELS = {"cardiac", "lactate", "urinalysis", "lipase", "crp"}
NO_PRIORITY_PANELS = {"blood_gas", "lactate"}


class ChartItem(NamedTuple):
    itemid: int
    label: str
    abbreviation: str
    category: str
    unit: str | None
    param_type: str
    low_normal: float | None = None
    high_normal: float | None = None


RVS = "Routine Vital Signs"
CHART_ITEMS: list[ChartItem] = [
    ChartItem(220045, "Heart Rate", "HR", RVS, "bpm", "Numeric"),
    ChartItem(220179, "Non Invasive Blood Pressure systolic", "NBPs", RVS, "mmHg", "Numeric"),
    ChartItem(220180, "Non Invasive Blood Pressure diastolic", "NBPd", RVS, "mmHg", "Numeric"),
    ChartItem(220181, "Non Invasive Blood Pressure mean", "NBPm", RVS, "mmHg", "Numeric"),
    ChartItem(220050, "Arterial Blood Pressure systolic", "ABPs", RVS, "mmHg", "Numeric", 90.0, 140.0),
    ChartItem(220051, "Arterial Blood Pressure diastolic", "ABPd", RVS, "mmHg", "Numeric", 60.0, 90.0),
    ChartItem(220052, "Arterial Blood Pressure mean", "ABPm", RVS, "mmHg", "Numeric"),
    ChartItem(220210, "Respiratory Rate", "RR", "Respiratory", "insp/min", "Numeric"),
    ChartItem(220277, "O2 saturation pulseoxymetry", "SpO2", "Respiratory", "%", "Numeric"),
    ChartItem(223761, "Temperature Fahrenheit", "Temperature F", RVS, "°F", "Numeric"),
    ChartItem(223762, "Temperature Celsius", "Temperature C", RVS, "°C", "Numeric"),
    ChartItem(220048, "Heart Rhythm", "Heart Rhythm", RVS, None, "Text"),
    ChartItem(220739, "GCS - Eye Opening", "Eye Opening", "Neurological", None, "Text"),
    ChartItem(223900, "GCS - Verbal Response", "Verbal Response", "Neurological", None, "Text"),
    ChartItem(223901, "GCS - Motor Response", "Motor Response", "Neurological", None, "Text"),
    ChartItem(228096, "Richmond-RAS Scale", "Richmond-RAS Scale", "Pain/Sedation", None, "Text"),
    ChartItem(226732, "O2 Delivery Device(s)", "O2 Delivery Device(s)", "Respiratory", None, "Text"),
    ChartItem(223835, "Inspired O2 Fraction", "FiO2", "Respiratory", None, "Numeric"),
    ChartItem(220339, "PEEP set", "PEEP set", "Respiratory", "cmH2O", "Numeric"),
    ChartItem(224685, "Tidal Volume (observed)", "Tidal Volume (observed)", "Respiratory", "mL", "Numeric", 299.0, 750.0),
    ChartItem(220224, "Arterial O2 pressure", "PO2 (Arterial)", "Labs", "mmHg", "Numeric"),
    ChartItem(220235, "Arterial CO2 Pressure", "PCO2 (Arterial)", "Labs", "mmHg", "Numeric"),
    ChartItem(225664, "Glucose finger stick (range 70-100)", "Glucose FS (range 70 -100)", "Labs", None, "Numeric"),
    ChartItem(220074, "Central Venous Pressure", "CVP", "Hemodynamics", "mmHg", "Numeric"),
    ChartItem(226512, "Admission Weight (Kg)", "Admission Weight (Kg)", "General", "kg", "Numeric"),
    ChartItem(226730, "Height (cm)", "Height (cm)", "General", "cm", "Numeric"),
]

# Vital value models: name -> (center, spread, min, max).
VITALS: dict[str, tuple[float, float, float, float]] = {
    "hr": (80.0, 12.0, 25.0, 200.0),
    "sbp": (121.0, 17.0, 50.0, 230.0),
    "rr": (17.0, 3.2, 4.0, 50.0),
    "spo2": (97.8, 1.4, 60.0, 100.0),
    "temp": (98.3, 0.65, 91.0, 106.0),
    "gcs": (0.0, 1.0, -6.0, 3.0),
    "glucose": (135.0, 35.0, 30.0, 700.0),
}

GCS_EYE = [("No Response", 1), ("To Pain", 2), ("To Speech", 3), ("Spontaneously", 4)]
GCS_VERBAL = [("No Response", 1), ("Incomprehensible sounds", 2), ("Inappropriate Words", 3), ("Confused", 4),
              ("Oriented", 5), ("No Response-ETT", 1)]
GCS_MOTOR = [("No response", 1), ("Abnormal extension", 2), ("Abnormal Flexion", 3), ("Flex-withdraws", 4),
             ("Localizes Pain", 5), ("Obeys Commands", 6)]
RHYTHMS = ["SR (Sinus Rhythm)", "ST (Sinus Tachycardia)", "SB (Sinus Bradycardia)", "AF (Atrial Fibrillation)",
           "A Paced", "1st AV (First degree AV Block)"]
RASS = [("+2 Agitated", 2), ("+1 Restless", 1), ("0 Alert and calm", 0), ("-1 Drowsy", -1), ("-2 Light sedation", -2),
        ("-3 Moderate sedation", -3), ("-4 Deep sedation", -4), ("-5 Unarousable", -5)]
O2_DEVICES = ["None", "Nasal cannula", "Face tent", "High flow nasal cannula", "Non-rebreather", "Endotracheal tube"]


class InputItem(NamedTuple):
    """An ICU input and how it is given.

    ``kind``: ``drip`` (titrated infusion in rate units), ``fluid`` (mL/hour infusion),
    ``bolus`` (fluid given at once), ``product`` (blood product or colloid over ~1 h),
    ``push`` (a dose), ``additive`` (electrolyte over 1 h). ``lo``/``hi`` bound the rate
    (drip, fluid) or the amount (others); ``k`` turns rate*hours (*kg when weight-based)
    into the amount unit. ``p`` is the chance per ICU stay, raised by ``boosts`` flags;
    ``per_day`` is how many orders a day a receiving stay gets.
    """

    itemid: int
    label: str
    abbreviation: str
    category: str
    unit: str
    kind: str
    amountuom: str
    rateuom: str | None
    ordercategoryname: str
    secondaryordercategoryname: str | None
    ordercomponenttypedescription: str
    ordercategorydescription: str
    p: float
    boosts: dict[str, float]
    per_day: float
    lo: float
    hi: float
    k: float = 1.0
    weight_based: bool = False
    total: float | None = None


MED, FLU, ABX, BP = "Medications", "Fluids/Intake", "Antibiotics", "Blood Products/Colloids"
DRIPS, CRYST, MAIN = "01-Drips", "02-Fluids (Crystalloids)", "Main order parameter"
ABXIV, BOLUSMED = "08-Antibiotics (IV)", "05-Med Bolus"

INPUT_ITEMS: list[InputItem] = [
    InputItem(225158, "NaCl 0.9%", "NaCl 0.9%", FLU, "mL", "fluid", "ml", "mL/hour", CRYST, "Additive (Crystalloid)", MAIN,
              "Continuous IV", 0.4, {"sepsis": 0.3, "dehydration": 0.3, "dka": 0.5}, 0.7, 50, 150, total=1000),
    InputItem(225828, "LR", "LR", FLU, "mL", "fluid", "ml", "mL/hour", CRYST, "Additive (Crystalloid)", MAIN,
              "Continuous IV", 0.15, {"surgical": 0.35, "pancreatitis": 0.5}, 0.6, 75, 150, total=1000),
    InputItem(220949, "Dextrose 5%", "Dextrose 5%", FLU, "mL", "fluid", "ml", "mL/hour", DRIPS, CRYST, "Mixed solution",
              "Continuous Med", 0.25, {"vent": 0.3}, 1.0, 5, 40, total=250),
    InputItem(229010, "Jevity 1.2 (Full)", "Jevity 1.2 (Full)", "Nutrition - Enteral", "mL", "fluid", "ml", "mL/hour",
              "13-Enteral Nutrition", "Additives (EN)", MAIN, "Continuous IV", 0.02, {"vent": 0.5}, 1.0, 20, 70, total=750),
    InputItem(225158, "NaCl 0.9%", "NaCl 0.9%", FLU, "mL", "bolus", "ml", None, "03-IV Fluid Bolus", None, MAIN,
              "Bolus", 0.2, {"sepsis": 0.5, "shock": 0.5, "hypotension": 0.4}, 0.6, 250, 1000, total=1000),
    InputItem(226452, "PO Intake", "PO Intake", FLU, "mL", "bolus", "ml", None, "14-Oral/Gastric Intake", None, MAIN,
              "Bolus", 0.6, {"vent": -0.6}, 3.0, 60, 480),
    InputItem(225799, "Gastric Meds", "Gastric Meds", FLU, "mL", "bolus", "ml", None, "14-Oral/Gastric Intake", None, MAIN,
              "Bolus", 0.03, {"vent": 0.6}, 3.0, 20, 60),
    InputItem(221906, "Norepinephrine", "Norepinephrine", MED, "mg", "drip", "mg", "mcg/kg/min", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.01, {"shock": 0.85, "sepsis": 0.3, "cardiac_surgery": 0.15, "dying": 0.4}, 1.0,
              0.02, 0.5, 0.06, True, 250),
    InputItem(221749, "Phenylephrine", "Phenylephrine", MED, "mg", "drip", "mg", "mcg/kg/min", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.02, {"cardiac_surgery": 0.4, "shock": 0.25, "neuro": 0.1}, 1.0, 0.2, 3.0, 0.06, True, 250),
    InputItem(222315, "Vasopressin", "Vasopressin", MED, "units", "drip", "units", "units/hour", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.0, {"shock": 0.35}, 1.0, 1.2, 2.4, 1.0, False, 100),
    InputItem(221289, "Epinephrine", "Epinephrine", MED, "mg", "drip", "mg", "mcg/kg/min", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.0, {"cardiac_surgery": 0.25, "shock": 0.1}, 1.0, 0.01, 0.1, 0.06, True, 250),
    InputItem(221653, "Dobutamine", "Dobutamine", MED, "mg", "drip", "mg", "mcg/kg/min", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.0, {"chf_exac": 0.1, "cardiac_surgery": 0.05}, 1.0, 2.0, 7.5, 0.06, True, 250),
    InputItem(222168, "Propofol", "Propofol", MED, "mg", "drip", "mg", "mcg/kg/min", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.0, {"vent": 0.75}, 1.0, 10, 60, 0.06, True, 100),
    InputItem(225942, "Fentanyl (Concentrate)", "Fentanyl (Concentrate)", MED, "mg", "drip", "mg", "mcg/hour", DRIPS, CRYST,
              MAIN, "Continuous Med", 0.0, {"vent": 0.55}, 1.0, 25, 200, 0.001, False, 50),
    InputItem(225150, "Dexmedetomidine (Precedex)", "Dexmedetomidine (Precedex)", MED, "mcg", "drip", "mcg", "mcg/kg/hour",
              DRIPS, CRYST, MAIN, "Continuous Med", 0.02, {"vent": 0.25, "withdrawal": 0.3, "delirium": 0.2}, 1.0,
              0.2, 1.2, 1.0, True, 50),
    InputItem(225152, "Heparin Sodium", "Heparin Sodium", MED, "units", "drip", "units", "units/hour", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.0, {"pe": 0.8, "acs": 0.6, "afib": 0.15}, 1.0, 600, 1800, 1.0, False, 250),
    InputItem(223258, "Insulin - Regular", "Insulin - Regular", MED, "units", "drip", "units", "units/hour", DRIPS, CRYST,
              MAIN, "Continuous Med", 0.0, {"dka": 0.95, "cardiac_surgery": 0.6, "hyperglycemia": 0.2}, 1.0, 1, 10, 1.0,
              False, 100),
    InputItem(228339, "Amiodarone 600/500", "Amiodarone 600/500", MED, "mg", "drip", "mg", "mg/min", DRIPS, CRYST, MAIN,
              "Continuous Med", 0.0, {"afib": 0.15, "cardiac_surgery": 0.1}, 1.0, 0.5, 1.0, 60.0, False, 500),
    InputItem(221468, "Diltiazem", "Diltiazem", MED, "mg", "drip", "mg", "mg/hour", DRIPS, CRYST, MAIN, "Continuous Med",
              0.0, {"afib": 0.25}, 1.0, 5, 15, 1.0, False, 125),
    InputItem(225798, "Vancomycin", "Vancomycin", ABX, "dose", "push", "dose", None, ABXIV, CRYST, MAIN, "Drug Push",
              0.04, {"infection": 0.6}, 2.0, 1, 1, total=250),
    InputItem(225851, "Cefepime", "Cefepime", ABX, "dose", "push", "dose", None, ABXIV, CRYST, MAIN, "Drug Push",
              0.02, {"infection": 0.4}, 2.5, 1, 1, total=50),
    InputItem(225893, "Piperacillin/Tazobactam (Zosyn)", "Piperacillin/Tazobactam (Zosyn)", ABX, "dose", "push", "dose",
              None, ABXIV, CRYST, MAIN, "Drug Push", 0.02, {"infection": 0.4}, 3.0, 1, 1, total=100),
    InputItem(225883, "Meropenem", "Meropenem", ABX, "dose", "push", "dose", None, ABXIV, CRYST, MAIN, "Drug Push",
              0.0, {"sepsis": 0.15, "neutropenia": 0.5}, 3.0, 1, 1, total=100),
    InputItem(225855, "Ceftriaxone", "Ceftriaxone", ABX, "dose", "push", "dose", None, ABXIV, CRYST, MAIN, "Drug Push",
              0.02, {"infection": 0.25, "neuro": 0.05}, 1.0, 1, 1, total=50),
    InputItem(225884, "Metronidazole", "Metronidazole", ABX, "dose", "push", "dose", None, ABXIV, CRYST, MAIN, "Drug Push",
              0.01, {"infection": 0.15, "surgical": 0.1}, 3.0, 1, 1, total=100),
    InputItem(225850, "Cefazolin", "Cefazolin", ABX, "dose", "push", "dose", None, ABXIV, CRYST, MAIN, "Drug Push",
              0.0, {"surgical": 0.5}, 3.0, 1, 1, total=50),
    InputItem(221744, "Fentanyl", "Fentanyl", MED, "mg", "push", "mcg", None, BOLUSMED, None, MAIN, "Drug Push",
              0.2, {"vent": 0.3, "pain": 0.3, "surgical": 0.3}, 2.0, 25, 100),
    InputItem(221833, "Hydromorphone (Dilaudid)", "Hydromorphone (Dilaudid)", MED, "mg", "push", "mg", None, BOLUSMED, None,
              MAIN, "Drug Push", 0.1, {"pain": 0.3, "surgical": 0.3}, 2.0, 0.2, 1.0),
    InputItem(225154, "Morphine Sulfate", "Morphine Sulfate", MED, "mg", "push", "mg", None, BOLUSMED, None, MAIN,
              "Drug Push", 0.08, {"acs": 0.3, "pain": 0.2}, 1.5, 1, 4),
    InputItem(221668, "Midazolam (Versed)", "Midazolam (Versed)", MED, "mg", "push", "mg", None, BOLUSMED, None, MAIN,
              "Drug Push", 0.03, {"vent": 0.3, "withdrawal": 0.3, "neuro": 0.1}, 1.5, 1, 2),
    InputItem(221794, "Furosemide (Lasix)", "Furosemide (Lasix)", MED, "mg", "push", "mg", None, BOLUSMED, None, MAIN,
              "Drug Push", 0.06, {"chf": 0.4, "chf_exac": 0.5, "cardiac_surgery": 0.4}, 1.5, 20, 80),
    InputItem(228315, "Acetaminophen-IV", "Acetaminophen-IV", MED, "mg", "push", "mg", None, BOLUSMED, None, MAIN,
              "Drug Push", 0.1, {"fever": 0.3, "surgical": 0.3}, 2.0, 650, 1000),
    InputItem(225975, "Heparin Sodium (Prophylaxis)", "Heparin Sodium (Prophylaxis)", MED, "dose", "push", "dose", None,
              "11-Prophylaxis (Non IV)", None, MAIN, "Drug Push", 0.6, {"anticoag": -0.5, "bleeding": -0.5}, 2.5, 1, 1),
    InputItem(225907, "Famotidine (Pepcid)", "Famotidine (Pepcid)", MED, "dose", "push", "dose", None, "10-Prophylaxis (IV)",
              CRYST, MAIN, "Drug Push", 0.2, {"vent": 0.3}, 2.0, 1, 1, total=50),
    InputItem(223262, "Insulin - Humalog", "Insulin - Humalog", MED, "units", "push", "units", None, "06-Insulin (Non IV)",
              None, MAIN, "Drug Push", 0.06, {"dm": 0.6, "hyperglycemia": 0.3}, 3.0, 2, 10),
    InputItem(225166, "Potassium Chloride", "Potassium Chloride - KCL", MED, "mEq", "additive", "mEq", None, CRYST,
              "Additive (Crystalloid)", "Additives", "Continuous IV", 0.15, {"hypoK": 0.7, "dka": 0.5}, 1.0, 10, 40, total=100),
    InputItem(222011, "Magnesium Sulfate", "Magnesium Sulfate", MED, "grams", "additive", "grams", None, CRYST,
              "Additive (Crystalloid)", "Additives", "Continuous IV", 0.12, {"hypoMg": 0.7, "cardiac_surgery": 0.4}, 0.8,
              1, 4, total=50),
    InputItem(221456, "Calcium Gluconate", "Calcium Gluconate", MED, "grams", "additive", "grams", None, CRYST,
              "Additive (Crystalloid)", "Additives", "Continuous IV", 0.05, {"hypoCa": 0.6, "cardiac_surgery": 0.2}, 0.6,
              1, 2, total=100),
    InputItem(220864, "Albumin 5%", "Albumin 5%", BP, "mL", "product", "ml", "mL/hour", "04-Fluids (Colloids)", None, MAIN,
              "Continuous IV", 0.02, {"shock": 0.3, "cardiac_surgery": 0.35}, 0.5, 250, 500),
    InputItem(220862, "Albumin 25%", "Albumin 25%", BP, "mL", "product", "ml", "mL/hour", "04-Fluids (Colloids)", None, MAIN,
              "Continuous IV", 0.01, {"liver": 0.4}, 0.5, 50, 100),
    InputItem(225168, "Packed Red Blood Cells", "PRBC's", BP, "mL", "product", "ml", "mL/hour", "07-Blood Products", None,
              MAIN, "Continuous IV", 0.04, {"bleeding": 0.6, "gi_bleed": 0.5, "cardiac_surgery": 0.35, "anemia": 0.15},
              0.6, 280, 350),
    InputItem(225170, "Platelets", "Platelets", BP, "mL", "product", "ml", "mL/hour", "07-Blood Products", None, MAIN,
              "Continuous IV", 0.0, {"lowplt": 0.4, "heme_onc": 0.3}, 0.3, 200, 300),
    InputItem(220970, "Fresh Frozen Plasma", "FFP", BP, "mL", "product", "ml", "mL/hour", "07-Blood Products", None, MAIN,
              "Continuous IV", 0.0, {"coag": 0.4, "liver": 0.2}, 0.3, 250, 330),
]


class OutputItem(NamedTuple):
    """An ICU output: chance per stay (raised by ``boosts``), charts per hour, median mL."""

    itemid: int
    label: str
    category: str
    p: float
    boosts: dict[str, float]
    per_hour: float
    median: float
    first_hours: float | None = None  # only charted during the first N hours of the stay


OUTPUT_ITEMS: list[OutputItem] = [
    OutputItem(226559, "Foley", "Output", 0.7, {"surgical": 0.2, "vent": 0.25, "shock": 0.2}, 0.85, 70.0),
    OutputItem(226560, "Void", "Output", 0.3, {"vent": -0.3, "surgical": -0.1}, 0.18, 250.0),
    OutputItem(226588, "Chest Tube #1", "Output", 0.01, {"cardiac_surgery": 0.9, "trauma": 0.15}, 0.5, 30.0, 48.0),
    OutputItem(226589, "Chest Tube #2", "Output", 0.0, {"cardiac_surgery": 0.5}, 0.5, 25.0, 48.0),
    OutputItem(226627, "OR Urine", "Output", 0.0, {"surgical": 0.5}, 0.0, 400.0),
    OutputItem(226626, "OR EBL", "Output", 0.0, {"surgical": 0.45}, 0.0, 250.0),
    OutputItem(226579, "Stool", "Output", 0.2, {"infection": 0.1}, 0.08, 150.0),
    OutputItem(226571, "Emesis", "Output", 0.05, {"bowel": 0.3}, 0.04, 100.0),
    OutputItem(226576, "Oral Gastric", "Output", 0.0, {"vent": 0.4}, 0.15, 80.0),
    OutputItem(226575, "Nasogastric", "Output", 0.03, {"gi_bleed": 0.3, "surgical": 0.15}, 0.2, 150.0),
]


class ProcedureItem(NamedTuple):
    """An ICU procedure: a ``continuous`` process (value in minutes) or a one-off ``task``."""

    itemid: int
    label: str
    abbreviation: str
    category: str
    continuous: bool
    ordercategoryname: str
    locations: tuple[str, ...] = ()
    locationcategory: str | None = None


PROCEDURE_ITEMS: list[ProcedureItem] = [
    ProcedureItem(225792, "Invasive Ventilation", "Invasive Ventilation", "2-Ventilation", True, "Ventilation"),
    ProcedureItem(224385, "Intubation", "Intubation", "1-Intubation/Extubation", False, "Intubation/Extubation"),
    ProcedureItem(227194, "Extubation", "Extubation", "1-Intubation/Extubation", False, "Intubation/Extubation"),
    ProcedureItem(225752, "Arterial Line", "Arterial Line", "Access Lines - Invasive", True, "Invasive Lines",
                  ("Left Radial", "Right Radial", "Left Femoral"), "Invasive Arterial"),
    ProcedureItem(224263, "Multi Lumen", "Multi Lumen", "Access Lines - Invasive", True, "Invasive Lines",
                  ("Right IJ", "Left IJ", "Right Subclavian", "Right Femoral"), "Invasive Venous"),
    ProcedureItem(224264, "PICC Line", "PICC Line", "Access Lines - Invasive", True, "Invasive Lines",
                  ("Right Basilic", "Left Basilic", "Right Brachial"), "Invasive Venous"),
    ProcedureItem(224275, "20 Gauge", "20 Gauge", "Access Lines - Peripheral", True, "Peripheral Lines",
                  ("Left Antecubital", "Right Antecubital", "Left Cephalic Lower Arm", "Right Hand"), "Peripheral"),
    ProcedureItem(224277, "18 Gauge", "18 Gauge", "Access Lines - Peripheral", True, "Peripheral Lines",
                  ("Left Antecubital", "Right Antecubital", "Right Forearm"), "Peripheral"),
    ProcedureItem(229351, "Foley Catheter", "Indwelling Urinary Catheter", "GI/GU", True, "Tubes"),
    ProcedureItem(225459, "Chest X-Ray", "Chest X-Ray", "5-Imaging", False, "Imaging"),
    ProcedureItem(221214, "CT scan", "CT scan", "5-Imaging", False, "Imaging"),
    ProcedureItem(225402, "EKG", "EKG", "4-Procedures", False, "Procedures"),
    ProcedureItem(225432, "Transthoracic Echo", "Transthoracic Echo", "5-Imaging", False, "Procedures"),
    ProcedureItem(225401, "Blood Cultured", "Blood Cultured", "6-Cultures", False, "Procedures"),
]


def d_items_rows() -> list[tuple[int, str, str, str, str, str | None, str, float | None, float | None]]:
    """Rows of d_items: (itemid, label, abbreviation, linksto, category, unitname, param_type, low, high)."""
    rows: dict[int, tuple[int, str, str, str, str, str | None, str, float | None, float | None]] = {}
    for c in CHART_ITEMS:
        rows[c.itemid] = (c.itemid, c.label, c.abbreviation, "chartevents", c.category, c.unit, c.param_type,
                          c.low_normal, c.high_normal)
    for i in INPUT_ITEMS:
        rows.setdefault(i.itemid, (i.itemid, i.label, i.abbreviation, "inputevents", i.category, i.unit, "Solution",
                                   None, None))
    for o in OUTPUT_ITEMS:
        rows[o.itemid] = (o.itemid, o.label, o.label, "outputevents", o.category, "mL", "Numeric", None, None)
    for p in PROCEDURE_ITEMS:
        rows[p.itemid] = (p.itemid, p.label, p.abbreviation, "procedureevents", p.category, None, "Processes", None, None)
    return sorted(rows.values())


def d_labitems_rows() -> list[tuple[int, str, str, str]]:
    """Rows of d_labitems: (itemid, label, fluid, category)."""
    rows = [(lab.itemid, lab.label, lab.fluid, lab.category) for lab in LABS]
    rows += [(t.itemid, t.label, t.fluid, t.category) for t in TEXT_LABS]
    return sorted(rows)
