"""Conversations in a real IPython shell with the fake model server: follow-ups, notebook
variables, %ehr new/history, bad input, and one path shared with ``ehr-magic ask``/``chat``."""

from __future__ import annotations

import json
import os
import subprocess
import sys


from ehr_magic.llm import AuditLog
from ehr_magic.magic.command import read_marker
from ehr_magic.memory import MemoryStore
from test_magic import inserted, ip  # noqa: F401  (the real IPython shell fixture)

COUNT_CODE = "patients = ehr.sql('SELECT count(*) AS n FROM patients')\nanswer = patients.item()"
WOMEN_CODE = "answer = ehr.sql(\"SELECT count(*) AS n FROM patients WHERE gender = 'f'\").item()"
WOMEN = "How many female patients are there?"
MARKER_ID = 987654321
AGE = "What is the average age at admission?"
AGE_CODE = "answer = ehr.sql('SELECT avg(age) AS age FROM admissions').item()"


def reply(code: str, standalone: str | None = None) -> str:
    head = f"Standalone question: {standalone}\n" if standalone else ""
    return f"{head}Knowledge:\n- patients has one row per patient\n```python\n{code}\n```"


def test_follow_up_request_carries_previous_question_and_code(ip, fake_llm, tmp_path, capsys) -> None:
    fake_llm.enqueue(reply(COUNT_CODE), reply(WOMEN_CODE, WOMEN), "CLARIFY: The women of which question?")
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    assert ip.user_ns["answer"] == 94
    ip.run_cell_magic("ehr", "", "now only the women")
    follow_up = fake_llm.chat_requests()[-1].last_user_message
    assert "How many patients are there?" in follow_up and COUNT_CODE.splitlines()[0] in follow_up
    assert "now only the women" in follow_up and "Standalone question:" in follow_up
    women = ip.user_ns["answer"]
    assert 0 < women < 94
    # The inserted cell states the standalone question; running it stores that question.
    token, question, body = read_marker(inserted(ip))
    assert question == WOMEN
    assert ip.run_cell(inserted(ip)).success
    assert [e.question for e in MemoryStore(tmp_path / "memory.sqlite").list()] == [WOMEN]
    capsys.readouterr()
    ip.run_line_magic("ehr", "history")
    history = capsys.readouterr().out
    assert "1. How many patients are there?" in history and "2. now only the women" in history
    assert f"meaning: {WOMEN}" in history
    ip.run_line_magic("ehr", "new")
    ip.run_line_magic("ehr", "history")
    assert "No questions yet" in capsys.readouterr().out
    # Anyone asking the standalone question later is answered from memory, without the model.
    ip.run_cell_magic("ehr", "", WOMEN)
    assert ip.user_ns["answer"] == women and len(fake_llm.chat_requests()) == 2


def test_a_first_question_worded_like_a_follow_up_goes_to_the_model(ip, fake_llm, capsys) -> None:
    # Wording never refuses a question: the model, which sees there is no earlier turn, may ask.
    fake_llm.enqueue("CLARIFY: Only the emergency ones of what: admissions or patients?")
    ip.run_cell_magic("ehr", "", "now only the emergency ones")
    out = capsys.readouterr().out
    assert "Only the emergency ones of what" in out and "Traceback" not in out
    assert "no earlier question" not in out
    sent = fake_llm.chat_requests()[0].last_user_message
    assert "now only the emergency ones" in sent and "Turn 1:" not in sent


def test_kernel_frame_name_and_columns_reach_the_model_not_its_values(ip, fake_llm, capsys) -> None:
    ip.run_line_magic("config", "EhrMagics.privacy = 'schema'")
    ip.run_cell(f"import polars as pl\ncohort = pl.DataFrame({{'subject_id': [{MARKER_ID}, 10004235], "
                "'note': ['CANARY-TEXT-1', 'x']})")
    fake_llm.enqueue(reply("admissions = ehr.sql('SELECT subject_id FROM admissions')\n"
                           "answer = admissions.filter(pl.col('subject_id')"
                           ".is_in(cohort['subject_id'].to_list())).height",
                           "How many admissions do the patients in cohort have?"))
    ip.run_cell_magic("ehr", "", "How many admissions do the patients in cohort have?")
    sent = fake_llm.chat_requests()[-1].text
    assert "cohort" in sent and "subject_id" in sent and "note" in sent and "2 rows" in sent
    assert str(MARKER_ID) not in sent and "CANARY-TEXT-1" not in sent
    with_cohort = ip.user_ns["answer"]
    assert isinstance(with_cohort, int) and with_cohort > 0  # the code used the kernel's `cohort`
    # The cell inserted runs in the kernel as it is (self-contained given `cohort`).
    assert ip.run_cell(inserted(ip)).success and ip.user_ns["answer"] == with_cohort
    # The audit log names the variables described to the model.
    entry = AuditLog().entries()[-1]
    assert "Notebook variables described to the model: cohort" in json.dumps(entry.request)
    # The variable disappears: the next question naming it gets one sentence, no model call.
    ip.run_cell("del cohort")
    capsys.readouterr()
    ip.run_cell_magic("ehr", "", "and their discharge times from cohort?")
    out = capsys.readouterr().out
    assert "There is no variable `cohort` in the notebook" in out and "Traceback" not in out
    assert len(fake_llm.chat_requests()) == 1


def test_huge_and_unknown_variables(ip, fake_llm, capsys) -> None:
    ip.run_cell("import polars as pl\n"
                "huge = pl.LazyFrame().select(pl.int_range(0, 10**12).alias('i'))\n"
                "class Gadget: pass\n"
                "gadget = Gadget()")
    fake_llm.enqueue(reply("answer = ehr.sql('SELECT 1').item()", "What is one?"),
                     reply("answer = ehr.sql('SELECT 2').item()", "What is two?"))
    ip.run_cell_magic("ehr", "", "How many rows has huge?")
    sent = fake_llm.chat_requests()[-1].text
    assert "`huge`: polars LazyFrame (rows not counted; not collected)" in sent
    assert "`huge` is a LazyFrame: the model sees its columns only" in capsys.readouterr().out
    ip.run_cell_magic("ehr", "", "What is in gadget?")
    out = capsys.readouterr().out
    assert "a type ehr-magic does not describe" in out and "Traceback" not in out
    assert ip.user_ns["answer"] == 2


def test_ask_cli_and_magic_share_one_path(ip, fake_llm, ehrsql_db, tmp_path) -> None:
    env = {**os.environ, "EHR_MAGIC_MEMORY": str(tmp_path / "memory.sqlite")}

    def ask(question: str, *extra: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "ehr_magic", "ask", question, "--db", str(ehrsql_db), "--json",
                               *extra], capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    # Accepted in the notebook, reused by the CLI without a model call.
    fake_llm.enqueue(reply(COUNT_CODE))
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    assert ip.run_cell(inserted(ip)).success
    reused = ask("How many patients are there?")
    assert reused["source"] == "memory" and reused["answer"] == 94 and reused["llm_calls"] == 0
    assert len(fake_llm.chat_requests()) == 1
    # Answered by the agent in the CLI and accepted there; the magic reuses it.
    fake_llm.enqueue(reply(AGE_CODE))
    generated = ask(AGE, "--accept")
    assert generated["source"] == "agent" and generated["llm_calls"] == 1
    ip.run_cell_magic("ehr", "", AGE)
    assert ip.user_ns["answer"] == generated["answer"] and len(fake_llm.chat_requests()) == 2


def test_chat_reads_a_conversation_from_a_pipe(fake_llm, ehrsql_db, tmp_path) -> None:
    fake_llm.enqueue(reply(COUNT_CODE), reply(WOMEN_CODE, WOMEN), "CLARIFY: The women of which question?")
    lines = "How many patients are there?\nnow only the women\n/history\n/accept\n/new\nnow only the women\n/quit\n"
    env = {**os.environ, "EHR_MAGIC_MEMORY": str(tmp_path / "memory.sqlite")}
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "chat", "--db", str(ehrsql_db), "--quiet"],
                          input=lines, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Traceback" not in out + done.stderr
    assert f"meaning: {WOMEN}" in out and "2. now only the women" in out
    assert f"Stored as memory entry #1: {WOMEN}" in out
    assert out.count("The women of which question?") == 1  # after /new the model asks; nothing is refused
    follow_up, after_new = (r.last_user_message for r in fake_llm.chat_requests()[1:])
    assert "How many patients are there?" in follow_up and "How many patients are there?" not in after_new
    assert [e.question for e in MemoryStore(tmp_path / "memory.sqlite").list()] == [WOMEN]


def test_a_stale_answer_in_the_kernel_does_not_pass_for_the_new_code(ip, fake_llm) -> None:
    ip.run_cell("answer = 123")
    fake_llm.enqueue(reply("x = 1"), "Set `answer`.", reply("answer = ehr.sql('SELECT 7').item()"))
    ip.run_cell_magic("ehr", "", "What is seven?")
    assert ip.user_ns["answer"] == 7 and len(fake_llm.chat_requests()) == 3


def test_an_accepted_cell_using_a_notebook_variable_is_reused_with_it(ip, fake_llm) -> None:
    ip.run_cell("import polars as pl\ncohort = pl.DataFrame({'subject_id': [10004235, 10001217]})")
    fake_llm.enqueue(reply("answer = cohort.height"))
    ip.run_cell_magic("ehr", "", "How many patients are in cohort?")
    assert ip.run_cell(inserted(ip)).success and ip.user_ns["answer"] == 2
    ip.run_cell("cohort = pl.DataFrame({'subject_id': [1, 2, 3]})")
    ip.run_cell_magic("ehr", "", "How many patients are in cohort?")
    assert ip.user_ns["answer"] == 3 and len(fake_llm.chat_requests()) == 1  # reused, on today's `cohort`
