"""Medication orders and microbiology of one chunk: prescriptions (drugs chosen from
the admission's clinical flags), their administrations (emar), and cultures with
organisms and antibiotic susceptibilities.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ehr_magic.sources.synthetic import drugs as dr
from ehr_magic.sources.synthetic import vocab as v
from ehr_magic.sources.synthetic.hosp import FLAG_INDEX, Cohort, Ids
from ehr_magic.sources.synthetic.util import (
    DAY, HOUR, MINUTE, Rng, cat, floor_to, group_cumsum, num, owners, pick, pick_rows, ranks, ts,
)

N_DRUGS = len(dr.DRUGS)
LOG_BASE = np.log([d.weight for d in dr.DRUGS])


def _log_boosts() -> np.ndarray:
    m = np.zeros((len(v.FLAGS), N_DRUGS))
    for j, d in enumerate(dr.DRUGS):
        for flag, factor in d.boosts.items():
            m[FLAG_INDEX[flag], j] = np.log(factor)
    return m


LOG_BOOSTS = _log_boosts()
DOSES = np.array([np.nan if d.doses_per_24_hrs is None else d.doses_per_24_hrs for d in dr.DRUGS])
IS_BASE = np.array([d.drug_type == "BASE" for d in dr.DRUGS])


def _field(name: str) -> tuple[np.ndarray, list[str | None]]:
    values = [getattr(d, name) for d in dr.DRUGS]
    labels = list(dict.fromkeys(values))
    return np.array([labels.index(x) for x in values]), labels


DRUG_FIELDS = {name: _field(name) for name in (
    "drug_type", "drug", "formulary_drug_cd", "gsn", "ndc", "prod_strength", "dose_val_rx", "dose_unit_rx",
    "form_val_disp", "form_unit_disp", "route")}


def prescriptions(rng: Rng, c: Cohort, ids: Ids) -> tuple[dict[str, pa.Array], dict[str, np.ndarray]]:
    """The prescriptions table, plus the order facts that emar needs."""
    los = c.disch_s - c.admit_s
    lam = 2.0 + 1.2 * los / DAY + 4.0 * c.icu
    counts = np.minimum(rng.poisson(lam), 80)
    adm = owners(counts)
    weights = np.exp(LOG_BASE + c.flags.astype(float) @ LOG_BOOSTS)
    drug = pick_rows(rng, weights[adm])
    start = c.admit_s[adm] + (los[adm] * rng.uniform(0.0, 0.9, len(adm)) ** 1.5).astype(np.int64)
    start = np.clip(-(-start // HOUR) * HOUR, c.admit_s[adm], c.disch_s[adm] - 30 * MINUTE)
    scheduled = ~np.isnan(DOSES[drug])
    length = np.where(scheduled, rng.uniform(1, 7, len(adm)) * DAY, rng.uniform(1, 48, len(adm)) * HOUR)
    stop = np.minimum(start + length.astype(np.int64), c.disch_s[adm])
    order = np.lexsort((drug, start, adm))
    adm, drug, start, stop = adm[order], drug[order], start[order], stop[order]
    n = len(adm)
    pat = c.pat[adm]
    per_patient = np.bincount(pat, minlength=len(c.subject_id))
    poe_seq = group_cumsum(rng.integers(1, 6, n).astype(float), per_patient).astype(np.int64)
    base = IS_BASE[drug]
    cols: dict[str, pa.Array] = {
        "subject_id": num(c.subject_id[pat]), "hadm_id": num(c.hadm_id[adm]),
        "pharmacy_id": num(ids.extra["pharmacy"].take(n)),
        "poe_seq": num(poe_seq, ~base),
        "order_provider_id": cat(np.where(base, len(ids.providers), rng.integers(0, len(ids.providers), n)),
                                 ids.providers + [None]),
        "starttime": ts(start), "stoptime": ts(stop),
        "doses_per_24_hrs": num(np.nan_to_num(DOSES[drug]).astype(np.float32), ~np.isnan(DOSES[drug])),
    }
    for name, (lookup, labels) in DRUG_FIELDS.items():
        cols[name] = cat(lookup[drug], labels)
    facts = {"adm": adm, "drug": drug, "start": start, "stop": stop, "poe_seq": poe_seq, "base": base,
             "pharmacy_id": cols["pharmacy_id"].to_numpy()}
    return cols, facts


def emar_table(rng: Rng, c: Cohort, ids: Ids, rx: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    """Administrations: scheduled doses (up to three per order) and one or two as-needed doses."""
    drug, start, stop = rx["drug"], rx["start"], rx["stop"]
    given = ~rx["base"]
    doses = DOSES[drug]
    scheduled = given & (doses > 0)
    interval = np.where(scheduled, DAY / np.where(doses > 0, doses, 1), DAY)
    n_sched = np.where(scheduled, np.minimum((stop - start) // interval.astype(np.int64) + 1, 3), 0)
    n_prn = np.where(given & ~scheduled, 1 + (rng.random(len(drug)) < 0.3), 0)
    counts = (n_sched + n_prn).astype(np.int64)
    o = owners(counts)
    k = ranks(counts)
    sched = scheduled[o]
    schedule = start[o] + (k * interval[o]).astype(np.int64)
    prn_time = start[o] + ((stop[o] - start[o]) * rng.random(len(o))).astype(np.int64)
    charttime = np.where(sched, schedule + rng.normal(0, 20, len(o)).astype(np.int64) * MINUTE, prn_time)
    adm = rx["adm"][o]
    charttime = floor_to(np.clip(charttime, c.admit_s[adm], c.disch_s[adm]), MINUTE)
    order = np.lexsort((charttime, c.pat[adm]))
    o, charttime, schedule, sched, adm = o[order], charttime[order], schedule[order], sched[order], adm[order]
    n = len(o)
    pat = c.pat[adm]
    emar_seq = ranks(np.bincount(pat, minlength=len(c.subject_id))) + 1
    event = pick(rng, n, [w for _, w in dr.EMAR_EVENTS])
    drug_idx, drug_labels = DRUG_FIELDS["drug"]
    return {
        "subject_id": num(c.subject_id[pat]), "hadm_id": num(c.hadm_id[adm]), "emar_seq": num(emar_seq),
        "poe_seq": num(rx["poe_seq"][o]), "pharmacy_id": num(rx["pharmacy_id"][o]),
        "charttime": ts(charttime), "medication": cat(drug_idx[drug[o]], drug_labels),
        "event_txt": cat(event, [e for e, _ in dr.EMAR_EVENTS]),
        "scheduletime": ts(np.minimum(schedule, c.disch_s[adm]), sched),
        "storetime": ts(charttime + rng.integers(0, 15, n) * MINUTE),
    }


PROC_TYPES = ["Unit Dose", "IV Piggyback", "IV Large Volume"]
STATUSES = ["Discontinued", "Expired", "Inactive (Due to a change order)", "Discontinued via patient discharge"]
# doses a day -> (frequency, dispensing schedule)
SCHEDULES = {1: ("DAILY", "08"), 2: ("BID", "08, 20"), 3: ("TID", "08, 14, 20"), 4: ("Q6H", "00, 06, 12, 18")}
AS_NEEDED = ["Q4H:PRN", "Q6H:PRN", "PRN", "ONCE"]
FREQUENCIES = [f for f, _ in SCHEDULES.values()] + AS_NEEDED + ["ASDIR", "TITRATE TO"]
DISP_SCHEDS = [d for _, d in SCHEDULES.values()] + ["11"]
DISPENSATIONS = [("Omnicell", 0.75), ("Floor Stock Item", 0.15), ("Pharmacy", 0.1)]


def pharmacy_table(rng: Rng, c: Cohort, rx: dict[str, np.ndarray]) -> dict[str, pa.Array]:
    """The pharmacy's view of every prescription: how it was dispensed and how often."""
    adm, drug, start, stop, base = rx["adm"], rx["drug"], rx["start"], rx["stop"], rx["base"]
    n = len(adm)
    routes = np.array([d.route for d in dr.DRUGS])[drug]
    drip = routes == "IV DRIP"
    proc_type = np.where(base, 2, np.where(np.isin(routes, ["IV", "IV DRIP"]), 1, 0))
    at_discharge = stop >= c.disch_s[adm]
    status = np.where(at_discharge, 3, pick(rng, n, [0.6, 0.25, 0.15]))
    doses = DOSES[drug]
    freq = np.full(n, FREQUENCIES.index("ASDIR"))
    sched = np.full(n, -1)
    for k, (f, d) in SCHEDULES.items():
        m = doses == k
        freq[m], sched[m] = FREQUENCIES.index(f), DISP_SCHEDS.index(d)
    prn = np.isnan(doses) & ~base
    prn_freq = rng.integers(0, len(AS_NEEDED), n)
    freq = np.where(prn, FREQUENCIES.index(AS_NEEDED[0]) + prn_freq, freq)
    sched = np.where(prn & (prn_freq == AS_NEEDED.index("ONCE")), DISP_SCHEDS.index("11"), sched)
    freq = np.where(drip, FREQUENCIES.index("TITRATE TO"), freq)
    entertime = np.maximum(start - rng.integers(5, 60, n) * MINUTE, c.admit_s[adm])
    verified = np.minimum(entertime + rng.integers(0, 20, n) * MINUTE, c.disch_s[adm])
    insulin = np.array([d.drug.startswith("Insulin") and d.route == "SC" for d in dr.DRUGS])[drug]
    drug_idx, drug_labels = DRUG_FIELDS["drug"]
    route_idx, route_labels = DRUG_FIELDS["route"]
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]),
        "pharmacy_id": num(rx["pharmacy_id"]), "poe_seq": num(rx["poe_seq"], ~base),
        "starttime": ts(start), "stoptime": ts(stop), "medication": cat(drug_idx[drug], drug_labels),
        "proc_type": cat(proc_type, PROC_TYPES), "status": cat(status, STATUSES),
        "entertime": ts(entertime), "verifiedtime": ts(verified), "route": cat(route_idx[drug], route_labels),
        "frequency": cat(freq, FREQUENCIES),
        "disp_sched": cat(np.where(sched >= 0, sched, len(DISP_SCHEDS)), DISP_SCHEDS + [None]),
        "sliding_scale": cat(np.where(insulin, 0, 1), ["Y", None]),
        "doses_per_24_hrs": num(np.nan_to_num(doses).astype(np.float32), ~np.isnan(doses)),
        "dispensation": cat(pick(rng, n, [w for _, w in DISPENSATIONS]), [d for d, _ in DISPENSATIONS]),
    }


# --- microbiology ----------------------------------------------------------------------

SPEC_LOG_W = np.log([s.weight for s in dr.SPECIMENS])
SPEC_BOOSTS = np.zeros((len(v.FLAGS), len(dr.SPECIMENS)))
for _j, _s in enumerate(dr.SPECIMENS):
    for _f, _x in _s.boosts.items():
        SPEC_BOOSTS[FLAG_INDEX[_f], _j] = np.log(_x)
ORG_IDS = list(dr.ORGANISMS)
PANELS = list(dr.SUSCEPTIBILITY_PANELS)
PANEL_LEN = np.array([len(dr.SUSCEPTIBILITY_PANELS[p]) for p in PANELS])
PANEL_AB = np.zeros((len(PANELS), PANEL_LEN.max()), dtype=np.int64)
PANEL_R = np.zeros((len(PANELS), PANEL_LEN.max()))
AB_IDS = list(dr.ANTIBIOTICS)
for _p, _name in enumerate(PANELS):
    for _k, (_ab, _r) in enumerate(dr.SUSCEPTIBILITY_PANELS[_name]):
        PANEL_AB[_p, _k] = AB_IDS.index(_ab)
        PANEL_R[_p, _k] = _r
ORG_PANEL = np.array([-1 if panel is None else PANELS.index(panel) for _, panel in (dr.ORGANISMS[o] for o in ORG_IDS)])
TESTS = list(dict.fromkeys(t for s in dr.SPECIMENS for t in s.tests))
COMMENTS = list(dict.fromkeys([s.negative_comment for s in dr.SPECIMENS]
                              + [dr.GRAM_STAIN_NEGATIVE, dr.GRAM_STAIN_POSITIVE]))


def _dilutions() -> tuple[list[str], np.ndarray, list[str]]:
    """Per antibiotic four results: S at/below breakpoint, S above it, I, R -> text and value."""
    texts, values = [], []
    for ab in AB_IDS:
        _, s_mic, r_mic = dr.ANTIBIOTICS[ab]
        for comp, val in (("<=", s_mic), ("=", s_mic * 2), ("=", (s_mic + r_mic) / 2), ("=>", r_mic)):
            val = float(f"{val:.3g}")
            number = f"{val:g}"
            texts.append(number if comp == "=" else comp + number)
            values.append(val)
    return texts, np.array(values), ["<=", "=", "=>"]


DIL_TEXT, DIL_VALUE, DIL_COMP = _dilutions()


def microbiology_table(rng: Rng, c: Cohort, ids: Ids) -> dict[str, pa.Array]:
    na = c.n_adm
    f = c.flag
    p = np.clip(0.15 + 0.5 * c.icu + 0.35 * f("infection"), 0, 0.95)
    n_spec = np.where(rng.random(na) < p, 1 + np.minimum(rng.poisson(0.5 + 0.8 * c.icu), 7), 0)
    sadm = owners(n_spec)
    ns = len(sadm)
    stype = pick_rows(rng, np.exp(SPEC_LOG_W + c.flags[sadm].astype(float) @ SPEC_BOOSTS))
    los = c.disch_s[sadm] - c.admit_s[sadm]
    early = rng.random(ns) < 0.5
    frac = np.where(early, rng.uniform(0, 1, ns) * np.minimum(1.0, DAY / np.maximum(los, 1)), rng.uniform(0, 0.95, ns))
    stime = floor_to(c.admit_s[sadm] + (los * frac).astype(np.int64), MINUTE)
    spec_id = ids.extra["micro_specimen"].take(ns)
    p_pos = np.array([s.p_positive for s in dr.SPECIMENS])[stype]
    for j, s in enumerate(dr.SPECIMENS):
        for flag, extra in s.positive_boosts.items():
            p_pos = p_pos + extra * ((stype == j) & c.flags[sadm, FLAG_INDEX[flag]])
    positive = rng.random(ns) < np.clip(p_pos, 0, 0.95)
    org_w = np.zeros((len(dr.SPECIMENS), len(ORG_IDS)))
    for j, s in enumerate(dr.SPECIMENS):
        for o, w in s.organisms.items():
            org_w[j, ORG_IDS.index(o)] = w
    org = pick_rows(rng, org_w[stype])

    # test rows: every test of the specimen type; the last one is the culture
    n_tests = np.array([len(s.tests) for s in dr.SPECIMENS])[stype]
    t_spec = owners(n_tests)
    t_pos = ranks(n_tests)
    t_culture = t_pos == n_tests[t_spec] - 1
    test_idx = np.array([[TESTS.index(s.tests[min(k, len(s.tests) - 1)]) for k in range(2)] for s in dr.SPECIMENS])
    t_test = test_idx[stype[t_spec], t_pos]
    t_org = np.where(t_culture & positive[t_spec], org[t_spec], -1)
    t_panel = np.where(t_org >= 0, ORG_PANEL[np.maximum(t_org, 0)], -1)
    n_rows = np.where(t_panel >= 0, PANEL_LEN[np.maximum(t_panel, 0)], 1)
    r_test = owners(n_rows)
    r_k = ranks(n_rows)
    r_spec = t_spec[r_test]
    r_org = t_org[r_test]
    r_panel = t_panel[r_test]
    has_ab = r_panel >= 0
    ab = np.where(has_ab, PANEL_AB[np.maximum(r_panel, 0), np.minimum(r_k, PANEL_AB.shape[1] - 1)], -1)
    p_res = np.where(has_ab, PANEL_R[np.maximum(r_panel, 0), np.minimum(r_k, PANEL_R.shape[1] - 1)], 0)
    mrsa_screen = stype[r_spec] == [s.spec_type_desc for s in dr.SPECIMENS].index("MRSA SCREEN")
    oxacillin = ab == AB_IDS.index(90016)
    p_res = np.where(mrsa_screen & oxacillin, 1.0, p_res)
    u = rng.random(len(r_test))
    interp = np.where(u < p_res, 2, np.where(u < p_res + 0.04, 1, 0))  # 0 S, 1 I, 2 R
    variant = np.where(interp == 2, 3, np.where(interp == 1, 2, (rng.random(len(u)) < 0.25).astype(int)))
    dil = np.maximum(ab, 0) * 4 + variant
    comp = np.array([0, 1, 1, 2])[variant]
    gram = ~t_culture[r_test]
    neg_comment = np.array([COMMENTS.index(s.negative_comment) for s in dr.SPECIMENS])[stype[r_spec]]
    comment = np.where(gram, np.where(positive[r_spec], COMMENTS.index(dr.GRAM_STAIN_POSITIVE),
                                      COMMENTS.index(dr.GRAM_STAIN_NEGATIVE)),
                       np.where(r_org >= 0, -1, neg_comment))
    delay = np.where(gram, rng.uniform(2, 12, len(r_test)) * HOUR, rng.uniform(30, 96, len(r_test)) * HOUR)
    delay = delay[np.searchsorted(r_test, r_test)]  # one result time per test
    storetime = floor_to(stime[r_spec] + delay.astype(np.int64), MINUTE)
    adm = sadm[r_spec]
    n = len(r_test)
    provider = np.where(rng.random(ns) < 0.3, rng.integers(0, len(ids.providers), ns), len(ids.providers))
    return {
        "microevent_id": num(ids.extra["microevent"].take(n)),
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]),
        "micro_specimen_id": num(spec_id[r_spec]),
        "order_provider_id": cat(provider[r_spec], ids.providers + [None]),
        "chartdate": ts(floor_to(stime[r_spec], DAY)), "charttime": ts(stime[r_spec]),
        "spec_itemid": num(np.array([s.spec_itemid for s in dr.SPECIMENS])[stype[r_spec]]),
        "spec_type_desc": cat(stype[r_spec], [s.spec_type_desc for s in dr.SPECIMENS]),
        "test_seq": num(t_pos[r_test] + 1),
        "storedate": ts(floor_to(storetime, DAY)), "storetime": ts(storetime),
        "test_itemid": num(np.array([t[0] for t in TESTS])[t_test[r_test]]),
        "test_name": cat(t_test[r_test], [t[1] for t in TESTS]),
        "org_itemid": num(np.array(ORG_IDS)[np.maximum(r_org, 0)], r_org >= 0),
        "org_name": cat(np.where(r_org >= 0, r_org, len(ORG_IDS)), [dr.ORGANISMS[o][0] for o in ORG_IDS] + [None]),
        "isolate_num": num(np.ones(n, dtype=np.int16), r_org >= 0),
        "ab_itemid": num(np.array(AB_IDS)[np.maximum(ab, 0)], has_ab),
        "ab_name": cat(np.where(has_ab, np.maximum(ab, 0), len(AB_IDS)),
                       [dr.ANTIBIOTICS[a][0] for a in AB_IDS] + [None]),
        "dilution_text": cat(np.where(has_ab, dil, len(DIL_TEXT)), DIL_TEXT + [None]),
        "dilution_comparison": cat(np.where(has_ab, comp, len(DIL_COMP)), DIL_COMP + [None]),
        "dilution_value": num(DIL_VALUE[dil], has_ab),
        "interpretation": cat(np.where(has_ab, interp, 3), ["S", "I", "R", None]),
        "comments": cat(np.where(comment >= 0, comment, len(COMMENTS)), COMMENTS + [None]),
    }
