"""KDIGO acute kidney injury stage from creatinine, urine output and renal replacement therapy."""

from __future__ import annotations

from typing import Any

import polars as pl

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills import calculators as calc
from ehr_magic.skills.base import Context, Ids, in_list, scope
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.events import urine_sql, weight_sql, with_ctes
from ehr_magic.skills.items import CONCEPTS, RRT_PROCEDURES
from ehr_magic.skills.registry import register
from ehr_magic.skills.testing import icu_patient
from ehr_magic.skills.timeline import cohort_cte

STAY_IDS = ["subject_id", "hadm_id", "stay_id"]
FULL = 0.999  # a 6/12/24 h rate needs the whole period covered by urine charting


def _end(ctx: Context, hours: float | None) -> str:
    cap = "" if hours is None else f", k.intime + to_microseconds(CAST({float(hours)} * 3600e6 AS BIGINT))"
    return f"least(k.outtime, {ctx.cutoff}{cap})"


def _creatinine(ctx: Context, hours: float | None) -> pl.DataFrame:
    cr = CONCEPTS["creatinine"]
    ctx.require("labevents", "subject_id", "itemid", "charttime", "valuenum", why="creatinine")
    query = f"""{with_ctes(cohort_cte(ctx, 'stay'))},
    cr AS (SELECT k.stay_id AS key, l.charttime, avg(l.valuenum) AS creatinine FROM labevents l
           JOIN cohort k ON l.subject_id = k.subject_id
           WHERE l.itemid IN ({', '.join(map(str, cr.itemids))}) AND l.valuenum BETWEEN {cr.low} AND {cr.high}
             AND l.charttime BETWEEN k.intime - INTERVAL 7 DAY AND {_end(ctx, hours)} GROUP BY 1, 2),
    base AS (SELECT key, charttime, creatinine,
               min(creatinine) OVER (PARTITION BY key ORDER BY charttime
                                     RANGE BETWEEN INTERVAL 7 DAY PRECEDING AND CURRENT ROW) AS baseline_7d,
               min(creatinine) OVER (PARTITION BY key ORDER BY charttime
                                     RANGE BETWEEN INTERVAL 48 HOUR PRECEDING AND CURRENT ROW) AS lowest_48h
             FROM cr)
    SELECT k.subject_id, k.hadm_id, k.stay_id, b.charttime, b.creatinine, b.baseline_7d, b.lowest_48h
    FROM base b JOIN cohort k ON k.stay_id = b.key WHERE b.charttime >= k.intime - INTERVAL 6 HOUR
    ORDER BY k.stay_id, b.charttime"""
    frame = ctx.sql(query)
    return frame.with_columns(calc.kdigo_creatinine_stage(pl.col("creatinine"), pl.col("baseline_7d"),
                                                          pl.col("lowest_48h")).alias("stage"))


def _urine(ctx: Context, hours: float | None) -> pl.DataFrame:
    """Hourly urine output (each charted volume spread over the time since the previous chart),
    rolling 6/12/24 h rates in mL/kg/h where fully covered, and the stage by urine output."""
    if not ctx.has("outputevents", "stay_id", "itemid", "charttime", "value"):
        return pl.DataFrame()
    weight = weight_sql(ctx) if ctx.has("chartevents", "stay_id", "itemid", "charttime", "valuenum") else \
        "SELECT NULL::BIGINT AS key, NULL::TIMESTAMP AS charttime, NULL::DOUBLE AS weight WHERE FALSE"
    cut = _end(ctx, hours).replace("k.", "c.")
    query = f"""{with_ctes(cohort_cte(ctx, 'stay'), ('uo', urine_sql(ctx)), ('wt', weight))},
    charts AS (SELECT key, charttime, sum(volume) AS volume FROM uo GROUP BY 1, 2),
    iv AS (SELECT key, volume, charttime AS t1,
             coalesce(lag(charttime) OVER (PARTITION BY key ORDER BY charttime),
                      charttime - INTERVAL 1 HOUR) AS t0 FROM charts),
    hours AS (SELECT c.stay_id AS key, h.hr, c.intime + to_hours(CAST(h.hr AS BIGINT)) AS hs,
                     c.intime + to_hours(CAST(h.hr + 1 AS BIGINT)) AS he
              FROM cohort c, LATERAL (SELECT unnest(range(0, CAST(floor(greatest(epoch({cut} - c.intime), 0) / 3600)
                                                                AS BIGINT))) AS hr) h),
    hv AS (SELECT h.key, h.hr, h.he,
             sum(i.volume * epoch(least(i.t1, h.he) - greatest(i.t0, h.hs)) / nullif(epoch(i.t1 - i.t0), 0)) AS volume,
             coalesce(sum(epoch(least(i.t1, h.he) - greatest(i.t0, h.hs))) FILTER (WHERE i.t1 IS NOT NULL), 0)
               / 3600.0 AS covered
           FROM hours h LEFT JOIN iv i ON i.key = h.key AND i.t1 > h.hs AND i.t0 < h.he GROUP BY ALL),
    roll AS (SELECT key, hr, he,
               {', '.join(f"sum(volume) OVER (PARTITION BY key ORDER BY hr ROWS {n - 1} PRECEDING) AS v{n}, "
                          f"sum(covered) OVER (PARTITION BY key ORDER BY hr ROWS {n - 1} PRECEDING) AS c{n}"
                          for n in (6, 12, 24))},
               (SELECT arg_max(w.weight, w.charttime) FROM wt w WHERE w.key = hv.key AND w.charttime <= hv.he) AS weight
             FROM hv)
    SELECT k.subject_id, k.hadm_id, k.stay_id, r.hr, r.he AS charttime, r.weight,
           {', '.join(f"CASE WHEN r.c{n} >= {n * FULL} THEN greatest(r.v{n}, 0) / r.weight / {n} END AS uo_rate_{n}h"
                      for n in (6, 12, 24))},
           CASE WHEN r.c12 >= {12 * FULL} THEN greatest(r.v12, 0) END AS uo_volume_12h
    FROM roll r JOIN cohort k ON k.stay_id = r.key ORDER BY k.stay_id, r.hr"""
    frame = ctx.sql(query)
    return frame.with_columns(calc.kdigo_urine_output_stage(
        pl.col("uo_rate_6h"), pl.col("uo_rate_12h"), pl.col("uo_rate_24h"), pl.col("uo_volume_12h")).alias("stage"))


def _rrt(ctx: Context, hours: float | None) -> pl.DataFrame:
    if not (ctx.can("rrt") and ctx.has("procedureevents", "stay_id", "itemid", "starttime")):
        return pl.DataFrame(schema={"stay_id": pl.Int64, "rrt_time": pl.Datetime("us")})
    return ctx.sql(f"""{with_ctes(cohort_cte(ctx, 'stay'))}
        SELECT k.stay_id, min(p.starttime) AS rrt_time FROM procedureevents p JOIN cohort k ON p.stay_id = k.stay_id
        WHERE {in_list('p.itemid', RRT_PROCEDURES)} AND p.starttime <= {_end(ctx, hours)} GROUP BY 1""")


@register(Card(
    name="kdigo_aki",
    title="KDIGO acute kidney injury (AKI) stage",
    purpose="KDIGO AKI stage (0-3) per ICU stay from creatinine rises, low urine output and renal replacement "
            "therapy, over the whole stay or its first `hours` (e.g. hours=24 for the first day).",
    eligibility="ICU stays. Creatinine rises are judged against the lowest value of the previous 7 days "
                "(and 48 h), counting measurements from 6 h before ICU admission.",
    inputs="labevents: creatinine 50912 (from 7 days before ICU); outputevents: urine items (mimic-code list); "
           "chartevents: weight 226512/224639/226531; procedureevents: RRT 225802/225803/225805/225809/225955/"
           "225441.",
    output="One row per ICU stay: subject_id, hadm_id, stay_id, aki_stage (0-3), aki_stage_creatinine, "
           "aki_stage_urine_output, rrt (bool), aki_time (first time the stage was reached), creatinine_max, "
           "creatinine_baseline (7-day lowest at that creatinine), uo_rate_24h_min (mL/kg/h). With timeline=True: "
           "every creatinine and urine-output hour with its stage.",
    interpretation="Stage 1: creatinine +0.3 mg/dL in 48 h or 1.5-1.9x baseline, or urine < 0.5 mL/kg/h for 6 h; "
                   "stage 2: 2.0-2.9x, or < 0.5 mL/kg/h for 12 h; stage 3: >= 3x or >= 4.0 mg/dL (with an acute "
                   "rise) or RRT, or < 0.3 mL/kg/h for 24 h or anuria for 12 h.",
    source="Kidney Disease: Improving Global Outcomes (KDIGO) Acute Kidney Injury Work Group. KDIGO Clinical "
           "Practice Guideline for Acute Kidney Injury. Kidney Int Suppl 2012;2:1-138. After mimic-code "
           "kdigo_creatinine/kdigo_uo/kdigo_stages.",
    limits="Baseline = lowest creatinine in the previous 7 days (no pre-admission baseline). Each urine volume "
           "is spread over the time since the previous chart (the first over 1 h); a rate needs its 6/12/24 h "
           "fully covered and a weight charted by then. RRT is not recorded on ehrsql_mimic_iv (dropped there).",
    level="ICU stay",
    keywords=("kdigo", "aki", "acute kidney injury", "aki stage", "kidney injury", "renal failure",
              "creatinine rise", "oliguria"),
    vectors=(
        Vector("Creatinine 0.8 a day before ICU, 1.2 at 10 h (+0.4 in 34 h): stage 1",
               {"aki_stage": 1, "aki_stage_creatinine": 1, "aki_time": "2180-01-02 10:00:00"},
               data=icu_patient(labs=[(50912, -24, 0.8), (50912, 10, 1.2)])),
        Vector("1.0 four days before, 1.4 at 10 h: < 1.5x and no 48 h rise: stage 0", {"aki_stage": 0},
               data=icu_patient(labs=[(50912, -100, 1.0), (50912, 10, 1.4)], admit_hours_before=120)),
        Vector("1.0 then 2.1 (2.1x): stage 2", {"aki_stage": 2, "creatinine_max": 2.1, "creatinine_baseline": 1.0},
               data=icu_patient(labs=[(50912, -24, 1.0), (50912, 20, 2.1)])),
        Vector("0.8 then 2.5 (3.1x): stage 3", {"aki_stage": 3, "aki_stage_urine_output": None},
               data=icu_patient(labs=[(50912, -24, 0.8), (50912, 20, 2.5)])),
        Vector("Same patient as of 15 h: only the baseline is known: stage 0",
               {"aki_stage": 0}, call={"as_of": "2180-01-02 15:00:00"},
               data=icu_patient(labs=[(50912, -24, 0.8), (50912, 20, 2.5)])),
        Vector("80 kg, 30 mL urine every hour for 13 h (0.375 mL/kg/h): stage 2 at 12 h",
               {"aki_stage": 2, "aki_stage_urine_output": 2, "aki_time": "2180-01-02 12:00:00"},
               data=icu_patient(chart=[(226512, 0, 80.0)], outputs=[(226559, h, 30) for h in range(1, 14)],
                                los_hours=13)),
        Vector("80 kg, 0 mL charted every hour for 12 h (anuria): stage 3", {"aki_stage_urine_output": 3},
               data=icu_patient(chart=[(226512, 0, 80.0)], outputs=[(226559, h, 0) for h in range(1, 13)],
                                los_hours=12)),
        Vector("80 kg, 50 mL/h (0.625 mL/kg/h): stage 0", {"aki_stage": 0, "aki_stage_urine_output": 0},
               data=icu_patient(chart=[(226512, 0, 80.0)], outputs=[(226559, h, 50) for h in range(1, 14)],
                                los_hours=13)),
        Vector("CRRT started at 5 h: stage 3", {"aki_stage": 3, "rrt": True},
               data=icu_patient(procedures=[(225802, 5, 30)])),
    ),
))
def kdigo_aki(ehr: Database, *, stay_ids: Ids = None, hadm_ids: Ids = None, subject_ids: Ids = None, as_of: Any = None,
              hours: float | None = None, timeline: bool = False) -> pl.DataFrame:
    ctx = Context(ehr, scope(stay_ids, hadm_ids, subject_ids, as_of), "kdigo_aki")
    cr, uo, rrt = _creatinine(ctx, hours), _urine(ctx, hours), _rrt(ctx, hours)
    stays = ctx.sql(f"{with_ctes(cohort_cte(ctx, 'stay'))} SELECT subject_id, hadm_id, stay_id, intime FROM cohort "
                    "ORDER BY stay_id")
    cr_rows = cr.select(*STAY_IDS, "charttime", pl.lit("creatinine").alias("source"), "stage", "creatinine",
                        "baseline_7d", pl.lit(None, dtype=pl.Float64).alias("uo_rate_6h"),
                        pl.lit(None, dtype=pl.Float64).alias("uo_rate_12h"),
                        pl.lit(None, dtype=pl.Float64).alias("uo_rate_24h"))
    uo_rows = (uo.filter(pl.col("stage").is_not_null()).select(
        *STAY_IDS, "charttime", pl.lit("urine_output").alias("source"), "stage",
        pl.lit(None, dtype=pl.Float64).alias("creatinine"), pl.lit(None, dtype=pl.Float64).alias("baseline_7d"),
        "uo_rate_6h", "uo_rate_12h", "uo_rate_24h") if uo.height else cr_rows.clear())
    rrt_rows = rrt.join(stays, on="stay_id").select(
        *STAY_IDS, pl.col("rrt_time").alias("charttime"), pl.lit("rrt").alias("source"),
        pl.lit(3, dtype=pl.Int64).alias("stage"), *[pl.lit(None, dtype=pl.Float64).alias(c) for c in
                                                    ("creatinine", "baseline_7d", "uo_rate_6h", "uo_rate_12h",
                                                     "uo_rate_24h")])
    events = pl.concat([cr_rows.cast({"stage": pl.Int64}), uo_rows.cast({"stage": pl.Int64}), rrt_rows],
                       how="vertical_relaxed").sort("stay_id", "charttime")
    if timeline:
        return events
    top = events.sort("stay_id", pl.col("stage"), "charttime", descending=[False, True, False]).group_by(
        "stay_id", maintain_order=True).first().select("stay_id", pl.col("stage").alias("aki_stage"),
                                                       pl.col("charttime").alias("aki_time"))
    by_source = events.group_by("stay_id").agg(
        pl.col("stage").filter(pl.col("source") == "creatinine").max().alias("aki_stage_creatinine"),
        pl.col("stage").filter(pl.col("source") == "urine_output").max().alias("aki_stage_urine_output"),
        (pl.col("source") == "rrt").any().alias("rrt"),
        pl.col("creatinine").max().alias("creatinine_max"),
        pl.col("baseline_7d").sort_by("creatinine", descending=True).first().alias("creatinine_baseline"),
        pl.col("uo_rate_24h").min().alias("uo_rate_24h_min"),
    )
    out = stays.select(*STAY_IDS).join(top, on="stay_id", how="left").join(by_source, on="stay_id", how="left")
    return out.with_columns(
        pl.col("aki_stage").fill_null(0), pl.col("rrt").fill_null(False),
        pl.when(pl.col("aki_stage") > 0).then(pl.col("aki_time")).alias("aki_time"),
    ).select(*STAY_IDS, "aki_stage", "aki_stage_creatinine", "aki_stage_urine_output", "rrt", "aki_time",
             "creatinine_max", "creatinine_baseline", "uo_rate_24h_min")
