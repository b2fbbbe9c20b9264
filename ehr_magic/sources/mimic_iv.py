"""MIMIC-IV from its official file layout: ``hosp/*.csv.gz`` and ``icu/*.csv.gz``.

Works for the open demo and the full credentialed release, with plain CSV or parquet
files too. Several folders can be given: a table missing from the first is looked for
in the next (e.g. a separately obtained chartevents). A table found nowhere is skipped
with a warning and recorded in the database's metadata.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from ehr_magic.sources.loading import LoadReport, Progress, check_dirs, find_tables, load_tables

log = logging.getLogger(__name__)

SCHEMA = "mimic_iv"

MODULES: dict[str, tuple[str, ...]] = {
    "hosp": (
        "admissions", "d_hcpcs", "d_icd_diagnoses", "d_icd_procedures", "d_labitems", "diagnoses_icd",
        "drgcodes", "emar", "emar_detail", "hcpcsevents", "labevents", "microbiologyevents", "omr",
        "patients", "pharmacy", "poe", "poe_detail", "prescriptions", "procedures_icd", "provider",
        "services", "transfers",
    ),
    "icu": (
        "caregiver", "chartevents", "d_items", "datetimeevents", "icustays", "ingredientevents",
        "inputevents", "outputevents", "procedureevents",
    ),
}

_BIGINT = (
    "subject_id hadm_id stay_id itemid caregiver_id labevent_id specimen_id microevent_id micro_specimen_id "
    "pharmacy_id orderid linkorderid transfer_id spec_itemid test_itemid org_itemid ab_itemid emar_seq "
    "poe_seq seq_num icd_version anchor_age anchor_year hospital_expire_flag test_seq isolate_num "
    "parent_field_ordinal drg_severity drg_mortality warning isopenbag continueinnextdept"
).split()
_VARCHAR = (
    "icd_code drg_code hcpcs_cd code gsn ndc value result_value formulary_drug_cd dilution_text "
    "emar_id poe_id order_provider_id enter_provider_id admit_provider_id provider_id comments "
    "dose_val_rx form_val_disp doses_per_24_hrs product_code"
).split()
_DOUBLE = (
    "valuenum ref_range_lower ref_range_upper amount rate patientweight totalamount originalamount "
    "originalrate los dilution_value lownormalvalue highnormalvalue"
).split()
_TIMESTAMP = (
    "admittime dischtime deathtime edregtime edouttime charttime storetime starttime endtime stoptime "
    "intime outtime transfertime ordertime scheduletime entertime verifiedtime expirationdate"
).split()
TYPE_OVERRIDES: dict[str, str] = {
    **{c: "BIGINT" for c in _BIGINT},
    **{c: "VARCHAR" for c in _VARCHAR},
    **{c: "DOUBLE" for c in _DOUBLE},
    **{c: "TIMESTAMP" for c in _TIMESTAMP},
    # `value` means different things per table (text results, volumes, times).
    "outputevents.value": "DOUBLE",
    "procedureevents.value": "DOUBLE",
    "datetimeevents.value": "TIMESTAMP",
    "dod": "DATE",
    "chartdate": "DATE",
    "storedate": "DATE",
}


def find_files(dirs: Iterable[os.PathLike[str] | str]) -> tuple[dict[str, Path], list[str]]:
    """``table -> file`` for every MIMIC-IV table found, and the tables not found."""
    roots = check_dirs(dirs)
    # each table in its module folder, or directly in the root
    return find_tables((table, [r / module for r in roots] + roots, [table])
                       for module, tables in MODULES.items() for table in tables)


def load(
    dirs: Iterable[os.PathLike[str] | str],
    out: os.PathLike[str] | str,
    *,
    now: dt.datetime | str | None = None,
    progress: Progress | None = None,
    dataset: str = "mimic-iv",
) -> LoadReport:
    """Build a DuckDB database at ``out`` from MIMIC-IV folders (see module docstring)."""
    files, missing = find_files(dirs)
    if not {"patients", "admissions"} <= files.keys():
        from ehr_magic.errors import DataSourceError

        raise DataSourceError(
            "No MIMIC-IV patients/admissions files found; pass the folder that holds hosp/ and icu/."
        )
    for table in missing:
        log.warning("MIMIC-IV table %s not found; skipped.", table)
    return load_tables(files, out, schema=SCHEMA, source="mimic-iv-csv", dataset=dataset,
                       type_overrides=TYPE_OVERRIDES, now=now, missing=missing, progress=progress)
