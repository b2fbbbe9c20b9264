"""SOFA: first-day (or any first N hours) and hourly rolling 24-hour SOFA."""

from __future__ import annotations

from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills.base import Context, Ids, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.registry import register
from ehr_magic.skills.scores._sofa_sql import (
    COMPONENTS, VALUE_COLUMNS, components_for, first_day_windows, hourly_windows, sofa_points, sofa_values,
)
from ehr_magic.skills.testing import icu_patient

SOURCE = ("Vincent JL et al. The SOFA (Sepsis-related Organ Failure Assessment) score to describe organ "
          "dysfunction/failure. Intensive Care Med 1996;22:707-10. Implementation after the MIT-LCP "
          "mimic-code SOFA concepts (Johnson AEW et al., JAMIA 2018;25:32-9).")
INPUTS = ("labevents: pO2 50821 (arterial specimens: 52033 'ART.'), FiO2 50816, platelets 51265, bilirubin "
          "50885, creatinine 50912; chartevents: FiO2 223835, MAP 220052/220181/225312 (else from SBP/DBP), GCS "
          "220739/223900/223901, ventilator settings 223849/229314/220339/224684; procedureevents: ventilation "
          "225792/225794; inputevents: norepinephrine 221906, epinephrine 221289, dopamine 221662, dobutamine "
          "221653 (rate, mcg/kg/min); outputevents: urine items (mimic-code list).")
LIMITS = ("Missing organs count 0 in the total (their column is null). No FiO2 -> no P/F (room air is not "
          "assumed). GCS is as charted (no adjustment for sedation; the reconstructed demo chartevents lost the "
          "'No Response-ETT' text, so intubated patients show verbal 1). Vasopressor duration (>= 1 h) is not "
          "required. Urine output counts only when the window covers >= 22 h of ICU time. On ehrsql_mimic_iv "
          "only coagulation, liver and renal can be scored (pass components=...).")

# The reference patient (times in hours from ICU admission): every organ abnormal on day 1.
_ART = [(50821, 3, 80.0, 7), (50816, 3, 50.0, 7), (52033, 3, "ART.", 7)]  # PaO2 80 on FiO2 50%: P/F 160


def _full_patient() -> dict[str, list[dict[str, Any]]]:
    """The reference patient's rows, built afresh for each vector."""
    return icu_patient(
        labs=[(51265, 2, 45.0), (50885, 2, 2.5), (50912, 2, 1.5), *_ART, (51265, 30, 10.0)],
        chart=[(220052, 1, 65.0), (220739, 2, 2), (223900, 2, 3), (223901, 2, 5)],
        inputs=[(221906, 2, 4, 0.05, "mcg/kg/min")],
        procedures=[(225792, 0, 10)],
        outputs=[(226559, 5, 100), (226559, 20, 200)],
    )


_FULL_EXPECTED = {"respiration": 3, "coagulation": 3, "liver": 2, "cardiovascular": 3, "cns": 2, "renal": 3,
                  "sofa": 16, "pf_ratio_min": 160.0, "gcs_min": 10.0, "urine_output": 300.0}


@register(Card(
    name="sofa",
    title="SOFA score (first day)",
    purpose="Sequential Organ Failure Assessment over the first 24 h of each ICU stay (or the first `hours`), "
            "with its six organ components (respiration, coagulation, liver, cardiovascular, CNS, renal).",
    eligibility="Adult ICU stays (icustays). Scored from 6 h before ICU admission to `hours` after it "
                "(capped at ICU discharge and as_of).",
    inputs=INPUTS,
    output="One row per ICU stay: subject_id, hadm_id, stay_id, window_start, window_end, sofa (0-24), "
           "respiration, coagulation, liver, cardiovascular, cns, renal (0-4 each, null when unmeasured) and "
           "the worst values used (pf_ratio_min, platelets_min, bilirubin_max, map_min, *_max vasopressor rates, "
           "gcs_min, creatinine_max, urine_output, urine_output_hours).",
    interpretation="Each organ 0 (normal) to 4 (failure). A SOFA >= 2 above baseline with infection defines "
                   "sepsis (Sepsis-3); first-day SOFA > 11 is associated with ICU mortality above 80% "
                   "(Ferreira 2001).",
    source=SOURCE, limits=LIMITS, level="ICU stay",
    keywords=("sofa", "sequential organ failure assessment", "organ failure", "organ dysfunction",
              "first day sofa", "sofa score", "sepsis severity"),
    vectors=(
        Vector("Every organ abnormal on day 1 (platelets 45, bilirubin 2.5, creatinine 1.5, P/F 160 ventilated, "
               "MAP 65 + norepinephrine 0.05, GCS 2+3+5, urine 300 mL/24 h); platelets 10 at 30 h ignored",
               _FULL_EXPECTED, data=_full_patient()),
        Vector("Same patient as of 2.5 h: the blood gas (3 h) and the day's urine are not yet known",
               {"respiration": None, "coagulation": 3, "liver": 2, "cardiovascular": 3, "cns": 2, "renal": 1,
                "sofa": 11}, call={"as_of": "2180-01-02 02:30:00"}, data=_full_patient()),
        Vector("P/F 160 without ventilation: respiration 2", {"respiration": 2, "sofa": 2},
               data=icu_patient(labs=_ART)),
        Vector("MAP 68 only: cardiovascular 1", {"cardiovascular": 1, "sofa": 1},
               data=icu_patient(chart=[(220181, 4, 68.0)])),
        Vector("Dopamine 6 mcg/kg/min: cardiovascular 3", {"cardiovascular": 3},
               data=icu_patient(inputs=[(221662, 1, 3, 6.0, "mcg/kg/min")])),
        Vector("Norepinephrine 8 mcg/min at 80 kg (0.1 mcg/kg/min): cardiovascular 3; 0.2 -> 4",
               {"cardiovascular": 4, "norepinephrine_max": 0.2},
               data=icu_patient(inputs=[(221906, 1, 3, 8.0, "mcg/min", 80.0), (221906, 3, 5, 0.2, "mcg/kg/min")])),
        Vector("Dobutamine 5: cardiovascular 2", {"cardiovascular": 2},
               data=icu_patient(inputs=[(221653, 1, 3, 5.0, "mcg/kg/min")])),
        Vector("Creatinine 3.6 with 1000 mL urine on day 1: renal 3 (from creatinine)", {"renal": 3},
               data=icu_patient(labs=[(50912, 5, 3.6)], outputs=[(226559, 10, 1000)])),
        Vector("Urine 150 mL over day 1, creatinine 1.0: renal 4", {"renal": 4, "urine_output": 150.0},
               data=icu_patient(labs=[(50912, 5, 1.0)], outputs=[(226559, 10, 150)])),
        Vector("GCS 4+5+6 = 15: cns 0; bilirubin 12.5: liver 4", {"cns": 0, "liver": 4, "sofa": 4},
               data=icu_patient(chart=[(220739, 1, 4), (223900, 1, 5), (223901, 1, 6)], labs=[(50885, 1, 12.5)])),
    ),
))
def sofa(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
         hours: float = 24, components: tuple[str, ...] | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "sofa")
    chosen = components_for(ctx, components)
    frame = sofa_points(sofa_values(ctx, first_day_windows(ctx, hours), chosen), chosen)
    return frame.select("subject_id", "hadm_id", "stay_id", "window_start", "window_end", "sofa", *COMPONENTS,
                        *VALUE_COLUMNS)


@register(Card(
    name="sofa_hourly",
    title="SOFA score, hourly rolling 24 h",
    purpose="SOFA for every hour of each ICU stay, each organ taking its worst value of the past 24 hours "
            "(the rolling SOFA used to detect an acute rise, e.g. for Sepsis-3).",
    eligibility="ICU stays; hours from ICU admission to discharge (or as_of).",
    inputs=INPUTS,
    output="One row per ICU stay and hour: subject_id, hadm_id, stay_id, hr (0 = first hour), window_start, "
           "window_end (end of the hour), sofa_24hours, the six components and the worst values used.",
    interpretation="sofa_24hours at hour h uses only data charted up to the end of hour h. A rise >= 2 points "
                   "from baseline (assumed 0 when unknown) marks acute organ dysfunction.",
    source=SOURCE, limits=LIMITS, level="ICU stay hour",
    keywords=("rolling sofa", "hourly sofa", "sofa over time", "sofa trajectory", "sofa 24 hours", "max sofa"),
    vectors=(
        Vector("Platelets 45 at 2:00: hour 0 (0:00-1:00) scores 0; hour 1 (1:00-2:00) and later coagulation 3",
               [{"hr": 0, "sofa_24hours": 0}, {"hr": 1, "sofa_24hours": 3}, {"hr": 2, "sofa_24hours": 3},
                {"hr": 3, "sofa_24hours": 3}],
               call={"components": ("coagulation",)}, data=icu_patient(labs=[(51265, 2, 45.0)], los_hours=4)),
        Vector("Platelets 45 at 2:00 leaves the 24 h window after hour 25 (window 2:00-26:00 excludes it)",
               [{"hr": 24, "sofa_24hours": 3}, {"hr": 25, "sofa_24hours": 0}, {"hr": 26, "sofa_24hours": 0},
                {"hr": 27, "sofa_24hours": 0, "coagulation": None}],
               call={"components": ("coagulation",), "as_of": "2180-01-03 04:00:00"},
               data=icu_patient(labs=[(51265, 2, 45.0), (51265, 1, 200.0)], los_hours=28)),
    ),
))
def sofa_hourly(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None,
                as_of: Any = None, components: tuple[str, ...] | None = None) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "sofa_hourly")
    chosen = components_for(ctx, components)
    frame = sofa_points(sofa_values(ctx, hourly_windows(ctx), chosen), chosen, total="sofa_24hours")
    return frame.rename({"wid": "hr"}).select(
        "subject_id", "hadm_id", "stay_id", "hr", "window_start", "window_end", "sofa_24hours", *COMPONENTS,
        *VALUE_COLUMNS)
