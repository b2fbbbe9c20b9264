"""The hospital skeleton of one chunk of synthetic patients: patients, their
admissions, ward transfers, ICU stays, services, diagnoses and procedures.

``make_cohort`` draws everything the event generators need (times, clinical
category, flags, severity, deaths) into a ``Cohort`` of numpy arrays; the
``*_table`` functions turn it into MIMIC-IV shaped columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from ehr_magic.sources.synthetic import icd
from ehr_magic.sources.synthetic import vocab as v
from ehr_magic.sources.synthetic.util import (
    DAY, HOUR, MINUTE, YEAR, IdSpace, Rng, Sequential, cat, dates, floor_to, group_cumsum, lognormal, num, owners,
    pick, pick_rows, ranks, ts,
)

DX_INDEX = icd.dx_index()
PROC_INDEX = icd.proc_index()
FLAG_INDEX = {f: i for i, f in enumerate(v.FLAGS)}
CHRONIC_KEYS = list(v.CHRONIC_PREVALENCE)
SECONDARY_KEYS = list(v.SECONDARY_WEIGHTS)
CATEGORY_INDEX = {c.key: i for i, c in enumerate(v.CATEGORIES)}
CARE_UNITS: list[str] = sorted({u for c in v.CATEGORIES for u in c.wards + c.icus}
                               | {v.ED_UNIT, v.ED_OBSERVATION_UNIT})
UNIT_INDEX = {u: i for i, u in enumerate(CARE_UNITS)}
DISCHARGE_LABELS = v.DISCHARGE_LOCATIONS + [v.DIED]
# ICD code labels: index 2*dx + (1 if ICD-10)
DX_CODES = [code for c in icd.ALL_DX for code in (c[1], c[3])]
PROC_CODES = [code for c in icd.PROCEDURES for code in (c[1], c[3])]


def _concept_flag_matrix() -> np.ndarray:
    m = np.zeros((len(icd.ALL_DX), len(v.FLAGS)), dtype=bool)
    for key, flags in v.CONCEPT_FLAGS.items():
        for f in flags:
            m[DX_INDEX[key], FLAG_INDEX[f]] = True
    return m


CONCEPT_FLAGS = _concept_flag_matrix()


@dataclass
class Ids:
    """Id allocators shared by all chunks of one build (handed out in chunk order)."""

    subject: IdSpace
    hadm: IdSpace
    stay: IdSpace
    transfer: IdSpace
    providers: list[str]
    caregivers: np.ndarray
    extra: dict[str, IdSpace | Sequential] = field(default_factory=dict)


@dataclass
class Cohort:
    now_s: int
    # patients
    subject_id: np.ndarray
    male: np.ndarray
    anchor_age: np.ndarray
    anchor_year: np.ndarray
    year_group: np.ndarray
    dod_s: np.ndarray  # -1 when alive
    race: np.ndarray
    language: np.ndarray
    marital: np.ndarray
    insurance: np.ndarray
    weight_kg: np.ndarray
    height_cm: np.ndarray
    chronic: np.ndarray  # (patients, CHRONIC_KEYS)
    # admissions
    pat: np.ndarray
    hadm_id: np.ndarray
    admit_s: np.ndarray
    disch_s: np.ndarray
    ed_in_s: np.ndarray  # -1 when not through the ED
    ed_out_s: np.ndarray
    category: np.ndarray
    principal: np.ndarray  # index into icd.ALL_DX
    adm_type: np.ndarray
    adm_loc: np.ndarray
    disch_loc: np.ndarray  # index into DISCHARGE_LABELS, -1 for NULL
    died: np.ndarray
    icu: np.ndarray
    severity: np.ndarray
    age: np.ndarray
    icd10: np.ndarray
    provider: np.ndarray
    flags: np.ndarray  # (admissions, FLAGS)
    chronic_flags: np.ndarray  # flags due to lasting conditions
    sec_adm: np.ndarray  # secondary diagnoses (ragged)
    sec_dx: np.ndarray
    ward1: np.ndarray
    ward2: np.ndarray
    transfers: dict[str, np.ndarray]
    # ICU stays
    stay_adm: np.ndarray
    stay_id: np.ndarray
    icu_in: np.ndarray
    icu_out: np.ndarray
    icu_unit: np.ndarray
    vent_end: np.ndarray  # == icu_in when never ventilated
    art_line: np.ndarray
    stay_weight: np.ndarray  # admission weight charted in the ICU (kg)

    @property
    def n_adm(self) -> int:
        return len(self.hadm_id)

    def flag(self, name: str) -> np.ndarray:
        return self.flags[:, FLAG_INDEX[name]]


def make_cohort(rng: Rng, n: int, now_s: int, ids: Ids) -> Cohort:
    """Draw ``n`` patients with their admissions and ICU stays, all ending before ``now_s``."""
    # --- patients
    male = rng.random(n) < v.GENDERS[1][1]
    age0 = 18.0 + 74.0 * rng.beta(2.3, 1.9, n)
    t0 = now_s - rng.uniform(90 * DAY, 12 * YEAR, n)
    anchor_year = t0.astype(np.int64).astype("datetime64[s]").astype("datetime64[Y]").astype(np.int64) + 1970
    anchor_age = np.floor(age0).astype(np.int64)
    anchor_age = np.where(anchor_age > 89, 91, anchor_age)
    year_group = pick(rng, n, [w for _, w in v.ANCHOR_YEAR_GROUPS])
    race = pick(rng, n, [w for _, w in v.RACES])
    language = pick(rng, n, [w for _, w in v.LANGUAGES])
    band = np.digitize(age0, [40, 65, 80])
    marital = pick_rows(rng, np.asarray(v.MARITAL_WEIGHTS)[band])
    insurance = pick_rows(rng, np.where((age0 >= 65)[:, None], v.INSURANCE_65_PLUS, v.INSURANCE_UNDER_65))
    weight_kg = np.clip(np.where(male, 86.0, 73.0) + rng.normal(0, 18, n), 38, 220)
    height_cm = np.clip(np.where(male, 176.0, 162.5) + rng.normal(0, 7, n), 140, 205)
    chronic = _chronic_conditions(rng, age0, male)

    # --- admissions: how many, what kind, how long
    k_adm = np.minimum(rng.geometric(0.55, n), 8)
    pat = owners(k_adm)
    nth = ranks(k_adm)
    na = len(pat)
    cat_w = np.tile([c.weight for c in v.CATEGORIES], (na, 1))
    for j, c in enumerate(v.CATEGORIES):
        if c.female_only:
            cat_w[male[pat], j] = 0.0
        cat_w[age0[pat] > c.max_age, j] = 0.0
    category = pick_rows(rng, cat_w)
    first = np.repeat(np.cumsum(k_adm) - k_adm, k_adm)
    stay_with_first = (nth > 0) & (rng.random(na) < 0.4)
    category = np.where(stay_with_first, category[first], category)

    principal = np.zeros(na, dtype=np.int64)
    adm_type = np.zeros(na, dtype=np.int64)
    for j, c in enumerate(v.CATEGORIES):
        rows = np.flatnonzero(category == j)
        keys = list(c.principal)
        principal[rows] = np.array([DX_INDEX[k] for k in keys])[pick(rng, len(rows), list(c.principal.values()))]
        types = list(c.admission_types)
        type_ids = np.array([v.ADMISSION_TYPES.index(t) for t in types])
        adm_type[rows] = type_ids[pick(rng, len(rows), list(c.admission_types.values()))]
    adm_loc = pick_rows(rng, np.asarray([v.LOCATION_BY_TYPE[t] for t in v.ADMISSION_TYPES])[adm_type])
    observation = np.isin(adm_type, [v.ADMISSION_TYPES.index(t) for t in v.OBSERVATION_TYPES])

    severity = lognormal(rng, 1.0, 0.35, na)
    p_icu = 0.7 * np.array([c.p_icu for c in v.CATEGORIES])[category] * np.clip(severity, 0.5, 2.0)
    icu = rng.random(na) < np.where(observation, 0.1 * p_icu, p_icu)
    severity = np.where(icu, severity * 1.3, severity)

    los_days = lognormal(rng, np.array([c.los_days for c in v.CATEGORIES])[category], 0.7, na)
    los_days = np.where(observation, los_days * 0.35, los_days)
    los_days = np.where(icu, np.maximum(los_days * 1.3, 1.0), los_days)
    los_days = np.clip(los_days, 0.12, 55.0)
    gap_days = 1.0 + np.minimum(lognormal(rng, 120.0, 1.1, na), 5 * 365.0)
    step = los_days + gap_days
    offset_days = group_cumsum(step, k_adm) - step
    time_of_day = rng.uniform(0, DAY, na)
    admit_s = floor_to((floor_to(t0[pat], DAY) + offset_days * DAY + time_of_day).astype(np.int64), MINUTE)
    disch_s = floor_to(admit_s + (los_days * DAY).astype(np.int64), MINUTE)

    # Everything (even microbiology results) must be final before "now".
    keep = disch_s <= now_s - 8 * DAY
    k_adm = np.bincount(pat[keep], minlength=n)
    sel = np.flatnonzero(keep)
    pat, category, principal, adm_type, adm_loc, severity, icu, admit_s, disch_s, los_days = (
        a[sel] for a in (pat, category, principal, adm_type, adm_loc, severity, icu, admit_s, disch_s, los_days))
    na = len(pat)
    age = age0[pat] + (admit_s - t0[pat]) / YEAR

    # --- deaths: in hospital on the last admission, or within a year after it
    last = np.cumsum(k_adm) - 1
    cat_death = np.ones(len(v.CATEGORIES))
    cat_death[[CATEGORY_INDEX["obstetrics"], CATEGORY_INDEX["psychiatry"], CATEGORY_INDEX["gynaecology"]]] = 0.05
    p_die = np.where(icu, 0.11, 0.012) * severity * np.clip(age / 65.0, 0.3, 1.6) ** 2 * cat_death[category]
    died = np.zeros(na, dtype=bool)
    died[last] = rng.random(n) < np.clip(p_die[last], 0, 0.6)
    onc = np.isin(category, [CATEGORY_INDEX["oncology"]])
    p_later = 0.03 + 0.12 * np.clip((age[last] - 60) / 30, 0, 1) + 0.15 * onc[last]
    dod_s = np.full(n, -1, dtype=np.int64)
    later = (~died[last]) & (rng.random(n) < p_later)
    later_s = disch_s[last] + rng.uniform(1, 365, n) * DAY
    later &= later_s <= now_s - DAY
    dod_s[later] = later_s[later].astype(np.int64)
    dod_s[died[last]] = disch_s[last][died[last]]

    # --- clinical flags and secondary diagnoses
    chronic_f = _chronic_flag_rows(chronic)[pat]
    acute_f = CONCEPT_FLAGS[principal].copy()
    for j, c in enumerate(v.CATEGORIES):
        for f in c.flags:
            acute_f[category == j, FLAG_INDEX[f]] = True
    sec_adm, sec_dx = _secondaries(rng, icu, los_days, age, chronic_f | acute_f)
    np.logical_or.at(acute_f, sec_adm, CONCEPT_FLAGS[sec_dx])
    acute_f[:, FLAG_INDEX["dying"]] = died

    # --- emergency department, wards, ICU
    has_ed = np.isin(adm_loc, [v.ADMISSION_LOCATIONS.index(x) for x in v.ED_LOCATIONS]) & (rng.random(na) < 0.97)
    los_s = disch_s - admit_s
    ed_in = floor_to(admit_s - rng.uniform(1.5 * HOUR, 9 * HOUR, na).astype(np.int64), MINUTE)
    ed_out = admit_s + np.minimum(rng.uniform(0.2 * HOUR, 3 * HOUR, na), 0.3 * los_s).astype(np.int64)
    ed_out = floor_to(ed_out, MINUTE)
    ed_in, ed_out = np.where(has_ed, ed_in, -1), np.where(has_ed, ed_out, -1)
    care_start = np.where(has_ed, ed_out, admit_s)

    csurg = category == CATEGORY_INDEX["cardiac_surgery"]
    direct = rng.random(na) < np.where(csurg, 0.85, 0.45)
    avail = disch_s - care_start
    icu_in = care_start + np.where(direct, 0, avail * rng.uniform(0.05, 0.35, na)).astype(np.int64)
    icu_in = icu_in + rng.integers(0, 60, na)
    frac = np.where(csurg, rng.uniform(0.12, 0.3, na), rng.uniform(0.18, 0.55, na))
    icu_out = icu_in + ((disch_s - icu_in) * frac).astype(np.int64)
    icu_out = np.where(died & (rng.random(na) < 0.75), disch_s, icu_out)
    icu_out = np.where(disch_s - icu_out < 3 * HOUR, disch_s, icu_out)

    ward1 = _unit_choice(rng, WARDS, category)
    ward2 = _unit_choice(rng, WARDS, category)
    icu_unit = _unit_choice(rng, ICUS, category)
    split = (~icu) & (los_days > 1.0) & (rng.random(na) < 0.25) & (ward1 != ward2)
    split_s = care_start + (avail * rng.uniform(0.2, 0.7, na)).astype(np.int64) + rng.integers(0, 60, na)

    stay_adm = np.flatnonzero(icu)
    ns = len(stay_adm)
    sf = (chronic_f | acute_f)[stay_adm]
    fi = FLAG_INDEX
    p_vent = np.clip(0.08 + 0.3 * sf[:, fi["resp"]] + 0.3 * sf[:, fi["shock"]] + 0.2 * sf[:, fi["neuro"]]
                     + 0.75 * sf[:, fi["cardiac_surgery"]] + 0.1 * sf[:, fi["sepsis"]], 0, 0.95)
    vent = rng.random(ns) < p_vent
    s_in, s_out = icu_in[stay_adm], icu_out[stay_adm]
    vent_len = np.where(sf[:, fi["cardiac_surgery"]], rng.uniform(3, 12, ns) * HOUR,
                        (s_out - s_in) * rng.uniform(0.3, 1.0, ns))
    vent_end = np.where(vent, np.minimum(s_in + vent_len.astype(np.int64), s_out), s_in)
    acute_f[stay_adm[vent], fi["vent"]] = True
    p_art = np.clip(0.2 + 0.55 * vent + 0.5 * sf[:, fi["cardiac_surgery"]] + 0.3 * sf[:, fi["shock"]], 0, 0.95)
    art_line = rng.random(ns) < p_art

    transfers = _transfers(rng, ids, na, has_ed, ed_in, ed_out, care_start, icu, direct, icu_in, icu_out,
                           split, split_s, disch_s, ward1, ward2, icu_unit, adm_type)

    # --- coding era, discharge disposition
    group_start = np.array([int(g.split(" ")[0]) for g, _ in v.ANCHOR_YEAR_GROUPS], dtype=float)
    real_year0 = group_start[year_group] + rng.uniform(0, 3, n)
    icd10 = real_year0[pat] + (admit_s - t0[pat]) / YEAR >= 2015.75
    disch_loc = pick_rows(rng, np.where((age >= 65)[:, None], v.DISCHARGE_65_PLUS, v.DISCHARGE_UNDER_65))
    disch_loc = np.where(disch_loc == v.DISCHARGE_LOCATIONS.index(None), -1, disch_loc)
    soon = np.zeros(na, dtype=bool)
    soon[last] = later & (later_s - disch_s[last] < 30 * DAY)
    disch_loc = np.where(soon & (rng.random(na) < 0.4), v.DISCHARGE_LOCATIONS.index("HOSPICE"), disch_loc)
    disch_loc = np.where(died, len(v.DISCHARGE_LOCATIONS), disch_loc)

    return Cohort(
        now_s=now_s, subject_id=ids.subject.take(n), male=male, anchor_age=anchor_age, anchor_year=anchor_year,
        year_group=year_group, dod_s=dod_s, race=race, language=language, marital=marital, insurance=insurance,
        weight_kg=weight_kg, height_cm=height_cm, chronic=chronic,
        pat=pat, hadm_id=ids.hadm.take(na), admit_s=admit_s, disch_s=disch_s, ed_in_s=ed_in, ed_out_s=ed_out,
        category=category, principal=principal, adm_type=adm_type, adm_loc=adm_loc, disch_loc=disch_loc, died=died,
        icu=icu, severity=severity, age=age, icd10=icd10, provider=rng.integers(0, len(ids.providers), na),
        flags=chronic_f | acute_f, chronic_flags=chronic_f, sec_adm=sec_adm, sec_dx=sec_dx,
        ward1=ward1, ward2=ward2, transfers=transfers,
        stay_adm=stay_adm, stay_id=ids.stay.take(ns), icu_in=s_in, icu_out=s_out, icu_unit=icu_unit[stay_adm],
        vent_end=vent_end, art_line=art_line,
        stay_weight=np.round(weight_kg[pat[stay_adm]] * (1 + rng.normal(0, 0.02, ns)), 1),
    )


def _units_table(pick_units: str) -> tuple[np.ndarray, np.ndarray]:
    """(category x slot) unit indices padded with -1, and how many units each category has."""
    lists = [[UNIT_INDEX[u] for u in getattr(c, pick_units)] for c in v.CATEGORIES]
    table = np.full((len(lists), max(map(len, lists))), -1)
    for j, units in enumerate(lists):
        table[j, :len(units)] = units
    return table, np.array([len(units) for units in lists])


WARDS = _units_table("wards")
ICUS = _units_table("icus")


def _unit_choice(rng: Rng, units: tuple[np.ndarray, np.ndarray], category: np.ndarray) -> np.ndarray:
    table, counts = units
    return table[category, (rng.random(len(category)) * counts[category]).astype(np.int64)]


def _chronic_conditions(rng: Rng, age: np.ndarray, male: np.ndarray) -> np.ndarray:
    n = len(age)
    out = np.zeros((n, len(CHRONIC_KEYS)), dtype=bool)
    for j, key in enumerate(CHRONIC_KEYS):
        base, per_decade, sex = v.CHRONIC_PREVALENCE[key]
        p = np.clip(base * per_decade ** ((age - 60.0) / 10.0), 0, 0.85)
        if sex == "M":
            p = np.where(male, p, 0.0)
        elif sex == "F":
            p = np.where(male, 0.0, p)
        out[:, j] = rng.random(n) < p
    col = {k: j for j, k in enumerate(CHRONIC_KEYS)}
    out[:, col["ckd"]] &= ~out[:, col["esrd"]]
    out[:, col["tobacco_hx"]] &= ~out[:, col["smoker"]]
    return out


def _chronic_flag_rows(chronic: np.ndarray) -> np.ndarray:
    m = np.zeros((len(CHRONIC_KEYS), len(v.FLAGS)), dtype=bool)
    for j, key in enumerate(CHRONIC_KEYS):
        m[j] = CONCEPT_FLAGS[DX_INDEX[key]]
    return (chronic.astype(np.int32) @ m.astype(np.int32)) > 0


def _secondaries(rng: Rng, icu: np.ndarray, los_days: np.ndarray, age: np.ndarray,
                 flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    na = len(icu)
    lam = 2.0 + 0.4 * los_days + 3.0 * icu + 1.0 * (age > 75)
    counts = np.minimum(rng.poisson(lam), 14)
    adm = owners(counts)
    w = np.empty((na, len(SECONDARY_KEYS)))
    for j, key in enumerate(SECONDARY_KEYS):
        weight, need, ward_f, icu_f = v.SECONDARY_WEIGHTS[key]
        col = weight * np.where(icu, icu_f, ward_f)
        if need is not None:
            col = col * flags[:, FLAG_INDEX[need]]
        w[:, j] = col
    choice = pick_rows(rng, w[adm])
    dx = np.array([DX_INDEX[k] for k in SECONDARY_KEYS])[choice]
    return adm, dx


def _transfers(rng: Rng, ids: Ids, na: int, has_ed: np.ndarray, ed_in: np.ndarray, ed_out: np.ndarray,
               care_start: np.ndarray, icu: np.ndarray, direct: np.ndarray, icu_in: np.ndarray, icu_out: np.ndarray,
               split: np.ndarray, split_s: np.ndarray, disch_s: np.ndarray, ward1: np.ndarray, ward2: np.ndarray,
               icu_unit: np.ndarray, adm_type: np.ndarray) -> dict[str, np.ndarray]:
    """Transfer rows as (admission, eventtype, careunit, intime, outtime) slots, in time order."""
    first_ward_end = np.where(icu, icu_in, np.where(split, split_s, disch_s))
    after_icu = icu & (icu_out < disch_s)
    ed_unit = np.where(adm_type == v.ADMISSION_TYPES.index("EU OBSERVATION"),
                       UNIT_INDEX[v.ED_OBSERVATION_UNIT], UNIT_INDEX[v.ED_UNIT])
    # slot: (valid, eventtype, unit, intime, outtime)
    slots = [
        (has_ed, np.full(na, 0), ed_unit, ed_in, ed_out),
        (~(icu & direct), np.full(na, 1), ward1, care_start, first_ward_end),
        (icu, np.where(direct, 1, 2), icu_unit, icu_in, icu_out),
        (after_icu | split, np.full(na, 2), ward2, np.where(icu, icu_out, split_s), disch_s),
        (np.ones(na, dtype=bool), np.full(na, 3), np.full(na, -1), disch_s, np.full(na, -1)),
    ]
    valid = np.stack([s[0] for s in slots], axis=1)
    adm = np.repeat(np.arange(na), valid.sum(axis=1))
    out = {"adm": adm}
    for name, k in (("eventtype", 1), ("unit", 2), ("intime", 3), ("outtime", 4)):
        out[name] = np.stack([np.asarray(s[k]) for s in slots], axis=1)[valid]
    out["transfer_id"] = ids.transfer.take(len(adm))
    return out


EVENTTYPES = ["ED", "admit", "transfer", "discharge"]


# --- tables ------------------------------------------------------------------------------


def patients_table(c: Cohort) -> dict[str, pa.Array]:
    return {
        "subject_id": num(c.subject_id),
        "gender": cat(c.male.astype(np.int32), ["F", "M"]),
        "anchor_age": num(c.anchor_age),
        "anchor_year": num(c.anchor_year),
        "anchor_year_group": cat(c.year_group, [g for g, _ in v.ANCHOR_YEAR_GROUPS]),
        "dod": dates(c.dod_s, c.dod_s >= 0),
    }


def admissions_table(c: Cohort, ids: Ids) -> dict[str, pa.Array]:
    dl = np.where(c.disch_loc < 0, len(DISCHARGE_LABELS), c.disch_loc)
    return {
        "subject_id": num(c.subject_id[c.pat]), "hadm_id": num(c.hadm_id),
        "admittime": ts(c.admit_s), "dischtime": ts(c.disch_s), "deathtime": ts(c.disch_s, c.died),
        "admission_type": cat(c.adm_type, v.ADMISSION_TYPES),
        "admit_provider_id": cat(c.provider, ids.providers),
        "admission_location": cat(c.adm_loc, v.ADMISSION_LOCATIONS),
        "discharge_location": cat(dl, DISCHARGE_LABELS + [None]),
        "insurance": cat(c.insurance[c.pat], v.INSURANCES),
        "language": cat(c.language[c.pat], [x for x, _ in v.LANGUAGES]),
        "marital_status": cat(c.marital[c.pat], v.MARITAL_STATUSES),
        "race": cat(c.race[c.pat], [x for x, _ in v.RACES]),
        "edregtime": ts(c.ed_in_s, c.ed_in_s >= 0), "edouttime": ts(c.ed_out_s, c.ed_out_s >= 0),
        "hospital_expire_flag": num(c.died.astype(np.int16)),
    }


def transfers_table(c: Cohort) -> dict[str, pa.Array]:
    t = c.transfers
    return {
        "subject_id": num(c.subject_id[c.pat[t["adm"]]]), "hadm_id": num(c.hadm_id[t["adm"]]),
        "transfer_id": num(t["transfer_id"]),
        "eventtype": cat(t["eventtype"], EVENTTYPES),
        "careunit": cat(np.where(t["unit"] < 0, len(CARE_UNITS), t["unit"]), CARE_UNITS + [None]),
        "intime": ts(t["intime"]), "outtime": ts(t["outtime"], t["outtime"] >= 0),
    }


def icustays_table(c: Cohort) -> dict[str, pa.Array]:
    a = c.stay_adm
    return {
        "subject_id": num(c.subject_id[c.pat[a]]), "hadm_id": num(c.hadm_id[a]), "stay_id": num(c.stay_id),
        "first_careunit": cat(c.icu_unit, CARE_UNITS), "last_careunit": cat(c.icu_unit, CARE_UNITS),
        "intime": ts(c.icu_in), "outtime": ts(c.icu_out), "los": num((c.icu_out - c.icu_in) / DAY),
    }


SERVICES = sorted({c.service for c in v.CATEGORIES})


def services_table(rng: Rng, c: Cohort) -> dict[str, pa.Array]:
    svc = np.array([SERVICES.index(x.service) for x in v.CATEGORIES])[c.category]
    second = rng.random(c.n_adm) < 0.08
    other = (svc + rng.integers(1, len(SERVICES), c.n_adm)) % len(SERVICES)
    when = c.admit_s + ((c.disch_s - c.admit_s) * rng.uniform(0.2, 0.8, c.n_adm)).astype(np.int64)
    adm = np.concatenate([np.arange(c.n_adm), np.flatnonzero(second)])
    order = np.argsort(adm, kind="stable")
    adm = adm[order]
    time = np.concatenate([c.admit_s, when[second]])[order]
    prev = np.concatenate([np.full(c.n_adm, len(SERVICES)), svc[second]])[order]
    curr = np.concatenate([svc, other[second]])[order]
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]), "transfertime": ts(time),
        "prev_service": cat(prev, SERVICES + [None]), "curr_service": cat(curr, SERVICES),
    }


def diagnoses_table(rng: Rng, c: Cohort) -> dict[str, pa.Array]:
    """Principal first, then in-hospital problems, chronic conditions and status codes."""
    na = c.n_adm
    parts_adm = [np.arange(na), c.sec_adm]
    parts_dx = [c.principal, c.sec_dx]
    chronic = c.chronic[c.pat] & (rng.random(c.chronic[c.pat].shape) < 0.85)
    col = {k: j for j, k in enumerate(CHRONIC_KEYS)}
    htn_ckd = chronic[:, col["htn"]] & chronic[:, col["ckd"]]
    ca, cj = np.nonzero(chronic)
    cdx = np.array([DX_INDEX[k] for k in CHRONIC_KEYS])[cj]
    cdx = np.where((cj == col["htn"]) & htn_ckd[ca], DX_INDEX["htn_ckd"], cdx)
    parts_adm.append(ca)
    parts_dx.append(cdx)
    f = c.flag
    # (status code, who may have it, the chance they do: one for all or one per admission)
    status: list[tuple[str, np.ndarray, float | np.ndarray]] = [
        ("anticoag_use", f("anticoag"), 0.6), ("insulin_use", f("dm"), 0.35), ("aspirin_use", f("cad"), 0.5),
        ("dialysis", f("esrd"), 0.9), ("dnr", c.died | (c.age > 85), np.where(c.died, 0.5, 0.15))]
    for key, has, p in status:
        rows = np.flatnonzero(has & (rng.random(na) < p))
        parts_adm.append(rows)
        parts_dx.append(np.full(len(rows), DX_INDEX[key]))
    adm = np.concatenate(parts_adm)
    dx = np.concatenate(parts_dx)
    adm, dx = _dedupe_in_order(adm, dx, len(icd.ALL_DX))
    seq = ranks(np.bincount(adm, minlength=na)) + 1
    ten = c.icd10[adm]
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]), "seq_num": num(seq),
        "icd_code": cat(2 * dx + ten, DX_CODES), "icd_version": num(np.where(ten, 10, 9).astype(np.int16)),
    }


def procedures_table(rng: Rng, c: Cohort) -> dict[str, pa.Array]:
    """Procedures that follow the principal diagnosis, plus ICU procedures."""
    na = c.n_adm
    los = c.disch_s - c.admit_s
    adm_parts, proc_parts, time_parts = [], [], []

    def add(rows: np.ndarray, key: str, when: np.ndarray) -> None:
        adm_parts.append(rows)
        proc_parts.append(np.full(len(rows), PROC_INDEX[key]))
        time_parts.append(when)

    for key, procs in v.PRINCIPAL_PROCEDURES.items():
        rows = np.flatnonzero(c.principal == DX_INDEX[key])
        for pkey, p in procs.items():
            hit = rows[rng.random(len(rows)) < p]
            add(hit, pkey, c.admit_s[hit] + (los[hit] * rng.uniform(0.02, 0.5, len(hit))).astype(np.int64))
    sa = c.stay_adm
    vent = c.vent_end > c.icu_in
    start = c.icu_in + rng.integers(0, 2 * HOUR, len(sa))
    start = np.minimum(start, c.icu_out)
    long_vent = (c.vent_end - c.icu_in) >= 96 * HOUR
    ns = len(sa)
    u = rng.random((ns, 6))
    add(sa[vent & long_vent], "vent_long", c.icu_in[vent & long_vent])
    add(sa[vent & ~long_vent], "vent_short", c.icu_in[vent & ~long_vent])
    m = vent & (u[:, 0] < 0.7)
    add(sa[m], "intubation", c.icu_in[m])
    line = u[:, 1] < 0.35 + 0.4 * c.flags[sa, FLAG_INDEX["shock"]]
    add(sa[line], "central_line", start[line])
    m = line & (u[:, 2] < 0.3)
    add(sa[m], "cvc_guidance", start[m])
    m = c.art_line & (u[:, 3] < 0.15)
    add(sa[m], "arterial_line", start[m])
    m = long_vent & (u[:, 4] < 0.6)
    add(sa[m], "enteral_nutrition", start[m])
    m = (c.flags[sa, FLAG_INDEX["aki"]] | c.flags[sa, FLAG_INDEX["esrd"]]) & (u[:, 5] < 0.2)
    add(sa[m], "hemodialysis", start[m])
    ward = rng.random((na, 3))
    when = c.admit_s + (los * rng.uniform(0.05, 0.9, na)).astype(np.int64)
    for key, flag, p, col in (("transfusion_rbc", "bleeding", 0.4, 0), ("paracentesis", "liver", 0.25, 1),
                              ("thoracentesis", "resp", 0.04, 2)):
        rows = np.flatnonzero(c.flags[:, FLAG_INDEX[flag]] & (ward[:, col] < p))
        add(rows, key, when[rows])
    adm = np.concatenate(adm_parts)
    proc = np.concatenate(proc_parts)
    when = np.minimum(np.concatenate(time_parts), c.disch_s[adm])
    order = np.lexsort((when, adm))
    adm, proc, when = adm[order], proc[order], when[order]
    key = adm * len(icd.PROCEDURES) + proc
    _, first = np.unique(key, return_index=True)
    first.sort()
    adm, proc, when = adm[first], proc[first], when[first]
    seq = ranks(np.bincount(adm, minlength=na)) + 1
    ten = c.icd10[adm]
    return {
        "subject_id": num(c.subject_id[c.pat[adm]]), "hadm_id": num(c.hadm_id[adm]), "seq_num": num(seq),
        "chartdate": dates(when), "icd_code": cat(2 * proc + ten, PROC_CODES),
        "icd_version": num(np.where(ten, 10, 9).astype(np.int16)),
    }


def _dedupe_in_order(adm: np.ndarray, item: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Drop repeated (admission, item) pairs, keeping the first; rows end up grouped by admission."""
    order = np.argsort(adm, kind="stable")
    adm, item = adm[order], item[order]
    _, first = np.unique(adm * n_items + item, return_index=True)
    first.sort()
    return adm[first], item[first]
