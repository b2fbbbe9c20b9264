"""Pure calculators: hand-computed reference vectors, and the same thresholds on polars columns."""

from __future__ import annotations

import math

import polars as pl
import pytest

from ehr_magic.skills import calculators as calc
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.registry import builtin
from ehr_magic.skills.testing import check

CALCULATORS = {n: s for n, s in builtin().items() if s.card.kind == "calculator"}
VECTORS = [(name, v) for name, s in CALCULATORS.items() for v in s.card.vectors]


@pytest.mark.parametrize(("name", "vector"), VECTORS, ids=[f"{n}: {v.description}" for n, v in VECTORS])
def test_calculator_vector(name, vector):
    assert check(CALCULATORS[name].fn(**vector.call), vector.expected) == []


@pytest.mark.parametrize(("name", "vector"), VECTORS, ids=[f"{n}: {v.description}" for n, v in VECTORS])
def test_calculator_gives_the_same_on_polars_columns(name, vector):
    """The EHR skills apply calculators to columns; the column result must equal the scalar one."""
    if name == "calc.charlson_index":
        conditions = {k: pl.col(k) for k in vector.call["conditions"]}
        frame = pl.DataFrame({k: [v] for k, v in vector.call["conditions"].items()})
        expr = calc.charlson_index(conditions, pl.lit(vector.call["age"]) if "age" in vector.call else None)
    else:
        frame = pl.DataFrame({k: [v] for k, v in vector.call.items()},
                             schema={k: (pl.String if isinstance(v, str) else pl.Boolean if isinstance(v, bool)
                                         else pl.Float64) for k, v in vector.call.items()})
        expr = CALCULATORS[name].fn(**{k: pl.col(k) for k in vector.call})
    value = frame.select(expr.alias("out"))["out"][0]
    assert check(value, vector.expected) == []


def test_every_calculator_has_vectors():
    assert len(CALCULATORS) >= 20
    assert all(s.card.vectors for s in CALCULATORS.values())


def test_egfr_published_examples():
    # Inker 2021 (NEJM) equation; values checked by hand to 2 decimals.
    assert calc.egfr_ckd_epi_2021(0.7, 50, "F") == pytest.approx(142 * 0.9938**50 * 1.012)
    assert calc.egfr_ckd_epi_2021(1.0, 60, "male") == pytest.approx(86.16, abs=0.01)
    assert calc.egfr_ckd_epi_2021(None, 60, "M") is None
    with pytest.raises(SkillError, match="sex"):
        calc.egfr_ckd_epi_2021(1.0, 60, "X")
    with pytest.raises(SkillError, match="positive"):
        calc.egfr_ckd_epi_2021(0, 60, "F")


def test_missing_inputs():
    assert calc.sofa_points_coagulation(None) is None
    assert calc.sofa_points_cardiovascular(None) is None
    assert calc.sofa_total(None, 2, None, 3) == 5
    assert calc.qsofa(None, None, None) == 0
    assert calc.anion_gap(140, None, 24) is None
    assert calc.bmi(70, 0) is None
    assert calc.shock_index(100, 0) is None
    assert calc.kdigo_creatinine_stage(None, 1.0) is None


def test_fio2_and_pf_ratio():
    assert calc.fio2_fraction(40) == 0.4
    assert calc.fio2_fraction(0.4) == 0.4
    assert calc.fio2_fraction(4) is None  # oxygen flow in L/min mistaken for FiO2
    assert calc.pf_ratio(80, 4) is None


def test_fio2_sql_matches_python():
    import duckdb

    from ehr_magic.skills.events import fio2_fraction_sql

    con = duckdb.connect()
    for raw in (0.1, 0.21, 0.5, 1.0, 4.0, 20.9, 21.0, 55.0, 100.0, 101.0):
        sql = con.execute(f"SELECT {fio2_fraction_sql(str(raw))} AS f").fetchone()[0]
        py = calc.fio2_fraction(raw)
        assert (sql is None and py is None) or math.isclose(sql, py), raw


def test_gcs_total_checks_ranges():
    assert calc.gcs_total(4, 5, 6) == 15
    with pytest.raises(SkillError, match="motor"):
        calc.gcs_total(4, 5, 7)


def test_charlson_hierarchy_and_unknown_condition():
    assert calc.charlson_index({"mild_liver_disease": 1, "severe_liver_disease": 1}) == 3
    assert calc.charlson_index({"malignant_cancer": 1}, age=85) == 2 + 4
    with pytest.raises(SkillError, match="Unknown Charlson"):
        calc.charlson_index({"gout": 1})
    assert calc.charlson_ten_year_survival(0) == pytest.approx(0.983)
