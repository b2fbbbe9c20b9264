"""Timelines of measured values per ICU stay or admission, within a window from its start."""

from __future__ import annotations

import polars as pl

from ehr_magic.skills.base import LOOKBACK_HOURS, Context
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.events import gcs_sql, with_ctes
from ehr_magic.skills.items import Concept

# level -> (key column, start column, end column, id columns of an output row)
LEVELS: dict[str, tuple[str, str, str, list[str]]] = {
    "stay": ("stay_id", "intime", "outtime", ["subject_id", "hadm_id", "stay_id"]),
    "admission": ("hadm_id", "admittime", "dischtime", ["subject_id", "hadm_id"]),
}


def level_for(ctx: Context, by: str | None, default: str) -> str:
    """'stay' or 'admission': ``by`` when given, else ``stay`` if stay_ids were given, else ``default``."""
    if by is not None:
        if by not in LEVELS:
            raise SkillError(f"by must be 'stay' (ICU stays) or 'admission' (got {by!r}).")
        return by
    return "stay" if ctx.scope.stay_ids is not None else default


def cohort_cte(ctx: Context, level: str) -> tuple[str, str]:
    return ("cohort", ctx.stays_sql() if level == "stay" else ctx.admissions_sql())


def window_sql(level: str, hours: float | None, lookback: float = LOOKBACK_HOURS) -> tuple[str, str]:
    """SQL of the window start and end over cohort ``k`` ([start - lookback, start + hours] or to the end)."""
    _, start, end, _ = LEVELS[level]
    lo = f"k.{start} - INTERVAL {int(lookback)} HOUR" if lookback else f"k.{start}"
    if hours is None:
        return lo, f"k.{end}"
    if hours < 0:
        raise SkillError(f"hours must be positive (got {hours}).")
    return lo, f"k.{start} + to_microseconds(CAST({float(hours)} * 3600e6 AS BIGINT))"


def concept_values(ctx: Context, concepts: list[Concept], level: str, hours: float | None,
                   lookback: float = LOOKBACK_HOURS) -> pl.DataFrame:
    """Long frame: id columns, charttime, concept, value, itemid (values outside a concept's
    plausible range dropped), for the cohort of ``level`` within the window."""
    key, _, _, ids = LEVELS[level]
    lo, hi = window_sql(level, hours, lookback)
    parts = []
    for c in concepts:
        parts.append(f"SELECT '{c.name}' AS concept, key, charttime, value, itemid "
                     f"FROM ({ctx.values_sql(c, 'cohort', key, lo, hi)}) WHERE {ctx.valid(c)}")
    query = (f"{with_ctes(cohort_cte(ctx, level), ('v', ' UNION ALL '.join(parts)))}\n"
             f"SELECT {', '.join('c.' + i for i in ids)}, v.charttime, v.concept, v.value, v.itemid "
             f"FROM v JOIN cohort c ON c.{key} = v.key ORDER BY {', '.join('c.' + i for i in ids)}, v.charttime")
    return ctx.sql(query)


def wide(frame: pl.DataFrame, ids: list[str], names: list[str]) -> pl.DataFrame:
    """One row per id and charttime with a column per concept (mean of values charted together)."""
    if frame.height == 0:
        return pl.DataFrame(schema={**{i: pl.Int64 for i in ids}, "charttime": pl.Datetime("us"),
                                    **{n: pl.Float64 for n in names}})
    out = frame.pivot(on="concept", index=[*ids, "charttime"], values="value", aggregate_function="mean")
    for n in names:
        if n not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=pl.Float64).alias(n))
    return out.select(*ids, "charttime", *names).sort([*ids, "charttime"])


def stay_rows(ctx: Context, ctes: list[tuple[str, str]], source: str, columns: str,
              hours: float | None) -> pl.DataFrame:
    """Rows of CTE ``source`` (keyed ``key`` = stay_id, with charttime) joined to the stay ids,
    within ``hours`` of ICU admission when given."""
    limit = ("TRUE" if hours is None else
             f"x.charttime <= c.intime + to_microseconds(CAST({float(hours)} * 3600e6 AS BIGINT))")
    query = (f"{with_ctes(cohort_cte(ctx, 'stay'), ctes)}\n"
             f"SELECT c.subject_id, c.hadm_id, c.stay_id, x.charttime, {columns} FROM {source} x "
             f"JOIN cohort c ON c.stay_id = x.key WHERE {limit} ORDER BY c.stay_id, x.charttime")
    return ctx.sql(query)


def cohort_ids(ctx: Context, level: str) -> pl.DataFrame:
    """Every stay/admission in scope (id columns and start), also those without any value."""
    _, start, _, ids = LEVELS[level]
    return ctx.sql(f"{with_ctes(cohort_cte(ctx, level))} SELECT {', '.join(ids)}, {start} FROM cohort "
                   f"ORDER BY {', '.join(ids)}")


def aggregate(ctx: Context, specs: dict[str, tuple[str, str]], level: str, hours: float | None,
              lookback: float = LOOKBACK_HOURS) -> pl.DataFrame:
    """One row per stay/admission in scope: ``{output: (concept, 'min'|'max'|'first'|'last'|'mean')}``."""
    from ehr_magic.skills.items import CONCEPTS

    ids = LEVELS[level][3]
    names = sorted({concept for concept, _ in specs.values()})
    base = cohort_ids(ctx, level)
    long = concept_values(ctx, [CONCEPTS[n] for n in names], level, hours, lookback)
    aggs = [getattr(pl.col("value").filter(pl.col("concept") == concept).sort_by(
        pl.col("charttime").filter(pl.col("concept") == concept)), agg)().alias(out)
            for out, (concept, agg) in specs.items()]
    values = long.group_by(ids).agg(aggs) if long.height else pl.DataFrame(
        schema={**{i: pl.Int64 for i in ids}, **{out: pl.Float64 for out in specs}})
    return base.join(values, on=ids, how="left")


def gcs_worst(ctx: Context, hours: float | None) -> pl.DataFrame:
    """stay_id, gcs_min: the lowest GCS of each ICU stay in the window (lookback included)."""
    lo, hi = window_sql("stay", hours)
    return ctx.sql(f"{with_ctes(cohort_cte(ctx, 'stay'), ('g', gcs_sql(ctx)))} "
                   f"SELECT k.stay_id, min(g.gcs) AS gcs_min FROM g JOIN cohort k ON k.stay_id = g.key "
                   f"WHERE g.charttime >= {lo} AND g.charttime <= {hi} GROUP BY 1")
