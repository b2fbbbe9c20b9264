"""Item ids, value ranges and what each supported schema records.

MIMIC-IV (``mimic_iv``: the demo, the full database and the synthetic data) and the
EHRSQL variant (``ehrsql_mimic_iv``) share MIMIC-IV's item ids; EHRSQL keeps fewer
tables, columns and chart items, listed in ``SchemaItems.missing`` with the reason, so
a skill that needs them fails with a message that says so.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ehr_magic.skills.errors import SkillError


@dataclass(frozen=True)
class Concept:
    """A measured quantity: where it is stored, its item ids and plausible range."""

    name: str
    table: str  # "chartevents" or "labevents"
    itemids: tuple[int, ...]
    low: float  # values outside [low, high] are dropped as errors
    high: float
    unit: str
    worst: str | None = None  # "min" or "max": which extreme is clinically worse
    convert: dict[int, str] = field(default_factory=dict)  # itemid -> SQL of `v` in the unit
    label: str = ""


def _c(name: str, table: str, itemids: tuple[int, ...], low: float, high: float, unit: str,
       worst: str | None = None, convert: dict[int, str] | None = None, label: str = "") -> Concept:
    return Concept(name, table, itemids, low, high, unit, worst, convert or {}, label or name.replace("_", " "))


CHART = "chartevents"
LAB = "labevents"

CONCEPTS: dict[str, Concept] = {c.name: c for c in [
    # vital signs (chartevents)
    _c("heart_rate", CHART, (220045,), 1, 300, "bpm", "max"),
    _c("sbp", CHART, (220050, 220179, 225309), 1, 400, "mmHg", "min", label="systolic blood pressure"),
    _c("dbp", CHART, (220051, 220180, 225310), 1, 300, "mmHg", "min", label="diastolic blood pressure"),
    _c("map", CHART, (220052, 220181, 225312), 1, 300, "mmHg", "min", label="mean arterial pressure"),
    _c("resp_rate", CHART, (220210, 224690), 1, 70, "insp/min", "max", label="respiratory rate"),
    _c("temperature", CHART, (223762, 223761), 25, 45, "C", None,
       convert={223761: "(v - 32) * 5.0 / 9.0"}),
    _c("spo2", CHART, (220277,), 1, 100, "%", "min", label="oxygen saturation (pulse oximetry)"),
    _c("fio2_chart", CHART, (223835,), 0.21, 100, "fraction", None, label="inspired O2 fraction (charted)"),
    _c("gcs_eye", CHART, (220739,), 1, 4, "points", "min", label="GCS eye opening"),
    _c("gcs_verbal", CHART, (223900,), 1, 5, "points", "min", label="GCS verbal response"),
    _c("gcs_motor", CHART, (223901,), 1, 6, "points", "min", label="GCS motor response"),
    _c("weight", CHART, (226512, 224639, 226531), 20, 400, "kg", None,
       convert={226531: "v * 0.45359237"}),
    _c("height", CHART, (226730, 226707), 100, 250, "cm", None, convert={226707: "v * 2.54"}),
    _c("glucose_chart", CHART, (220621, 225664, 226537), 1, 2000, "mg/dL", None, label="glucose (charted)"),
    # laboratory (labevents)
    _c("creatinine", LAB, (50912,), 0.1, 150, "mg/dL", "max"),
    _c("bun", LAB, (51006,), 1, 300, "mg/dL", "max", label="blood urea nitrogen"),
    _c("platelets", LAB, (51265,), 0.1, 10000, "K/uL", "min", label="platelet count"),
    _c("bilirubin", LAB, (50885,), 0.01, 150, "mg/dL", "max", label="total bilirubin"),
    _c("sodium", LAB, (50983,), 80, 200, "mEq/L", None),
    _c("potassium", LAB, (50971,), 0.5, 15, "mEq/L", None),
    _c("chloride", LAB, (50902,), 40, 200, "mEq/L", None),
    _c("bicarbonate", LAB, (50882,), 1, 80, "mEq/L", "min"),
    _c("calcium", LAB, (50893,), 1, 25, "mg/dL", None, label="total calcium"),
    _c("albumin", LAB, (50862,), 0.5, 8, "g/dL", "min"),
    _c("wbc", LAB, (51301, 51300), 0, 1000, "K/uL", None, label="white blood cells"),
    _c("bands", LAB, (51144,), 0, 100, "%", "max", label="band neutrophils"),
    _c("lactate", LAB, (50813,), 0.1, 50, "mmol/L", "max"),
    _c("pao2", LAB, (50821,), 1, 800, "mmHg", "min", label="pO2 (blood gas)"),
    _c("paco2", LAB, (50818,), 1, 250, "mmHg", None, label="pCO2 (blood gas)"),
    _c("ph", LAB, (50820,), 6.5, 8.0, "units", None, label="pH (blood gas)"),
    _c("fio2_lab", LAB, (50816,), 21, 100, "%", None, label="oxygen (blood gas FiO2)"),
    _c("hemoglobin", LAB, (51222,), 1, 25, "g/dL", "min"),
    _c("inr", LAB, (51237,), 0.5, 20, "ratio", "max", label="INR (PT)"),
    _c("glucose", LAB, (50931,), 1, 2000, "mg/dL", None),
    _c("ast", LAB, (50878,), 1, 20000, "IU/L", "max", label="aspartate aminotransferase"),
    _c("alt", LAB, (50861,), 1, 20000, "IU/L", "max", label="alanine aminotransferase"),
]}

SPECIMEN_TYPE_ITEM = 52033  # labevents "Specimen Type" of a blood gas: 'ART.', 'VEN.', ...

# inputevents: vasopressors for SOFA (rates in mcg/kg/min)
VASOPRESSORS: dict[str, int] = {"norepinephrine": 221906, "epinephrine": 221289, "dopamine": 221662,
                                "dobutamine": 221653}
# procedureevents intervals; chartevents items only charted on a ventilator or NIV
VENTILATION_PROCEDURES = (225792, 225794)  # invasive, non-invasive ventilation
VENTILATOR_CHART_ITEMS = (223849, 229314, 220339, 224684)  # vent mode, Hamilton mode, PEEP set, VT set
RRT_PROCEDURES = (225802, 225803, 225805, 225809, 225955, 225441)  # CRRT, CVVHD, PD, CVVHDF, SCUF, HD
# outputevents: urine (mimic-code urine_output); 227488 "GU Irrigant Volume In" is subtracted
URINE_OUTPUT_ITEMS = (226559, 226560, 226561, 226584, 226563, 226564, 226565, 226567, 226557, 226558,
                      227488, 227489)
URINE_NEGATIVE_ITEMS = (227488,)


@dataclass(frozen=True)
class SchemaItems:
    """How one schema stores what the skills read."""

    name: str
    missing: dict[str, str] = field(default_factory=dict)  # capability -> why it is not available
    icd: str = "versioned"  # "versioned": icd_code + icd_version; "prefixed": 'icd9|4019'
    age: str = "anchor"  # "anchor": patients.anchor_age/anchor_year; "admission": admissions.age
    diagnoses_time: str = "dischtime"  # when an admission's codes are known: dischtime | charttime

    def require(self, capability: str, skill: str) -> None:
        if capability in self.missing:
            raise SkillError(f"{skill} needs {_CAPABILITIES.get(capability, capability)}, which "
                             f"{self.name} does not record: {self.missing[capability]}.")

    def has(self, capability: str) -> bool:
        return capability not in self.missing


_CAPABILITIES = {
    "gcs": "the Glasgow Coma Scale (chartevents 220739, 223900, 223901)",
    "fio2_chart": "charted FiO2 (chartevents 223835)",
    "ventilation": "ventilation status (procedureevents 225792/225794 or ventilator settings in chartevents)",
    "vasopressor_rate": "vasopressor infusion rates (inputevents rate, rateuom, endtime)",
    "nibp": "non-invasive blood pressure (chartevents 220179-220181)",
    "specimen_type": "blood gas specimen types (labevents.specimen_id with item 52033)",
    "rrt": "renal replacement therapy (procedureevents)",
    "omr": "outpatient measurements (omr)",
}

MIMIC_IV = SchemaItems("mimic_iv")

_EHRSQL_CHART = "EHRSQL's chartevents keeps only 9 items (heart rate, arterial BP, respiratory rate, SpO2, " \
                "temperature in C, weight, height)"
EHRSQL_MIMIC_IV = SchemaItems(
    "ehrsql_mimic_iv",
    missing={
        "gcs": _EHRSQL_CHART,
        "fio2_chart": _EHRSQL_CHART,
        "nibp": _EHRSQL_CHART,
        "ventilation": "it has no procedureevents and its chartevents keeps no ventilator settings",
        "vasopressor_rate": "its inputevents keeps only starttime and totalamount",
        "specimen_type": "its labevents has no specimen_id",
        "rrt": "it has no procedureevents",
        "omr": "it has no omr table",
    },
    icd="prefixed", age="admission", diagnoses_time="charttime",
)

SCHEMAS = {s.name: s for s in (MIMIC_IV, EHRSQL_MIMIC_IV)}


class Listing(Protocol):
    """What ``schema_items`` reads of a database besides its schema name: its tables and columns."""

    def tables(self) -> Iterable[str]: ...

    def columns(self, table: str) -> Container[str]: ...


def schema_items(ehr: Listing) -> SchemaItems:  # any EHR-like object; its ``schema`` name is optional
    """The item layout of ``ehr``; MIMIC-IV-shaped databases of another name count as mimic_iv."""
    found = SCHEMAS.get(getattr(ehr, "schema", ""))
    if found is not None:
        return found
    tables = set(ehr.tables())
    if {"icustays", "patients", "admissions"} <= tables and "anchor_age" in ehr.columns("patients"):
        return MIMIC_IV
    raise SkillError(
        f"Clinical skills read MIMIC-IV item ids (schemas {' and '.join(SCHEMAS)}), which this "
        f"{getattr(ehr, 'schema', 'unknown')} database does not have, so write the computation with ehr.sql."
    )


def concept(name: str) -> Concept:
    try:
        return CONCEPTS[name]
    except KeyError:
        raise SkillError(f"Unknown concept {name!r}; known: {', '.join(sorted(CONCEPTS))}.") from None
