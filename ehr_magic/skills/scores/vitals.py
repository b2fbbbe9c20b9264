"""Bedside measurements: GCS, mean arterial pressure, shock index, P/F ratio, and the
generic first/last/worst value of any lab or vital sign in a window."""

from __future__ import annotations

from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, pick, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.events import abg_ctes, bp_sql, gcs_sql
from ehr_magic.skills.items import CONCEPTS, Concept
from ehr_magic.skills.registry import register
from ehr_magic.skills.testing import icu_patient
from ehr_magic.skills.timeline import LEVELS, concept_values, level_for, stay_rows

WHICH_DOC = ("which='all' (default) gives every charted value; 'first', 'last', 'min', 'max' or 'worst' one row "
             "per stay with that value and its charttime; 'summary' first/last/min/max/mean/n per stay.")
STAY_IDS = ["subject_id", "hadm_id", "stay_id"]


@register(Card(
    name="gcs",
    title="Glasgow Coma Scale",
    purpose="Glasgow Coma Scale (eye + verbal + motor) at each charting time of ICU stays.",
    eligibility="ICU stays with GCS charted (chartevents).",
    inputs="chartevents: GCS eye opening 220739, verbal response 223900, motor response 223901.",
    output="subject_id, hadm_id, stay_id, charttime, eye, verbal, motor, gcs (3-15). " + WHICH_DOC,
    interpretation="15 normal; 13-14 mild, 9-12 moderate, <= 8 severe impairment (coma; consider airway "
                   "protection).",
    source="Teasdale G, Jennett B. Assessment of coma and impaired consciousness. Lancet 1974;2:81-4.",
    limits="A component charted alone is completed with the others charted in the previous 6 h (mimic-code). "
           "No adjustment for sedation or intubation (verbal 'ETT' shows as 1 when the text is lost). Not "
           "available on ehrsql_mimic_iv (no GCS items).",
    level="ICU stay charting time", schemas=("mimic_iv",),
    keywords=("gcs", "glasgow coma scale", "glasgow", "coma score", "consciousness", "mental status"),
    vectors=(
        Vector("Eye 3 + verbal 4 + motor 5 at 1 h = 12; motor 6 alone at 2 h completes to 13",
               [{"charttime": "2180-01-02 01:00:00", "gcs": 12}, {"charttime": "2180-01-02 02:00:00", "gcs": 13}],
               data=icu_patient(chart=[(220739, 1, 3), (223900, 1, 4), (223901, 1, 5), (223901, 2, 6)])),
        Vector("Worst GCS of the stay: 12", {"gcs": 12, "eye": 3}, call={"which": "worst"},
               data=icu_patient(chart=[(220739, 1, 3), (223900, 1, 4), (223901, 1, 5), (223901, 2, 6)])),
        Vector("As of 1:30 the last GCS is 12 (the 2 h value is later)", {"gcs": 12},
               call={"which": "last", "as_of": "2180-01-02 01:30:00"},
               data=icu_patient(chart=[(220739, 1, 3), (223900, 1, 4), (223901, 1, 5), (223901, 2, 6)])),
    ),
))
def gcs(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
        hours: float | None = None, which: str = "all") -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "gcs")
    frame = stay_rows(ctx, [("g", gcs_sql(ctx))], "g", "x.eye, x.verbal, x.motor, x.gcs", hours)
    frame = frame.with_columns(calc.gcs_total(pl.col("eye"), pl.col("verbal"), pl.col("motor")).alias("gcs"))
    return pick(frame, STAY_IDS, "gcs", which, "min")


@register(Card(
    name="mean_arterial_pressure",
    title="Mean arterial pressure (MAP)",
    purpose="Mean arterial pressure at each charting time of ICU stays: measured (arterial line or cuff), "
            "else computed from systolic and diastolic pressure.",
    eligibility="ICU stays with blood pressure charted.",
    inputs="chartevents: MAP 220052 (arterial), 220181 (non-invasive), 225312; SBP 220050/220179/225309; "
           "DBP 220051/220180/225310.",
    output="subject_id, hadm_id, stay_id, charttime, map (mmHg), measured (bool), sbp, dbp. " + WHICH_DOC,
    interpretation="Normal 70-100 mmHg; < 65 mmHg is the usual vasopressor target threshold in septic shock; "
                   "MAP < 70 scores 1 cardiovascular SOFA point.",
    source="MAP = (SBP + 2 x DBP) / 3 when not measured (Guyton & Hall, Textbook of Medical Physiology). "
           "Surviving Sepsis Campaign 2021 (Evans L et al., Crit Care Med 2021;49:e1063) for the 65 mmHg target.",
    limits="Values outside 1-300 mmHg dropped; several devices at one time are averaged. On ehrsql_mimic_iv "
           "only arterial-line pressures exist.",
    level="ICU stay charting time",
    keywords=("map", "mean arterial pressure", "blood pressure", "hypotension", "mean bp", "mbp"),
    vectors=(
        Vector("Measured MAP 70 at 1 h; SBP 120 / DBP 60 at 2 h gives (120 + 2x60)/3 = 80",
               [{"map": 70.0, "measured": True}, {"map": 80.0, "measured": False}],
               data=icu_patient(chart=[(220052, 1, 70.0), (220179, 2, 120.0), (220180, 2, 60.0)])),
        Vector("Lowest MAP: 70", {"map": 70.0}, call={"which": "min"},
               data=icu_patient(chart=[(220052, 1, 70.0), (220179, 2, 120.0), (220180, 2, 60.0)])),
    ),
))
def mean_arterial_pressure(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None,
                           as_of: Any = None, hours: float | None = None, which: str = "all") -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "mean_arterial_pressure")
    frame = stay_rows(ctx, [("bp", bp_sql(ctx))], "bp", "x.map_measured, x.sbp, x.dbp", hours)
    frame = frame.with_columns(
        pl.coalesce(pl.col("map_measured"), calc.mean_arterial_pressure(pl.col("sbp"), pl.col("dbp"))).alias("map"),
        pl.col("map_measured").is_not_null().alias("measured"),
    ).filter(pl.col("map").is_not_null()).select(*STAY_IDS, "charttime", "map", "measured", "sbp", "dbp")
    return pick(frame, STAY_IDS, "map", which, "min")


@register(Card(
    name="shock_index",
    title="Shock index",
    purpose="Shock index (heart rate / systolic blood pressure) at each time both are charted in ICU stays.",
    eligibility="ICU stays with heart rate and systolic pressure charted at the same time.",
    inputs="chartevents: heart rate 220045; SBP 220050/220179/225309.",
    output="subject_id, hadm_id, stay_id, charttime, shock_index, heart_rate, sbp. " + WHICH_DOC,
    interpretation="Normal 0.5-0.7; > 0.9-1.0 suggests haemodynamic instability and higher mortality.",
    source="Allgower M, Burri C. Schockindex. Dtsch Med Wochenschr 1967;92:1947-50; Koch E et al. Shock index "
           "in the emergency department. Scand J Trauma Resusc Emerg Med 2019;27:20.",
    limits="Only times where both are charted; several SBP devices at one time are averaged.",
    level="ICU stay charting time",
    keywords=("shock index", "heart rate systolic ratio", "hr sbp ratio", "haemodynamic instability"),
    vectors=(
        Vector("HR 110 / SBP 100 at 1 h = 1.1; HR alone at 2 h gives no value",
               [{"shock_index": 1.1}],
               data=icu_patient(chart=[(220045, 1, 110.0), (220179, 1, 100.0), (220045, 2, 80.0)])),
    ),
))
def shock_index(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None,
                as_of: Any = None, hours: float | None = None, which: str = "all") -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "shock_index")
    frame = stay_rows(ctx, [("bp", bp_sql(ctx))], "bp", "x.heart_rate, x.sbp", hours)
    frame = frame.with_columns(calc.shock_index(pl.col("heart_rate"), pl.col("sbp")).alias("shock_index"))
    frame = frame.filter(pl.col("shock_index").is_not_null()).select(
        *STAY_IDS, "charttime", "shock_index", "heart_rate", "sbp")
    return pick(frame, STAY_IDS, "shock_index", which, "max")


@register(Card(
    name="pf_ratio",
    title="PaO2/FiO2 ratio",
    purpose="PaO2/FiO2 (P/F) ratio of each arterial blood gas of ICU stays, with the FiO2 used and whether "
            "the patient was on respiratory support.",
    eligibility="ICU stays with arterial blood gases (from 6 h before ICU admission).",
    inputs="labevents: pO2 50821, FiO2 50816 of the same specimen, specimen type 52033 ('ART.'); chartevents: "
           "FiO2 223835 in the previous 4 h; procedureevents 225792/225794 and ventilator settings for "
           "ventilated.",
    output="subject_id, hadm_id, stay_id, charttime, pf_ratio, pao2, fio2 (fraction), fio2_source ('blood gas' "
           "or 'charted'), ventilated. " + WHICH_DOC,
    interpretation="Berlin ARDS severity with PEEP >= 5: mild 200-300, moderate 100-200, severe <= 100 mmHg. "
                   "SOFA respiration: < 400: 1, < 300: 2, < 200 with support: 3, < 100 with support: 4.",
    source="ARDS Definition Task Force. Acute respiratory distress syndrome: the Berlin Definition. JAMA "
           "2012;307:2526-33. FiO2 matching after mimic-code (blood gas FiO2, else charted FiO2 within 4 h).",
    limits="No FiO2 -> no ratio (room air not assumed). Specimens typed venous/mixed are excluded; untyped "
           "ones (and all of them on ehrsql_mimic_iv, which lacks specimen types) are taken as arterial.",
    level="blood gas",
    keywords=("pf ratio", "p/f ratio", "pao2 fio2", "pao2/fio2", "oxygenation", "horowitz index", "ards"),
    vectors=(
        Vector("PaO2 90 at 2 h with FiO2 0.5 charted at 1 h: P/F 180; a gas at 8 h has no FiO2 within 4 h",
               [{"pf_ratio": 180.0, "fio2": 0.5, "fio2_source": "charted", "ventilated": False},
                {"pf_ratio": None, "pao2": 70.0}],
               data=icu_patient(chart=[(223835, 1, 0.5)], labs=[(50821, 2, 90.0), (50821, 8, 70.0)])),
        Vector("PaO2 60 with blood-gas FiO2 60% (same specimen), ventilated: P/F 100", {"pf_ratio": 100.0,
               "fio2_source": "blood gas", "ventilated": True},
               data=icu_patient(labs=[(50821, 2, 60.0, 5), (50816, 2, 60.0, 5), (52033, 2, "ART.", 5)],
                                procedures=[(225792, 0, 12)])),
        Vector("A venous gas is ignored", {"pf_ratio": 200.0},
               data=icu_patient(labs=[(50821, 2, 40.0, 5), (50816, 2, 40.0, 5), (52033, 2, "VEN.", 5),
                                      (50821, 3, 80.0, 6), (50816, 3, 40.0, 6)])),
    ),
))
def pf_ratio(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None,
             as_of: Any = None, hours: float | None = None, which: str = "all") -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "pf_ratio")
    frame = stay_rows(ctx, abg_ctes(ctx), "abg", "x.pao2, x.fio2, x.fio2_source, x.ventilated", hours)
    frame = frame.with_columns(
        calc.fio2_fraction(pl.col("fio2")).alias("fio2"),
    ).with_columns(calc.pf_ratio(pl.col("pao2"), pl.col("fio2")).alias("pf_ratio"))
    frame = frame.select(*STAY_IDS, "charttime", "pf_ratio", "pao2", "fio2", "fio2_source", "ventilated")
    return pick(frame, STAY_IDS, "pf_ratio", which, "min")


def _resolve(ctx: Context, item: str | int | list[int] | tuple[int, ...]) -> Concept:
    """A known concept name, an item label (fuzzy), or item ids."""
    if isinstance(item, str) and item.strip().lower().replace(" ", "_") in CONCEPTS:
        return CONCEPTS[item.strip().lower().replace(" ", "_")]
    if isinstance(item, str):
        best: tuple[str, float, str] | None = None
        for table in ("d_labitems", "d_items"):
            if table in ctx.ehr.tables():
                for label, score in ctx.ehr.lookup(table, "label", item, 1, scores=True):
                    if best is None or score > best[1]:
                        best = (label, score, table)
        if best is None or best[1] < 80:
            raise SkillError(f"No lab or chart item matches {item!r}; known concepts: {', '.join(sorted(CONCEPTS))}, "
                             "or pass item ids.")
        label, _, table = best
        itemids = tuple(ctx.ehr.sql(f"SELECT itemid FROM {table} WHERE label = ?", [label]).to_series().to_list())
        return Concept(label, "labevents" if table == "d_labitems" else "chartevents", itemids, -1e12, 1e12, "",
                       None, {}, label)
    ids = (int(item),) if isinstance(item, int) else tuple(int(i) for i in item)
    for c in CONCEPTS.values():
        if set(ids) <= set(c.itemids):
            return Concept(c.name, c.table, ids, c.low, c.high, c.unit, c.worst, c.convert, c.label)
    events_table = None
    for d, target in (("d_labitems", "labevents"), ("d_items", "chartevents")):
        if d in ctx.ehr.tables():
            found = ctx.ehr.sql(f"SELECT count(*) AS n FROM {d} WHERE itemid IN ({', '.join(map(str, ids))})").item()
            if found:
                events_table = target
                break
    if events_table is None:
        raise SkillError(f"Item ids {list(ids)} are in neither d_labitems nor d_items.")
    return Concept(f"item {ids[0]}", events_table, ids, -1e12, 1e12, "", None, {}, f"items {list(ids)}")


@register(Card(
    name="measurement",
    title="First / last / worst value of a lab or vital sign in a window",
    purpose="Values of one lab test or vital sign per ICU stay or admission within a window from its start: "
            "every value, or the first, last, min, max or worst one, or a summary.",
    eligibility="Any ICU stay (by='stay') or admission (by='admission'); labs from 6 h before the start.",
    inputs="labevents or chartevents (valuenum) of the item: a known concept name ("
           + ", ".join(sorted(CONCEPTS)) + "), an item label (matched fuzzily in d_labitems/d_items) or item ids.",
    output="One row per stay/admission (subject_id, hadm_id[, stay_id]) with charttime and value (which="
           "'first'/'last'/'min'/'max'/'worst'), or first, first_time, last, last_time, min, max, mean, n "
           "(which='summary'), or every value (which='all') with itemid.",
    interpretation="'worst' is the clinically worse extreme of a known concept (e.g. min platelets, max "
                   "creatinine, min MAP); for other items choose 'min' or 'max'. hours=24 is the first day.",
    source="Window conventions of the MIT-LCP mimic-code first-day concepts (Johnson AEW et al., JAMIA "
           "2018;25:32-9).",
    limits="Values outside each known concept's plausible range are dropped; units as stored (temperature "
           "converted to C, weight to kg, height to cm).",
    level="ICU stay or admission",
    keywords=("first value", "last value", "worst value", "lab value", "vital sign", "lowest", "highest",
              "maximum", "minimum", "latest lab", "measurement in window", "first day labs", "min max",
              *sorted({c.label for c in CONCEPTS.values()} | {n.replace("_", " ") for n in CONCEPTS})),
    vectors=(
        Vector("Creatinine 1.0 at -2 h (in the 6 h lookback), 1.8 at 10 h, 1.2 at 30 h; first day summary",
               {"first": 1.0, "last": 1.8, "max": 1.8, "min": 1.0, "n": 2},
               call={"item": "creatinine", "hours": 24, "which": "summary", "by": "stay"},
               data=icu_patient(labs=[(50912, -2, 1.0), (50912, 10, 1.8), (50912, 30, 1.2)])),
        Vector("Worst (max) creatinine of the admission: 1.8", {"value": 1.8},
               call={"item": "creatinine", "which": "worst"},
               data=icu_patient(labs=[(50912, -2, 1.0), (50912, 10, 1.8), (50912, 30, 1.2)])),
        Vector("By label ('White Blood Cells', matched in d_labitems) and by item id (51301): highest 13.5",
               {"value": 13.5}, call={"item": "White Blood Cells", "which": "max"},
               data=icu_patient(labs=[(51301, 1, 9.0), (51300, 5, 13.5)])),
        Vector("By item id", {"value": 9.0}, call={"item": 51301, "which": "max"},
               data=icu_patient(labs=[(51301, 1, 9.0), (51300, 5, 13.5)])),
        Vector("Temperature 100.4 F is 38 C; the last of two", {"value": 38.0},
               call={"item": "temperature", "which": "last"},
               data=icu_patient(chart=[(223762, 1, 37.0), (223761, 2, 100.4)])),
    ),
))
def measurement(ehr: Database, item: str | int | list[int], *, stay_ids: Ids = None, hadm_ids: Ids = None,
                subject_ids: Ids = None, as_of: Any = None, hours: float | None = None, which: str = "all",
                by: str | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "measurement")
    c = _resolve(ctx, item)
    level = level_for(ctx, by, "stay" if c.table == "chartevents" else "admission")
    ids = LEVELS[level][3]
    frame = concept_values(ctx, [c], level, hours).select(*ids, "charttime", "value", "itemid")
    return pick(frame, ids, "value", which, c.worst)
