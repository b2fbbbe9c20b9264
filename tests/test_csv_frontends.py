"""The front ends answer on a CSV folder's schema: ``%%ehr`` in a real IPython shell and
``ehr-magic ask``, with the fake model. The model is shown the knowledge drafted from the data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from datapaths import SHARED_DATA
from ehr_magic import sources
from ehr_magic.magic.command import read_marker
from test_magic import ipython_shell

SYNTHEA = SHARED_DATA / "synthea-dbt-synthea-seeds" / "synthea"
QUESTION = "How many emergency encounters did female patients have?"
CODE = (
    "visits = ehr.sql(\"SELECT count(*) AS n FROM encounters e JOIN patients p ON e.patient = p.id "
    "WHERE e.encounterclass = 'emergency' AND p.gender = 'F'\")\n"
    "answer = visits.item()"
)
# What the drafted knowledge says, and the model must have been told.
DRAFTED = [
    "drafted from the data",
    "- patient: VARCHAR, refers to patients.id (a patient id).",  # the join, said by its column
    "encounterclass: VARCHAR, encounter class, 6 values (",
    "'emergency'",
    "The dataset clock (ehr.now) is 2024-02-07 23:24:16",
]


def reply(code: str) -> str:
    return f"Knowledge:\n- encounters.patient refers to patients.id\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def synthea_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synthea-fe") / "synthea.duckdb"
    sources.load("csv", [SYNTHEA], out)
    return out


@pytest.fixture(scope="module")
def expected(synthea_db: Path) -> int:
    import duckdb

    with duckdb.connect(str(synthea_db), read_only=True) as con:
        return con.execute("SELECT count(*) FROM encounters e JOIN patients p ON e.patient = p.id "
                           "WHERE e.encounterclass = 'emergency' AND p.gender = 'F'").fetchone()[0]


@pytest.fixture()
def ip(synthea_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    yield from ipython_shell(synthea_db, monkeypatch, tmp_path)


def test_magic_answers_on_the_csv_schema_with_the_drafted_knowledge(ip, fake_llm, expected: int) -> None:
    assert ip.user_ns["ehr"].schema == "csv_synthea"
    fake_llm.enqueue(reply(CODE))
    ip.run_cell_magic("ehr", "", QUESTION)
    assert ip.user_ns["answer"] == expected > 0
    _token, question, body = read_marker(getattr(ip, "rl_next_input", "") or "")
    assert question == QUESTION and "encounterclass = 'emergency'" in body
    sent = fake_llm.chat_requests()[-1].text  # every message of the request, joined
    for words in DRAFTED:
        assert words in sent, words


def test_ask_cli_answers_on_the_csv_schema_with_the_drafted_knowledge(fake_llm, synthea_db: Path, tmp_path: Path,
                                                                    expected: int) -> None:
    fake_llm.enqueue(reply(CODE))
    env = {**os.environ, "EHR_MAGIC_MEMORY": str(tmp_path / "memory.sqlite")}
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "ask", QUESTION, "--db", str(synthea_db), "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["source"] == "agent" and result["answer"] == expected and result["llm_calls"] == 1
    sent = fake_llm.chat_requests()[-1].text
    for words in DRAFTED:
        assert words in sent, words
