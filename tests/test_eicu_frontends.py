"""%%ehr and ``ehr-magic ask`` answer on the eICU demo with the fake model, and what the model
is sent describes eICU's own tables and time rules (all messages of the request, joined)."""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from datapaths import EICU_DEMO
from fake_llm import messages_text
from ehr_magic.magic.command import read_marker
from test_magic import ipython_shell

QUESTION = "How many ICU stays lasted longer than 3 days?"
CODE = "answer = ehr.sql(f'SELECT count(*) FROM patient WHERE unitdischargeoffset > {ehr.minutes(days=3)}').item()"
REPLY = f"Knowledge:\n- patient.unitdischargeoffset is the ICU length of stay in minutes\n```python\n{CODE}\n```"


def expected_stays(_db: Path) -> int:
    """Counted from the source file, independently of the database."""
    with gzip.open(EICU_DEMO / "patient.csv.gz", "rt", newline="") as handle:
        return sum(1 for row in csv.DictReader(handle) if int(row["unitdischargeoffset"]) > 3 * 24 * 60)


def assert_describes_eicu(text: str) -> None:
    assert "patientunitstayid" in text and "uniquepid" in text
    assert "offset" in text and "minutes since this ICU stay's admission" in text
    assert "ehr.in_first" in text and "vitalaperiodic" in text
    # Only the tables this database has are described.
    assert "labresultoffset" not in text and "nursingchartvalue" not in text
    assert "mimic" not in text.lower() and "subject_id" not in text


@pytest.fixture()
def eicu_shell(eicu_demo_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    yield from ipython_shell(eicu_demo_db, monkeypatch, tmp_path)


def test_the_magic_answers_on_eicu(eicu_shell, fake_llm, eicu_demo_db: Path, capsys) -> None:
    assert eicu_shell.user_ns["ehr"].schema == "eicu"
    eicu_shell.run_line_magic("ehr", "status")
    assert "times are offsets (no dates)" in capsys.readouterr().out
    fake_llm.enqueue(REPLY)
    eicu_shell.run_cell_magic("ehr", "", QUESTION)
    assert eicu_shell.user_ns["answer"] == expected_stays(eicu_demo_db) > 0
    inserted = getattr(eicu_shell, "rl_next_input", "") or ""
    assert read_marker(inserted)[1] == QUESTION and CODE in inserted
    assert_describes_eicu(fake_llm.chat_requests()[-1].text)
    out = capsys.readouterr().out
    assert "Traceback" not in out


def test_ask_answers_on_eicu(fake_llm, eicu_demo_db: Path, tmp_path: Path) -> None:
    fake_llm.enqueue(REPLY)
    env = {**os.environ, "EHR_MAGIC_MEMORY": str(tmp_path / "memory.sqlite")}
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "ask", QUESTION, "--db", str(eicu_demo_db), "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["source"] == "agent" and result["answer"] == expected_stays(eicu_demo_db)
    assert_describes_eicu(fake_llm.chat_requests()[-1].text)


def test_generated_code_asking_for_now_gets_the_offset_explanation(eicu_shell, fake_llm, capsys) -> None:
    """A model that reaches for the calendar clock is told, in the feedback, what to use instead."""
    wrong = "Knowledge:\n- recent stays\n```python\nanswer = ehr.now\n```"

    def respond(request: dict) -> str:
        text = messages_text(request)
        if "rubber-duck debugger" in text:
            return "The code asks for ehr.now, which an offset database does not have."
        return REPLY if "This database has no dates" in text else wrong

    fake_llm.responder = respond
    eicu_shell.run_cell_magic("ehr", "", QUESTION)
    told = [r.text for r in fake_llm.chat_requests() if "This database has no dates" in r.text]
    assert told and all("ehr.in_first" in text for text in told)
    assert eicu_shell.user_ns["answer"] > 0
