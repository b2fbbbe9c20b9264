"""Tiny hand-made EHR databases for verifying skills.

``icu_patient(...)`` describes one made-up patient with times in hours from ICU
admission (``T0``); ``build(path, data)`` writes a MIMIC-IV-shaped (or EHRSQL-shaped)
DuckDB file with just those rows and returns it connected. The reference vectors of
the skill cards use these helpers, and so do the tests.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.skills.items import CONCEPTS

if TYPE_CHECKING:
    from ehr_magic.db import EHR

T0 = dt.datetime(2180, 1, 2, 0, 0)  # ICU admission of the default patient
NOW = "2181-01-01 00:00:00"


def at(hours: float) -> dt.datetime:
    """The time ``hours`` after T0."""
    return T0 + dt.timedelta(hours=hours)


MIMIC_IV_TABLES: dict[str, dict[str, str]] = {
    "patients": {"subject_id": "BIGINT", "gender": "VARCHAR", "anchor_age": "BIGINT", "anchor_year": "BIGINT",
                 "anchor_year_group": "VARCHAR", "dod": "DATE"},
    "admissions": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "admittime": "TIMESTAMP",
                   "dischtime": "TIMESTAMP", "deathtime": "TIMESTAMP", "admission_type": "VARCHAR",
                   "race": "VARCHAR", "hospital_expire_flag": "BIGINT"},
    "icustays": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "first_careunit": "VARCHAR",
                 "last_careunit": "VARCHAR", "intime": "TIMESTAMP", "outtime": "TIMESTAMP", "los": "DOUBLE"},
    "chartevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "charttime": "TIMESTAMP",
                    "storetime": "TIMESTAMP", "itemid": "BIGINT", "value": "VARCHAR", "valuenum": "DOUBLE",
                    "valueuom": "VARCHAR"},
    "labevents": {"labevent_id": "BIGINT", "subject_id": "BIGINT", "hadm_id": "BIGINT", "specimen_id": "BIGINT",
                  "itemid": "BIGINT", "charttime": "TIMESTAMP", "storetime": "TIMESTAMP", "value": "VARCHAR",
                  "valuenum": "DOUBLE", "valueuom": "VARCHAR", "ref_range_lower": "DOUBLE",
                  "ref_range_upper": "DOUBLE", "flag": "VARCHAR"},
    "inputevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "starttime": "TIMESTAMP",
                    "endtime": "TIMESTAMP", "itemid": "BIGINT", "amount": "DOUBLE", "amountuom": "VARCHAR",
                    "rate": "DOUBLE", "rateuom": "VARCHAR", "patientweight": "DOUBLE",
                    "statusdescription": "VARCHAR"},
    "outputevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "charttime": "TIMESTAMP",
                     "itemid": "BIGINT", "value": "VARCHAR", "valueuom": "VARCHAR"},
    "procedureevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT",
                        "starttime": "TIMESTAMP", "endtime": "TIMESTAMP", "itemid": "BIGINT", "value": "VARCHAR"},
    "prescriptions": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "starttime": "TIMESTAMP",
                      "stoptime": "TIMESTAMP", "drug": "VARCHAR", "route": "VARCHAR", "drug_type": "VARCHAR"},
    "microbiologyevents": {"microevent_id": "BIGINT", "subject_id": "BIGINT", "hadm_id": "BIGINT",
                           "micro_specimen_id": "BIGINT", "chartdate": "DATE", "charttime": "TIMESTAMP",
                           "spec_type_desc": "VARCHAR", "test_name": "VARCHAR", "org_name": "VARCHAR"},
    "diagnoses_icd": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "seq_num": "BIGINT", "icd_code": "VARCHAR",
                      "icd_version": "BIGINT"},
    "omr": {"subject_id": "BIGINT", "chartdate": "DATE", "seq_num": "BIGINT", "result_name": "VARCHAR",
            "result_value": "VARCHAR"},
    "d_items": {"itemid": "BIGINT", "label": "VARCHAR", "abbreviation": "VARCHAR", "linksto": "VARCHAR",
                "category": "VARCHAR", "unitname": "VARCHAR"},
    "d_labitems": {"itemid": "BIGINT", "label": "VARCHAR", "fluid": "VARCHAR", "category": "VARCHAR"},
}

EHRSQL_TABLES: dict[str, dict[str, str]] = {
    "patients": {"subject_id": "BIGINT", "gender": "VARCHAR", "dob": "TIMESTAMP", "dod": "TIMESTAMP"},
    "admissions": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "admittime": "TIMESTAMP",
                   "dischtime": "TIMESTAMP", "admission_type": "VARCHAR", "age": "BIGINT"},
    "icustays": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "first_careunit": "VARCHAR",
                 "last_careunit": "VARCHAR", "intime": "TIMESTAMP", "outtime": "TIMESTAMP"},
    "chartevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "itemid": "BIGINT",
                    "charttime": "TIMESTAMP", "valuenum": "DOUBLE", "valueuom": "VARCHAR"},
    "labevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "itemid": "BIGINT", "charttime": "TIMESTAMP",
                  "valuenum": "DOUBLE", "valueuom": "VARCHAR"},
    "inputevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "starttime": "TIMESTAMP",
                    "itemid": "BIGINT", "totalamount": "DOUBLE", "totalamountuom": "VARCHAR"},
    "outputevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "stay_id": "BIGINT", "charttime": "TIMESTAMP",
                     "itemid": "BIGINT", "value": "DOUBLE", "valueuom": "VARCHAR"},
    "prescriptions": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "starttime": "TIMESTAMP",
                      "stoptime": "TIMESTAMP", "drug": "VARCHAR", "dose_val_rx": "VARCHAR",
                      "dose_unit_rx": "VARCHAR", "route": "VARCHAR"},
    "microbiologyevents": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "charttime": "TIMESTAMP",
                           "spec_type_desc": "VARCHAR", "test_name": "VARCHAR", "org_name": "VARCHAR"},
    "diagnoses_icd": {"subject_id": "BIGINT", "hadm_id": "BIGINT", "icd_code": "VARCHAR",
                      "charttime": "TIMESTAMP"},
    "d_items": {"itemid": "BIGINT", "label": "VARCHAR", "abbreviation": "VARCHAR", "linksto": "VARCHAR"},
    "d_labitems": {"itemid": "BIGINT", "label": "VARCHAR"},
}


def icu_patient(
    *,
    subject_id: int = 1, hadm_id: int = 10, stay_id: int = 100, age: int = 70, gender: str = "F",
    los_hours: float = 72, admit_hours_before: float = 12,
    chart: Iterable[tuple] = (), labs: Iterable[tuple] = (), inputs: Iterable[tuple] = (),
    outputs: Iterable[tuple] = (), procedures: Iterable[tuple] = (), prescriptions: Iterable[tuple] = (),
    micro: Iterable[tuple] = (), diagnoses: Iterable[tuple] = (), omr: Iterable[tuple] = (),
) -> dict[str, list[dict[str, Any]]]:
    """One patient with one admission and one ICU stay from T0 (times in hours from T0).

    chart: (itemid, hour, valuenum); labs: (itemid, hour, value[, specimen_id]) where a text
    value (e.g. 'ART.' for item 52033) goes to ``value``; inputs: (itemid, start, end, rate,
    rateuom[, patientweight]); outputs: (itemid, hour, mL); procedures: (itemid, start, end);
    prescriptions: (drug, start[, route]); micro: (hour, spec_type_desc); diagnoses:
    (icd_code, icd_version); omr: (days from T0, result_name, result_value).
    """
    ids = {"subject_id": subject_id, "hadm_id": hadm_id}
    stay = {**ids, "stay_id": stay_id}
    admit, outtime = at(-admit_hours_before), at(los_hours)
    data: dict[str, list[dict[str, Any]]] = {
        "patients": [{"subject_id": subject_id, "gender": gender, "anchor_age": age, "anchor_year": T0.year}],
        "admissions": [{**ids, "admittime": admit, "dischtime": outtime + dt.timedelta(days=1),
                        "admission_type": "EW EMER."}],
        "icustays": [{**stay, "first_careunit": "MICU", "last_careunit": "MICU", "intime": T0,
                      "outtime": outtime, "los": los_hours / 24}],
        "chartevents": [{**stay, "itemid": i, "charttime": at(h), "valuenum": v, "value": str(v)}
                        for i, h, v in chart],
        "labevents": [],
        "inputevents": [],
        "outputevents": [{**stay, "itemid": i, "charttime": at(h), "value": str(v), "valueuom": "ml"}
                         for i, h, v in outputs],
        "procedureevents": [{**stay, "itemid": i, "starttime": at(s), "endtime": at(e)} for i, s, e in procedures],
        "prescriptions": [{**ids, "drug": p[0], "starttime": at(p[1]), "stoptime": at(p[1] + 24),
                           "route": p[2] if len(p) > 2 else "IV"} for p in prescriptions],
        "microbiologyevents": [{**ids, "micro_specimen_id": n, "charttime": at(h), "chartdate": at(h).date(),
                                "spec_type_desc": spec} for n, (h, spec) in enumerate(micro)],
        "diagnoses_icd": [{**ids, "seq_num": n + 1, "icd_code": code, "icd_version": version}
                          for n, (code, version) in enumerate(diagnoses)],
        "omr": [{"subject_id": subject_id, "chartdate": (T0 + dt.timedelta(days=d)).date(), "seq_num": 1,
                 "result_name": name, "result_value": str(value)} for d, name, value in omr],
    }
    for n, lab in enumerate(labs):
        itemid, hour, value = lab[:3]
        text = isinstance(value, str)
        data["labevents"].append({**ids, "labevent_id": n, "specimen_id": lab[3] if len(lab) > 3 else 1000 + n,
                                  "itemid": itemid, "charttime": at(hour), "value": str(value),
                                  "valuenum": None if text else value})
    for entry in inputs:
        itemid, start, end, rate, unit = entry[:5]
        data["inputevents"].append({**stay, "itemid": itemid, "starttime": at(start), "endtime": at(end),
                                    "rate": rate, "rateuom": unit,
                                    "patientweight": entry[5] if len(entry) > 5 else 80.0})
    return data


def merge(*patients: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for p in patients:
        for table, rows in p.items():
            out.setdefault(table, []).extend(rows)
    return out


def dictionary_rows() -> dict[str, list[dict[str, Any]]]:
    """d_items / d_labitems rows for every concept the skills know."""
    items, labitems = [], []
    for c in CONCEPTS.values():
        for itemid in c.itemids:
            if c.table == "chartevents":
                items.append({"itemid": itemid, "label": f"{c.label} ({itemid})", "linksto": "chartevents"})
            else:
                labitems.append({"itemid": itemid, "label": c.label, "fluid": "Blood"})
    return {"d_items": items, "d_labitems": labitems}


def build(path: str | os.PathLike[str], data: dict[str, list[dict[str, Any]]], *, schema: str = "mimic_iv",
          tables: Iterable[str] | None = None) -> EHR:
    """Write ``data`` as a database file of ``schema`` and connect to it.

    Every table of the schema is created (empty when ``data`` has no rows for it) unless
    ``tables`` names the only ones to create.
    """
    from ehr_magic.db import connect
    from ehr_magic.db.build import building, write_metadata

    layout = MIMIC_IV_TABLES if schema == "mimic_iv" else EHRSQL_TABLES
    data = merge(dictionary_rows(), data)
    if schema != "mimic_iv":
        data = _to_ehrsql(data)
    wanted = list(layout) if tables is None else list(tables)
    with building(path) as con:
        for table in wanted:
            columns = layout[table]
            con.execute(f'CREATE TABLE {quote(table)} ({", ".join(f"{quote(c)} {t}" for c, t in columns.items())})')
            rows = data.get(table, [])
            names = list(columns)
            for start in range(0, len(rows), 500):  # one statement per 500 rows (executemany is slow)
                chunk = rows[start:start + 500]
                marks = ", ".join("(" + ", ".join("?" * len(names)) + ")" for _ in chunk)
                con.execute(f"INSERT INTO {quote(table)} VALUES {marks}", [row.get(n) for row in chunk for n in names])
        write_metadata(con, schema=schema, source="test", now=NOW, dataset="test")
    return connect(path)


def _to_ehrsql(data: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """MIMIC-IV-shaped rows -> the EHRSQL layout (lower-case text, prefixed ICD codes, ages)."""
    out = {k: [dict(r) for r in v] for k, v in data.items()}
    ages = {p["subject_id"]: p.get("anchor_age") for p in out.get("patients", [])}
    for p in out.get("patients", []):
        p["gender"] = str(p["gender"]).lower()
        p["dob"] = dt.datetime(T0.year - int(p.get("anchor_age") or 0), 1, 1)
    discharge = {}
    for a in out.get("admissions", []):
        a["age"] = ages.get(a["subject_id"])
        discharge[a["hadm_id"]] = a["dischtime"]
    for d in out.get("diagnoses_icd", []):
        d["icd_code"] = f"icd{d.pop('icd_version')}|{str(d['icd_code']).lower()}"
        d["charttime"] = discharge.get(d["hadm_id"])
    for r in out.get("prescriptions", []):
        r["drug"], r["route"] = str(r["drug"]).lower(), str(r.get("route") or "").lower()
    for r in out.get("outputevents", []):
        r["value"] = float(r["value"])
    for r in out.get("microbiologyevents", []):
        r["spec_type_desc"] = str(r["spec_type_desc"]).lower()
    return out


# -- checking reference vectors -------------------------------------------------------------

SELECTORS = ("subject_id", "hadm_id", "stay_id", "hr", "charttime")
TOLERANCE = 0.005  # hand-computed values are given to 2 decimals


def same(actual: Any, expected: Any) -> bool:
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, bool) or isinstance(actual, bool):
        return bool(actual) == bool(expected)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return abs(actual - expected) <= TOLERANCE + 1e-9 * abs(expected)
    if isinstance(actual, dt.datetime) and isinstance(expected, str):
        return actual == dt.datetime.fromisoformat(expected)
    return actual == expected


def check(result: Any, expected: dict[str, Any] | list[dict[str, Any]]) -> list[str]:
    """Differences between a skill's result and a vector's expected values (empty when it matches)."""
    import polars as pl

    if not isinstance(result, pl.DataFrame):
        if isinstance(result, dict):
            rows = [result]
        else:
            rows = [{"value": result}]
    else:
        rows = result.to_dicts()
    wanted = expected if isinstance(expected, list) else [expected]
    problems: list[str] = []
    positional = not any(k in SELECTORS for w in wanted for k in w)
    if positional and len(rows) != len(wanted):
        return [f"expected {len(wanted)} row(s), got {len(rows)}: {rows[:5]}"]
    for i, want in enumerate(wanted):
        if positional:
            row = rows[i]
        else:
            keys = {k: v for k, v in want.items() if k in SELECTORS}
            found = [r for r in rows if all(same(r.get(k), v) for k, v in keys.items())]
            if len(found) != 1:
                problems.append(f"{len(found)} rows match {keys}")
                continue
            row = found[0]
        for key, value in want.items():
            if key not in row:
                problems.append(f"no column {key!r} in {sorted(row)}")
            elif not same(row[key], value):
                problems.append(f"{key}: expected {value!r}, got {row[key]!r}")
    return problems


ID_COLUMNS = ("subject_id", "hadm_id", "stay_id", "specimen_id", "labevent_id", "micro_specimen_id")
ID_STEP = 100_000


def shift_ids(data: dict[str, list[dict[str, Any]]], n: int) -> dict[str, list[dict[str, Any]]]:
    """A copy of ``data`` with every id moved by ``n`` x 100,000 (to put many patients in one file)."""
    return {table: [{k: (v + n * ID_STEP if k in ID_COLUMNS and v is not None else v) for k, v in row.items()}
                    for row in rows] for table, rows in data.items()}


def subjects(data: dict[str, list[dict[str, Any]]]) -> list[int]:
    return sorted({p["subject_id"] for p in data.get("patients", [])})


class VectorSuite:
    """Many EHR-skill vectors in one database: each vector's patients get their own ids, and
    each vector runs on its own patients (``subject_ids=``)."""

    def __init__(self, cases: list[tuple[str, Any]], path: str | os.PathLike[str], *, schema: str = "mimic_iv",
                 transform: Any = None) -> None:
        parts, self.subjects = [], {}
        for n, (key, data) in enumerate(cases, start=1):
            shifted = shift_ids(data, n)
            if transform is not None:
                shifted = transform(key, shifted)
            parts.append(shifted)
            self.subjects[key] = subjects(shifted)
        self.ehr = build(path, merge(*parts), schema=schema)

    def run(self, key: str, fn: Any, call: dict[str, Any]) -> Any:
        return fn(self.ehr, **{"subject_ids": self.subjects[key], **call})

    def close(self) -> None:
        self.ehr.close()


def run_vector(fn: Any, vector: Any, folder: str | os.PathLike[str], *, schema: str = "mimic_iv") -> list[str]:
    """Run one reference vector of ``fn`` (building its tiny database in ``folder``)."""
    if vector.data is None:
        return check(fn(**vector.call), vector.expected)
    path = os.path.join(os.fspath(folder), f"vector-{abs(hash(vector.description))}.duckdb")
    ehr = build(path, vector.data, schema=schema)
    try:
        return check(fn(ehr, **vector.call), vector.expected)
    finally:
        ehr.close()
