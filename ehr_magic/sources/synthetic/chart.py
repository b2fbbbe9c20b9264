"""Chart events of one chunk: vital signs of every ICU stay (hourly, two-hourly once
stable), four-hourly
assessments (temperature, GCS, rhythm, sedation, oxygen device), ventilator
settings while intubated, finger-stick glucose, CVP, and admission weight/height.

Vitals follow a per-stay baseline, the admission's clinical flags, a slow random
walk and noise; blood pressure components, rhythm and GCS sub-scores are kept
consistent with each other.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ehr_magic.sources.synthetic import items as it
from ehr_magic.sources.synthetic import vocab as v
from ehr_magic.sources.synthetic.hosp import FLAG_INDEX, Cohort, Ids
from ehr_magic.sources.synthetic.util import (
    HOUR, MINUTE, Rng, cat, floor_to, group_cumsum, num, owners, ranks, ts,
)

VITAL_NAMES = list(it.VITALS)
VITAL_POS = {k: i for i, k in enumerate(VITAL_NAMES)}
MAX_HOURS = 24 * 30


def _vital_effects() -> np.ndarray:
    m = np.zeros((len(v.FLAGS), len(VITAL_NAMES)))
    for flag, effects in v.VITAL_EFFECTS.items():
        if flag == "vent":  # applied hour by hour, only while intubated
            continue
        for name, z in effects.items():
            m[FLAG_INDEX[flag], VITAL_POS[name]] = z
    return m


EFFECTS = _vital_effects()
VENT_EFFECT = np.array([v.VITAL_EFFECTS["vent"].get(n, 0.0) for n in VITAL_NAMES])
CHRONIC_MASK = np.array([f in v.CHRONIC_FLAGS for f in v.FLAGS])
UNITS = sorted({ci.unit for ci in it.CHART_ITEMS if ci.unit})
UNIT_BY_ITEM = {ci.itemid: (UNITS.index(ci.unit) if ci.unit else len(UNITS)) for ci in it.CHART_ITEMS}
TEXTS: list[str] = ([t for t, _ in it.GCS_EYE] + [t for t, _ in it.GCS_VERBAL] + [t for t, _ in it.GCS_MOTOR]
                    + it.RHYTHMS + [t for t, _ in it.RASS] + it.O2_DEVICES)
TEXT_POS = {t: i for i, t in enumerate(dict.fromkeys(TEXTS))}
TEXTS = list(TEXT_POS)
# item -> (low, high) outside which the monitor raises a warning
WARN = {220045: (40, 140), 220179: (80, 200), 220050: (80, 200), 220277: (85, 101), 220210: (6, 35),
        223761: (95.0, 103.0), 223762: (35.0, 39.5)}


class _Rows:
    """Accumulates chart rows column-wise."""

    def __init__(self) -> None:
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in ("stay", "time", "item", "num", "text", "dec")}

    def add(self, stay: np.ndarray, time: np.ndarray, itemid: int, valuenum: np.ndarray | None,
            text: np.ndarray | None = None, dec: int = 0) -> None:
        n = len(stay)
        self.parts["stay"].append(stay)
        self.parts["time"].append(time)
        self.parts["item"].append(np.full(n, itemid))
        self.parts["num"].append(np.full(n, np.nan) if valuenum is None else np.asarray(valuenum, dtype=float))
        self.parts["text"].append(np.full(n, -1) if text is None else text)
        self.parts["dec"].append(np.full(n, dec, dtype=np.int8))

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate(p) for k, p in self.parts.items()}


def hour_grid(c: Cohort) -> dict[str, np.ndarray]:
    """Whole hours of every ICU stay: stay index, position and time."""
    first = -(-c.icu_in // HOUR) * HOUR
    hours = np.clip((c.icu_out - first) // HOUR + 1, 0, MAX_HOURS)
    stay = owners(hours)
    k = ranks(hours)
    return {"stay": stay, "k": k, "time": first[stay] + k * HOUR, "hours": hours}


def chartevents_table(rng: Rng, c: Cohort, ids: Ids) -> dict[str, pa.Array]:
    ns = len(c.stay_id)
    adm = c.stay_adm
    g = hour_grid(c)
    gs, gk, gt = g["stay"], g["k"], g["time"]
    ng = len(gs)
    ga = adm[gs]
    progress = (gt - c.admit_s[ga]) / np.maximum(c.disch_s[ga] - c.admit_s[ga], 1)
    course = np.where(c.died[ga], 0.7 + 0.6 * progress, np.exp(-1.6 * progress))
    vented = gt < c.vent_end[gs]

    flags = c.flags[adm].astype(float)
    sev = np.clip(c.severity[adm], 0.5, 2.5)[:, None]
    chronic = (flags * CHRONIC_MASK) @ EFFECTS
    acute = ((flags * ~CHRONIC_MASK) @ EFFECTS) * sev
    base = rng.normal(0.0, 0.5, (ns, len(VITAL_NAMES)))
    z = np.empty((ng, len(VITAL_NAMES)))
    for j in range(len(VITAL_NAMES)):
        walk = group_cumsum(rng.normal(0.0, 0.12, ng), g["hours"])
        z[:, j] = base[gs, j] + chronic[gs, j] + acute[gs, j] * course + walk + rng.normal(0.0, 0.35, ng)
    z += vented[:, None] * VENT_EFFECT

    def vital(name: str) -> np.ndarray:
        center, spread, lo, hi = it.VITALS[name]
        return np.clip(center + spread * z[:, VITAL_POS[name]], lo, hi)

    rows = _Rows()
    # Vitals are hourly during the first day, while intubated and on pressors; every two hours once stable.
    pressors = c.flags[adm, FLAG_INDEX["shock"]][gs]
    due = (gt - c.icu_in[gs] < 24 * HOUR) | vented | pressors | (gk % 2 == 0)
    afib = c.flags[adm, FLAG_INDEX["afib"]]
    hr = np.round(vital("hr") + afib[gs] * rng.normal(0, 8, ng))
    hr = np.clip(hr, 25, 220)
    keep = due & (rng.random(ng) > 0.03)
    rows.add(gs[keep], gt[keep], 220045, hr[keep])
    keep = due & (rng.random(ng) > 0.04)
    rows.add(gs[keep], gt[keep], 220210, np.round(vital("rr"))[keep])
    keep = due & (rng.random(ng) > 0.04)
    rows.add(gs[keep], gt[keep], 220277, np.round(vital("spo2"))[keep])

    sbp = vital("sbp")
    ratio = rng.uniform(0.45, 0.6, ns)[gs]
    dbp = np.clip(sbp * ratio + rng.normal(0, 4, ng), 20, 140)
    mbp = np.clip((sbp + 2 * dbp) / 3 + rng.normal(0, 2, ng), 30, 170)
    sbp, dbp, mbp = np.round(sbp), np.round(dbp), np.round(mbp)
    off4 = rng.integers(0, 4, ns)[gs]
    q4 = (gk % 4) == off4
    art = c.art_line[gs]
    m = art & due & (rng.random(ng) > 0.05)
    for itemid, val in ((220050, sbp), (220051, dbp), (220052, mbp)):
        rows.add(gs[m], gt[m], itemid, val[m])
    m = np.where(art, q4, due & (rng.random(ng) > 0.08))
    for itemid, val in ((220179, sbp), (220180, dbp), (220181, mbp)):
        rows.add(gs[m], gt[m], itemid, val[m])

    temp_f = np.round(vital("temp"), 1)
    celsius = (rng.random(ns) < 0.15)[gs]
    m = q4 & ~celsius
    rows.add(gs[m], gt[m], 223761, temp_f[m], dec=1)
    m = q4 & celsius
    rows.add(gs[m], gt[m], 223762, np.round((temp_f[m] - 32) / 1.8, 1), dec=1)

    _gcs(rng, rows, gs[q4], gt[q4], z[q4, VITAL_POS["gcs"]], vented[q4])
    _rhythm(rng, rows, gs[q4], gt[q4], hr[q4], afib[gs[q4]])
    _sedation_and_oxygen(rng, rows, c, gs, gk, gt, vented, q4)

    glucose_stay = rng.random(ns) < np.where(c.flags[adm, FLAG_INDEX["dm"]], 0.85, 0.2)
    m = glucose_stay[gs] & ((gk % 6) == rng.integers(0, 6, ns)[gs])
    rows.add(gs[m], gt[m], 225664, np.round(vital("glucose"))[m])
    cvp_p = 0.6 * c.flags[adm, FLAG_INDEX["cardiac_surgery"]] + 0.3 * c.flags[adm, FLAG_INDEX["shock"]]
    cvp_stay = rng.random(ns) < cvp_p
    m = cvp_stay[gs] & (gk % 2 == 0)
    cvp = np.clip(10 + 3 * base[gs, 0] + group_cumsum(rng.normal(0, 0.4, ng), g["hours"]), 0, 30)
    rows.add(gs[m], gt[m], 220074, np.round(cvp[m]))

    stays = np.arange(ns)
    when = np.minimum(floor_to(c.icu_in + rng.integers(5, 60, ns) * MINUTE, MINUTE), c.icu_out)
    rows.add(stays, when, 226512, c.stay_weight, dec=1)
    tall = rng.random(ns) < 0.7
    rows.add(stays[tall], when[tall], 226730, np.round(c.height_cm[c.pat[adm[tall]]]))

    r = rows.arrays()
    order = np.lexsort((r["item"], r["time"], r["stay"]))
    r = {k: a[order] for k, a in r.items()}
    n = len(r["stay"])
    s = r["stay"]
    numeric = ~np.isnan(r["num"])
    warning = np.zeros(n, dtype=np.int16)
    for itemid, (lo, hi) in WARN.items():
        m = r["item"] == itemid
        warning[m] = ((r["num"][m] < lo) | (r["num"][m] > hi)).astype(np.int16)
    unit_of = np.full(int(r["item"].max()) + 1, len(UNITS))
    for itemid, u in UNIT_BY_ITEM.items():
        unit_of[itemid] = u
    shift = r["time"] // (12 * HOUR)
    caregiver = ids.caregivers[(c.stay_id[s] * 7 + shift * 13) % len(ids.caregivers)]
    storetime = r["time"] + rng.integers(1, 40, n) * MINUTE
    return {
        "subject_id": num(c.subject_id[c.pat[adm[s]]]), "hadm_id": num(c.hadm_id[adm[s]]), "stay_id": num(c.stay_id[s]),
        "caregiver_id": num(caregiver), "charttime": ts(r["time"]), "storetime": ts(storetime),
        "itemid": num(r["item"]),
        "value_text": cat(np.where(r["text"] >= 0, r["text"], len(TEXTS)), TEXTS + [None]),
        "value_dec": num(r["dec"]),
        "valuenum": num(np.nan_to_num(r["num"]), numeric),
        "valueuom": cat(unit_of[r["item"]], UNITS + [None]),
        "warning": num(warning),
    }


def _gcs(rng: Rng, rows: _Rows, s: np.ndarray, t: np.ndarray, z: np.ndarray, vented: np.ndarray) -> None:
    n = len(s)
    total = np.clip(np.round(15 + 2.4 * np.minimum(0.0, z + 0.9)), 3, 15)
    eye = np.clip(np.round(total * 4 / 15 + rng.normal(0, 0.3, n)), 1, 4)
    motor = np.clip(np.round(total * 6 / 15 + rng.normal(0, 0.3, n)), 1, 6)
    verbal = np.clip(total - eye - motor, 1, 5)
    eye_text = np.array([TEXT_POS[x] for x, _ in it.GCS_EYE])[(eye - 1).astype(int)]
    motor_text = np.array([TEXT_POS[x] for x, _ in it.GCS_MOTOR])[(motor - 1).astype(int)]
    verbal_text = np.array([TEXT_POS[x] for x, _ in it.GCS_VERBAL[:5]])[(verbal - 1).astype(int)]
    verbal_text = np.where(vented, TEXT_POS["No Response-ETT"], verbal_text)
    verbal = np.where(vented, 1.0, verbal)
    rows.add(s, t, 220739, eye, eye_text)
    rows.add(s, t, 223900, verbal, verbal_text)
    rows.add(s, t, 223901, motor, motor_text)


def _rhythm(rng: Rng, rows: _Rows, s: np.ndarray, t: np.ndarray, hr: np.ndarray, afib: np.ndarray) -> None:
    names = it.RHYTHMS
    code = np.where(hr > 100, 1, np.where(hr < 60, 2, 0))
    code = np.where((code == 0) & (rng.random(len(s)) < 0.03), names.index("1st AV (First degree AV Block)"), code)
    code = np.where(afib & (rng.random(len(s)) < 0.85), names.index("AF (Atrial Fibrillation)"), code)
    rows.add(s, t, 220048, None, np.array([TEXT_POS[x] for x in names])[code])


def _sedation_and_oxygen(rng: Rng, rows: _Rows, c: Cohort, gs: np.ndarray, gk: np.ndarray, gt: np.ndarray,
                         vented: np.ndarray, q4: np.ndarray) -> None:
    ns = len(c.stay_id)
    ng = len(gs)
    adm = c.stay_adm
    # Richmond agitation-sedation scale: every 4 h while intubated, every 8 h otherwise
    q8 = q4 & (gk % 8 < 4)
    m = np.where(vented, q4, q8)
    delirium = c.flags[adm, FLAG_INDEX["delirium"]][gs]
    rass = np.where(vented, np.round(-2.5 + rng.normal(0, 1, ng)), np.round(rng.normal(0, 0.4, ng) + 0.8 * delirium))
    rass = np.clip(rass, -5, 2)
    rass_text = np.array([TEXT_POS[x] for x, _ in it.RASS])[(2 - rass).astype(int)]
    rows.add(gs[m], gt[m], 228096, rass[m], rass_text[m])
    # oxygen delivery device
    resp = c.flags[adm, FLAG_INDEX["resp"]] | c.flags[adm, FLAG_INDEX["copd"]]
    dev_w = np.where(resp[:, None], [0.1, 0.6, 0.05, 0.2, 0.05], [0.5, 0.42, 0.03, 0.03, 0.02])
    cdf = np.cumsum(dev_w, axis=1)
    device = (cdf < rng.random(ns)[:, None]).sum(axis=1)
    dev = np.where(vented, it.O2_DEVICES.index("Endotracheal tube"), device[gs])
    rows.add(gs[q4], gt[q4], 226732, None, np.array([TEXT_POS[x] for x in it.O2_DEVICES])[dev[q4]])
    # ventilator settings and arterial gases charted by respiratory therapy
    m = vented & q4
    fio2 = np.array([30, 35, 40, 50, 60, 80, 100])[rng.choice(7, ns, p=[0.05, 0.1, 0.45, 0.2, 0.1, 0.04, 0.06])]
    peep = np.array([5, 8, 10, 12, 14])[rng.choice(5, ns, p=[0.5, 0.25, 0.15, 0.06, 0.04])]
    tidal = rng.normal(450, 50, ns)
    rows.add(gs[m], gt[m], 223835, fio2[gs[m]].astype(float))
    rows.add(gs[m], gt[m], 220339, peep[gs[m]].astype(float))
    rows.add(gs[m], gt[m], 224685, np.round(tidal[gs[m]] + rng.normal(0, 25, int(m.sum()))))
    m = vented & q8
    k = int(m.sum())
    copd = c.flags[adm, FLAG_INDEX["copd"]][gs[m]]
    pao2 = 100 * np.exp(rng.normal(0, 0.3, k)) * (0.6 + fio2[gs[m]] / 100)
    rows.add(gs[m], gt[m], 220224, np.round(np.clip(pao2, 40, 550)))
    rows.add(gs[m], gt[m], 220235, np.round(np.clip(40 * np.exp(rng.normal(0, 0.12, k) + 0.15 * copd), 20, 110)))
