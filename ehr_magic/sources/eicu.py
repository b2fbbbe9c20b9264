"""eICU Collaborative Research Database v2.x from its official files.

One file per table (``patient.csv.gz``, ``admissionDrug.csv.gz``...) as CSV, gzipped
CSV or parquet, demo or full release; the tables are the lower-cased file names, as in
eicu-code. Several folders can be given: a table missing from the first is looked for in
the next. Official tables found nowhere are recorded as missing (the demo on PhysioNet
lacks none, but copies often lack the big ``lab``, ``nurseCharting`` or
``vitalPeriodic``). eICU has no dates: every time is an ``*offset`` column, minutes
from the ICU stay's admission, so the database records ``time_model=offset`` and no
clock (see docs/time.md).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from ehr_magic.sources.loading import LoadReport, Progress, check_dirs, load_tables, table_files
from ehr_magic.errors import DataSourceError

log = logging.getLogger(__name__)

SCHEMA = "eicu"

# The 31 tables of eICU-CRD v2.0, by their file names.
OFFICIAL_FILES = (
    "admissionDrug", "admissionDx", "allergy", "apacheApsVar", "apachePatientResult", "apachePredVar",
    "carePlanCareProvider", "carePlanEOL", "carePlanGeneral", "carePlanGoal", "carePlanInfectiousDisease",
    "customLab", "diagnosis", "hospital", "infusionDrug", "intakeOutput", "lab", "medication", "microLab",
    "note", "nurseAssessment", "nurseCare", "nurseCharting", "pastHistory", "patient", "physicalExam",
    "respiratoryCare", "respiratoryCharting", "treatment", "vitalAperiodic", "vitalPeriodic",
)
OFFICIAL_TABLES = tuple(name.lower() for name in OFFICIAL_FILES)
FILE_NAMES = dict(zip(OFFICIAL_TABLES, OFFICIAL_FILES))
# Without these the folder is not eICU (or not the part of it anything can be asked of).
CORE_TABLES = ("patient",)

# Where each ICU stay's windows live, for the offset-time helpers (ehr_magic/db/offsets.py).
OFFSET_STAYS = {
    "table": "patient", "key": "patientunitstayid", "icu_end": "unitdischargeoffset",
    "hospital_start": "hospitaladmitoffset", "hospital_end": "hospitaldischargeoffset",
    "hospital_stay": "patienthealthsystemstayid", "year": "hospitaldischargeyear",
}

TYPE_OVERRIDES: dict[str, str] = {
    # Identifiers are integers, except the patient id '002-34851'.
    "*id": "BIGINT",
    "uniquepid": "VARCHAR",
    "volumeoffluid": "DOUBLE",  # ends in "id" too
    # Minutes from the ICU admission.
    "*offset": "INTEGER",
    # Clock times '14:36:00' stay text: Spark has no TIME type and the meaning is "a clock reading".
    "*time24": "VARCHAR",
    # '> 89' for the oldest patients (apachepredvar.age is a plain number).
    "patient.age": "VARCHAR",
    "apachepredvar.age": "BIGINT",
    # Codes and text that can look numeric in a sample.
    "icd9code": "VARCHAR",
    "drugrate": "VARCHAR",
    "cellvaluetext": "VARCHAR",
    "labresulttext": "VARCHAR",
    "labothervaluetext": "VARCHAR",
    "labmeasurenamesystem": "VARCHAR",
    "labmeasurenameinterface": "VARCHAR",
    "nursingchartvalue": "VARCHAR",
    "respchartvalue": "VARCHAR",
    "notevalue": "VARCHAR",
    "notetext": "VARCHAR",
    "physicalexamvalue": "VARCHAR",
    "physicalexamtext": "VARCHAR",
    "pasthistoryvalue": "VARCHAR",
    "pasthistoryvaluetext": "VARCHAR",
    "admitdxname": "VARCHAR",
    "admitdxtext": "VARCHAR",
    "drugdosage": "VARCHAR",
    "dosage": "VARCHAR",
    "airwaysize": "VARCHAR",
    "cellattributevalue": "VARCHAR",
    "cplitemvalue": "VARCHAR",
    # Measurements that must stay numbers even where a sample holds only integers.
    "labresult": "DOUBLE",
    "labotherresult": "DOUBLE",
    "temperature": "DOUBLE",
    "admissionheight": "DOUBLE",
    "admissionweight": "DOUBLE",
    "dischargeweight": "DOUBLE",
    "hospitaldischargeyear": "INTEGER",
}


def find_files(dirs: Iterable[os.PathLike[str] | str]) -> tuple[dict[str, Path], list[str], list[Path]]:
    """``table -> file`` for every official eICU table found, the official tables not
    found, and other table files that were ignored."""
    roots = check_dirs(dirs)
    found: dict[str, Path] = {}
    ignored: list[Path] = []
    for root in roots:
        for table, path in table_files(root).items():
            if table not in OFFICIAL_TABLES:
                ignored.append(path)
            else:
                found.setdefault(table, path)  # the first folder wins, as with MIMIC-IV
    files = {table: found[table] for table in OFFICIAL_TABLES if table in found}
    missing = [table for table in OFFICIAL_TABLES if table not in found]
    return files, missing, ignored


def load(
    dirs: Iterable[os.PathLike[str] | str],
    out: os.PathLike[str] | str,
    *,
    now: dt.datetime | str | None = None,
    progress: Progress | None = None,
    dataset: str = "eicu",
) -> LoadReport:
    """Build a DuckDB database at ``out`` from eICU folders (see module docstring)."""
    if now is not None:
        raise DataSourceError("eICU has no dates (times are minutes from each ICU admission), so --now does not "
                              "apply; load it without --now.")
    dirs = list(dirs)
    files, missing, ignored = find_files(dirs)
    absent_core = [FILE_NAMES[t] for t in CORE_TABLES if t not in files]
    if absent_core:
        where = ", ".join(str(d) for d in dirs)
        raise DataSourceError(
            f"{where} is not an eICU folder: it has no {' or '.join(absent_core)} file "
            "(patient.csv.gz, .csv or .parquet); pass the folder that holds the eICU-CRD files.")
    for table in missing:  # the report lists them; front ends say so
        log.info("eICU table %s (%s) not found; skipped.", table, FILE_NAMES[table])
    for path in ignored:
        log.warning("%s is not an eICU table; ignored.", path)
    if dataset == "eicu" and "demo" in " ".join(str(d).lower() for d in dirs):
        dataset = "eicu-demo"
    return load_tables(files, out, schema=SCHEMA, source="eicu-csv", dataset=dataset,
                       type_overrides=TYPE_OVERRIDES, missing=missing, progress=progress,
                       metadata={"time_model": "offset", "offset_stays": json.dumps(OFFSET_STAYS)})
