"""MIMIC-III v1.4 from its official files: ``ADMISSIONS.csv.gz``, ``CHARTEVENTS.csv.gz``, ...

Works for the open demo and the full credentialed release, as CSV, gzipped CSV or
parquet. The files have upper-case names; the tables are lower-case, as in mimic-code
(``ADMISSIONS.csv.gz`` -> ``admissions``). Several folders can be given: a table
missing from the first is looked for in the next. A table found nowhere is skipped with
a warning and recorded in the database's metadata.

Dates are shifted per patient into 2100-2200 (patients older than 89 have their date
of birth moved about 300 years back); the dataset clock is the latest timestamp in the
data unless ``now`` is given.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from ehr_magic.sources.loading import LoadReport, Progress, check_dirs, find_tables, load_tables
from ehr_magic.errors import DataSourceError

log = logging.getLogger(__name__)

SCHEMA = "mimic_iii"

# The 26 tables of MIMIC-III v1.4 (mimic-code's names).
TABLES: tuple[str, ...] = (
    "admissions", "callout", "caregivers", "chartevents", "cptevents", "d_cpt", "d_icd_diagnoses",
    "d_icd_procedures", "d_items", "d_labitems", "datetimeevents", "diagnoses_icd", "drgcodes", "icustays",
    "inputevents_cv", "inputevents_mv", "labevents", "microbiologyevents", "noteevents", "outputevents",
    "patients", "prescriptions", "procedureevents_mv", "procedures_icd", "services", "transfers",
)
CORE = ("patients", "admissions")

_BIGINT = (
    "row_id subject_id hadm_id icustay_id itemid cgid orderid linkorderid seq_num first_wardid last_wardid "
    "prev_wardid curr_wardid submit_wardid callout_wardid discharge_wardid spec_itemid org_itemid ab_itemid "
    "isolate_num hospital_expire_flag has_chartevents_data expire_flag drg_severity drg_mortality warning error "
    "iserror cpt_number ticket_id_seq category mincodeinsubsection maxcodeinsubsection isopenbag "
    "continueinnextdept request_tele request_resp request_cdiff request_mrsa request_vre"
).split()
# Codes keep their leading zeros and letters (ICD-9 '0389', 'V4581'; NDC '00003029328').
_VARCHAR = (
    "icd9_code cpt_cd cpt_suffix drg_code ndc gsn formulary_drug_cd loinc_code dose_val_rx form_val_disp "
    "value sectionrange subsectionrange codesuffix dilution_text resultstatus stopped language conceptid"
).split()
_DOUBLE = (
    "valuenum amount rate originalamount originalrate patientweight totalamount los dilution_value"
).split()
_TIMESTAMP = (
    "admittime dischtime deathtime edregtime edouttime charttime storetime starttime endtime intime outtime "
    "transfertime createtime updatetime acknowledgetime outcometime firstreservationtime "
    "currentreservationtime comments_date dob dod dod_hosp dod_ssn chartdate startdate enddate"
).split()
TYPE_OVERRIDES: dict[str, str] = {
    **{c: "BIGINT" for c in _BIGINT},
    **{c: "VARCHAR" for c in _VARCHAR},
    **{c: "DOUBLE" for c in _DOUBLE},
    **{c: "TIMESTAMP" for c in _TIMESTAMP},
    # `value` means different things per table: text results, volumes, dates.
    "outputevents.value": "DOUBLE",
    "procedureevents_mv.value": "DOUBLE",
    "datetimeevents.value": "TIMESTAMP",
    # d_cpt.category is a number, caregivers/d_items/d_labitems/noteevents.category are text.
    "d_items.category": "VARCHAR",
    "d_labitems.category": "VARCHAR",
    "noteevents.category": "VARCHAR",
    "outputevents.newbottle": "VARCHAR",
}


def find_files(dirs: Iterable[os.PathLike[str] | str]) -> tuple[dict[str, Path], list[str]]:
    """``table -> file`` for every MIMIC-III table found, and the tables not found."""
    roots = check_dirs(dirs)
    return find_tables((table, roots, [table.upper(), table]) for table in TABLES)


def load(
    dirs: Iterable[os.PathLike[str] | str],
    out: os.PathLike[str] | str,
    *,
    now: dt.datetime | str | None = None,
    progress: Progress | None = None,
    dataset: str = "mimic-iii",
) -> LoadReport:
    """Build a DuckDB database at ``out`` from MIMIC-III folders (see module docstring)."""
    dirs = list(dirs)
    files, missing = find_files(dirs)
    absent = [t for t in CORE if t not in files]
    if absent:
        where = ", ".join(str(d) for d in dirs)
        raise DataSourceError(
            f"{where} is not a MIMIC-III folder: it has no {' or '.join(t.upper() for t in absent)} file "
            "(.csv, .csv.gz or .parquet); pass the folder that holds PATIENTS.csv.gz and ADMISSIONS.csv.gz."
        )
    for table in missing:
        log.warning("MIMIC-III table %s not found; skipped.", table)
    return load_tables(files, out, schema=SCHEMA, source="mimic-iii-csv", dataset=dataset,
                       type_overrides=TYPE_OVERRIDES, now=now, missing=missing, progress=progress)
