"""The side panel's Data tab in a real browser, on a CSV folder's database whose knowledge
was drafted from the data: it lists the tables with their marks, Edit opens the knowledge
file in JupyterLab's editor, a bad Import shows its problems in the tab and stores nothing,
a good one is marked confirmed and is what the next Ask request carries. The screenshot goes
to docs/panel-data.png. JupyterLab, Chromium and the fake model as in test_panel_browser.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import ehr_magic
from fake_llm import FakeReply
from test_csv_folder import synthea_db  # noqa: F401  (the Synthea folder loaded once)
from test_panel_browser import DOCS, in_browser, lab, open_panel  # noqa: F401  (lab: the fixture)

MEANING = "One row per visit of a patient to a clinic or hospital."
QUESTION = "How many encounters are there?"

pytestmark = pytest.mark.slow


@pytest.fixture()
def ehrsql_db(synthea_db: Path, tmp_path: Path) -> Path:
    """The database ``lab`` serves: here a copy of the Synthea folder's (imports write into it)."""
    db = tmp_path / "synthea.duckdb"
    shutil.copy(synthea_db, db)
    return db


def test_the_data_tab_shows_and_corrects_the_knowledge(lab, ehrsql_db: Path, tmp_path: Path) -> None:
    lab["llm"].responder = lambda request: FakeReply(text="```python\nanswer = ehr.count('encounters')\n```")
    in_browser(lab, tmp_path, lambda page, expect: _scenario(page, expect, lab, ehrsql_db))


def _scenario(page, expect, lab, db: Path) -> None:
    panel = open_panel(page, expect, lab, 460)

    # the tables, one line each, with their drafted marks
    panel.get_by_role("tab", name="Data").click()
    tables = panel.locator(".jp-EhrAssistant-dataTable")
    expect(tables).to_have_count(18)
    encounters = panel.locator(".jp-EhrAssistant-dataTable[data-table='encounters']")
    expect(encounters).to_contain_text("encounters.patient -> patients.id")
    expect(encounters.locator(".jp-EhrAssistant-mark-drafted").first).to_be_visible()
    expect(panel.locator(".jp-EhrAssistant-dataClock")).to_contain_text("2024-02-07 23:24:16")

    # Edit writes the file beside the notebook and opens it in the editor
    panel.get_by_role("button", name="Edit", exact=True).click()
    expect(page.locator(".jp-FileEditor:not(.lm-mod-hidden)")).to_be_visible()
    expect(page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current")).to_contain_text(
        "csv_synthea.knowledge.yaml")
    path = Path(lab["log"]).parent / "work" / "csv_synthea.knowledge.yaml"
    data = yaml.safe_load(path.read_text())
    with ehr_magic.connect(db) as ehr:
        stored, columns = ehr.stored_knowledge, len(ehr.columns("encounters"))

    # a bad import: each problem in the tab, nothing stored
    bad = yaml.safe_load(path.read_text())
    bad["tables"]["encounters"]["columns"]["patinet"] = "a typo"
    bad["tables"]["encounters"]["joins"] = ["patients ON encounters.code = patients.id"]
    path.write_text(yaml.safe_dump(bad, sort_keys=False))
    panel.get_by_role("button", name="Import", exact=True).click()
    problems = panel.locator(".jp-EhrAssistant-dataProblems li")
    expect(problems).to_have_count(2)
    expect(problems.nth(0)).to_contain_text("column encounters.patinet, which encounters does not have "
                                           "(did you mean 'patient'?)")
    expect(problems.nth(1)).to_contain_text("compares encounters.code (BIGINT) with patients.id (VARCHAR)")

    # a good one: confirmed in the tab, and what the next question is told
    data["tables"]["encounters"]["row"] = MEANING
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    panel.get_by_role("button", name="Import", exact=True).click()
    expect(panel.locator(".jp-EhrAssistant-dataMessage")).to_contain_text("The next question uses it.")
    expect(problems).to_have_count(0)
    line = encounters.locator(".jp-EhrAssistant-dataTableLine")
    expect(line).to_contain_text(MEANING)
    expect(line.locator(".jp-EhrAssistant-mark-confirmed")).to_be_visible()
    line.click()
    expect(encounters.locator(".jp-EhrAssistant-dataColumns tr")).to_have_count(columns)
    page.wait_for_timeout(300)
    page.screenshot(path=str(DOCS / "panel-data.png"))
    with ehr_magic.connect(db) as ehr:
        assert ehr.stored_knowledge != stored and ehr.knowledge.tables["encounters"].row == MEANING

    panel.get_by_role("tab", name="Ask").click()
    calls = len(lab["llm"].chat_requests())
    panel.get_by_role("textbox", name="Question").fill(QUESTION)
    panel.get_by_role("button", name="Ask", exact=True).click()
    expect(panel.locator(".jp-EhrAssistant-badge-answered")).to_be_visible()
    sent = lab["llm"].chat_requests()[calls:]
    assert sent and all(MEANING in request.text for request in sent)
