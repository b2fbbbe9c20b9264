"""ICU inputs, outputs and procedures of one chunk.

Inputs: titrated drips split into rate-change segments that share a link order,
continuous fluids, boluses, blood products, drug pushes and electrolyte
additives, chosen per stay from the admission's clinical flags. Outputs: urine
(Foley or voids), drains, gastric and operating-room outputs. Procedures:
ventilation (matching the charted ventilator settings), lines, catheters, imaging.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ehr_magic.sources.synthetic import items as it
from ehr_magic.sources.synthetic.chart import hour_grid
from ehr_magic.sources.synthetic.hosp import FLAG_INDEX, Cohort, Ids
from ehr_magic.sources.synthetic.util import (
    HOUR, MINUTE, Rng, cat, floor_to, num, owners, ranks, ts,
)

STATUSES = ["FinishedRunning", "ChangeDose/Rate", "Stopped", "Paused"]


def _stay_prob(c: Cohort, p: float, boosts: dict[str, float]) -> np.ndarray:
    prob = np.full(len(c.stay_id), p)
    for flag, extra in boosts.items():
        prob = prob + extra * c.flags[c.stay_adm, FLAG_INDEX[flag]]
    return np.clip(prob, 0.0, 0.98)


def _text_list(values: list[str | None]) -> tuple[list[str | None], dict[str | None, int]]:
    labels = list(dict.fromkeys(values))
    return labels, {x: i for i, x in enumerate(labels)}


ITEM_TEXT = {
    name: _text_list([getattr(i, name) for i in it.INPUT_ITEMS] + [None])
    for name in ("amountuom", "rateuom", "ordercategoryname", "secondaryordercategoryname",
                 "ordercomponenttypedescription", "ordercategorydescription")
}


def inputevents_table(rng: Rng, c: Cohort, ids: Ids) -> dict[str, pa.Array]:
    ns = len(c.stay_id)
    s_in, s_out = c.icu_in, c.icu_out
    days = np.maximum((s_out - s_in) / (24 * HOUR), 0.05)
    keys = ("stay", "item", "start", "end", "amount", "rate", "status", "run")
    parts: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    run_counter = 0
    for j, item in enumerate(it.INPUT_ITEMS):
        gets = np.flatnonzero(rng.random(ns) < _stay_prob(c, item.p, item.boosts))
        if not len(gets):
            continue
        if item.kind == "drip":
            n_orders = np.ones(len(gets), dtype=np.int64)
        else:
            n_orders = np.maximum(rng.poisson(item.per_day * days[gets]), 1)
        stay = np.repeat(gets, n_orders)
        m = len(stay)
        span = s_out[stay] - s_in[stay]
        start = s_in[stay] + (span * rng.uniform(0.0, 0.95 if item.kind != "drip" else 0.4, m)).astype(np.int64)
        start = np.minimum(-(-start // MINUTE) * MINUTE, s_out[stay])  # whole minutes, inside the stay
        runs = np.arange(run_counter, run_counter + m)
        run_counter += m
        if item.kind == "drip":
            length = np.maximum((s_out[stay] - start) * rng.uniform(0.3, 0.95, m), HOUR)
            n_seg = np.clip(np.round(length / (rng.uniform(2, 6, m) * HOUR)), 1, 24).astype(np.int64)
            seg_run = owners(n_seg)
            seg_k = ranks(n_seg)
            seg_len = (length / n_seg)[seg_run]
            seg_start = floor_to(start[seg_run] + (seg_k * seg_len).astype(np.int64), MINUTE)
            seg_end = floor_to(start[seg_run] + ((seg_k + 1) * seg_len).astype(np.int64), MINUTE)
            seg_end = np.minimum(seg_end, s_out[stay[seg_run]])
            base = np.exp(rng.uniform(np.log(item.lo), np.log(item.hi), m))[seg_run]
            rate = np.clip(base * np.exp(rng.normal(0, 0.25, len(seg_run))), item.lo * 0.5, item.hi * 1.5)
            rate = np.round(rate, 3)
            hours = (seg_end - seg_start) / HOUR
            kg = c.stay_weight[stay[seg_run]] if item.weight_based else 1.0
            amount = np.round(rate * hours * item.k * kg, 4)
            last = seg_k == n_seg[seg_run] - 1
            status = np.where(last, np.where(rng.random(len(seg_run)) < 0.65, 0, 2), 1)
            status = np.where(~last & (rng.random(len(seg_run)) < 0.08), 3, status)
            stay_r, run_r = stay[seg_run], runs[seg_run]
            start, end = seg_start, seg_end
        else:
            stay_r, run_r = stay, runs
            if item.kind == "fluid":
                dur = rng.uniform(1, 8, m) * HOUR
                rate = np.round(rng.uniform(item.lo, item.hi, m) / 5) * 5
            elif item.kind == "product":
                dur = rng.uniform(0.5, 2.0, m) * HOUR
                rate = None
            elif item.kind == "additive":
                dur = np.full(m, HOUR)
                rate = None
            else:  # bolus, push
                dur = np.full(m, MINUTE)
                rate = None
            end = np.minimum(floor_to(start + dur.astype(np.int64), MINUTE), s_out[stay])
            end = np.maximum(end, start)
            if item.kind == "fluid":
                amount = np.round(rate * (end - start) / HOUR, 2)
            else:
                amount = _amounts(rng, item, m)
                if item.kind == "product":
                    rate = np.round(amount / np.maximum((end - start) / HOUR, 1 / 60), 1)
            if rate is None:
                rate = np.full(m, np.nan)
            status = np.zeros(m, dtype=np.int64)
        parts["stay"].append(stay_r)
        parts["item"].append(np.full(len(stay_r), j))
        parts["start"].append(start)
        parts["end"].append(end)
        parts["amount"].append(np.asarray(amount, dtype=float))
        parts["rate"].append(np.asarray(rate, dtype=float))
        parts["status"].append(status)
        parts["run"].append(run_r)
    r = {k: np.concatenate(p) if p else np.zeros(0, dtype=np.int64) for k, p in parts.items()}
    order = np.lexsort((r["item"], r["start"], r["stay"]))
    r = {k: a[order] for k, a in r.items()}
    n = len(r["stay"])
    orderid = ids.extra["order"].take(n)
    # the link order is the order id of the first segment of the same run
    run = r["run"]
    linkorderid = orderid
    if n:
        uniq, first_idx = np.unique(run, return_index=True)
        link_pos = np.empty(int(run.max()) + 1, dtype=np.int64)
        link_pos[uniq] = first_idx
        linkorderid = orderid[link_pos[run]]
    items = it.INPUT_ITEMS
    s = r["stay"]
    adm = c.stay_adm[s]
    has_rate = ~np.isnan(r["rate"])
    item_pos = r["item"]  # each row's position in it.INPUT_ITEMS

    def text(name: str) -> pa.Array:
        labels, pos = ITEM_TEXT[name]
        lookup = np.array([pos[getattr(x, name)] for x in items])
        return cat(lookup[item_pos], labels)

    total = np.array([np.nan if x.total is None else x.total for x in items])[item_pos]
    open_bag = np.array([x.kind in ("drip", "fluid") for x in items])[item_pos]
    shift = r["start"] // (12 * HOUR)
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]), "stay_id": num(c.stay_id[s]),
        "caregiver_id": num(ids.caregivers[(c.stay_id[s] * 7 + shift * 13) % len(ids.caregivers)]),
        "starttime": ts(r["start"]), "endtime": ts(r["end"]),
        "storetime": ts(r["end"] + rng.integers(0, 20, n) * MINUTE),
        "itemid": num(np.array([x.itemid for x in items])[item_pos]),
        "amount": num(r["amount"]), "amountuom": text("amountuom"),
        "rate": num(np.nan_to_num(r["rate"]), has_rate), "rateuom": text("rateuom"),
        "orderid": num(orderid), "linkorderid": num(linkorderid),
        "ordercategoryname": text("ordercategoryname"),
        "secondaryordercategoryname": text("secondaryordercategoryname"),
        "ordercomponenttypedescription": text("ordercomponenttypedescription"),
        "ordercategorydescription": text("ordercategorydescription"),
        "patientweight": num(c.stay_weight[s]),
        "totalamount": num(np.nan_to_num(total), ~np.isnan(total)),
        "totalamountuom": cat(np.where(np.isnan(total), 1, 0), ["ml", None]),
        "isopenbag": num(open_bag.astype(np.int16)), "continueinnextdept": num(np.zeros(n, dtype=np.int16)),
        "statusdescription": cat(r["status"], STATUSES),
        "originalamount": num(r["amount"]), "originalrate": num(np.nan_to_num(r["rate"]), has_rate),
    }


def _amounts(rng: Rng, item: it.InputItem, m: int) -> np.ndarray:
    if item.lo == item.hi:
        return np.full(m, float(item.lo))
    if item.itemid == 225158:  # saline boluses come in standard volumes
        return rng.choice([250.0, 500.0, 1000.0], m, p=[0.2, 0.5, 0.3])
    raw = rng.uniform(item.lo, item.hi, m)
    step = 10.0 if item.hi >= 100 else (1.0 if item.hi >= 2 else 0.1)
    return np.round(np.maximum(np.round(raw / step) * step, item.lo), 2)


def outputevents_table(rng: Rng, c: Cohort, ids: Ids) -> dict[str, pa.Array]:
    ns = len(c.stay_id)
    g = hour_grid(c)
    gs, gk, gt = g["stay"], g["k"], g["time"]
    parts: dict[str, list[np.ndarray]] = {"stay": [], "time": [], "item": [], "value": []}
    low_urine = (c.flags[c.stay_adm, FLAG_INDEX["aki"]] | c.flags[c.stay_adm, FLAG_INDEX["shock"]]
                 | c.flags[c.stay_adm, FLAG_INDEX["dying"]])
    foley = np.zeros(ns, dtype=bool)
    for out in it.OUTPUT_ITEMS:
        gets = rng.random(ns) < _stay_prob(c, out.p, out.boosts)
        if out.itemid == 226559:
            foley = gets
        elif out.itemid == 226560:
            gets &= ~foley
        if out.per_hour > 0:
            m = gets[gs] & (rng.random(len(gs)) < out.per_hour)
            if out.first_hours is not None:
                m &= gk < out.first_hours
            stay, time = gs[m], gt[m] - rng.integers(0, 2, int(m.sum())) * 30 * MINUTE
            time = np.maximum(time, c.icu_in[stay])
        else:
            stay = np.flatnonzero(gets)
            time = floor_to(c.icu_in[stay] + rng.integers(5, 60, len(stay)) * MINUTE, MINUTE)
            time = np.minimum(time, c.icu_out[stay])
        k = len(stay)
        value = out.median * np.exp(rng.normal(0, 0.6, k))
        if out.itemid == 226559:
            value = np.where(low_urine[stay], value * 0.45, value)
        value = np.maximum(np.round(value / 5) * 5, 0)
        parts["stay"].append(stay)
        parts["time"].append(time)
        parts["item"].append(np.full(k, out.itemid))
        parts["value"].append(value)
    r = {k: np.concatenate(p) for k, p in parts.items()}
    order = np.lexsort((r["item"], r["time"], r["stay"]))
    r = {k: a[order] for k, a in r.items()}
    n = len(r["stay"])
    s = r["stay"]
    adm = c.stay_adm[s]
    shift = r["time"] // (12 * HOUR)
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]), "stay_id": num(c.stay_id[s]),
        "caregiver_id": num(ids.caregivers[(c.stay_id[s] * 7 + shift * 13) % len(ids.caregivers)]),
        "charttime": ts(r["time"]), "storetime": ts(r["time"] + rng.integers(0, 30, n) * MINUTE),
        "itemid": num(r["item"]), "value": num(r["value"]), "valueuom": cat(np.zeros(n, dtype=np.int32), ["ml"]),
    }


PROC_POS = {p.itemid: j for j, p in enumerate(it.PROCEDURE_ITEMS)}
PROC_LOCATION_CATEGORIES = list(dict.fromkeys(p.locationcategory for p in it.PROCEDURE_ITEMS if p.locationcategory))


def procedureevents_table(rng: Rng, c: Cohort, ids: Ids) -> dict[str, pa.Array]:
    """Ventilation, lines and catheters (continuous, in minutes) and one-off tasks (imaging, EKG, cultures)."""
    ns = len(c.stay_id)
    s_in, s_out = c.icu_in, c.icu_out
    days = (s_out - s_in) / (24 * HOUR)
    flag = {name: c.flags[c.stay_adm, FLAG_INDEX[name]] for name in
            ("shock", "cardiac_surgery", "neuro", "trauma", "acs", "chf", "infection")}
    vent = c.vent_end > s_in
    parts: dict[str, list[np.ndarray]] = {"stay": [], "item": [], "start": [], "end": []}

    def add(stays: np.ndarray, itemid: int, start: np.ndarray, end: np.ndarray | None = None) -> None:
        start = np.clip(-(-start // MINUTE) * MINUTE, s_in[stays], s_out[stays] - MINUTE)
        end = start + MINUTE if end is None else np.clip(floor_to(end, MINUTE), start + MINUTE, s_out[stays])
        parts["stay"].append(stays)
        parts["item"].append(np.full(len(stays), PROC_POS[itemid]))
        parts["start"].append(start)
        parts["end"].append(end)

    def line(itemid: int, p: np.ndarray | float, max_days: float) -> None:
        stays = np.flatnonzero(rng.random(ns) < p)
        start = s_in[stays] + rng.uniform(0, 3 * HOUR, len(stays)).astype(np.int64)
        add(stays, itemid, start, start + (rng.uniform(0.5, max_days, len(stays)) * 24 * HOUR).astype(np.int64))

    vs = np.flatnonzero(vent)
    add(vs, 225792, s_in[vs], c.vent_end[vs])
    intubated_here = vs[rng.random(len(vs)) < 0.5]
    add(intubated_here, 224385, s_in[intubated_here])
    extubated = vs[c.vent_end[vs] < s_out[vs] - 2 * MINUTE]
    add(extubated, 227194, c.vent_end[extubated])
    art = np.flatnonzero(c.art_line)
    start = s_in[art] + rng.uniform(0, 3 * HOUR, len(art)).astype(np.int64)
    add(art, 225752, start, start + (rng.uniform(1, 6, len(art)) * 24 * HOUR).astype(np.int64))
    line(224263, np.clip(0.25 + 0.4 * flag["shock"] + 0.35 * flag["cardiac_surgery"] + 0.2 * vent, 0, 0.95), 8)
    line(224264, 0.03 + 0.12 * (days > 5), 20)
    line(224275, 0.65, 4)
    line(224277, 0.3, 3)
    line(229351, np.clip(0.55 + 0.3 * vent, 0, 0.95), 10)
    for itemid, per_stay in ((225459, 0.6 + 0.8 * days * vent + 0.3 * days),
                             (221214, 0.1 + 0.7 * (flag["neuro"] | flag["trauma"])),
                             (225402, 0.4 + 0.6 * flag["acs"]),
                             (225432, 0.05 + 0.45 * (flag["chf"] | flag["acs"] | flag["cardiac_surgery"])),
                             (225401, 0.15 + 1.0 * flag["infection"])):
        n = rng.poisson(per_stay)
        stays = np.repeat(np.arange(ns), n)
        add(stays, itemid, s_in[stays] + ((s_out[stays] - s_in[stays]) * rng.random(len(stays))).astype(np.int64))

    r = {k: np.concatenate(p) for k, p in parts.items()}
    order = np.lexsort((r["item"], r["start"], r["stay"]))
    r = {k: a[order] for k, a in r.items()}
    n = len(r["stay"])
    s, j = r["stay"], r["item"]
    items = it.PROCEDURE_ITEMS
    continuous = np.array([p.continuous for p in items])[j]
    minutes = np.round((r["end"] - r["start"]) / MINUTE)
    value = np.where(continuous, minutes, 1.0)
    n_locs = np.array([len(p.locations) for p in items])
    first_loc = np.cumsum(n_locs) - n_locs
    has_loc = (n_locs[j] > 0) & (rng.random(n) < 0.7)
    loc = np.where(has_loc, first_loc[j] + (rng.random(n) * np.maximum(n_locs[j], 1)).astype(np.int64), -1)
    all_locs = [loc_name for p in items for loc_name in p.locations]
    loc_cat = np.array([PROC_LOCATION_CATEGORIES.index(p.locationcategory) if p.locationcategory else -1
                        for p in items])[j]
    orderid = ids.extra["order"].take(n)
    adm = c.stay_adm[s]
    shift = r["start"] // (12 * HOUR)
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]), "stay_id": num(c.stay_id[s]),
        "caregiver_id": num(ids.caregivers[(c.stay_id[s] * 7 + shift * 13) % len(ids.caregivers)]),
        "starttime": ts(r["start"]), "endtime": ts(r["end"]),
        "storetime": ts(r["end"] + rng.integers(0, 30, n) * MINUTE),
        "itemid": num(np.array([p.itemid for p in items])[j]), "value": num(value),
        "valueuom": cat(np.where(continuous, 0, 1), ["min", None]),
        "location": cat(np.where(loc >= 0, loc, len(all_locs)), all_locs + [None]),
        "locationcategory": cat(np.where(has_loc & (loc_cat >= 0), loc_cat, len(PROC_LOCATION_CATEGORIES)),
                                PROC_LOCATION_CATEGORIES + [None]),
        "orderid": num(orderid), "linkorderid": num(orderid),
        "ordercategoryname": cat(j, [p.ordercategoryname for p in items]),
        "ordercategorydescription": cat(np.where(continuous, 0, 1), ["ContinuousProcess", "Task"]),
        "patientweight": num(c.stay_weight[s]),
        "isopenbag": num(continuous.astype(np.int16)), "continueinnextdept": num(np.zeros(n, dtype=np.int16)),
        "statusdescription": cat(np.zeros(n, dtype=np.int32), ["FinishedRunning"]),
        "originalamount": num(value), "originalrate": num(np.ones(n)),
    }
