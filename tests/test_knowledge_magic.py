"""``%ehr knowledge`` in a real IPython shell on a CSV folder's database: showing what
ehr-magic believes (drafted or confirmed), writing the file to edit, importing it (the
next question's request carries it), and bad imports that store nothing."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest
import yaml

from test_csv_folder import synthea_db  # noqa: F401  (the fixture: the Synthea folder loaded once)
from test_magic import ipython_shell

MEANING = "One row per visit of a patient to a clinic or hospital."
CODE = "answer = ehr.sql(\"SELECT count(*) AS n FROM encounters WHERE encounterclass = 'emergency'\").item()"


@pytest.fixture()
def ip(synthea_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    db = tmp_path / "synthea.duckdb"  # imports write into it: each test its own copy
    shutil.copy(synthea_db, db)
    notebook = tmp_path / "notebooks"
    notebook.mkdir()
    monkeypatch.chdir(notebook)  # the kernel's folder is the notebook's
    yield from ipython_shell(db, monkeypatch, tmp_path)


def shown(capsys) -> tuple[str, str]:
    """(text, HTML) of the rich displays since the last read: a shell without a frontend
    prints each display's MIME bundle."""
    bundles = [ast.literal_eval(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{'text/")]
    return ("\n".join(b.get("text/plain", "") for b in bundles), "\n".join(b.get("text/html", "") for b in bundles))


def edited_file(ip, capsys, change) -> Path:
    """``%ehr knowledge edit``, then ``change(data)`` applied to the file it wrote."""
    ip.run_line_magic("ehr", "knowledge edit")
    path = Path.cwd() / "csv_synthea.knowledge.yaml"
    assert f"Wrote {path.name}" in capsys.readouterr().out
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_show_lists_the_clock_and_each_table_marked_drafted(ip, capsys) -> None:
    ip.run_line_magic("ehr", "knowledge")
    text, rich = shown(capsys)
    assert "Clock [drafted]: Calendar time: now is 2024-02-07 23:24:16" in text
    assert "encounters [drafted]: One row per encounter. Referred to by " in text
    assert "604 rows." in text and "encounters.csv" not in text
    assert "key [drafted]: id" in text
    assert "joins [drafted]: encounters.patient -> patients.id;" in text
    assert "lookup columns [drafted]: encounterclass, description" in text
    assert "0 written or confirmed by a person" in text
    assert '<table class="ehr-knowledge"' in rich and "encounters.patient -&gt; patients.id" in rich
    assert "ehr-mark-drafted" in rich and "ehr-mark-confirmed" not in rich.split("</p>", 2)[-1]


def test_one_table_shows_its_columns_and_a_typo_gets_a_hint(ip, capsys) -> None:
    ip.run_line_magic("ehr", "knowledge encounters")
    text, rich = shown(capsys)
    assert re.search(r"\n +encounterclass +VARCHAR +\[drafted\] VARCHAR, encounter class, 6 values \(.*\(lookup\)\n",
                     text)
    assert "(key)" in text.split("\n      id ")[1].splitlines()[0]
    assert "<th>column</th>" in rich
    ip.run_line_magic("ehr", "knowledge encounter")
    assert "No table 'encounter' in synthea. Did you mean 'encounters'?" in capsys.readouterr().out


def test_edit_writes_beside_the_notebook_and_keeps_edits(ip, capsys) -> None:
    path = edited_file(ip, capsys, lambda data: data["tables"]["encounters"].update(row=MEANING))
    ip.run_line_magic("ehr", "knowledge edit")
    out = capsys.readouterr().out
    assert f"Kept {path.name}" in out and f"%ehr knowledge import {path.name}" in out
    assert MEANING in path.read_text()  # a second edit does not lose the first
    ip.run_line_magic("ehr", f"knowledge edit {Path.cwd() / 'other.yaml'}")
    assert (Path.cwd() / "other.yaml").read_text().startswith("schema: csv_synthea")


def test_import_is_shown_confirmed_and_the_next_question_uses_it(ip, capsys, fake_llm) -> None:
    def change(data: dict) -> None:
        data["tables"]["encounters"]["row"] = MEANING
        data["tables"]["encounters"]["joins"] = ["patients ON encounters.patient = patients.id"]

    path = edited_file(ip, capsys, change)
    before = ip.user_ns["ehr"]
    ip.run_line_magic("ehr", f"knowledge import {path.name}")
    out = capsys.readouterr().out
    assert f"Imported {path.name}: 18 tables described, 2 statements written or confirmed by a person" in out
    assert "The next question uses it." in out
    ehr = ip.user_ns["ehr"]
    assert ehr is not before and ehr.knowledge.tables["encounters"].row == MEANING  # reconnected, rebound
    ip.run_line_magic("ehr", "knowledge")
    text, _ = shown(capsys)
    assert f"encounters [confirmed]: {MEANING}" in text
    assert "joins [confirmed]: encounters.patient -> patients.id\n" in text
    assert "patients [drafted]" in text
    fake_llm.enqueue(f"```python\n{CODE}\n```")
    ip.run_cell_magic("ehr", "", "How many emergency encounters are there?")
    assert ip.user_ns["answer"] > 0
    sent = fake_llm.chat_requests()[-1].text
    assert MEANING in sent and "encounters.organization = organizations.id" not in sent


def test_a_bad_import_names_every_problem_and_stores_nothing(ip, capsys, synthea_db: Path) -> None:
    def change(data: dict) -> None:
        encounters = data["tables"]["encounters"]
        encounters["row"] = MEANING
        encounters["columns"]["patinet"] = "a typo"
        encounters["joins"].append("patients ON encounters.code = patients.id")
        encounters["key"] = "patient"
        data["tables"]["payer_transition"] = data["tables"].pop("payer_transitions")
        data["clock"] = "last tuesday"

    path = edited_file(ip, capsys, change)
    stored = ip.user_ns["ehr"].stored_knowledge
    ip.run_line_magic("ehr", f"knowledge import {path.name}")
    out = capsys.readouterr().out
    assert f"Knowledge file {path.name} has 5 problems; nothing was imported:" in out
    for words in ("table 'payer_transition', which is not in the database (did you mean 'payer_transitions'?)",
                  "column encounters.patinet, which encounters does not have (did you mean 'patient'?)",
                  "compares encounters.code (BIGINT) with patients.id (VARCHAR), columns of different types",
                  "The key encounters.patient does not identify each row of encounters",
                  "The clock 'last tuesday' is not a time"):
        assert words in out, words
    assert "Traceback" not in out
    assert ip.user_ns["ehr"].stored_knowledge == stored
    path.write_text(path.read_text().replace("tables:", "tables: [", 1))
    ip.run_line_magic("ehr", f"knowledge import {path.name}")
    out = capsys.readouterr().out
    assert f"Knowledge file {path.name} is not valid YAML: line " in out
    assert "; fix that line and import again. Nothing was imported." in out
    assert ip.user_ns["ehr"].stored_knowledge == stored and ip.user_ns["ehr"].count("patients") == 27


def test_usage_mistakes_are_one_sentence(ip) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="Name the file to import"):
        ip.run_line_magic("ehr", "knowledge import")
    with pytest.raises(UsageError, match="Usage: %ehr knowledge"):
        ip.run_line_magic("ehr", "knowledge a b c")
