"""Reuse inside the assistant and the eval's ``memory`` mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ehr_magic.session import Session
from ehr_magic.db import connect
from ehr_magic.errors import ConfigError
from ehr_magic.memory import MemoryStore

RDW = ('answer = ehr.sql("""\nSELECT labevents.valuenum FROM labevents WHERE labevents.hadm_id IN '
       '(SELECT admissions.hadm_id FROM admissions WHERE admissions.subject_id = 10004235) AND labevents.itemid IN '
       "(SELECT d_labitems.itemid FROM d_labitems WHERE d_labitems.label = 'rdw') "
       'ORDER BY labevents.charttime DESC LIMIT 1\n""")')


@pytest.fixture()
def assistant(ehrsql_db: Path, tmp_path: Path):
    with connect(ehrsql_db) as ehr, MemoryStore(tmp_path / "memory.sqlite") as store:
        assistant = Session(ehr, memory=store)
        assistant.cells.remember("What was the last RDW of patient 10004235?", RDW)
        yield assistant


def test_assistant_reuses_with_substitution_without_a_model(assistant) -> None:
    answer = assistant.ask("What was the last hemoglobin of patient 10010471?")
    assert answer.status == "answered" and answer.source == "memory" and answer.model_calls == 0
    assert answer.substitutions == [("hemoglobin", "rdw"), ("10010471", "10004235")]
    assert answer.message.startswith(f"reused accepted cell #{answer.entry_id} with: hemoglobin <- rdw, "
                                      "10010471 <- 10004235")
    assert "'hemoglobin'" in answer.code


def test_exact_question_still_runs_the_accepted_cell_as_is(assistant) -> None:
    answer = assistant.ask("What was the last RDW of patient 10004235?")
    assert answer.source == "memory" and answer.substitutions == [] and answer.code == RDW


def test_unanswerable_question_is_abstained_without_a_model(assistant) -> None:
    answer = assistant.ask("What was the last RDW of patient 15257?")
    assert answer.status == "abstained" and "no patient 15257" in answer.message


def test_without_a_model_the_error_says_why_reuse_declined(assistant) -> None:
    with pytest.raises(ConfigError, match="Memory reuse declined"):
        assistant.ask("Which ward was patient 10004235 in?")


def test_with_a_model_an_unmatched_question_goes_to_the_agent(assistant, fake_llm) -> None:
    fake_llm.enqueue("Knowledge:\n- one row per patient\n```python\nanswer = ehr.count('patients')\n```")
    answer = assistant.ask("How many patients are there?")
    assert answer.source == "agent" and answer.answer == 94


def test_render_shows_the_substitutions_and_the_adapted_code(assistant) -> None:
    from ehr_magic.magic import render

    answer = assistant.ask("What was the last hemoglobin of patient 10010471?")
    html = render.details_html(answer, "")
    assert "hemoglobin" in html and "&larr;" in html and "adapted code" in html
    assert "'hemoglobin'" in render.reuse_text(answer)


def write_split(folder: Path, rows: list[tuple[str, str, str | None, str]]) -> None:
    folder.mkdir(parents=True)
    (folder / "data.json").write_text(json.dumps({"version": "test", "data": [{"id": i, "question": q}
                                                                             for i, q, _, _ in rows]}))
    (folder / "label.json").write_text(json.dumps({i: (sql or "null") for i, _, sql, _ in rows}))
    (folder / "answer.json").write_text(json.dumps({i: a for i, _, _, a in rows}))


def test_eval_memory_mode_answers_from_the_memory_split(ehrsql_db: Path, tmp_path: Path) -> None:
    from ehr_magic.eval import evaluate

    route = "SELECT DISTINCT prescriptions.route FROM prescriptions WHERE prescriptions.drug = '{}'"
    with connect(ehrsql_db) as ehr:
        gold = {drug: str([list(r) for r in ehr.sql(route.format(drug)).rows()]) for drug in ("trazodone", "aspirin")}
    write_split(tmp_path / "data" / "train", [("t1", "How is trazodone typically taken?",
                                               route.format("trazodone"), gold["trazodone"])])
    write_split(tmp_path / "data" / "valid", [
        ("v1", "How is aspirin typically taken?", route.format("aspirin"), gold["aspirin"]),
        ("v2", "What is the phone number of patient 10004235?", None, "null"),
    ])
    report = evaluate(tmp_path / "data", "valid", ehrsql_db, mode="memory", memory_from="train", out=tmp_path / "out")
    by_id = {r.id: r for r in report.results}
    assert by_id["v1"].status == "answered" and by_id["v1"].correct
    assert by_id["v2"].status == "abstained" and by_id["v2"].correct
    assert report.metrics["llm_calls"] == 0 and report.metrics["rs10"] == 100.0
    assert (tmp_path / "out" / "memory.sqlite").exists()
