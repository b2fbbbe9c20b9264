"""Diagnosis codes per admission, normalised across schemas, and condition flags from code lists."""

from __future__ import annotations

import polars as pl

from ehr_magic.skills.base import Context
from ehr_magic.skills.events import with_ctes
from ehr_magic.skills.timeline import cohort_cte


def diagnoses_sql(ctx: Context) -> str:
    """subject_id, hadm_id, v (9/10), code (upper case, no dots), known (when the code became available)."""
    if ctx.items.icd == "prefixed":
        ctx.require("diagnoses_icd", "subject_id", "hadm_id", "icd_code", "charttime", why="ICD codes")
        return ("SELECT subject_id, hadm_id, CASE WHEN lower(icd_code) LIKE 'icd9|%' THEN 9 "
                "WHEN lower(icd_code) LIKE 'icd10|%' THEN 10 END AS v, "
                "upper(replace(split_part(icd_code, '|', 2), '.', '')) AS code, charttime AS known FROM diagnoses_icd")
    ctx.require("diagnoses_icd", "subject_id", "hadm_id", "icd_code", "icd_version", why="ICD codes")
    # MIMIC-IV codes are assigned for billing after discharge: known at dischtime.
    return ("SELECT d.subject_id, d.hadm_id, d.icd_version AS v, upper(replace(trim(d.icd_code), '.', '')) AS code, "
            "a.dischtime AS known FROM diagnoses_icd d JOIN admissions a ON a.hadm_id = d.hadm_id")


def prefixes_sql(conditions: dict[str, dict[int, tuple[str, ...]]]) -> str:
    rows = [f"('{name}', {version}, '{code}')" for name, lists in conditions.items()
            for version, codes in lists.items() for code in codes]
    return f"SELECT * FROM (VALUES {', '.join(rows)}) AS p(cond, v, prefix)"


def condition_flags(ctx: Context, conditions: dict[str, dict[int, tuple[str, ...]]], *, history: bool) -> pl.DataFrame:
    """One row per admission in scope: subject_id, hadm_id, admittime, dischtime and a 0/1 column per
    condition, from the admission's codes known by as_of (and, with ``history``, the codes of the
    patient's earlier admissions)."""
    scope_rows = ("dx.hadm_id = k.hadm_id" if not history else
                  "dx.subject_id = k.subject_id AND (dx.hadm_id = k.hadm_id OR dx.known <= k.admittime)")
    flags = ", ".join(f"max(CASE WHEN h.cond = '{name}' THEN 1 ELSE 0 END) AS {name}" for name in conditions)
    query = f"""{with_ctes(cohort_cte(ctx, 'admission'), ('dx', diagnoses_sql(ctx)), ('p', prefixes_sql(conditions)))},
    h AS (SELECT DISTINCT k.hadm_id, p.cond FROM cohort k
          JOIN dx ON {scope_rows} AND dx.known <= {ctx.cutoff}
          JOIN p ON p.v = dx.v AND starts_with(dx.code, p.prefix))
    SELECT k.subject_id, k.hadm_id, k.admittime, k.dischtime, {flags}
    FROM cohort k LEFT JOIN h ON h.hadm_id = k.hadm_id GROUP BY ALL ORDER BY k.subject_id, k.hadm_id"""
    return ctx.sql(query)


def with_age(ctx: Context, frame: pl.DataFrame) -> pl.DataFrame:
    ages = ctx.sql(ctx.age_sql())
    return frame.join(ages, on="hadm_id", how="left")
