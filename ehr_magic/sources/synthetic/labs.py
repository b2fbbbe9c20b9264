"""Lab events of one chunk: blood draws on admission and most mornings (twice a day
in the ICU), grouped into panels with their own specimen ids. Values follow each
admission's baseline, its clinical flags (acute effects fade as the patient
recovers, or grow when the patient is dying) and noise; dependent results (anion
gap, haematocrit indices, pH from bicarbonate and pCO2, PT from INR) are computed.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ehr_magic.sources.synthetic import items as it
from ehr_magic.sources.synthetic import vocab as v
from ehr_magic.sources.synthetic.hosp import FLAG_INDEX, Cohort, Ids
from ehr_magic.sources.synthetic.util import (
    DAY, HOUR, MINUTE, Rng, cat, floor_to, num, owners, ranks, ts,
)

LAB_IDS = np.array([lab.itemid for lab in it.LABS])
LAB_POS = {lab.itemid: j for j, lab in enumerate(it.LABS)}
TEXT_POS = {t.itemid: j for j, t in enumerate(it.TEXT_LABS)}
N_LABS = len(it.LABS)
CENTER = np.array([lab.center for lab in it.LABS])
SPREAD = np.array([lab.spread for lab in it.LABS])
LOG = np.array([lab.log for lab in it.LABS])
VMIN = np.array([lab.vmin for lab in it.LABS])
VMAX = np.array([lab.vmax for lab in it.LABS])
DEC = np.array([lab.dec for lab in it.LABS])
REF_LO = np.array([np.nan if lab.lo is None else lab.lo for lab in it.LABS])
REF_HI = np.array([np.nan if lab.hi is None else lab.hi for lab in it.LABS])
UNITS = sorted({lab.unit for lab in it.LABS if lab.unit} | {t.unit for t in it.TEXT_LABS if t.unit})
UNIT_OF = np.array([UNITS.index(lab.unit) if lab.unit else len(UNITS) for lab in it.LABS])
TEXT_VALUES = sorted({c for t in it.TEXT_LABS for c in t.choices})
PRIORITIES = ["ROUTINE", "STAT", None]


def _effect_matrix() -> np.ndarray:
    m = np.zeros((len(v.FLAGS), N_LABS))
    for flag, effects in v.LAB_EFFECTS.items():
        for itemid, z in effects.items():
            if itemid in LAB_POS:
                m[FLAG_INDEX[flag], LAB_POS[itemid]] = z
    return m


EFFECTS = _effect_matrix()
CHRONIC_MASK = np.array([f in v.CHRONIC_FLAGS for f in v.FLAGS])


class LabModel:
    """Per-admission value model: z = baseline + chronic + acute * course + noise."""

    def __init__(self, rng: Rng, c: Cohort) -> None:
        na = c.n_adm
        self.base = rng.normal(0.0, 0.55, (na, N_LABS))
        male = c.male[c.pat]
        self.base[:, LAB_POS[51222]] += np.where(male, 0.6, -0.3)
        self.base[:, LAB_POS[50912]] += np.where(male, 0.4, -0.3)
        flags = c.flags.astype(float)
        chronic = flags * CHRONIC_MASK
        acute = flags * ~CHRONIC_MASK
        sev = np.clip(c.severity, 0.5, 2.5)[:, None]
        self.chronic = chronic @ EFFECTS
        self.acute = (acute @ EFFECTS) * sev
        self.died = c.died

    def course(self, adm: np.ndarray, progress: np.ndarray) -> np.ndarray:
        """How much of the acute effect remains: fading for survivors, growing for the dying."""
        return np.where(self.died[adm], 0.7 + 0.6 * progress, np.exp(-1.6 * progress))

    def z(self, rng: Rng, itemid: int, adm: np.ndarray, course: np.ndarray, noise: float = 0.45) -> np.ndarray:
        j = LAB_POS[itemid]
        return (self.base[adm, j] + self.chronic[adm, j] + self.acute[adm, j] * course
                + rng.normal(0.0, noise, len(adm)))


def value(itemid: int, z: np.ndarray) -> np.ndarray:
    """Natural-unit value of a lab from its z score (clipped, rounded)."""
    j = LAB_POS[itemid]
    raw = CENTER[j] * np.exp(SPREAD[j] * z) if LOG[j] else CENTER[j] + SPREAD[j] * z
    return finish(itemid, raw)


def finish(itemid: int, raw: np.ndarray) -> np.ndarray:
    j = LAB_POS[itemid]
    return np.round(np.clip(raw, VMIN[j], VMAX[j]), DEC[j]) + 0.0  # no "-0"


def lab_draws(rng: Rng, c: Cohort) -> dict[str, np.ndarray]:
    """Blood draw times: on admission, most mornings, and ICU afternoons."""
    na = c.n_adm
    los = c.disch_s - c.admit_s
    first = floor_to(c.admit_s + np.minimum(rng.uniform(0.2, 2.0, na) * HOUR, 0.3 * los).astype(np.int64), MINUTE)
    first_morning = floor_to(c.admit_s + 6 * HOUR, DAY) + DAY + 4 * HOUR
    n_days = np.clip((c.disch_s - HOUR - first_morning) // DAY + 1, 0, 45)
    adm_m = owners(n_days)
    morning = first_morning[adm_m] + ranks(n_days) * DAY + rng.integers(0, 150, len(adm_m)) * MINUTE
    adm_a = adm_m.copy()
    afternoon = morning + 12 * HOUR
    in_icu = _in_icu(c, adm_m, morning)
    in_icu_pm = _in_icu(c, adm_a, afternoon)
    keep_m = in_icu | (rng.random(len(adm_m)) < 0.4)
    keep_m &= morning < c.disch_s[adm_m] - 30 * MINUTE
    keep_a = in_icu_pm & (afternoon < c.disch_s[adm_a] - HOUR) & (rng.random(len(adm_a)) < 0.2)
    adm = np.concatenate([np.arange(na), adm_m[keep_m], adm_a[keep_a]])
    time = np.concatenate([first, morning[keep_m], afternoon[keep_a]])
    kind = np.concatenate([np.zeros(na, int), np.where(in_icu[keep_m], 2, 1), np.full(int(keep_a.sum()), 2)])
    order = np.lexsort((time, adm))
    return {"adm": adm[order], "time": time[order], "kind": kind[order]}


def _in_icu(c: Cohort, adm: np.ndarray, time: np.ndarray) -> np.ndarray:
    """Whether each (admission, time) falls inside an ICU stay (at most one stay per admission)."""
    stay_of = np.full(c.n_adm, -1)
    stay_of[c.stay_adm] = np.arange(len(c.stay_adm))
    s = stay_of[adm]
    ok = s >= 0
    inside = np.zeros(len(adm), dtype=bool)
    inside[ok] = (time[ok] >= c.icu_in[s[ok]]) & (time[ok] <= c.icu_out[s[ok]])
    return inside


def labevents_table(rng: Rng, c: Cohort, ids: Ids) -> dict[str, pa.Array]:
    model = LabModel(rng, c)
    draws = lab_draws(rng, c)
    d_adm, d_time, d_kind = draws["adm"], draws["time"], draws["kind"]
    progress = (d_time - c.admit_s[d_adm]) / np.maximum(c.disch_s[d_adm] - c.admit_s[d_adm], 1)
    course = model.course(d_adm, progress)

    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("draw", "item", "val", "text", "panel")}
    for p, (name, items, p_first, p_ward, p_icu, boosts) in enumerate(it.PANELS):
        prob = np.array([p_first, p_ward, p_icu])[d_kind]
        for flag_name, extra in boosts.items():
            prob = prob + extra * (d_kind == 0) * c.flags[d_adm, FLAG_INDEX[flag_name]]
        sel = np.flatnonzero(rng.random(len(d_kind)) < prob)
        if not len(sel):
            continue
        vals = _panel_values(rng, name, items, model, d_adm[sel], course[sel])
        for itemid in items:
            cols["draw"].append(sel)
            cols["item"].append(np.full(len(sel), itemid))
            cols["panel"].append(np.full(len(sel), p))
            if itemid in TEXT_POS:
                cols["val"].append(np.full(len(sel), np.nan))
                cols["text"].append(_text_values(rng, itemid, c, d_adm[sel]))
            else:
                cols["val"].append(vals[itemid])
                cols["text"].append(np.full(len(sel), -1))
    draw = np.concatenate(cols["draw"])
    item = np.concatenate(cols["item"])
    val = np.concatenate(cols["val"])
    text = np.concatenate(cols["text"])
    panel = np.concatenate(cols["panel"])
    order = np.lexsort((item, panel, draw))
    draw, item, val, text, panel = draw[order], item[order], val[order], text[order], panel[order]
    n = len(draw)

    # one specimen per (draw, panel)
    new_spec = np.ones(n, dtype=bool)
    new_spec[1:] = (draw[1:] != draw[:-1]) | (panel[1:] != panel[:-1])
    spec_ids = ids.extra["specimen"].take(int(new_spec.sum()))
    specimen = spec_ids[np.cumsum(new_spec) - 1]

    adm = d_adm[draw]
    charttime = d_time[draw]
    names = np.array([pnl[0] for pnl in it.PANELS])[panel]
    is_gas = np.isin(names, list(it.NO_PRIORITY_PANELS))
    delay = np.where(is_gas, rng.integers(3, 25, n), rng.integers(25, 200, n)) * MINUTE
    spec_delay = delay[np.flatnonzero(new_spec)][np.cumsum(new_spec) - 1]
    storetime = floor_to(charttime + spec_delay, MINUTE)

    numeric = ~np.isnan(val)
    j = _ITEM_TO_POS[item]
    lo = np.where(numeric, REF_LO[j], np.nan)
    hi = np.where(numeric, REF_HI[j], np.nan)
    abnormal = numeric & ((val < lo) | (val > hi))
    text_abn = _text_abnormal(item, text)
    flag = np.where(abnormal | text_abn, 0, 1)
    stat = np.isin(names, list(it.STAT_PANELS)) | (d_kind[draw] == 0)
    priority = np.where(is_gas, 2, np.where(stat, 1, 0))
    unit = np.where(numeric, UNIT_OF[j], _text_unit(item))
    dec = np.where(numeric, DEC[j], 0)

    return {
        "labevent_id": num(ids.extra["labevent"].take(n)),
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]), "specimen_id": num(specimen),
        "itemid": num(item), "charttime": ts(charttime), "storetime": ts(storetime),
        "value_text": cat(np.where(text >= 0, text, len(TEXT_VALUES)), TEXT_VALUES + [None]),
        "value_dec": num(dec.astype(np.int8)),
        "valuenum": num(np.where(numeric, val, 0.0), numeric),
        "valueuom": cat(unit, UNITS + [None]),
        "ref_range_lower": num(np.nan_to_num(lo), ~np.isnan(lo)),
        "ref_range_upper": num(np.nan_to_num(hi), ~np.isnan(hi)),
        "flag": cat(flag, ["abnormal", None]), "priority": cat(priority, PRIORITIES),
    }


_ITEM_TO_POS = np.full(int(max(LAB_IDS.max(), max(TEXT_POS)) + 1), 0)
_ITEM_TO_POS[LAB_IDS] = np.arange(N_LABS)


def _text_unit(item: np.ndarray) -> np.ndarray:
    out = np.full(len(item), len(UNITS))
    for t in it.TEXT_LABS:
        if t.unit:
            out[item == t.itemid] = UNITS.index(t.unit)
    return out


def _text_abnormal(item: np.ndarray, text: np.ndarray) -> np.ndarray:
    out = np.zeros(len(item), dtype=bool)
    for t in it.TEXT_LABS:
        rows = item == t.itemid
        abn_values = [TEXT_VALUES.index(ch) for ch, a in zip(t.choices, t.abnormal) if a]
        out[rows] = np.isin(text[rows], abn_values)
    return out


def _text_values(rng: Rng, itemid: int, c: Cohort, adm: np.ndarray) -> np.ndarray:
    t = it.TEXT_LABS[TEXT_POS[itemid]]
    has = c.flags[adm, FLAG_INDEX[t.flag]]
    w = np.where(has[:, None], np.asarray(t.flagged_weights), np.asarray(t.normal_weights))
    cdf = np.cumsum(w, axis=1)
    choice = (cdf < rng.random(len(adm))[:, None] * cdf[:, -1:]).sum(axis=1)
    return np.array([TEXT_VALUES.index(ch) for ch in t.choices])[np.minimum(choice, len(t.choices) - 1)]


def _panel_values(rng: Rng, name: str, items: tuple[int, ...], m: LabModel, adm: np.ndarray,
                  course: np.ndarray) -> dict[int, np.ndarray]:
    """Values of every numeric item of a panel for the selected draws, with physiology tying them."""
    n = len(adm)
    out: dict[int, np.ndarray] = {}
    if name == "cbc":
        hgb = value(51222, m.z(rng, 51222, adm, course))
        hct = finish(51221, hgb * 2.95 + rng.normal(0, 0.8, n))
        mcv = value(51250, m.z(rng, 51250, adm, course, 0.2))
        rbc = finish(51279, hct / mcv * 10.0)
        out.update({51222: hgb, 51221: hct, 51250: mcv, 51279: rbc,
                    51248: finish(51248, hgb / np.maximum(rbc, 0.5) * 10.0),
                    51249: finish(51249, hgb / np.maximum(hct, 1.0) * 100.0)})
        for i in (51301, 51277, 51265):
            out[i] = value(i, m.z(rng, i, adm, course))
    elif name == "diff":
        for i in (51256, 51254, 51200, 51146):
            out[i] = value(i, m.z(rng, i, adm, course))
        rest = 100.0 - out[51256] - out[51254] - out[51200] - out[51146]
        out[51244] = finish(51244, rest)
    elif name == "bmp":
        na_ = value(50983, m.z(rng, 50983, adm, course))
        hco3 = value(50882, m.z(rng, 50882, adm, course))
        cl_z = m.z(rng, 50902, adm, course, 0.3)
        cl = finish(50902, na_ - 36.0 - 0.5 * (hco3 - 25.0) + 2.5 * cl_z)
        out.update({50983: na_, 50882: hco3, 50902: cl, 50868: finish(50868, na_ - cl - hco3)})
        for i in (50971, 51006, 50912, 50931):
            out[i] = value(i, m.z(rng, i, adm, course))
    elif name == "coag":
        inr = value(51237, m.z(rng, 51237, adm, course))
        out.update({51237: inr, 51274: finish(51274, 11.0 * inr + rng.normal(0, 0.4, n)),
                    51275: value(51275, m.z(rng, 51275, adm, course))})
    elif name == "blood_gas":
        hco3 = value(50882, m.z(rng, 50882, adm, course))
        pco2 = value(50818, m.z(rng, 50818, adm, course))
        ph = finish(50820, 6.1 + np.log10(hco3 / (0.0307 * pco2)))
        out.update({50818: pco2, 50820: ph, 50821: value(50821, m.z(rng, 50821, adm, course)),
                    50802: finish(50802, 0.93 * (hco3 - 24.4 + 14.8 * (ph - 7.4))),
                    50804: finish(50804, hco3 + 0.03 * pco2)})
    else:
        for i in items:
            if i in LAB_POS:
                out[i] = value(i, m.z(rng, i, adm, course))
    return out
