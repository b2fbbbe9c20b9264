"""Who wrote what survives: statements a person changed become confirmed on import, and
re-loading the same folder keeps them while re-drafting the rest (real DuckDB files)."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import yaml

import ehr_magic
from ehr_magic.db import knowledge_io
from ehr_magic.knowledge import store as knowledge_store
from ehr_magic import sources
from ehr_magic.knowledge.view import knowledge_view
from test_csv_folder import SYNTHEA, synthea_db  # noqa: F401  (the fixture: the Synthea folder loaded once)

MEANING = "One row per visit of a patient to a clinic or hospital."
JOIN = "patients ON encounters.patient = patients.id"


def test_a_redraft_keeps_what_a_person_confirmed(synthea_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    shutil.copy(synthea_db, db)
    edit = tmp_path / "k.yaml"
    knowledge_io.export_knowledge(db, edit)
    data = yaml.safe_load(edit.read_text())
    data["tables"]["encounters"].update(row=MEANING, joins=[JOIN])
    data["tables"]["patients"]["confirmed"] = ["lookup"]  # confirmed as drafted, unchanged
    data["clock"] = "encounters.start"
    edit.write_text(yaml.safe_dump(data, sort_keys=False))
    knowledge_io.import_knowledge(db, edit)
    with ehr_magic.connect(db) as ehr:
        assert ehr.now == dt.datetime(2024, 2, 2, 20, 27, 14)  # the latest encounters.start
        assert ehr.knowledge.tables["encounters"].confirmed == ("meaning", "joins")

    sources.load("csv", [SYNTHEA], db)  # the same folder again
    with ehr_magic.connect(db) as ehr:
        knowledge = ehr.knowledge
        encounters = knowledge.tables["encounters"]
        assert encounters.row == MEANING and encounters.joins == (JOIN,)
        assert knowledge.mark("meaning", "encounters") == knowledge.mark("joins", "encounters") == "confirmed"
        assert knowledge.mark("key", "encounters") == "drafted" and encounters.key == "id"
        assert knowledge.mark("lookup", "patients") == "confirmed"
        assert knowledge.mark("meaning", "patients") == "drafted"
        assert knowledge.tables["careplans"].joins == (JOIN.replace("encounters", "careplans"),
                                                       "encounters ON careplans.encounter = encounters.id")
        assert knowledge.clock == ("encounters.start",) and knowledge.mark("clock") == "confirmed"
        assert ehr.now == dt.datetime(2024, 2, 2, 20, 27, 14)
        view = knowledge_view(ehr)
        assert view.table("encounters").joins[0].arrow == "encounters.patient -> patients.id"
        assert view.counts()["confirmed"] == 3  # meanings, keys, joins and lookups: not the clock

    sources.load("csv", [SYNTHEA], db, now="2030-01-01 00:00:00")  # a clock given at load wins
    with ehr_magic.connect(db) as ehr:
        assert ehr.now == dt.datetime(2030, 1, 1) and ehr.knowledge.mark("clock") == "drafted"
        assert ehr.knowledge.tables["encounters"].row == MEANING


def test_a_packaged_description_is_written_by_people(ehrsql_db: Path) -> None:
    with ehr_magic.connect(ehrsql_db) as ehr:
        view = knowledge_view(ehr)
    assert view.origin.startswith("packaged") and view.counts()["drafted"] == 0 and view.clock.mark == "confirmed"
    admissions = view.table("admissions")
    assert "admissions.subject_id -> patients.subject_id" in [j.arrow for j in admissions.joins]


def test_a_packaged_description_fits_its_data(ehrsql_db: Path) -> None:
    """No false alarms: the people-written MIMIC-IV description passes every import check."""
    with ehr_magic.connect(ehrsql_db) as ehr:
        assert knowledge_store.problems(ehr.knowledge, ehr) == []
