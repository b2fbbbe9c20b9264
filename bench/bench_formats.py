"""Loading one real table from each file format a data folder may hold, against the same rows as CSV
loaded in the same run.

The MIMIC-IV demo's labevents (107,727 rows, 16 columns) is written as CSV (the baseline), parquet,
Stata (.dta), SPSS (.sav), SAS (.sas7bdat, and XPORT .xpt), JSON Lines, and as FHIR Observation
resources (JSON Lines, with a CSV of the same flattened fields as their baseline); each is loaded
with ``ehr-magic data load csv`` (knowledge drafted), and the bench prints seconds and the ratio to
its CSV.

    python bench/bench_formats.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import polars as pl
import pyreadstat

from ehr_magic import sources

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
LABEVENTS = SHARED / "mimic-iv-clinical-database-demo-2.2" / "hosp" / "labevents.csv.gz"


def load_seconds(folder: Path, work: Path, rounds: int) -> float:
    """The median time to load ``folder`` into a new database, over ``rounds`` loads."""
    times = []
    for i in range(rounds):
        out = work / f"{folder.name}-{i}.duckdb"
        started = time.perf_counter()
        sources.load("csv", [folder], out)
        times.append(time.perf_counter() - started)
        out.unlink()
    return statistics.median(times)


def write_formats(frame: pl.DataFrame, work: Path) -> dict[str, Path]:
    """One folder per format, each holding the table once."""
    folders = {name: work / name for name in ("csv", "parquet", "stata", "spss", "sas", "xport", "jsonl")}
    for folder in folders.values():
        folder.mkdir()
    frame.write_csv(folders["csv"] / "labevents.csv")
    frame.write_parquet(folders["parquet"] / "labevents.parquet")
    # the statistics packages store numbers as doubles and times as numbers with a format
    numeric = frame.with_columns(pl.col(pl.Int64).cast(pl.Float64))
    labels = [name.replace("_", " ") for name in frame.columns]
    pyreadstat.write_dta(numeric, str(folders["stata"] / "labevents.dta"), column_labels=labels)
    pyreadstat.write_sav(numeric, str(folders["spss"] / "labevents.sav"), column_labels=labels)
    pyreadstat.write_sas7bdat(numeric, str(folders["sas"] / "labevents.sas7bdat"), column_labels=labels)
    pyreadstat.write_xport(numeric, str(folders["xport"] / "labevents.xpt"), column_labels=labels,
                           file_format_version=8, table_name="LABEVENT")
    frame.write_ndjson(folders["jsonl"] / "labevents.jsonl")
    return folders


def write_fhir(frame: pl.DataFrame, work: Path) -> dict[str, Path]:
    """The rows as FHIR Observation resources, and a CSV of the fields they flatten to."""
    fhir, flat = work / "fhir", work / "fhir-flat-csv"
    fhir.mkdir()
    flat.mkdir()
    rows = []
    with open(fhir / "Observation.ndjson", "w", encoding="utf-8") as handle:
        for row in frame.iter_rows(named=True):
            resource = {
                "resourceType": "Observation", "id": str(row["labevent_id"]), "status": "final",
                "code": {"coding": [{"system": "http://mimic.mit.edu/fhir/mimic/CodeSystem/mimic-d-labitems",
                                     "code": str(row["itemid"])}]},
                "subject": {"reference": f"Patient/{row['subject_id']}"},
                "effectiveDateTime": row["charttime"].isoformat() if row["charttime"] else None,
                "valueQuantity": {"value": row["valuenum"], "unit": row["valueuom"]},
                "note": [{"text": row["comments"]}] if row["comments"] else []}
            handle.write(json.dumps(resource) + "\n")
            rows.append({"id": resource["id"], "status": "final", "code_coding_system": resource["code"]["coding"][0][
                "system"], "code_coding_code": str(row["itemid"]), "subject_id": str(row["subject_id"]),
                "effectiveDateTime": resource["effectiveDateTime"], "valueQuantity_value": row["valuenum"],
                "valueQuantity_unit": row["valueuom"], "note_text": row["comments"]})
    pl.DataFrame(rows).write_csv(flat / "observation.csv")
    return {"fhir": fhir, "fhir-flat-csv": flat}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="loads per format (the median is printed)")
    args = parser.parse_args()
    frame = pl.read_csv(LABEVENTS, infer_schema_length=None, try_parse_dates=True)
    print(f"labevents: {frame.height:,} rows, {frame.width} columns")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        folders = write_formats(frame, work) | write_fhir(frame, work)
        seconds = {name: load_seconds(folder, work, args.rounds) for name, folder in folders.items()}
        for name, took in seconds.items():
            baseline = "fhir-flat-csv" if name == "fhir" else "csv"
            size = sum(p.stat().st_size for p in folders[name].iterdir()) / 1e6
            print(f"  {name:<14} {size:7.1f} MB  {took:5.2f} s  {took / seconds[baseline]:4.2f} x {baseline}")


if __name__ == "__main__":
    main()
