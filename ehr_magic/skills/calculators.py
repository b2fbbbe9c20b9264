"""Pure clinical calculators: numbers in, a score or value out.

Every calculator takes plain numbers (``None`` = not measured) and also polars
expressions, so the EHR skills apply the very same thresholds to whole columns:
``sofa_points_coagulation(pl.col("platelets_min"))`` is an expression. Scalars give
``None`` when a required input is missing; criteria counts (qSOFA, SIRS, ...) count a
missing input as not met.

Units: creatinine, bilirubin, BUN, calcium in mg/dL; albumin g/dL; platelets and
WBC 10^3/uL; pressures mmHg; PaO2 mmHg; FiO2 as a fraction (0.21-1) or percent (21-100);
vasopressor doses mcg/kg/min; urine output mL; weight kg; height cm; age years.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import polars as pl

from ehr_magic.skills.errors import SkillError

if TYPE_CHECKING:
    from polars.expr.whenthen import ChainedThen, Then

Value = Any  # float | int | bool | None | pl.Expr


# -- helpers that work on scalars and expressions -------------------------------------------

def _is_expr(*values: Value) -> bool:
    return any(isinstance(v, pl.Expr) for v in values)


def _cmp(x: Value, op: Callable[[Any, Any], Any], threshold: Value) -> Value:
    """``op(x, threshold)``; False for a missing scalar, null-safe for expressions."""
    if isinstance(x, pl.Expr) or isinstance(threshold, pl.Expr):
        return op(x if isinstance(x, pl.Expr) else pl.lit(x), threshold).fill_null(False)
    if x is None or threshold is None:
        return False
    return bool(op(x, threshold))


def _lt(x: Value, t: Value) -> Value:
    return _cmp(x, operator.lt, t)


def _le(x: Value, t: Value) -> Value:
    return _cmp(x, operator.le, t)


def _gt(x: Value, t: Value) -> Value:
    return _cmp(x, operator.gt, t)


def _ge(x: Value, t: Value) -> Value:
    return _cmp(x, operator.ge, t)


def _flag(x: Value) -> Value:
    """A yes/no input: True/1 is yes; None/0/False is no."""
    if isinstance(x, pl.Expr):
        return x.cast(pl.Boolean).fill_null(False)
    return bool(x) if x is not None else False


def _or(*conds: Value) -> Value:
    if _is_expr(*conds):
        out = pl.lit(False)
        for c in conds:
            out = out | (c if isinstance(c, pl.Expr) else pl.lit(bool(c)))
        return out
    return any(conds)


def _and(*conds: Value) -> Value:
    if _is_expr(*conds):
        out = pl.lit(True)
        for c in conds:
            out = out & (c if isinstance(c, pl.Expr) else pl.lit(bool(c)))
        return out
    return all(conds)


def _count(*conds: Value) -> Value:
    if _is_expr(*conds):
        return pl.sum_horizontal([(c if isinstance(c, pl.Expr) else pl.lit(bool(c))).cast(pl.Int64) for c in conds])
    return sum(1 for c in conds if c)


def _missing(*values: Value) -> Value:
    """True when every input is missing (the score is then missing too)."""
    if _is_expr(*values):
        out = pl.lit(True)
        for v in values:
            out = out & (v.is_null() if isinstance(v, pl.Expr) else pl.lit(v is None))
        return out
    return all(v is None for v in values)


def _choose(pairs: list[tuple[Value, int]], otherwise: int, missing: Value = False) -> Value:
    """The value of the first true condition (in order), else ``otherwise``; None if ``missing``."""
    if _is_expr(missing, *[c for c, _ in pairs]):
        missing_expr = missing if isinstance(missing, pl.Expr) else pl.lit(bool(missing))
        chain: Then | ChainedThen = pl.when(missing_expr).then(pl.lit(None))
        for cond, value in pairs:
            chain = chain.when(cond if isinstance(cond, pl.Expr) else pl.lit(bool(cond))).then(pl.lit(value))
        return chain.otherwise(pl.lit(otherwise)).cast(pl.Int64)
    if missing:
        return None
    for cond, value in pairs:
        if cond:
            return value
    return otherwise


def _max(*values: Value) -> Value:
    if _is_expr(*values):
        return pl.max_horizontal([v if isinstance(v, pl.Expr) else pl.lit(v) for v in values])
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _female(sex: Value) -> Value:
    if isinstance(sex, pl.Expr):
        return sex.cast(pl.String).str.strip_chars().str.to_uppercase().str.starts_with("F")
    text = str(sex).strip().upper() if sex is not None else ""
    if text in {"F", "FEMALE", "W", "WOMAN"}:
        return True
    if text in {"M", "MALE", "MAN"}:
        return False
    raise SkillError(f"sex must be 'F' or 'M' (got {sex!r}).")


def _need(name: str, value: Value) -> None:
    if value is None:
        raise SkillError(f"{name} is required.")


# -- simple derived values ------------------------------------------------------------------

def mean_arterial_pressure(sbp: Value, dbp: Value) -> Value:
    """MAP = (SBP + 2 x DBP) / 3 (mmHg)."""
    if _is_expr(sbp, dbp):
        return (sbp + 2 * dbp) / 3
    if sbp is None or dbp is None:
        return None
    return (sbp + 2 * dbp) / 3


def shock_index(heart_rate: Value, sbp: Value) -> Value:
    """Shock index = heart rate / systolic blood pressure (normal 0.5-0.7; > 1 suggests shock)."""
    if _is_expr(heart_rate, sbp):
        return pl.when(sbp > 0).then(heart_rate / sbp)
    if heart_rate is None or sbp is None or sbp <= 0:
        return None
    return heart_rate / sbp


def fio2_fraction(fio2: Value) -> Value:
    """FiO2 as a fraction: 21-100 (percent) -> 0.21-1; 0.21-1 kept; anything else -> None."""
    if isinstance(fio2, pl.Expr):
        return (pl.when((fio2 >= 21) & (fio2 <= 100)).then(fio2 / 100)
                .when((fio2 >= 0.21) & (fio2 <= 1)).then(fio2))
    if fio2 is None:
        return None
    if 21 <= fio2 <= 100:
        return fio2 / 100
    if 0.21 <= fio2 <= 1:
        return float(fio2)
    return None


def pf_ratio(pao2: Value, fio2: Value) -> Value:
    """PaO2/FiO2 ratio (mmHg); FiO2 as fraction or percent."""
    fraction = fio2_fraction(fio2)
    if _is_expr(pao2, fraction):
        return pao2 / fraction
    if pao2 is None or fraction is None:
        return None
    return pao2 / fraction


def anion_gap(sodium: Value, chloride: Value, bicarbonate: Value, potassium: Value = None) -> Value:
    """Anion gap = Na - (Cl + HCO3) [+ K when given] (mEq/L); normal about 8-12 without K."""
    if _is_expr(sodium, chloride, bicarbonate, potassium):
        gap = sodium - (chloride + bicarbonate)
        return gap + potassium if potassium is not None else gap
    if sodium is None or chloride is None or bicarbonate is None:
        return None
    return sodium - (chloride + bicarbonate) + (potassium or 0)


def corrected_calcium(calcium: Value, albumin: Value, normal_albumin: float = 4.0) -> Value:
    """Payne: corrected Ca = Ca + 0.8 x (4.0 - albumin) (mg/dL, albumin g/dL)."""
    if _is_expr(calcium, albumin):
        return calcium + 0.8 * (normal_albumin - albumin)
    if calcium is None or albumin is None:
        return None
    return calcium + 0.8 * (normal_albumin - albumin)


def bmi(weight_kg: Value, height_cm: Value) -> Value:
    """Body mass index = weight (kg) / height (m)^2."""
    if _is_expr(weight_kg, height_cm):
        return pl.when(height_cm > 0).then(weight_kg / (height_cm / 100) ** 2)
    if weight_kg is None or height_cm is None or height_cm <= 0:
        return None
    return weight_kg / (height_cm / 100) ** 2


def egfr_ckd_epi_2021(creatinine: Value, age: Value, sex: Value) -> Value:
    """eGFR (mL/min/1.73 m2), CKD-EPI 2021 creatinine equation without race (Inker 2021).

    142 x min(Scr/k, 1)^a x max(Scr/k, 1)^-1.200 x 0.9938^age [x 1.012 if female];
    k = 0.7 (F) / 0.9 (M), a = -0.241 (F) / -0.302 (M); Scr in mg/dL; adults (>= 18 y).
    """
    if _is_expr(creatinine, age, sex):
        return _egfr_ckd_epi_2021_expr(creatinine, age, sex)
    if creatinine is None or age is None or sex is None:
        return None
    if creatinine <= 0:
        raise SkillError(f"creatinine must be positive mg/dL (got {creatinine}).")
    female = _female(sex)
    kappa, alpha = (0.7, -0.241) if female else (0.9, -0.302)
    ratio = creatinine / kappa
    return (142 * min(ratio, 1.0) ** alpha * max(ratio, 1.0) ** -1.2 * 0.9938 ** age
            * (1.012 if female else 1.0))


def _egfr_ckd_epi_2021_expr(creatinine: Value, age: Value, sex: Value) -> pl.Expr:
    """``egfr_ckd_epi_2021`` for expressions (null where creatinine is not positive)."""
    female = _female(sex) if isinstance(sex, pl.Expr) else pl.lit(_female(sex))
    kappa = pl.when(female).then(0.7).otherwise(0.9)
    alpha = pl.when(female).then(-0.241).otherwise(-0.302)
    ratio = creatinine / kappa
    value = (142 * ratio.clip(upper_bound=1.0).pow(alpha) * ratio.clip(lower_bound=1.0).pow(-1.2)
             * pl.lit(0.9938).pow(age) * pl.when(female).then(1.012).otherwise(1.0))
    return pl.when(creatinine > 0).then(value)


def gcs_total(eye: Value, verbal: Value, motor: Value) -> Value:
    """Glasgow Coma Scale = eye (1-4) + verbal (1-5) + motor (1-6), 3-15."""
    if _is_expr(eye, verbal, motor):
        return eye + verbal + motor
    if eye is None or verbal is None or motor is None:
        return None
    for name, value, top in (("eye", eye, 4), ("verbal", verbal, 5), ("motor", motor, 6)):
        if not 1 <= value <= top:
            raise SkillError(f"GCS {name} must be 1-{top} (got {value}).")
    return eye + verbal + motor


# -- SOFA (Vincent 1996) -----------------------------------------------------------------

def sofa_points_respiration(pf_ratio: Value, ventilated: Value = False) -> Value:
    """PaO2/FiO2 >= 400: 0; < 400: 1; < 300: 2; < 200 with respiratory support: 3; < 100 with support: 4."""
    vent = _flag(ventilated)
    return _choose([(_and(_lt(pf_ratio, 100), vent), 4), (_and(_lt(pf_ratio, 200), vent), 3),
                    (_lt(pf_ratio, 300), 2), (_lt(pf_ratio, 400), 1)], 0, _missing(pf_ratio))


def sofa_points_coagulation(platelets: Value) -> Value:
    """Platelets (10^3/uL) >= 150: 0; < 150: 1; < 100: 2; < 50: 3; < 20: 4."""
    return _choose([(_lt(platelets, 20), 4), (_lt(platelets, 50), 3), (_lt(platelets, 100), 2),
                    (_lt(platelets, 150), 1)], 0, _missing(platelets))


def sofa_points_liver(bilirubin: Value) -> Value:
    """Bilirubin (mg/dL) < 1.2: 0; 1.2-1.9: 1; 2.0-5.9: 2; 6.0-11.9: 3; >= 12: 4."""
    return _choose([(_ge(bilirubin, 12), 4), (_ge(bilirubin, 6), 3), (_ge(bilirubin, 2), 2),
                    (_ge(bilirubin, 1.2), 1)], 0, _missing(bilirubin))


def sofa_points_cardiovascular(map_min: Value, dopamine: Value = None, dobutamine: Value = None,
                               epinephrine: Value = None, norepinephrine: Value = None) -> Value:
    """MAP >= 70: 0; MAP < 70: 1; dopamine <= 5 or any dobutamine: 2; dopamine > 5 or
    epinephrine <= 0.1 or norepinephrine <= 0.1: 3; dopamine > 15 or epinephrine > 0.1 or
    norepinephrine > 0.1: 4 (doses mcg/kg/min)."""
    return _choose([
        (_or(_gt(dopamine, 15), _gt(epinephrine, 0.1), _gt(norepinephrine, 0.1)), 4),
        (_or(_gt(dopamine, 5), _gt(epinephrine, 0), _gt(norepinephrine, 0)), 3),
        (_or(_gt(dopamine, 0), _gt(dobutamine, 0)), 2),
        (_lt(map_min, 70), 1),
    ], 0, _missing(map_min, dopamine, dobutamine, epinephrine, norepinephrine))


def sofa_points_cns(gcs: Value) -> Value:
    """GCS 15: 0; 13-14: 1; 10-12: 2; 6-9: 3; < 6: 4."""
    return _choose([(_lt(gcs, 6), 4), (_lt(gcs, 10), 3), (_lt(gcs, 13), 2), (_lt(gcs, 15), 1)], 0,
                   _missing(gcs))


def sofa_points_renal(creatinine: Value, urine_output_24h: Value = None) -> Value:
    """Creatinine (mg/dL) < 1.2: 0; 1.2-1.9: 1; 2.0-3.4: 2; 3.5-4.9 or urine < 500 mL/day: 3;
    >= 5.0 or urine < 200 mL/day: 4."""
    return _choose([(_or(_ge(creatinine, 5), _lt(urine_output_24h, 200)), 4),
                    (_or(_ge(creatinine, 3.5), _lt(urine_output_24h, 500)), 3),
                    (_ge(creatinine, 2), 2), (_ge(creatinine, 1.2), 1)], 0,
                   _missing(creatinine, urine_output_24h))


def sofa_total(*components: Value) -> Value:
    """Sum of the organ points, a missing organ counting 0 (0-24)."""
    if _is_expr(*components):
        return pl.sum_horizontal([c.fill_null(0) if isinstance(c, pl.Expr) else pl.lit(c or 0)
                                  for c in components]).cast(pl.Int64)
    return sum(c or 0 for c in components)


# -- qSOFA, SIRS ---------------------------------------------------------------------------

def qsofa_criteria(resp_rate: Value, sbp: Value, gcs: Value) -> dict[str, Value]:
    """Seymour 2016: respiratory rate >= 22/min, systolic BP <= 100 mmHg, altered mentation (GCS < 15)."""
    return {"resp_rate_ge_22": _ge(resp_rate, 22), "sbp_le_100": _le(sbp, 100), "gcs_lt_15": _lt(gcs, 15)}


def qsofa(resp_rate: Value, sbp: Value, gcs: Value) -> Value:
    """Quick SOFA, 0-3 (>= 2 flags infection patients at risk of a poor outcome)."""
    return _count(*qsofa_criteria(resp_rate, sbp, gcs).values())


def sirs_criteria(temperature_min: Value = None, temperature_max: Value = None, heart_rate_max: Value = None,
                  resp_rate_max: Value = None, paco2_min: Value = None, wbc_min: Value = None,
                  wbc_max: Value = None, bands_max: Value = None) -> dict[str, Value]:
    """Bone 1992: temperature > 38 or < 36 C; heart rate > 90; respiratory rate > 20 or PaCO2 < 32;
    WBC > 12 or < 4 (10^3/uL) or bands > 10%."""
    return {
        "temperature": _or(_gt(temperature_max, 38), _lt(temperature_min, 36)),
        "heart_rate": _gt(heart_rate_max, 90),
        "respiration": _or(_gt(resp_rate_max, 20), _lt(paco2_min, 32)),
        "wbc": _or(_gt(wbc_max, 12), _lt(wbc_min, 4), _gt(bands_max, 10)),
    }


def sirs(**values: Value) -> Value:
    """Number of SIRS criteria met, 0-4 (keywords as in ``sirs_criteria``)."""
    return _count(*sirs_criteria(**values).values())


# -- KDIGO ----------------------------------------------------------------------------------

def kdigo_creatinine_stage(creatinine: Value, baseline_7d: Value, lowest_48h: Value = None) -> Value:
    """KDIGO 2012 stage from creatinine (mg/dL): 1 = rise >= 0.3 within 48 h or >= 1.5x the
    7-day baseline; 2 = >= 2.0x; 3 = >= 3.0x, or >= 4.0 with an acute rise (>= 0.3 in 48 h
    or >= 1.5x baseline)."""
    low48 = lowest_48h if lowest_48h is not None else baseline_7d
    if _is_expr(creatinine, baseline_7d, low48):
        ratio = creatinine / baseline_7d
        rise = creatinine - low48
    else:
        if creatinine is None or baseline_7d is None:
            return None
        ratio = creatinine / baseline_7d
        rise = creatinine - low48 if low48 is not None else None
    eps = 1e-9  # 2.4 / 0.8 is 2.9999999999999996 in floating point
    return _choose([
        (_or(_ge(ratio, 3 - eps), _and(_ge(creatinine, 4), _or(_ge(rise, 0.3 - eps), _ge(ratio, 1.5 - eps)))), 3),
        (_ge(ratio, 2 - eps), 2),
        (_or(_ge(rise, 0.3 - eps), _ge(ratio, 1.5 - eps)), 1),
    ], 0, _missing(creatinine))


def kdigo_urine_output_stage(rate_6h: Value = None, rate_12h: Value = None, rate_24h: Value = None,
                             volume_12h: Value = None) -> Value:
    """KDIGO 2012 stage from urine output rates (mL/kg/h, averaged over the past 6/12/24 h):
    1 = < 0.5 for 6 h; 2 = < 0.5 for 12 h; 3 = < 0.3 for 24 h or anuria (0 mL) for 12 h."""
    return _choose([(_or(_lt(rate_24h, 0.3), _le(volume_12h, 0)), 3), (_lt(rate_12h, 0.5), 2),
                    (_lt(rate_6h, 0.5), 1)], 0, _missing(rate_6h, rate_12h, rate_24h, volume_12h))


# -- risk scores ------------------------------------------------------------------------------

def curb65_criteria(confusion: Value, bun: Value, resp_rate: Value, sbp: Value, dbp: Value,
                    age: Value) -> dict[str, Value]:
    """Lim 2003: Confusion; Urea > 7 mmol/L (BUN > 19 mg/dL); RR >= 30; SBP < 90 or DBP <= 60; age >= 65."""
    return {"confusion": _flag(confusion), "urea": _gt(bun, 19), "resp_rate": _ge(resp_rate, 30),
            "blood_pressure": _or(_lt(sbp, 90), _le(dbp, 60)), "age_65": _ge(age, 65)}


def curb65(confusion: Value, bun: Value, resp_rate: Value, sbp: Value, dbp: Value, age: Value) -> Value:
    """CURB-65, 0-5 (0-1 low risk, 2 moderate, >= 3 severe pneumonia)."""
    return _count(*curb65_criteria(confusion, bun, resp_rate, sbp, dbp, age).values())


def cha2ds2_vasc(chf: Value, hypertension: Value, age: Value, diabetes: Value, stroke: Value,
                 vascular: Value, female: Value) -> Value:
    """Lip 2010: CHF 1, Hypertension 1, Age >= 75 2, Diabetes 1, Stroke/TIA/thromboembolism 2,
    Vascular disease 1, Age 65-74 1, Sex category female 1 (0-9)."""
    age_points = _choose([(_ge(age, 75), 2), (_ge(age, 65), 1)], 0)
    flags = _count(_flag(chf), _flag(hypertension), _flag(diabetes), _flag(vascular), _flag(female))
    return flags + age_points + 2 * _count(_flag(stroke))


def has_bled(hypertension: Value, abnormal_renal: Value, abnormal_liver: Value, stroke: Value,
             bleeding: Value, labile_inr: Value, age: Value, drugs: Value, alcohol: Value) -> Value:
    """Pisters 2010: one point each for Hypertension, Abnormal renal and liver function (1 each),
    Stroke, Bleeding, Labile INR, Elderly (> 65), Drugs and alcohol (1 each); 0-9, >= 3 high risk."""
    return _count(_flag(hypertension), _flag(abnormal_renal), _flag(abnormal_liver), _flag(stroke),
                  _flag(bleeding), _flag(labile_inr), _gt(age, 65), _flag(drugs), _flag(alcohol))


CHARLSON_WEIGHTS: dict[str, int] = {
    "myocardial_infarct": 1, "congestive_heart_failure": 1, "peripheral_vascular_disease": 1,
    "cerebrovascular_disease": 1, "dementia": 1, "chronic_pulmonary_disease": 1, "rheumatic_disease": 1,
    "peptic_ulcer_disease": 1, "mild_liver_disease": 1, "diabetes_without_cc": 1, "diabetes_with_cc": 2,
    "paraplegia": 2, "renal_disease": 2, "malignant_cancer": 2, "severe_liver_disease": 3,
    "metastatic_solid_tumor": 6, "aids": 6,
}
# A condition is not counted when its more severe form is present (Charlson 1987).
CHARLSON_HIERARCHY = {"mild_liver_disease": "severe_liver_disease", "diabetes_without_cc": "diabetes_with_cc",
                      "malignant_cancer": "metastatic_solid_tumor"}


def charlson_age_points(age: Value) -> Value:
    """Charlson 1994 age points: < 50: 0; 50-59: 1; 60-69: 2; 70-79: 3; >= 80: 4."""
    return _choose([(_ge(age, 80), 4), (_ge(age, 70), 3), (_ge(age, 60), 2), (_ge(age, 50), 1)], 0,
                   _missing(age))


def charlson_index(conditions: dict[str, Value], age: Value = None) -> Value:
    """Charlson comorbidity index: weighted conditions (hierarchy applied) + age points if ``age``."""
    unknown = set(conditions) - set(CHARLSON_WEIGHTS)
    if unknown:
        raise SkillError(f"Unknown Charlson conditions {sorted(unknown)}; use {sorted(CHARLSON_WEIGHTS)}.")
    terms = []
    for name, weight in CHARLSON_WEIGHTS.items():
        present = _flag(conditions.get(name))
        severe = CHARLSON_HIERARCHY.get(name)
        if severe is not None:
            present = _and(present, _not(_flag(conditions.get(severe))))
        terms.append((present, weight))
    if _is_expr(*[t for t, _ in terms], age):
        total = pl.sum_horizontal([(t if isinstance(t, pl.Expr) else pl.lit(bool(t))).cast(pl.Int64) * w
                                   for t, w in terms])
        return total + (charlson_age_points(age) if age is not None else 0)
    points = sum(w for t, w in terms if t)
    if age is not None:
        points += charlson_age_points(age)
    return points


def _not(x: Value) -> Value:
    return ~x if isinstance(x, pl.Expr) else not x


def charlson_ten_year_survival(index: float) -> float:
    """Estimated 10-year survival: 0.983^(e^(0.9 x CCI)) (Charlson 1987)."""
    return 0.983 ** math.exp(0.9 * index)
