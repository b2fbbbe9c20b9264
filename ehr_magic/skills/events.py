"""SQL for the derived timelines several skills share: GCS, blood pressure, blood gases
(P/F ratio, ventilation), vasopressor infusions, urine output and weight.

Each builder returns the body of a CTE (or a list of named CTEs) over a CTE named ``cohort`` of ICU stays
(subject_id, hadm_id, stay_id, intime, outtime); rows are keyed ``key`` (= stay_id) and
never charted after the context's as_of.
"""

from __future__ import annotations

from ehr_magic.skills.base import LOOKBACK_HOURS, Context, in_list
from ehr_magic.skills.items import (
    Concept,
    CONCEPTS, SPECIMEN_TYPE_ITEM, URINE_NEGATIVE_ITEMS, URINE_OUTPUT_ITEMS, VASOPRESSORS,
    VENTILATION_PROCEDURES, VENTILATOR_CHART_ITEMS,
)

GCS_CARRY_HOURS = 6  # a GCS component charted alone is completed with the others of the past 6 h
FIO2_CHART_HOURS = 4  # a blood gas without its own FiO2 takes the charted FiO2 of the past 4 h
VENT_CHART_HOURS = 6  # a ventilator setting charted in the past 6 h means respiratory support

# FiO2 in percent or fraction -> fraction (as calculators.fio2_fraction), in SQL over `x`.
FIO2_FRACTION_SQL = ("CASE WHEN x BETWEEN 21 AND 100 THEN x / 100.0 "
                     "WHEN x BETWEEN 0.21 AND 1 THEN x END")


def fio2_fraction_sql(column: str) -> str:
    return "(" + FIO2_FRACTION_SQL.replace("x", column) + ")"


def _chart(ctx: Context, why: str) -> None:
    ctx.require("chartevents", "stay_id", "itemid", "charttime", "valuenum", why=why)


def gcs_sql(ctx: Context) -> str:
    """key, charttime, eye, verbal, motor (last known within 6 h), gcs (their sum, 3-15)."""
    ctx.capability("gcs")
    _chart(ctx, "GCS")
    eye, verbal, motor = (CONCEPTS[n] for n in ("gcs_eye", "gcs_verbal", "gcs_motor"))
    ids = eye.itemids + verbal.itemids + motor.itemids

    def part(c: Concept) -> str:
        return (f"max(CASE WHEN e.itemid IN ({', '.join(map(str, c.itemids))}) "
                f"AND e.valuenum BETWEEN {c.low} AND {c.high} THEN e.valuenum END)")

    window = (f"(PARTITION BY key ORDER BY charttime "
              f"RANGE BETWEEN INTERVAL {GCS_CARRY_HOURS} HOUR PRECEDING AND CURRENT ROW)")
    return f"""
    SELECT key, charttime, eye, verbal, motor, eye + verbal + motor AS gcs FROM (
      SELECT key, charttime,
             last_value(eye IGNORE NULLS) OVER {window} AS eye,
             last_value(verbal IGNORE NULLS) OVER {window} AS verbal,
             last_value(motor IGNORE NULLS) OVER {window} AS motor
      FROM (
        SELECT k.stay_id AS key, e.charttime, {part(eye)} AS eye, {part(verbal)} AS verbal, {part(motor)} AS motor
        FROM chartevents e JOIN cohort k ON e.stay_id = k.stay_id
        WHERE {in_list('e.itemid', ids)} AND e.valuenum IS NOT NULL AND e.charttime <= {ctx.cutoff}
        GROUP BY 1, 2
      )
    )"""


def bp_sql(ctx: Context) -> str:
    """key, charttime, sbp, dbp, map_measured, heart_rate (means of what was charted at that time)."""
    _chart(ctx, "blood pressure")
    c = {n: CONCEPTS[n] for n in ("sbp", "dbp", "map", "heart_rate")}
    ids = sum((x.itemids for x in c.values()), ())

    def avg(x: Concept) -> str:
        return (f"avg(CASE WHEN e.itemid IN ({', '.join(map(str, x.itemids))}) "
                f"AND e.valuenum BETWEEN {x.low} AND {x.high} THEN e.valuenum END)")

    return f"""
    SELECT k.stay_id AS key, e.charttime, {avg(c['sbp'])} AS sbp, {avg(c['dbp'])} AS dbp,
           {avg(c['map'])} AS map_measured, {avg(c['heart_rate'])} AS heart_rate
    FROM chartevents e JOIN cohort k ON e.stay_id = k.stay_id
    WHERE {in_list('e.itemid', ids)} AND e.valuenum IS NOT NULL AND e.charttime <= {ctx.cutoff}
    GROUP BY 1, 2"""


def ventilation_sql(ctx: Context) -> str | None:
    """key, starttime, endtime of respiratory support (None when nothing records it)."""
    parts = []
    if ctx.can("ventilation") and ctx.has("procedureevents", "stay_id", "itemid", "starttime", "endtime"):
        parts.append(
            f"SELECT p.stay_id AS key, p.starttime, coalesce(p.endtime, p.starttime) AS endtime "
            f"FROM procedureevents p JOIN cohort k ON p.stay_id = k.stay_id "
            f"WHERE {in_list('p.itemid', VENTILATION_PROCEDURES)} AND p.starttime <= {ctx.cutoff}")
    if ctx.can("ventilation") and ctx.has("chartevents", "stay_id", "itemid", "charttime"):
        parts.append(
            f"SELECT e.stay_id AS key, e.charttime AS starttime, "
            f"e.charttime + INTERVAL {VENT_CHART_HOURS} HOUR AS endtime "
            f"FROM chartevents e JOIN cohort k ON e.stay_id = k.stay_id "
            f"WHERE {in_list('e.itemid', VENTILATOR_CHART_ITEMS)} AND e.charttime <= {ctx.cutoff}")
    return " UNION ALL ".join(parts) if parts else None


def abg_ctes(ctx: Context) -> list[tuple[str, str]]:
    """CTEs ending in ``abg``: key, charttime, pao2, fio2 (as recorded), fio2_source, ventilated:
    arterial blood gases of ICU stays (from 6 h before ICU admission), each with its FiO2."""
    ctx.require("labevents", "subject_id", "itemid", "charttime", "valuenum", why="blood gases")
    pao2, fio2_lab, fio2_chart = CONCEPTS["pao2"], CONCEPTS["fio2_lab"], CONCEPTS["fio2_chart"]
    by_specimen = ctx.can("specimen_type") and ctx.has("labevents", "specimen_id", "value")
    arterial = "TRUE"
    if by_specimen:
        arterial = (f"NOT EXISTS (SELECT 1 FROM labevents s WHERE s.specimen_id = l.specimen_id "
                    f"AND s.itemid = {SPECIMEN_TYPE_ITEM} AND upper(s.value) NOT LIKE 'ART%')")
    same = ("f.specimen_id = g.specimen_id" if by_specimen
            else "f.subject_id = g.subject_id AND f.charttime = g.charttime")
    fio2_lab_sql = (f"(SELECT max(f.valuenum) FROM labevents f WHERE {same} AND f.itemid IN "
                    f"({', '.join(map(str, fio2_lab.itemids))}) AND {fio2_fraction_sql('f.valuenum')} IS NOT NULL)")
    fio2_chart_sql = "NULL"
    if ctx.can("fio2_chart") and ctx.has("chartevents", "stay_id", "itemid", "charttime", "valuenum"):
        fio2_chart_sql = (
            f"(SELECT arg_max(c.valuenum, c.charttime) FROM chartevents c WHERE c.stay_id = g.key "
            f"AND c.itemid IN ({', '.join(map(str, fio2_chart.itemids))}) "
            f"AND c.charttime BETWEEN g.charttime - INTERVAL {FIO2_CHART_HOURS} HOUR AND g.charttime "
            f"AND {fio2_fraction_sql('c.valuenum')} IS NOT NULL)")
    vent = ventilation_sql(ctx)
    ventilated = ("EXISTS (SELECT 1 FROM vent v WHERE v.key = g.key AND g.charttime BETWEEN v.starttime "
                  "AND v.endtime)" if vent else "FALSE")
    specimen = "l.specimen_id" if by_specimen else "NULL::BIGINT"
    abg = f"""
    SELECT key, charttime, pao2, coalesce(fio2_lab, fio2_chart) AS fio2,
           CASE WHEN fio2_lab IS NOT NULL THEN 'blood gas' WHEN fio2_chart IS NOT NULL THEN 'charted' END
             AS fio2_source, ventilated
    FROM (
      SELECT g.key, g.charttime, g.pao2, {fio2_lab_sql} AS fio2_lab, {fio2_chart_sql} AS fio2_chart,
             {ventilated} AS ventilated
      FROM (
        SELECT k.stay_id AS key, l.subject_id, l.charttime, {specimen} AS specimen_id, l.valuenum AS pao2
        FROM labevents l JOIN cohort k ON l.subject_id = k.subject_id
        WHERE l.itemid IN ({', '.join(map(str, pao2.itemids))}) AND l.valuenum BETWEEN {pao2.low} AND {pao2.high}
          AND l.charttime BETWEEN k.intime - INTERVAL {LOOKBACK_HOURS} HOUR AND k.outtime
          AND l.charttime <= {ctx.cutoff} AND {arterial}
      ) g
    )"""
    return ([("vent", vent)] if vent else []) + [("abg", abg)]


def vasopressor_sql(ctx: Context) -> str:
    """key, starttime, endtime, drug, rate (mcg/kg/min) of norepinephrine, epinephrine, dopamine
    and dobutamine infusions started by as_of."""
    ctx.capability("vasopressor_rate")
    ctx.require("inputevents", "stay_id", "itemid", "starttime", "endtime", "rate", "rateuom",
                why="vasopressor infusion rates")
    weight = "i.patientweight" if ctx.has("inputevents", "patientweight") else "NULL::DOUBLE"
    drug = " ".join(f"WHEN {i} THEN '{name}'" for name, i in VASOPRESSORS.items())
    return f"""
    SELECT k.stay_id AS key, i.starttime, coalesce(i.endtime, i.starttime) AS endtime,
           CASE i.itemid {drug} END AS drug,
           CASE lower(i.rateuom) WHEN 'mcg/kg/min' THEN i.rate WHEN 'mg/kg/min' THEN i.rate * 1000
                WHEN 'mcg/min' THEN i.rate / nullif({weight}, 0)
                WHEN 'mg/min' THEN i.rate * 1000 / nullif({weight}, 0) END AS rate
    FROM inputevents i JOIN cohort k ON i.stay_id = k.stay_id
    WHERE {in_list('i.itemid', tuple(VASOPRESSORS.values()))} AND i.rate > 0 AND i.starttime <= {ctx.cutoff}"""


def urine_sql(ctx: Context) -> str:
    """key, charttime, volume (mL; GU irrigant in subtracted, so a volume can be negative; sums over
    a window are floored at 0) of urine output charted by as_of."""
    ctx.require("outputevents", "stay_id", "itemid", "charttime", "value", why="urine output")
    return f"""
    SELECT k.stay_id AS key, o.charttime,
           CASE WHEN {in_list('o.itemid', URINE_NEGATIVE_ITEMS)} THEN -1 ELSE 1 END
             * TRY_CAST(o.value AS DOUBLE) AS volume
    FROM outputevents o JOIN cohort k ON o.stay_id = k.stay_id
    WHERE {in_list('o.itemid', URINE_OUTPUT_ITEMS)} AND o.charttime <= {ctx.cutoff}
      AND TRY_CAST(o.value AS DOUBLE) IS NOT NULL"""


def weight_sql(ctx: Context) -> str:
    """key, charttime, weight (kg) charted in the ICU by as_of."""
    _chart(ctx, "weight")
    w = CONCEPTS["weight"]
    values = ctx.values_sql(w, "cohort", "stay_id", "k.intime - INTERVAL 1 DAY", "k.outtime")
    return f"SELECT key, charttime, value AS weight FROM ({values}) WHERE {ctx.valid(w)}"


def with_ctes(*parts: tuple[str, str] | list[tuple[str, str]]) -> str:
    """``WITH a AS (...), b AS (...)`` from (name, body) pairs or lists of them."""
    flat: list[tuple[str, str]] = []
    for part in parts:
        flat.extend(part if isinstance(part, list) else [part])
    return "WITH " + ",\n".join(f"{name} AS ({body})" for name, body in flat)
