"""Reuse thresholds come from the memory alone: cross-validation inside its cells."""

from __future__ import annotations

from pathlib import Path

import pytest

from datapaths import EHRSQL_DIR
from ehr_magic.db import connect
from ehr_magic.eval.answerers import gold_examples
from ehr_magic.eval.datasets import load_split
from ehr_magic.eval.sqlite_dialect import translator_for
from ehr_magic.memory import MemoryStore
from ehr_magic.reuse import Reuser
from ehr_magic.reuse.calibrate import Calibration, Observation, choose, fingerprint, observe, wilson_lower
from ehr_magic.reuse.match import DEFAULT_THRESHOLD


def test_wilson_lower_bound() -> None:
    assert wilson_lower(0, 0) == 0.0
    assert wilson_lower(98, 100) == pytest.approx(0.9404, abs=1e-3)
    assert wilson_lower(980, 1000) < 0.98 < wilson_lower(995, 1000)


def test_choose_answers_as_much_as_the_precision_bound_allows() -> None:
    # High similarity: always right; middle: one in five wrong; low: mostly wrong.
    observations = ([Observation(0.9, 0.3, True)] * 400 + [Observation(0.6, 0.3, i % 5 != 0) for i in range(100)]
                    + [Observation(0.3, 0.3, i % 2 == 0) for i in range(100)])
    calibration = choose(observations)
    assert calibration.source == "cross-validation"
    assert calibration.threshold == 0.9 and calibration.answered == 400
    assert calibration.lower_bound >= 0.98
    # each answer's own chance counts, not the average: at a 90% target the middle band (80%)
    # stays out although the average over both bands would be 96%; at 75% it comes in
    assert choose(observations, target=0.9).threshold == 0.9
    assert choose(observations, target=0.75).threshold == 0.6


def test_too_little_evidence_keeps_the_defaults() -> None:
    calibration = choose([Observation(0.9, 0.3, True)] * 10)
    assert calibration.source == "default" and calibration.threshold == DEFAULT_THRESHOLD
    assert "too few" in calibration.describe()


@pytest.fixture(scope="module")
def train_cells(ehrsql_db: Path) -> list[tuple[int, str, str]]:
    with connect(ehrsql_db) as ehr:
        examples = gold_examples(load_split(EHRSQL_DIR, "train"), translator_for(ehr))
    return [(i, e.question, e.code) for i, e in enumerate(examples[:400])]


def test_cross_validation_judges_answers_by_the_held_out_cells_own_code(ehrsql_db: Path, train_cells) -> None:
    with connect(ehrsql_db) as ehr:
        observations = observe(ehr, train_cells, folds=4)
    assert len(observations) > 100
    right = sum(o.correct for o in observations)
    assert 0 < right <= len(observations)
    assert all(o.score > 0 for o in observations)


def test_a_store_s_calibration_is_saved_and_follows_its_cells(tmp_path: Path, ehrsql_db: Path, train_cells) -> None:
    store = MemoryStore(tmp_path / "memory.sqlite")
    with connect(ehrsql_db) as ehr:
        for _, question, code in train_cells[:300]:
            store.add(question, code, origin="imported", schema=ehr.schema)
        reuser = Reuser.from_store(ehr, store)
        calibration = reuser.calibrate(folds=4)
        assert calibration.observations > 50
        assert (reuser.index.threshold, reuser.index.margin) == (calibration.threshold, calibration.margin)
        assert Path(f"{store.path}.calibration.json").is_file()
        # a new reuser over the same memory picks the saved calibration up
        again = Reuser.from_store(ehr, store)
        assert again.calibration == calibration
        # thresholds given explicitly win
        assert Reuser.from_store(ehr, store, threshold=0.9).index.threshold == 0.9
        # once the memory changes, the saved calibration no longer applies
        store.add(train_cells[300][1], train_cells[300][2], origin="imported", schema=ehr.schema)
        changed = Reuser.from_store(ehr, store)
        assert changed.calibration != calibration and changed.calibration.source == "default"
        assert fingerprint(changed.cells()) != fingerprint(again.cells())


def test_calibration_is_a_value(tmp_path: Path) -> None:
    calibration = Calibration(0.5, 0.05, observations=100, answered=90, correct=89, lower_bound=0.95,
                              source="cross-validation")
    assert Calibration(**calibration.to_dict()) == calibration
    assert "89/90" in calibration.describe()
