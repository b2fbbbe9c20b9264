"""The Data tab's requests (protocol v2): the knowledge view, writing the file to edit and
importing it, served by the same session calls as ``%ehr knowledge`` (real shell, real
DuckDB file of a CSV folder, the fake model server)."""

from __future__ import annotations

import shutil
import types
from pathlib import Path

import pytest
import yaml

from ehr_magic.panel import TARGET
from test_csv_folder import synthea_db  # noqa: F401  (the fixture: the Synthea folder loaded once)
from test_magic import ipython_shell
from test_panel_comm import FakeComm, FakeCommManager, Panel

MEANING = "One row per visit of a patient to a clinic or hospital."


@pytest.fixture()
def ip(synthea_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    db = tmp_path / "synthea.duckdb"
    shutil.copy(synthea_db, db)
    folder = tmp_path / "notebooks"
    folder.mkdir()
    monkeypatch.chdir(folder)
    yield from ipython_shell(db, monkeypatch, tmp_path, kernel=types.SimpleNamespace(comm_manager=FakeCommManager()))


@pytest.fixture()
def panel(ip) -> Panel:
    comm = FakeComm()
    ip.kernel.comm_manager.targets[TARGET](comm, {"content": {"data": {}}})
    return Panel(comm, ip._ehr_magic[0], version=2)


def test_the_view_is_the_sessions_view(ip, panel) -> None:
    view = panel.result("knowledge")["knowledge"]
    assert view == ip._ehr_magic[0].session.knowledge_view().to_dict()  # the same call as the magic
    assert view["clock"] == {"time_model": "calendar", "now": "2024-02-07 23:24:16", "mark": "drafted",
                             "text": view["clock"]["text"]}
    encounters = next(t for t in view["tables"] if t["name"] == "encounters")
    assert encounters["meaning_mark"] == "drafted" and encounters["key"] == "id"
    assert encounters["joins"][0]["arrow"] == "encounters.patient -> patients.id"
    assert "encounterclass" in encounters["lookup"]
    assert {"name": "encounterclass", "dtype": "VARCHAR", "lookup": True, "key": False,
            "mark": "drafted"}.items() <= next(
        c for c in encounters["columns"] if c["name"] == "encounterclass").items()


def test_edit_then_a_bad_import_shows_problems_and_stores_nothing(ip, panel) -> None:
    edited = panel.result("knowledge.edit")
    assert edited["name"] == "csv_synthea.knowledge.yaml" and edited["written"] is True
    assert "press Import in the Data tab" in edited["message"]
    path = Path(edited["path"])
    data = yaml.safe_load(path.read_text())
    data["tables"]["encounters"]["columns"]["patinet"] = "a typo"
    data["tables"]["encounters"]["joins"] = ["patients ON encounters.code = patients.id"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    stored = ip.user_ns["ehr"].stored_knowledge
    result = panel.result("knowledge.import", path=edited["name"])
    assert result["imported"] is False and len(result["problems"]) == 2
    assert ("column encounters.patinet, which encounters does not have (did you mean 'patient'?)"
            in result["problems"][0])
    assert "compares encounters.code (BIGINT) with patients.id (VARCHAR)" in result["problems"][1]
    assert ip.user_ns["ehr"].stored_knowledge == stored
    assert panel.error("knowledge.import", path=["x"])["code"] == "bad_params"


def test_an_import_changes_what_the_next_ask_carries(ip, panel, fake_llm) -> None:
    path = Path(panel.result("knowledge.edit")["path"])
    data = yaml.safe_load(path.read_text())
    data["tables"]["encounters"]["row"] = MEANING
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    result = panel.result("knowledge.import")  # the file Edit wrote, by default
    assert result["imported"] is True and "The next question uses it." in result["message"]
    encounters = next(t for t in result["knowledge"]["tables"] if t["name"] == "encounters")
    assert encounters["meaning"].startswith(MEANING) and encounters["meaning_mark"] == "confirmed"
    assert ip.user_ns["ehr"] is ip._ehr_magic[0].session.ehr  # the notebook's ehr is the reconnected one
    fake_llm.enqueue("```python\nanswer = ehr.count('encounters')\n```")
    assert panel.result("ask", question="How many encounters are there?")["status"] == "answered"
    assert MEANING in fake_llm.chat_requests()[-1].text
