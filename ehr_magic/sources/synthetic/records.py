"""Administrative and outpatient records of one chunk: diagnosis-related groups
(drgcodes, MS-DRG and APR-DRG with severity and mortality risk) and the online
medical record's clinic measurements (omr: blood pressure, weight, height, BMI).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ehr_magic.sources.synthetic import icd
from ehr_magic.sources.synthetic.hosp import FLAG_INDEX, Cohort
from ehr_magic.sources.synthetic.util import DAY, YEAR, Rng, cat, dates, num, owners

_KEYS = [c[0] for c in icd.ALL_DX]
# ALL_DX index -> row of DRG_ROWS (or -1 for concepts that are never principal)
DRG_ROWS = list(icd.DRGS.values())
DRG_OF_DX = np.array([list(icd.DRGS).index(k) if k in icd.DRGS else -1 for k in _KEYS])
MS_CODES = list(dict.fromkeys(r[0] for r in DRG_ROWS))
MS_TITLES = list(dict.fromkeys(r[1] for r in DRG_ROWS))
APR_CODES = list(dict.fromkeys(r[2] for r in DRG_ROWS))
APR_TITLES = list(dict.fromkeys(r[3] for r in DRG_ROWS))


def drgcodes_table(rng: Rng, c: Cohort) -> dict[str, pa.Array]:
    """One HCFA (MS-DRG) row per admission, and an APR-DRG row for most of them."""
    na = c.n_adm
    row = DRG_OF_DX[c.principal]
    n_sec = np.bincount(c.sec_adm, minlength=na)
    severity = np.clip(np.round(1 + (c.severity - 0.6) * 1.5 + c.icu + c.died + n_sec / 6
                                + rng.normal(0, 0.4, na)), 1, 4)
    mortality = np.clip(np.round(1 + (c.age - 50) / 25 + 0.8 * c.icu + 1.5 * c.died + rng.normal(0, 0.5, na)), 1, 4)
    apr = rng.random(na) < 0.85
    adm = np.concatenate([np.arange(na), np.flatnonzero(apr)])
    is_apr = np.concatenate([np.zeros(na, dtype=bool), np.ones(int(apr.sum()), dtype=bool)])
    order = np.argsort(adm, kind="stable")
    adm, is_apr = adm[order], is_apr[order]
    r = row[adm]
    code = np.where(is_apr, len(MS_CODES) + np.array([APR_CODES.index(x[2]) for x in DRG_ROWS])[r],
                    np.array([MS_CODES.index(x[0]) for x in DRG_ROWS])[r])
    title = np.where(is_apr, len(MS_TITLES) + np.array([APR_TITLES.index(x[3]) for x in DRG_ROWS])[r],
                     np.array([MS_TITLES.index(x[1]) for x in DRG_ROWS])[r])
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]),
        "drg_type": cat(is_apr.astype(np.int32), ["HCFA", "APR"]),
        "drg_code": cat(code, MS_CODES + APR_CODES), "description": cat(title, MS_TITLES + APR_TITLES),
        "drg_severity": num(severity[adm].astype(np.int16), is_apr),
        "drg_mortality": num(mortality[adm].astype(np.int16), is_apr),
    }


OMR_NAMES = ["Blood Pressure", "BMI (kg/m2)", "Height (Inches)", "Weight (Lbs)"]


def omr_table(rng: Rng, c: Cohort) -> dict[str, pa.Array]:
    """Clinic visits around each patient's hospital years, each with some measurements."""
    n = len(c.subject_id)
    k_adm = np.bincount(c.pat, minlength=n)
    first = np.cumsum(k_adm) - k_adm
    last = first + k_adm - 1
    lo = c.admit_s[first] - 2 * YEAR
    hi = np.minimum(c.disch_s[last] + 2 * YEAR, c.now_s - DAY)
    hi = np.where(c.dod_s >= 0, np.minimum(hi, c.dod_s), hi)
    visits = np.minimum(rng.poisson(2.2, n), 10)
    pat = owners(visits)
    when = lo[pat] + (rng.random(len(pat)) * (hi[pat] - lo[pat])).astype(np.int64)
    nv = len(pat)
    htn = np.zeros(n, dtype=bool)
    htn[c.pat[c.flags[:, FLAG_INDEX["htn"]]]] = True
    # measurements per visit: BP (sometimes twice), weight, BMI with the weight, height now and then
    has = {"bp": rng.random(nv) < 0.95, "bp2": rng.random(nv) < 0.1, "weight": rng.random(nv) < 0.85,
           "height": rng.random(nv) < 0.35}
    has["bmi"] = has["weight"] & (rng.random(nv) < 0.8)
    has["bp2"] &= has["bp"]
    years = (when - c.admit_s[first[pat]]) / YEAR
    weight_kg = c.weight_kg[pat] * (1 + 0.01 * years) * (1 + rng.normal(0, 0.02, nv))
    height_in = c.height_cm[pat] / 2.54
    parts: dict[str, list] = {"visit": [], "name": [], "value": []}

    def add(mask: np.ndarray, name: str, values: pa.Array) -> None:
        parts["visit"].append(np.flatnonzero(mask))
        parts["name"].append(np.full(int(mask.sum()), OMR_NAMES.index(name)))
        parts["value"].append(values.filter(pa.array(mask)))

    for flag in (has["bp"], has["bp2"]):
        sbp = np.round(126 + 8 * htn[pat] + rng.normal(0, 15, nv)).astype(np.int64)
        dbp = np.round(0.6 * sbp + rng.normal(0, 7, nv)).astype(np.int64)
        text = pc.binary_join_element_wise(pc.cast(pa.array(sbp), pa.string()), pc.cast(pa.array(dbp), pa.string()),
                                           "/")
        add(flag, "Blood Pressure", text)
    bmi = weight_kg / (height_in * 0.0254) ** 2
    add(has["weight"], "Weight (Lbs)", pc.cast(pa.array(np.round(weight_kg * 2.20462, 1)), pa.string()))
    add(has["bmi"], "BMI (kg/m2)", pc.cast(pa.array(np.round(bmi, 1)), pa.string()))
    add(has["height"], "Height (Inches)", pc.cast(pa.array(np.round(height_in * 2) / 2), pa.string()))
    visit = np.concatenate(parts["visit"])
    name = np.concatenate(parts["name"])
    value = pa.concat_arrays(parts["value"])
    day = when[visit] // DAY
    order = np.lexsort((np.arange(len(visit)), name, day, pat[visit]))
    visit, name, day = visit[order], name[order], day[order]
    value = value.take(pa.array(order))
    # seq_num counts repeated measurements of the same thing on the same day
    key = np.stack([pat[visit], day, name], axis=1)
    new = np.ones(len(visit), dtype=bool)
    new[1:] = (key[1:] != key[:-1]).any(axis=1)
    start = np.flatnonzero(new)
    seq = np.arange(len(visit)) - np.repeat(start, np.diff(np.append(start, len(visit)))) + 1
    return {
        "subject_id": num(c.subject_id[pat[visit]]), "chartdate": dates(when[visit]), "seq_num": num(seq),
        "result_name": cat(name, OMR_NAMES), "result_value": value,
    }
