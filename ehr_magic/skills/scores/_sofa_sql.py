"""The SOFA aggregation shared by first-day SOFA, hourly (rolling 24 h) SOFA and Sepsis-3."""

from __future__ import annotations

import polars as pl

from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, in_list
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.events import (
    abg_ctes, bp_sql, fio2_fraction_sql, gcs_sql, urine_sql, vasopressor_sql, with_ctes,
)
from ehr_magic.skills.items import _CAPABILITIES, CONCEPTS

COMPONENTS = ("respiration", "coagulation", "liver", "cardiovascular", "cns", "renal")
NEEDS = {"respiration": "ventilation", "cardiovascular": "vasopressor_rate", "cns": "gcs"}
LABS = {"coagulation": ("platelets", "min"), "liver": ("bilirubin", "max"), "renal": ("creatinine", "max")}
UO_MIN_HOURS = 22  # urine output criteria need (nearly) a day of observation
LAB_LOOKBACK = "INTERVAL 24 HOUR"


def components_for(ctx: Context, components: tuple[str, ...] | list[str] | None, what: str = "SOFA") -> tuple[str, ...]:
    chosen = COMPONENTS if components is None else tuple(components)
    bad = [c for c in chosen if c not in COMPONENTS]
    if bad:
        raise SkillError(f"Unknown SOFA component(s) {bad}; choose from {', '.join(COMPONENTS)}.")
    blocked = [c for c in chosen if c in NEEDS and not ctx.can(NEEDS[c])]
    if blocked:
        why = "; ".join(f"{c} needs {_CAPABILITIES[NEEDS[c]]} ({ctx.items.missing[NEEDS[c]]})" for c in blocked)
        ok = [c for c in chosen if c not in blocked]
        raise SkillError(f"{what} cannot be fully scored on {ctx.items.name}: {why}. "
                         f"Pass components={tuple(ok)!r} to score the organs this dataset supports.")
    return chosen


def first_day_windows(ctx: Context, hours: float) -> str:
    h = float(hours)
    return (f"SELECT stay_id AS key, 0 AS wid, intime - INTERVAL 6 HOUR AS ws, "
            f"least(intime + to_microseconds(CAST({h} * 3600e6 AS BIGINT)), outtime, {ctx.cutoff}) AS we, "
            f"intime AS uo_start FROM cohort")


def hourly_windows(ctx: Context) -> str:
    return f"""
    SELECT key, wid, we - INTERVAL 24 HOUR AS ws, we, greatest(we - INTERVAL 24 HOUR, intime) AS uo_start
    FROM (
      SELECT c.stay_id AS key, h.hr AS wid, c.intime,
             least(c.intime + to_hours(CAST(h.hr + 1 AS BIGINT)), c.outtime, {ctx.cutoff}) AS we
      FROM cohort c, LATERAL (
        SELECT unnest(range(0, CAST(ceil(greatest(epoch(least(c.outtime, {ctx.cutoff}) - c.intime), 0) / 3600)
                                    AS BIGINT))) AS hr) h
    )"""


def sofa_values(ctx: Context, windows: str, components: tuple[str, ...]) -> pl.DataFrame:
    """One row per window (key, wid, ws, we) with the worst values of each chosen organ."""
    ctes: list = [("cohort", ctx.stays_sql()), ("win", windows)]
    joins: list[str] = []
    columns: list[str] = []

    def add(name: str, body: str, cols: list[str]) -> None:
        ctes.append((name, body))
        joins.append(f"LEFT JOIN {name} USING (key, wid)")
        columns.extend(cols)

    if "respiration" in components:
        ctes.extend(abg_ctes(ctx))
        add("a_resp", f"""
            SELECT w.key, w.wid,
                   min(g.pao2 / {fio2_fraction_sql('g.fio2')}) FILTER (WHERE g.ventilated) AS pf_vent_min,
                   min(g.pao2 / {fio2_fraction_sql('g.fio2')}) FILTER (WHERE NOT g.ventilated) AS pf_novent_min
            FROM win w JOIN abg g ON g.key = w.key AND g.charttime > w.ws AND g.charttime <= w.we
            GROUP BY ALL""", ["pf_vent_min", "pf_novent_min"])
    labs = [LABS[c] for c in components if c in LABS]
    if labs:
        union = " UNION ALL ".join(
            f"SELECT '{name}' AS concept, key, charttime, value FROM "
            f"({ctx.values_sql(CONCEPTS[name], 'cohort', 'stay_id', f'k.intime - {LAB_LOOKBACK}', 'k.outtime')}) "
            f"WHERE {ctx.valid(CONCEPTS[name])}" for name, _ in labs)
        ctes.append(("labs", union))
        aggs = ", ".join(f"{agg}(l.value) FILTER (WHERE l.concept = '{name}') AS {name}_{agg}" for name, agg in labs)
        add("a_labs", f"SELECT w.key, w.wid, {aggs} FROM win w JOIN labs l ON l.key = w.key "
                      f"AND l.charttime > w.ws AND l.charttime <= w.we GROUP BY ALL", [f"{n}_{a}" for n, a in labs])
    if "cardiovascular" in components:
        ctes.append(("bp", bp_sql(ctx)))
        add("a_map", "SELECT w.key, w.wid, min(coalesce(b.map_measured, (b.sbp + 2 * b.dbp) / 3)) AS map_min "
                     "FROM win w JOIN bp b ON b.key = w.key AND b.charttime > w.ws AND b.charttime <= w.we "
                     "GROUP BY ALL",
            ["map_min"])
        ctes.append(("vaso", vasopressor_sql(ctx)))
        drugs = ("norepinephrine", "epinephrine", "dopamine", "dobutamine")
        aggs = ", ".join(f"max(v.rate) FILTER (WHERE v.drug = '{d}') AS {d}_max" for d in drugs)
        add("a_vaso", f"SELECT w.key, w.wid, {aggs} FROM win w JOIN vaso v ON v.key = w.key "
                      f"AND v.starttime <= w.we AND v.endtime > w.ws GROUP BY ALL", [f"{d}_max" for d in drugs])
    if "cns" in components:
        ctes.append(("gcs", gcs_sql(ctx)))
        add("a_gcs", "SELECT w.key, w.wid, min(g.gcs) AS gcs_min FROM win w JOIN gcs g ON g.key = w.key "
                     "AND g.charttime > w.ws AND g.charttime <= w.we GROUP BY ALL", ["gcs_min"])
    if "renal" in components and ctx.has("outputevents", "stay_id", "itemid", "charttime", "value"):
        ctes.append(("uo", urine_sql(ctx)))
        add("a_uo", "SELECT w.key, w.wid, CASE WHEN sum(u.volume) < 0 THEN 0 ELSE sum(u.volume) END "
                    "AS urine_output FROM win w JOIN uo u ON u.key = w.key "
                    "AND u.charttime > w.uo_start AND u.charttime <= w.we GROUP BY ALL", ["urine_output"])
    query = f"""{with_ctes(ctes)}
    SELECT c.subject_id, c.hadm_id, c.stay_id, w.wid, w.ws AS window_start, w.we AS window_end,
           epoch(w.we - w.uo_start) / 3600.0 AS urine_output_hours{''.join(', ' + col for col in columns)}
    FROM win w JOIN cohort c ON c.stay_id = w.key {' '.join(joins)}
    ORDER BY c.stay_id, w.wid"""
    frame = ctx.sql(query)
    for col in ("pf_vent_min", "pf_novent_min", "platelets_min", "bilirubin_max", "creatinine_max", "map_min",
                "norepinephrine_max", "epinephrine_max", "dopamine_max", "dobutamine_max", "gcs_min",
                "urine_output"):
        if col not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias(col))
    return frame


def sofa_points(frame: pl.DataFrame, components: tuple[str, ...], total: str = "sofa") -> pl.DataFrame:
    """Organ points (calculators) and their total from the worst values of each window."""
    c = pl.col
    uo = pl.when(c("urine_output_hours") >= UO_MIN_HOURS).then(c("urine_output"))
    points = {
        "respiration": pl.max_horizontal(calc.sofa_points_respiration(c("pf_vent_min"), True),
                                         calc.sofa_points_respiration(c("pf_novent_min"), False)),
        "coagulation": calc.sofa_points_coagulation(c("platelets_min")),
        "liver": calc.sofa_points_liver(c("bilirubin_max")),
        "cardiovascular": calc.sofa_points_cardiovascular(c("map_min"), c("dopamine_max"), c("dobutamine_max"),
                                                          c("epinephrine_max"), c("norepinephrine_max")),
        "cns": calc.sofa_points_cns(c("gcs_min")),
        "renal": calc.sofa_points_renal(c("creatinine_max"), uo),
    }
    frame = frame.with_columns(
        pl.min_horizontal(c("pf_vent_min"), c("pf_novent_min")).alias("pf_ratio_min"),
        *[(points[name] if name in components else pl.lit(None, dtype=pl.Int64)).cast(pl.Int64).alias(name)
          for name in COMPONENTS],
    )
    return frame.with_columns(calc.sofa_total(*[c(n) for n in components]).alias(total))


VALUE_COLUMNS = ["pf_ratio_min", "pf_vent_min", "pf_novent_min", "platelets_min", "bilirubin_max", "map_min",
                 "norepinephrine_max", "epinephrine_max", "dopamine_max", "dobutamine_max", "gcs_min",
                 "creatinine_max", "urine_output", "urine_output_hours"]


def stays_filter(ids: tuple[int, ...] | None) -> str:
    return in_list("stay_id", ids)
