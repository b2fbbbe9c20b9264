"""Renamed copies of the EHRSQL-2024 MIMIC-IV database: a stranger's tables with known answers.

Each naming style renames every table and column the way a person exporting a warehouse
might (no MIMIC names survive), and gives every table a dense row number under a
style-specific name (MIMIC's own ``row_id``). A copy is a plain folder of CSV files, one
per table, for ``ehr-magic data load csv DIR``; next to it, ``DIR.truth.json`` holds the
table and column mapping, the true foreign keys (from the benchmark's ``tables.json``) and,
for train and valid, each question's gold SQL renamed with sqlglot and its gold tables.

    python -m ehr_magic.eval.renamed --style descriptive --out /tmp/unfamiliar/descriptive

Styles: ``descriptive`` (spelled-out snake case), ``camel`` (CamelCase, FHIR-like) and
``warehouse`` (abbreviated upper case: HSP_ENC, FLWSHT_MEAS, ADM_DTTM, DX_CD).

The values that name MIMIC tables (the charge table's event kinds, the chart-item
dictionary's target table) are renamed as well, in the data and in the SQL literals.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import sqlglot
from sqlglot import exp

from ehr_magic import files
from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.errors import DataSourceError

ROW_ID = "row_id"
SPLITS = ("train", "valid")

# Column names shared by many tables; TABLE_COLUMNS overrides them per table.
_DESCRIPTIVE_COLUMNS = {
    "row_id": "recordid", "subject_id": "patient_id", "hadm_id": "admission_id", "stay_id": "icu_stay_id",
    "charttime": "recorded_at", "starttime": "started_at", "stoptime": "stopped_at",
    "intime": "entered_at", "outtime": "left_at", "valueuom": "unit", "valuenum": "numeric_result",
}
_DESCRIPTIVE_TABLES = {
    "patients": ("patient_demographics", {"gender": "sex", "dob": "birth_date", "dod": "death_date"}),
    "admissions": ("hospital_admissions", {
        "admittime": "admitdatetime", "dischtime": "dischargedatetime", "admission_type": "admit_category",
        "admission_location": "admitted_from", "discharge_location": "discharged_to", "insurance": "payer",
        "language": "spoken_language", "marital_status": "civil_status", "age": "age_years"}),
    "d_icd_diagnoses": ("diagnosis_code_catalog", {"icd_code": "diagnosis_code", "long_title": "description"}),
    "d_icd_procedures": ("procedure_code_catalog", {"icd_code": "procedure_code", "long_title": "description"}),
    "d_labitems": ("lab_test_types", {"itemid": "lab_test_id", "label": "test_name"}),
    "d_items": ("bedside_item_catalog", {
        "itemid": "bedside_item_id", "label": "item_name", "abbreviation": "short_name",
        "linksto": "recorded_in"}),
    "diagnoses_icd": ("admission_diagnoses", {"icd_code": "diagnosis_code", "charttime": "coded_at"}),
    "procedures_icd": ("admission_procedures", {"icd_code": "procedure_code", "charttime": "performed_at"}),
    "labevents": ("lab_results", {"itemid": "lab_test_id", "charttime": "collected_at"}),
    "prescriptions": ("medication_orders", {
        "drug": "medication", "dose_val_rx": "dose_amount", "dose_unit_rx": "dose_unit",
        "route": "administration_route"}),
    "cost": ("billing_charges", {
        "event_type": "charge_source", "event_id": "source_record", "chargetime": "charged_at",
        "cost": "amount"}),
    "chartevents": ("bedside_observations", {"itemid": "bedside_item_id", "charttime": "observed_at",
                                             "valuenum": "measured_value"}),
    "inputevents": ("icu_intake", {"itemid": "bedside_item_id", "totalamount": "total_given",
                                   "totalamountuom": "total_given_unit"}),
    "outputevents": ("icu_output", {"itemid": "bedside_item_id", "value": "volume"}),
    "microbiologyevents": ("culture_results", {
        "charttime": "collected_at", "spec_type_desc": "specimen", "test_name": "culture_test",
        "org_name": "organism"}),
    "icustays": ("icu_stays", {"first_careunit": "first_unit", "last_careunit": "last_unit"}),
    "transfers": ("ward_movements", {"transfer_id": "movement_id", "eventtype": "movement_kind",
                                     "careunit": "ward"}),
}

_CAMEL_COLUMNS = {
    "row_id": "RowKey", "subject_id": "PatientKey", "hadm_id": "AdmissionKey", "stay_id": "IcuStayKey",
    "charttime": "EntryDateTime", "starttime": "StartDateTime", "stoptime": "StopDateTime",
    "intime": "InDateTime", "outtime": "OutDateTime", "valueuom": "UnitOfMeasure", "valuenum": "NumericValue",
}
_CAMEL_TABLES = {
    "patients": ("Person", {"gender": "AdministrativeSex", "dob": "BirthDate", "dod": "DeceasedDate"}),
    "admissions": ("Encounter", {
        "admittime": "AdmitDateTime", "dischtime": "DischargeDateTime", "admission_type": "EncounterClass",
        "admission_location": "AdmitSource", "discharge_location": "DischargeDisposition",
        "insurance": "PayerClass", "language": "PreferredLanguage", "marital_status": "MaritalStatus",
        "age": "AgeAtAdmit"}),
    "d_icd_diagnoses": ("DiagnosisTerm", {"icd_code": "DiagnosisCode", "long_title": "TermText"}),
    "d_icd_procedures": ("ProcedureTerm", {"icd_code": "ProcedureCode", "long_title": "TermText"}),
    "d_labitems": ("LabTestType", {"itemid": "LabTestKey", "label": "TestName"}),
    "d_items": ("FlowsheetRow", {
        "itemid": "FlowsheetRowKey", "label": "DisplayName", "abbreviation": "Abbrev", "linksto": "StoredIn"}),
    "diagnoses_icd": ("EncounterDiagnosis", {"icd_code": "DiagnosisCode", "charttime": "CodedDateTime"}),
    "procedures_icd": ("EncounterProcedure", {"icd_code": "ProcedureCode", "charttime": "PerformedDateTime"}),
    "labevents": ("LabResult", {"itemid": "LabTestKey", "charttime": "ResultDateTime", "valuenum": "ResultValue",
                                "valueuom": "ResultUnit"}),
    "prescriptions": ("MedicationOrder", {
        "drug": "DrugName", "dose_val_rx": "DoseQuantity", "dose_unit_rx": "DoseUnit", "route": "RouteName"}),
    "cost": ("ChargeLine", {
        "event_type": "ChargeSource", "event_id": "SourceRowKey", "chargetime": "ChargeDateTime",
        "cost": "ChargeAmount"}),
    "chartevents": ("FlowsheetValue", {"itemid": "FlowsheetRowKey"}),
    "inputevents": ("FluidIntake", {"itemid": "FlowsheetRowKey", "totalamount": "TotalVolume",
                                    "totalamountuom": "VolumeUnit"}),
    "outputevents": ("FluidOutput", {"itemid": "FlowsheetRowKey", "value": "OutputVolume"}),
    "microbiologyevents": ("CultureFinding", {
        "charttime": "CollectedDateTime", "spec_type_desc": "SpecimenSource", "test_name": "CultureTest",
        "org_name": "OrganismName"}),
    "icustays": ("IntensiveCareStay", {"first_careunit": "FirstUnit", "last_careunit": "LastUnit"}),
    "transfers": ("UnitTransfer", {"transfer_id": "TransferKey", "eventtype": "TransferEvent",
                                   "careunit": "UnitName"}),
}

# An abbreviated, upper-case hospital reporting warehouse (of our own invention, in the manner of
# vendor reporting databases): subject-area prefixes (HSP, ENC, FLWSHT, ORD), _ID/_CD/_NM/_DTTM
# suffixes, a hospital account for the admission and a record key in every table.
_WAREHOUSE_COLUMNS = {
    "row_id": "REC_KEY", "subject_id": "PAT_ID", "hadm_id": "HSP_ACCT_ID", "stay_id": "ICU_STAY_ID",
    "charttime": "TAKEN_DTTM", "starttime": "BGN_DTTM", "stoptime": "END_DTTM",
    "intime": "IN_DTTM", "outtime": "OUT_DTTM", "valueuom": "UOM", "valuenum": "NUM_VAL",
}
_WAREHOUSE_TABLES = {
    "patients": ("PAT_DEMOG", {"gender": "SEX_CD", "dob": "BIRTH_DT", "dod": "DEATH_DT"}),
    "admissions": ("HSP_ENC", {
        "admittime": "ADM_DTTM", "dischtime": "DSCH_DTTM", "admission_type": "ADM_TYP",
        "admission_location": "ADM_SRC_NM", "discharge_location": "DSCH_DISP_NM", "insurance": "FIN_CLASS_NM",
        "language": "PREF_LANG", "marital_status": "MRTL_STAT", "age": "PAT_AGE_YRS"}),
    "d_icd_diagnoses": ("DX_CAT", {"icd_code": "DX_CD", "long_title": "DX_LONG_DESC"}),
    "d_icd_procedures": ("PX_CAT", {"icd_code": "PX_CD", "long_title": "PX_LONG_DESC"}),
    "d_labitems": ("LAB_CMPNT", {"itemid": "CMPNT_ID", "label": "CMPNT_NM"}),
    "d_items": ("FLWSHT_ROW", {
        "itemid": "FLO_MEAS_ID", "label": "DISP_NM", "abbreviation": "SHRT_NM", "linksto": "DATA_TBL_NM"}),
    "diagnoses_icd": ("ENC_DX", {"icd_code": "DX_CD", "charttime": "DX_ENTRY_DTTM"}),
    "procedures_icd": ("HSP_PX", {"icd_code": "PX_CD", "charttime": "PX_PERF_DTTM"}),
    "labevents": ("LAB_RSLT", {"itemid": "CMPNT_ID", "charttime": "RSLT_DTTM", "valuenum": "RSLT_NUM_VAL",
                               "valueuom": "RSLT_UOM"}),
    "prescriptions": ("ORD_MED", {
        "starttime": "ORD_STRT_DTTM", "stoptime": "ORD_END_DTTM", "drug": "MED_NM", "dose_val_rx": "ORD_QTY",
        "dose_unit_rx": "DOSE_UOM", "route": "ADMIN_RTE"}),
    "cost": ("HSP_CHG", {
        "event_type": "CHG_SRC_TBL", "event_id": "SRC_REC_KEY", "chargetime": "SVC_DTTM", "cost": "CHG_AMT"}),
    "chartevents": ("FLWSHT_MEAS", {"itemid": "FLO_MEAS_ID", "valuenum": "MEAS_VAL_NUM", "valueuom": "MEAS_UOM"}),
    "inputevents": ("IP_FLWSHT_INTK", {"itemid": "FLO_MEAS_ID", "starttime": "INTK_BGN_DTTM",
                                       "totalamount": "TOT_VOL", "totalamountuom": "TOT_VOL_UOM"}),
    "outputevents": ("IP_FLWSHT_OUTP", {"itemid": "FLO_MEAS_ID", "value": "OUTP_VOL"}),
    "microbiologyevents": ("MICRO_RSLT", {
        "charttime": "SPCMN_COLL_DTTM", "spec_type_desc": "SPCMN_SRC_NM", "test_name": "MICRO_TST_NM",
        "org_name": "ORGN_NM"}),
    "icustays": ("ICU_STAY", {"first_careunit": "FRST_DEPT_NM", "last_careunit": "LST_DEPT_NM",
                              "intime": "ICU_IN_DTTM", "outtime": "ICU_OUT_DTTM"}),
    "transfers": ("ADT_EVNT", {"transfer_id": "ADT_EVNT_ID", "eventtype": "EVNT_TYP", "careunit": "DEPT_NM",
                               "intime": "EFF_DTTM", "outtime": "EFF_END_DTTM"}),
}

_STYLES = {"descriptive": (_DESCRIPTIVE_COLUMNS, _DESCRIPTIVE_TABLES), "camel": (_CAMEL_COLUMNS, _CAMEL_TABLES),
           "warehouse": (_WAREHOUSE_COLUMNS, _WAREHOUSE_TABLES)}
STYLES = tuple(_STYLES)
_DEFAULT_SOURCE = Path(__file__).resolve().parents[3] / "shared" / "data" / "ehrsql-2024"


@dataclass(frozen=True)
class Naming:
    """One style's names: ``tables[old] -> new file stem``, ``loaded[old]`` -> the table's name once
    the CSV folder is loaded (``sources.folder`` lower-cases file stems), ``columns[old][old column] -> new``."""

    style: str
    tables: dict[str, str]
    loaded: dict[str, str]
    columns: dict[str, dict[str, str]]

    def table(self, old: str) -> str:
        return self.loaded[old]

    @property
    def row_number(self) -> str:
        return self.columns["patients"][ROW_ID]


def naming(style: str, columns_by_table: dict[str, list[str]]) -> Naming:
    """The mapping of ``style`` for the tables and columns of ``columns_by_table``."""
    if style not in _STYLES:
        raise DataSourceError(f"Unknown naming style {style!r}; choose one of {', '.join(STYLES)}.")
    shared, per_table = _STYLES[style]
    tables, columns = {}, {}
    for table, names in columns_by_table.items():
        new_table, own = per_table[table]
        tables[table] = new_table
        columns[table] = {c: own.get(c, shared.get(c, c)) for c in names}
        unmapped = [c for c in names if c not in own and c not in shared]
        if unmapped:
            raise DataSourceError(f"Style {style!r} has no name for {table}.{', '.join(unmapped)}.")
    from ehr_magic.sources.folder import table_name

    return Naming(style, tables, {old: table_name(new) for old, new in tables.items()}, columns)


def source_columns(sqlite_path: Path) -> dict[str, list[str]]:
    con = sqlite3.connect(f"file:{sqlite_path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")]
        return {t: [r[1] for r in con.execute(f"PRAGMA table_info({quote(t, 'sqlite')})")] for t in tables}
    finally:
        con.close()


def rename_sql(sql: str, names: Naming) -> str:
    """``sql`` (SQLite) with every table, column and table-naming literal renamed."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    read = {t.name for t in tree.find_all(exp.Table) if t.name in names.tables and t.name not in ctes}
    alias_of = {t.alias_or_name: t.name for t in tree.find_all(exp.Table) if t.name in read}
    derived = {q.alias: q.this for q in tree.find_all(exp.Subquery) if q.alias and isinstance(q.this, exp.Select)}
    values = {old: names.table(old) for old in names.tables}

    def column_name(column: exp.Column) -> str:
        old = column.name
        table = alias_of.get(column.table) if column.table else None
        if table is not None:
            return names.columns[table].get(old, old)
        if column.table in derived:  # a derived table's output: the name its own select gives it
            for projection in derived[column.table].expressions:
                if isinstance(projection, exp.Column) and projection.name == old:
                    return column_name(projection)
            return old
        # Unqualified: the name the tables of this query give it.
        candidates = {names.columns[t][old] for t in read if old in names.columns[t]}
        if len(candidates) > 1:
            raise DataSourceError(f"Column {old} is ambiguous in: {sql}")
        return candidates.pop() if candidates else old

    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and node.name in read:
            table = node.copy()
            table.set("this", exp.to_identifier(names.table(node.name)))
            return table
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            column = node.copy()
            column.set("this", exp.to_identifier(column_name(node)))
            if node.table in read and alias_of.get(node.table) == node.table:  # qualified by the table's own name
                column.set("table", exp.to_identifier(names.table(node.table)))
            return column
        if isinstance(node, exp.Literal) and node.is_string and node.this in values:
            return exp.Literal.string(values[node.this])
        return node

    return tree.transform(rename, copy=True).sql(dialect="sqlite")


def gold_tables(sql: str) -> list[str]:
    """The tables a (renamed) gold query reads, sorted."""
    tree = sqlglot.parse_one(sql, read="sqlite")
    ctes = {cte.alias_or_name for cte in tree.find_all(exp.CTE)}
    return sorted({t.name for t in tree.find_all(exp.Table) if t.name and t.name not in ctes})


def build_sqlite(sqlite_path: Path, names: Naming, out: Path) -> None:
    """A renamed copy of the benchmark database as SQLite (same types and rows), for checking gold SQL."""
    con = sqlite3.connect(out)
    try:
        con.execute(f"ATTACH DATABASE 'file:{sqlite_path}?mode=ro' AS src")
        for old in names.tables:
            select = ", ".join(_select_column(old, c, new_c, names) for c, new_c in names.columns[old].items())
            con.execute(f"CREATE TABLE {quote(names.table(old), 'sqlite')} AS SELECT {select} "
                        f"FROM src.{quote(old, 'sqlite')} ORDER BY row_id")
        con.commit()
    finally:
        con.close()


def _select_column(table: str, old: str, new: str, names: Naming) -> str:
    """The SELECT item copying one column; values that name a source table are renamed too."""
    if not _names_tables(table, old):
        return f"{quote(old, 'sqlite')} AS {quote(new, 'sqlite')}"
    cases = " ".join(f"WHEN '{k}' THEN '{names.table(k)}'" for k in sorted(names.tables))
    return f"CASE {quote(old, 'sqlite')} {cases} ELSE {quote(old, 'sqlite')} END AS {quote(new, 'sqlite')}"


def _names_tables(table: str, column: str) -> bool:
    return (table, column) in {("cost", "event_type"), ("d_items", "linksto")}


def write_csv_folder(sqlite_renamed: Path, names: Naming, out: Path) -> None:
    """One CSV per table (file stem = the style's table name), written whole or not at all."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the copy from other users of the machine
    con = sqlite3.connect(f"file:{sqlite_renamed}?mode=ro", uri=True)
    try:
        for old, stem in names.tables.items():
            frame = pl.read_database(f"SELECT * FROM {quote(names.table(old), 'sqlite')}", con)
            frame.write_csv(staging / f"{stem}.csv")
    finally:
        con.close()
    if out.exists():
        _remove_folder(out)
    staging.rename(out)


def _remove_folder(folder: Path) -> None:
    for path in folder.iterdir():
        if path.suffix != ".csv" or not path.is_file():
            raise DataSourceError(f"{folder} holds {path.name}, not a CSV written here; choose an empty --out.")
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


def truth(names: Naming, tables_json: Path, dataset: Path) -> dict[str, Any]:
    """The mapping, the renamed true foreign keys and every answerable question's renamed gold SQL."""
    spec = json.loads(tables_json.read_text())[0]
    tables, cols = spec["table_names_original"], spec["column_names_original"]
    keys = []
    for child, parent in spec["foreign_keys"]:
        (ct, cc), (pt, pc) = cols[child], cols[parent]
        keys.append({"table": names.table(tables[ct]), "column": names.columns[tables[ct]][cc],
                     "ref_table": names.table(tables[pt]), "ref_column": names.columns[tables[pt]][pc],
                     # one id column pointing at the row numbers of several tables, chosen by another column
                     "polymorphic": pc == ROW_ID})
    questions: dict[str, dict[str, dict[str, str | list[str]]]] = {}  # split -> id -> renamed gold SQL and its tables
    for split in SPLITS:
        labels = json.loads((dataset / split / "label.json").read_text())
        questions[split] = {}
        for qid, sql in labels.items():
            if sql is None or str(sql).strip() == "null":
                continue
            renamed = rename_sql(sql, names)
            questions[split][qid] = {"sql": renamed, "tables": gold_tables(renamed)}
    return {
        "style": names.style,
        "row_number": names.row_number,
        "tables": {old: {"file": f"{stem}.csv", "table": names.table(old)} for old, stem in names.tables.items()},
        "columns": names.columns,
        "foreign_keys": keys,
        "questions": questions,
    }


def build(style: str, out: os.PathLike[str] | str, source: os.PathLike[str] | str = _DEFAULT_SOURCE) -> Path:
    """Write the ``style`` copy at ``out`` (CSV files) and ``out.truth.json``; returns the truth file."""
    dataset = Path(source).expanduser()
    sqlite_path = dataset / "mimic_iv.sqlite"
    if not sqlite_path.is_file():
        raise DataSourceError(f"No mimic_iv.sqlite in {dataset}; pass the EHRSQL-2024 folder with --source.")
    names = naming(style, source_columns(sqlite_path.resolve()))
    out = Path(out).expanduser().resolve()
    with tempfile.TemporaryDirectory() as tmp:
        renamed = Path(tmp) / "renamed.sqlite"
        build_sqlite(sqlite_path.resolve(), names, renamed)
        write_csv_folder(renamed, names, out)
    facts = truth(names, dataset / "tables.json", dataset)
    target = out.with_name(out.name + ".truth.json")
    files.write_text(target, json.dumps(facts, indent=1))
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--style", choices=STYLES, required=True)
    parser.add_argument("--out", required=True, help="folder to write the CSV files to")
    parser.add_argument("--source", default=str(_DEFAULT_SOURCE), help="the EHRSQL-2024 folder")
    args = parser.parse_args(argv)
    try:
        target = build(args.style, args.out, args.source)
    except DataSourceError as exc:
        parser.exit(2, f"{exc}\n")
    print(f"wrote {args.out} and {target}")


if __name__ == "__main__":
    main()
