"""%%ehr and %ehr on a real IPython shell, with the fake model server and real DuckDB."""

from __future__ import annotations

import atexit
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from ehr_magic.magic.command import read_marker
from ehr_magic.memory import MemoryStore

COUNT_CODE = "patients = ehr.sql('SELECT count(*) AS n FROM patients')\nanswer = patients.item()"
CELL_CODE = COUNT_CODE + "\nanswer"  # as inserted: the last line shows the answer when the cell runs


def fenced(code: str) -> str:
    return f"Knowledge:\n- patients has one row per patient\n```python\n{code}\n```"


def ipython_shell(database: Path | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *,
                  kernel: object | None = None, config: dict | None = None) -> Iterator[InteractiveShell]:
    """A real IPython shell with the extension loaded on ``database`` (None: no
    EHR_MAGIC_DB, so the demo database) and a private memory (``kernel``: a stand-in for
    the kernel, e.g. one with a comm manager for the panel; ``config``: more IPython configuration).

    It keeps no history and leaves nothing for interpreter exit: every shell registers an
    exit handler that resets it with a full garbage collection, which made the whole
    session spend minutes exiting."""
    if database is None:
        monkeypatch.delenv("EHR_MAGIC_DB", raising=False)
    else:
        monkeypatch.setenv("EHR_MAGIC_DB", str(database))
    monkeypatch.setenv("EHR_MAGIC_MEMORY", str(tmp_path / "memory.sqlite"))
    shell = InteractiveShell(config=Config({"HistoryManager": {"enabled": False}, **(config or {})}))
    atexit.unregister(shell.atexit_operations)
    if kernel is not None:
        shell.kernel = kernel
    shell.run_line_magic("load_ext", "ehr_magic")
    yield shell
    shell.run_line_magic("unload_ext", "ehr_magic")
    shell.clear_instance()


@pytest.fixture()
def ip(ehrsql_db: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys):
    yield from ipython_shell(ehrsql_db, monkeypatch, tmp_path)


def inserted(shell: InteractiveShell) -> str:
    return getattr(shell, "rl_next_input", None) or ""


def memory(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path / "memory.sqlite")


def test_load_ext_binds_ehr_and_says_so(ip, capsys) -> None:
    assert ip.user_ns["ehr"].schema == "ehrsql_mimic_iv"
    ip.run_line_magic("ehr", "status")
    out = capsys.readouterr().out
    assert "schema ehrsql_mimic_iv" in out and "memory:" in out


def test_question_inserts_marked_cell_binds_variables(ip, fake_llm) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    code = inserted(ip)
    token, question, body = read_marker(code)
    assert question == "How many patients are there?"
    assert body.strip() == CELL_CODE
    assert ip.user_ns["answer"] == 94
    assert ip.user_ns["patients"].item() == 94  # the code's own variables too
    assert len(fake_llm.chat_requests()) == 1


def test_running_inserted_cell_accepts_it_and_rerun_needs_no_model(ip, fake_llm, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    cell = inserted(ip)
    assert ip.run_cell(cell).success
    entries = memory(tmp_path).list()
    assert [(e.question, e.origin, e.code) for e in entries] == [
        ("How many patients are there?", "accepted", CELL_CODE)]
    ip.user_ns.pop("answer")
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    assert ip.user_ns["answer"] == 94
    assert len(fake_llm.chat_requests()) == 1  # answered from memory


def test_edited_cell_is_stored_as_edited(ip, fake_llm, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    edited = inserted(ip).replace("answer = patients.item()", "answer = int(patients.item())  # mine")
    assert ip.run_cell(edited).success
    (entry,) = memory(tmp_path).list()
    assert "# mine" in entry.code and entry.generated_code.strip() == CELL_CODE


def test_failing_inserted_cell_is_not_accepted(ip, fake_llm, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    broken = inserted(ip) + "raise ValueError('no')\n"
    ip.run_cell(broken)
    assert memory(tmp_path).list() == []


def test_no_run_as_and_regenerate(ip, fake_llm, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "--no-run", "How many patients are there?")
    assert "answer" not in ip.user_ns and read_marker(inserted(ip))[2].strip() == CELL_CODE
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "--as n_patients", "How many patients are there?")
    assert ip.user_ns["n_patients"] == 94
    ip.run_cell(inserted(ip))
    requests = len(fake_llm.chat_requests())
    fake_llm.enqueue(fenced("answer = ehr.count('patients')"))
    ip.run_cell_magic("ehr", "--regenerate", "How many patients are there?")
    assert len(fake_llm.chat_requests()) == requests + 1
    assert "ehr.count" in inserted(ip)


@pytest.mark.parametrize("reply, expected", [
    ("CLARIFY: Which hospital visit do you mean?", "Which hospital visit do you mean?"),
    ("UNANSWERABLE: addresses are not recorded here.", "addresses are not recorded here"),
])
def test_clarify_and_abstain_render_without_traceback(ip, fake_llm, capsys, reply, expected) -> None:
    fake_llm.enqueue(reply)
    result = ip.run_cell(f"%%ehr\nQuestion with reply {reply[:5]}")
    assert result.success
    out = capsys.readouterr().out
    assert expected in out and "Traceback" not in out
    assert inserted(ip) == ""


def test_failed_run_shows_last_code_and_error(ip, fake_llm, capsys) -> None:
    fake_llm.responder = lambda req: "Use an existing table." if "rubber-duck" in str(req) else fenced(
        "answer = ehr.sql('SELECT * FROM nope')")
    result = ip.run_cell("%%ehr --steps 2\nWhat is in nope?")
    assert result.success
    out = capsys.readouterr().out
    assert "failed" in out and "nope" in out and "Traceback" not in out


def test_no_model_configured_is_one_message_and_memory_still_works(ip, fake_llm, monkeypatch, capsys, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    ip.run_cell(inserted(ip))
    for var in ("EHR_MAGIC_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(var)
    capsys.readouterr()
    result = ip.run_cell("%%ehr\nHow many admissions are there?")
    assert result.success
    out = capsys.readouterr().out
    assert "EHR_MAGIC_MODEL" in out and "Traceback" not in out
    ip.user_ns.pop("answer", None)
    ip.run_cell("%%ehr\nHow many patients are there?")
    assert ip.user_ns["answer"] == 94



def test_bad_options_are_usage_errors(ip, capsys) -> None:
    result = ip.run_cell("%%ehr --steps zero\nAnything?")
    assert not result.success
    err = capsys.readouterr()
    assert "Traceback" not in err.out + err.err
    result = ip.run_cell("%%ehr\n   ")
    assert not result.success


def test_a_configured_setting_out_of_range_loads_with_the_default_and_says_so(ehrsql_db, monkeypatch, tmp_path,
                                                                          capsys) -> None:
    for shell in ipython_shell(ehrsql_db, monkeypatch, tmp_path, config={"EhrMagics": {"steps": 0, "shots": 2}}):
        magics = shell._ehr_magic[0]
        assert (magics.steps, magics.shots) == (10, 2)  # the other settings of the file still hold
        out = capsys.readouterr().out
        assert ("ehr-magic: steps must be a whole number from 1 to 50; got 0. The configuration's value is not "
                "used: steps = 10.") in out and "Traceback" not in out


@pytest.mark.parametrize(("setting", "value", "message"), [
    ("steps", "0", "steps must be a whole number from 1 to 50; got 0."),
    ("shots", "17", "shots must be a whole number from 0 to 16; got 17."),
    ("timeout", "0", "timeout must be a number of seconds above 0 and at most 86,400; got 0.0."),
])
def test_settings_out_of_range_are_refused_and_not_kept(ip, fake_llm, capsys, setting, value, message) -> None:
    """The agent's own range check, in %ehr config and in the %%ehr options: the setting keeps its
    value, and the session's settings stay ones the agent accepts."""
    before = getattr(ip._ehr_magic[0], setting)
    result = ip.run_cell(f"%ehr config {setting} {value}")
    assert not result.success and str(result.error_in_exec) == message
    assert getattr(ip._ehr_magic[0], setting) == before
    if setting != "timeout":  # %%ehr has no --timeout
        result = ip.run_cell(f"%%ehr --{setting} {value}\nHow many patients are there?")
        assert not result.success and str(result.error_in_exec) == f"--{message}"
    assert not fake_llm.chat_requests()
    assert "Traceback" not in capsys.readouterr().out


def test_line_commands(ip, fake_llm, capsys, tmp_path) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    ip.run_cell(inserted(ip))
    capsys.readouterr()
    ip.run_line_magic("ehr", "memory list")
    assert "How many patients are there?" in capsys.readouterr().out
    ip.run_line_magic("ehr", "history")
    assert "answered" in capsys.readouterr().out
    ip.run_line_magic("ehr", "config steps 3")
    assert ip.run_line_magic("config", "EhrMagics.steps") == 3  # the traitlet itself changed
    ip.run_line_magic("ehr", "config")
    assert "steps = 3" in capsys.readouterr().out
    ip.run_line_magic("ehr", "help")
    assert "%ehr connect" in capsys.readouterr().out
    from ehr_magic.llm import config_path

    config = config_path()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('# mine\n[llm]\nmodel = "old"  # the usual one\n\n[memory]\nenabled = true\n')
    ip.run_line_magic("ehr", "config model gpt-4o --save")  # edits the file, keeping its comments
    assert config.read_text() == '# mine\n[llm]\nmodel = "gpt-4o"  # the usual one\n\n[memory]\nenabled = true\n'
    assert f"saved to {config}" in capsys.readouterr().out
    result = ip.run_cell("%ehr nonsense")  # a usage error: a message, no traceback
    captured = capsys.readouterr()
    assert not result.success and "Unknown command 'nonsense'" in captured.err + captured.out
    assert "Traceback" not in captured.err + captured.out


def test_accepted_cell_becomes_a_user_skill(ip, fake_llm, capsys) -> None:
    code = "labs = ehr.sql('SELECT count(*) AS n FROM labevents WHERE subject_id = 10004235')\nanswer = labs.item()"
    fake_llm.enqueue(fenced(code))
    ip.run_cell_magic("ehr", "", "How many lab results does patient 10004235 have?")
    assert ip.run_cell(inserted(ip)).success
    expected_other = ip.user_ns["ehr"].sql("SELECT count(*) AS n FROM labevents WHERE subject_id = 10014729").item()
    capsys.readouterr()
    assert ip.run_cell("%ehr skill save lab_count subject_id=10004235").success
    assert "Saved user skill lab_count v1" in capsys.readouterr().out
    assert ip.run_cell("other = skills.lab_count(ehr, subject_id=10014729)").success
    value = ip.user_ns["other"]
    value = value.item() if hasattr(value, "item") else value
    assert value == expected_other
    ip.run_line_magic("ehr", "skill list")
    out = capsys.readouterr().out
    assert "lab_count" in out and "sofa" in out


def test_generated_code_can_call_skills(ip, fake_llm) -> None:
    fake_llm.enqueue(fenced("answer = skills.calc.bmi(80, 180)"))
    ip.run_cell_magic("ehr", "", "What is the BMI of someone weighing 80 kg at 180 cm?")
    assert round(ip.user_ns["answer"], 1) == 24.7


def test_review_mode_inserts_without_running_and_status_shows_privacy(ip, fake_llm, capsys) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    ip.run_cell_magic("ehr", "--review", "How many patients are there?")
    assert "answer" not in ip.user_ns
    assert read_marker(inserted(ip))[2].strip() == CELL_CODE
    assert "not run" in capsys.readouterr().out
    ip.run_line_magic("ehr", "status")
    assert "privacy: full" in capsys.readouterr().out  # the open EHRSQL demo data


def test_blocked_code_is_fed_back_and_rewritten(ip, fake_llm) -> None:
    def responder(request):
        text = str(request)
        if "rubber-duck" in text:
            return "Reading files is not allowed; query the database."
        if "is not allowed" in text:
            return fenced("answer = ehr.count('patients')")
        return fenced("import os\nanswer = os.listdir('/')")

    fake_llm.responder = responder
    ip.run_cell_magic("ehr", "", "How many patients are there?")
    assert ip.user_ns["answer"] == 94


def test_accepted_cell_is_reused_with_new_values_without_the_model(ip, fake_llm, tmp_path) -> None:
    code = ("answer = ehr.sql(\"SELECT count(*) FROM admissions WHERE subject_id = 10004235\").item()")
    fake_llm.enqueue(fenced(code))
    ip.run_cell_magic("ehr", "", "How many hospital visits did patient 10004235 have?")
    assert ip.run_cell(inserted(ip)).success
    requests = len(fake_llm.chat_requests())
    other = ip.user_ns["ehr"].sql("SELECT count(*) FROM admissions WHERE subject_id = 10014729").item()
    ip.run_cell_magic("ehr", "", "How many hospital visits did patient 10014729 have?")
    assert len(fake_llm.chat_requests()) == requests  # no model call
    assert ip.user_ns["answer"] == other
    cell = inserted(ip)
    assert "10014729" in cell and "10004235" not in read_marker(cell)[2]
