"""Built-in synthetic EHR data: a MIMIC-IV 2.2 shaped DuckDB database, generated offline.

``generate(out, patients=..., seed=...)`` writes the hosp and icu tables of MIMIC-IV
(same table names, column names, order and types, flat in the main schema) filled with
made-up but clinically coherent patients. Tables: patients, admissions, transfers,
services, icustays, diagnoses_icd, procedures_icd, drgcodes, labevents, microbiologyevents,
prescriptions, pharmacy, emar, omr, chartevents, inputevents, outputevents,
procedureevents, and the dictionaries d_labitems, d_items, d_icd_diagnoses,
d_icd_procedures (vocabularies written for ehr_magic, with MIMIC-IV's item ids and
labels for well-known items and real ICD-9/ICD-10 codes and titles).

* patients are adults (anchor_age 18-91); ids, names of units, services, admission
  types and the like follow MIMIC-IV;
* each patient has 1-8 non-overlapping admissions after their birth and before their
  death; everything ends at least a week before ``now``;
* admissions have a clinical category (medicine, cardiology, surgery, ...) that sets the
  care units, length of stay, principal diagnosis and procedures; diagnoses set clinical
  flags that shift lab values and vital signs (an AKI raises creatinine, sepsis raises
  lactate and heart rate), and make the matching drugs and ICU inputs likelier;
* transfers and ICU stays lie inside their admission (ED rows start before admittime,
  as in MIMIC-IV, where the ED visit precedes the admission); lab, chart, input, output,
  prescription, administration and culture times lie inside their admission or stay.
  Result/storage times (``storetime``, ``storedate``) may fall after discharge, as in
  real data, but never after ``now``.
* outpatient measurements (omr) fall in the patient's life around their hospital
  years, outside admissions as well as inside.

Generation runs in chunks of patients with vectorised numpy; each chunk is appended to
DuckDB through Arrow, so memory stays bounded whatever the patient count. The same seed
gives the same database; ids, values and times all depend on it.
"""

from __future__ import annotations

import datetime as dt
import math
import queue
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from ehr_magic.db.build import building, write_metadata
from ehr_magic.sources.synthetic import icd
from ehr_magic.sources.synthetic import items
from ehr_magic.sources.synthetic.chart import chartevents_table
from ehr_magic.sources.synthetic.hosp import (
    Ids, admissions_table, diagnoses_table, icustays_table, make_cohort, patients_table, procedures_table,
    services_table, transfers_table,
)
from ehr_magic.sources.synthetic.icu import inputevents_table, outputevents_table, procedureevents_table
from ehr_magic.sources.synthetic.labs import labevents_table
from ehr_magic.sources.synthetic.orders import emar_table, microbiology_table, pharmacy_table, prescriptions
from ehr_magic.sources.synthetic.records import drgcodes_table, omr_table
from ehr_magic.sources.synthetic.schema import TABLES, create_statements
from ehr_magic.sources.synthetic.util import IdSpace, Sequential
from ehr_magic.errors import DataSourceError

__all__ = ["generate", "DEFAULT_NOW", "MAX_PATIENTS", "TABLES"]

DEFAULT_NOW = dt.datetime(2180, 1, 1)
MAX_PATIENTS = 500_000
CHUNK_PATIENTS = 2_000  # part of the output's definition: changing it changes the data of a seed
MEMORY_LIMIT = "512MB"  # DuckDB's buffer pool; the chunks in flight and a transaction's tail come on top
CHUNKS_PER_COMMIT = 4  # one transaction per few chunks: full row groups skip the write-ahead log
EARLIEST_NOW = dt.datetime(1900, 1, 1)
LATEST_NOW = dt.datetime(2999, 12, 31)

ProgressCallback = Callable[[str, int, int], None]

_VALUE_SQL = ("COALESCE(value_text, CASE value_dec WHEN 0 THEN printf('%.0f', valuenum) "
              "WHEN 1 THEN printf('%.1f', valuenum) WHEN 2 THEN printf('%.2f', valuenum) "
              "ELSE printf('%.3f', valuenum) END)")
# Columns computed in SQL from helper columns of the Arrow chunk.
_EXPRESSIONS: dict[str, dict[str, str]] = {
    "labevents": {"value": _VALUE_SQL},
    "chartevents": {"value": _VALUE_SQL},
    "prescriptions": {"poe_id": "CAST(subject_id AS VARCHAR) || '-' || CAST(poe_seq AS VARCHAR)"},
    "emar": {"emar_id": "CAST(subject_id AS VARCHAR) || '-' || CAST(emar_seq AS VARCHAR)",
             "poe_id": "CAST(subject_id AS VARCHAR) || '-' || CAST(poe_seq AS VARCHAR)"},
    "pharmacy": {"poe_id": "CAST(subject_id AS VARCHAR) || '-' || CAST(poe_seq AS VARCHAR)"},
}
_HELPERS: dict[str, set[str]] = {"labevents": {"value_text", "value_dec"}, "chartevents": {"value_text", "value_dec"},
                                 "emar": {"poe_seq"}, "pharmacy": {"poe_seq"}}


def generate(
    out: str | Path,
    *,
    patients: int = 100,
    seed: int = 0,
    now: dt.datetime = DEFAULT_NOW,
    progress: ProgressCallback | None = None,
) -> dict[str, int]:
    """Write a synthetic MIMIC-IV shaped DuckDB file at ``out``; return rows per table.

    ``now`` is the dataset's current time: every event ends before it. ``progress`` is
    called as ``progress(phase, done, total)``: once for the dictionaries, then after
    each chunk of patients. A failure (including one raised by ``progress``) leaves no
    output file behind.
    """
    _check(patients, seed, now)
    now_s = int((now - dt.datetime(1970, 1, 1)).total_seconds())
    with building(out) as con:
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.execute("SET enable_progress_bar = false")  # front ends draw their own, from ``progress``
        for statement in create_statements():
            con.execute(statement)
        _write_dictionaries(con)
        if progress:
            progress("dictionaries", 1, 1)
            progress("patients", 0, patients)
        done = 0
        for chunk, (n, tables) in enumerate(_chunks_ahead(seed, patients, now_s)):
            if chunk % CHUNKS_PER_COMMIT == 0:
                con.execute("BEGIN TRANSACTION")
            for table, cols in tables:
                _append(con, table, cols)
            done += n
            if chunk % CHUNKS_PER_COMMIT == CHUNKS_PER_COMMIT - 1 or done == patients:
                con.execute("COMMIT")
            if progress:
                progress("patients", done, patients)
        write_metadata(con, schema="mimic_iv", source="synthetic", now=now, dataset="synthetic",
                       seed=str(seed), patients=str(patients))
        counts = {t: int(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}  # type: ignore[index]
    return counts


def _check(patients: int, seed: int, now: dt.datetime) -> None:
    if isinstance(patients, bool) or not isinstance(patients, int) or not 1 <= patients <= MAX_PATIENTS:
        raise DataSourceError(f"patients must be a whole number from 1 to {MAX_PATIENTS:,}; got {patients!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise DataSourceError(f"seed must be a whole number >= 0; got {seed!r}.")
    if not isinstance(now, dt.datetime) or now.tzinfo is not None:
        raise DataSourceError(f"now must be a datetime without time zone, e.g. datetime(2180, 1, 1); got {now!r}.")
    if not EARLIEST_NOW <= now <= LATEST_NOW:
        raise DataSourceError(f"now must lie between {EARLIEST_NOW:%Y} and {LATEST_NOW:%Y}; got {now:%Y-%m-%d}.")


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def _id_spaces(seed: int) -> Ids:
    rng = _rng(seed, 0xFFFFFFFF)
    codes = rng.integers(0, 36**5, 4000)
    _, first = np.unique(codes, return_index=True)
    codes = codes[np.sort(first)][:1500]
    alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    providers = ["P" + "".join(alphabet[(int(x) // 36**k) % 36] for k in range(4, -1, -1)) for x in codes]
    caregivers = rng.permutation(90_000)[:3000] + 10_000
    off = rng.integers(0, 2**40, 8)
    return Ids(
        subject=IdSpace(10_000_000, 10_000_000, 7_368_787, int(off[0])),
        hadm=IdSpace(20_000_000, 10_000_000, 3_458_149, int(off[1])),
        stay=IdSpace(30_000_000, 10_000_000, 6_127_243, int(off[2])),
        transfer=IdSpace(30_000_000, 10_000_000, 2_735_413, int(off[3])),
        providers=providers,
        caregivers=caregivers,
        extra={
            "specimen": IdSpace(10_000_000, 90_000_000, 48_271_231, int(off[4])),
            "pharmacy": IdSpace(10_000_000, 90_000_000, 31_415_927, int(off[5])),
            "order": IdSpace(1_000_000, 90_000_000, 27_182_819, int(off[6])),
            "micro_specimen": IdSpace(1_000_000, 9_000_000, 4_999_999, int(off[7])),
            "labevent": Sequential(1),
            "microevent": Sequential(1),
        },
    )


Chunk = tuple[int, list[tuple[str, dict[str, pa.Array]]]]
_END = object()


def _chunks_ahead(seed: int, patients: int, now_s: int) -> Iterator[Chunk]:
    """(patients, tables) of each chunk in order, generated one chunk ahead in a worker
    thread so that numpy generation overlaps DuckDB's inserts. At most two chunks are
    held in memory; stopping early (an error, an interrupt) stops the worker too."""
    handoff: queue.Queue[object] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            ids = _id_spaces(seed)  # ids are handed out in chunk order, by this thread only
            for chunk in range(math.ceil(patients / CHUNK_PATIENTS)):
                n = min(CHUNK_PATIENTS, patients - chunk * CHUNK_PATIENTS)
                if not put((n, _chunk_tables(seed, chunk, n, now_s, ids))):
                    return
            put(_END)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer thread, which re-raises it
            put(error)

    worker = threading.Thread(target=work, name="ehr-magic-synthetic", daemon=True)
    worker.start()
    try:
        while True:
            item = handoff.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        stop.set()
        worker.join()


def _chunk_tables(seed: int, chunk: int, n: int, now_s: int, ids: Ids) -> list[tuple[str, dict[str, pa.Array]]]:
    """Every table's rows for one chunk of ``n`` patients, in dependency order."""
    r = [_rng(seed, chunk, k) for k in range(14)]
    c = make_cohort(r[0], n, now_s, ids)
    rx_cols, rx = prescriptions(r[6], c, ids)
    return [
        ("patients", patients_table(c)),
        ("admissions", admissions_table(c, ids)),
        ("transfers", transfers_table(c)),
        ("services", services_table(r[1], c)),
        ("icustays", icustays_table(c)),
        ("diagnoses_icd", diagnoses_table(r[2], c)),
        ("procedures_icd", procedures_table(r[3], c)),
        ("labevents", labevents_table(r[4], c, ids)),
        ("chartevents", chartevents_table(r[5], c, ids)),
        ("inputevents", inputevents_table(r[7], c, ids)),
        ("outputevents", outputevents_table(r[8], c, ids)),
        ("prescriptions", rx_cols),
        ("emar", emar_table(r[9], c, ids, rx)),
        ("microbiologyevents", microbiology_table(r[1], c, ids)),
        ("procedureevents", procedureevents_table(r[10], c, ids)),
        ("pharmacy", pharmacy_table(r[11], c, rx)),
        ("drgcodes", drgcodes_table(r[12], c)),
        ("omr", omr_table(r[13], c)),
    ]


def _append(con: duckdb.DuckDBPyConnection, table: str, cols: dict[str, pa.Array]) -> None:
    """INSERT one chunk, casting every column to the table's type and filling absent ones with NULL."""
    schema = TABLES[table]
    known = {name for name, _ in schema} | _HELPERS.get(table, set())
    unknown = set(cols) - known
    if unknown:
        raise ValueError(f"{table}: generated columns not in the schema: {sorted(unknown)}")
    exprs = _EXPRESSIONS.get(table, {})
    select = []
    for name, typ in schema:
        expr = exprs.get(name) or (name if name in cols else "NULL")
        select.append(f"CAST({expr} AS {typ}) AS {name}")
    con.register("_synthetic_chunk", pa.table(cols))
    try:
        con.execute(f"INSERT INTO {table} SELECT {', '.join(select)} FROM _synthetic_chunk")
    finally:
        con.unregister("_synthetic_chunk")


def _write_dictionaries(con: duckdb.DuckDBPyConnection) -> None:
    for table, rows in (("d_labitems", items.d_labitems_rows()), ("d_items", items.d_items_rows()),
                        ("d_icd_diagnoses", icd.dictionary_rows(icd.ALL_DX)),
                        ("d_icd_procedures", icd.dictionary_rows(icd.PROCEDURES))):
        names = [name for name, _ in TABLES[table]]
        _append(con, table, {name: pa.array([row[i] for row in rows]) for i, name in enumerate(names)})
