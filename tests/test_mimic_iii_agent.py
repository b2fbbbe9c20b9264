"""The front ends, skills, value lookup and reuse on a real MIMIC-III database (the open
demo, built once per session): %%ehr in a real IPython shell and ``ehr-magic ask`` with
the fake model, skills that only run on MIMIC-IV never offered, lookup on MIMIC-III's own
dictionary columns, and memory that never crosses schemas."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ehr_magic
from ehr_magic import skills
from ehr_magic.runtime.executor import Executor, base_namespace
from ehr_magic.agent.hints import value_hints
from ehr_magic.magic.command import read_marker
from ehr_magic.memory import MemoryStore
from ehr_magic.reuse.reuser import Reuser
from ehr_magic.session import Session
from ehr_magic.skills import SkillError
from test_magic import inserted, ipython_shell

REPO = Path(__file__).resolve().parents[1]
STAYS_CODE = ("stays = ehr.sql('SELECT dbsource, count(*) AS n FROM icustays GROUP BY dbsource ORDER BY dbsource')\n"
              "answer = stays")
LABS_CODE = ("answer = ehr.sql(\"SELECT count(*) FROM labevents l JOIN d_labitems d USING (itemid) "
             "WHERE l.subject_id = 10006 AND d.label = 'Creatinine'\").item()")


def fenced(code: str) -> str:
    return f"Knowledge:\n- icustays.dbsource is carevue or metavision\n```python\n{code}\n```"


def mimic_iii_described(text: str) -> None:
    """The request tells the model about MIMIC-III's own tables and conventions, not MIMIC-IV's."""
    for needed in ("MIMIC-III", "icustay_id", "row_id", "CareVue", "MetaVision", "inputevents_cv",
                   "inputevents_mv", "icd9_code", "ICD-9", "d_icd_diagnoses", "300 years"):
        assert needed in text, needed
    for foreign in ("stay_id", "anchor_age", "icd_version", "emar", "d_hcpcs", "ingredientevents"):
        assert not re.search(rf"\b{foreign}\b", text), foreign


@pytest.fixture(scope="module")
def ehr(mimic_iii_demo_db: Path):
    with ehr_magic.connect(mimic_iii_demo_db) as handle:
        yield handle


@pytest.fixture()
def ip(mimic_iii_demo_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys):
    yield from ipython_shell(mimic_iii_demo_db, monkeypatch, tmp_path)


# -- front ends --------------------------------------------------------------------------------

def test_magic_answers_on_mimic_iii_and_the_prompt_describes_it(ip, fake_llm) -> None:
    assert ip.user_ns["ehr"].schema == "mimic_iii"
    fake_llm.enqueue(fenced(STAYS_CODE))
    ip.run_cell_magic("ehr", "", "How many ICU stays did CareVue and MetaVision record?")
    answer = ip.user_ns["answer"]
    assert dict(answer.iter_rows()) == {"carevue": 59, "metavision": 77}
    assert read_marker(inserted(ip))[2].strip().startswith("stays = ehr.sql(")
    (request,) = fake_llm.chat_requests()
    mimic_iii_described(request.text)
    assert "seed:mimic_iii" not in request.text  # ids stay internal; the seed's question is shown instead
    assert "CareVue and by MetaVision" in request.text  # the closest MIMIC-III seed is a few-shot example


def test_ask_cli_answers_on_mimic_iii(fake_llm, mimic_iii_demo_db: Path, tmp_path: Path) -> None:
    fake_llm.enqueue(fenced(LABS_CODE))
    env = {**os.environ, "EHR_MAGIC_MEMORY": str(tmp_path / "memory.sqlite"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "ask", "How many creatinine results has patient 10006?",
                           "--db", str(mimic_iii_demo_db), "--json"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    with ehr_magic.connect(mimic_iii_demo_db) as ehr:
        expected = ehr.sql("SELECT count(*) FROM labevents WHERE subject_id = 10006 AND itemid IN "
                           "(SELECT itemid FROM d_labitems WHERE label = 'Creatinine')").item()
    assert result["source"] == "agent" and result["answer"] == expected == 62
    (request,) = fake_llm.chat_requests()
    mimic_iii_described(request.text)


# -- skills ----------------------------------------------------------------------------------

def test_mimic_iv_skills_are_never_offered_on_mimic_iii(ehr) -> None:
    bound = skills.namespace(ehr)["skills"]
    offered = bound.names()
    assert "sofa" not in offered and "kdigo_aki" not in offered and "measurement" not in offered
    assert "sofa" not in dir(bound) and not hasattr(bound, "sofa")
    assert "skills.sofa" not in repr(bound)
    assert all(card.kind == "calculator" for card in bound.search("first-day SOFA score", k=10))
    assert all(card.kind == "calculator" for card in skills.catalog(schema="mimic_iii"))
    assert skills.prompt_section("What was the first-day SOFA score of ICU stay 211552?", "mimic_iii") == ""
    assert skills.prompt_section("What was the first-day SOFA score of ICU stay 211552?", "mimic_iv") != ""
    assert bound.calc.bmi(80, 180) == pytest.approx(24.69, abs=0.01)  # calculators take plain values: anywhere
    assert skills.card("calc.bmi").schemas == () and "Datasets: any" in skills.card("calc.bmi").text()


def test_calling_an_unsupported_skill_is_one_sentence(ehr) -> None:
    bound = skills.namespace(ehr)["skills"]
    with pytest.raises(AttributeError) as caught:
        bound.sofa(stay_ids=[211552])
    message = str(caught.value)
    assert message == ("skills.sofa works on mimic_iv and ehrsql_mimic_iv databases, not on this mimic_iii one, "
                       "so write the computation with ehr.sql (skills.search('...') lists the skills that fit here).")
    # The module-level function, given the MIMIC-III ehr, refuses with one sentence too.
    with pytest.raises(SkillError) as direct:
        skills.get("sofa")(ehr, stay_ids=[211552])
    assert str(direct.value).count(". ") == 0 and "mimic_iii" in str(direct.value) and "ehr.sql" in str(direct.value)
    # In generated code, the executor reports it as the error of that line.
    names = base_namespace(ehr)
    names.update(skills.namespace(ehr))
    run = Executor(ehr).run("x = 1\nscore = skills.sofa(ehr)\nanswer = score", names)
    assert not run.ok and run.error.line == 2 and "not on this mimic_iii one" in run.error.message


def test_skill_list_in_the_notebook_shows_only_what_runs_here(ip, capsys) -> None:
    capsys.readouterr()
    ip.run_line_magic("ehr", "skill list")
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert "calc.bmi" in listed and "sofa" not in listed and "gcs" not in listed


def test_user_skill_saved_on_mimic_iii_runs_there(ip, fake_llm, capsys) -> None:
    fake_llm.enqueue(fenced(LABS_CODE))
    ip.run_cell_magic("ehr", "", "How many creatinine results has patient 10006?")
    assert ip.run_cell(inserted(ip)).success
    assert ip.run_cell("%ehr skill save creatinine_count subject_id=10006").success
    card = skills.card("creatinine_count")
    assert card.schemas == ("mimic_iii",)
    assert ip.run_cell("other = skills.creatinine_count(subject_id=10019)").success
    expected = ip.user_ns["ehr"].sql("SELECT count(*) FROM labevents WHERE subject_id = 10019 AND itemid IN "
                                     "(SELECT itemid FROM d_labitems WHERE label = 'Creatinine')").item()
    value = ip.user_ns["other"]
    assert (value.item() if hasattr(value, "item") else value) == expected
    assert "creatinine_count" not in {c.name for c in skills.catalog(schema="mimic_iv")}


# -- value lookup ----------------------------------------------------------------------------

def test_lookup_uses_mimic_iii_dictionary_columns(ehr) -> None:
    assert ehr.lookup("d_labitems", "label", "CREATININE")[0] == "Creatinine"
    assert ehr.lookup("d_items", "label", "heart rate")[0] == "Heart Rate"
    assert ehr.lookup("d_icd_diagnoses", "short_title", "acute kidney failure nos")[0] == "Acute kidney failure NOS"
    assert "Acute kidney failure, unspecified" in ehr.lookup("d_icd_diagnoses", "long_title", "acute kidney failure")
    vocabulary = set(ehr.knowledge.vocabulary_columns())
    assert {("d_labitems", "label"), ("d_items", "label"), ("d_icd_diagnoses", "short_title"),
            ("d_icd_diagnoses", "long_title"), ("prescriptions", "drug")} <= vocabulary


def test_value_hints_name_the_stored_mimic_iii_values(ehr) -> None:
    code = ("answer = ehr.sql(\"SELECT avg(c.valuenum) FROM chartevents c JOIN d_items d USING (itemid) "
            "WHERE d.label = 'heart rate'\").item()\n"
            "labs = ehr.table('d_labitems').filter(pl.col('label') == 'CREATININE')")
    hints = {(h.table, h.column, h.literal): h.closest for h in value_hints(code, ehr)}
    assert hints[("d_items", "label", "heart rate")][0] == "Heart Rate"
    assert hints[("d_labitems", "label", "CREATININE")][0] == "Creatinine"


# -- reuse -----------------------------------------------------------------------------------

def test_reuse_adapts_a_mimic_iii_cell_and_never_one_of_another_schema(ehr, tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.sqlite")
    question = "How many creatinine results has patient 10006?"
    # The same question remembered for MIMIC-IV, whose code would fail here: never used on MIMIC-III.
    store.add(question, "answer = ehr.sql('SELECT count(*) FROM labevents WHERE subject_id = 10000032').item()",
              schema="mimic_iv")
    reuser = Reuser.from_store(ehr, store)
    assert not reuser.answer(question).answered
    assert not reuser.answer("How many creatinine results has patient 10019?").answered
    store.add(question, LABS_CODE, schema="mimic_iii")
    reuser.refresh()
    same = reuser.answer(question)
    assert same.answered and same.answer == 62 and "10000032" not in same.code
    other = reuser.answer("How many potassium results has patient 10019?")
    expected = ehr.sql("SELECT count(*) FROM labevents l JOIN d_labitems d USING (itemid) "
                       "WHERE l.subject_id = 10019 AND d.label = 'Potassium'").item()
    assert other.answered, other.reason
    assert other.answer == expected > 0 and "'Potassium'" in other.code and "10019" in other.code


def test_session_on_mimic_iii_uses_its_own_memory_without_the_model(ehr, tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory.sqlite")
    store.add("How many ICU stays did CareVue and MetaVision record?",
              "answer = ehr.sql('SELECT count(*) FROM icustays WHERE dbsource = \\'carevue\\'').item()",
              schema="mimic_iv")
    store.add("How many ICU stays are there?", "answer = ehr.count('icustays')", schema="mimic_iii")
    session = Session(ehr, memory=store, mode="memory")
    assert session.ask("How many ICU stays are there?").answer == 136
    declined = session.ask("How many ICU stays did CareVue and MetaVision record?")
    assert declined.status == "abstained" and declined.answer is None
