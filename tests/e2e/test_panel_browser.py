"""The side panel end to end, in a real browser.

JupyterLab runs on 127.0.0.1 with the installed extension, a notebook, a DuckDB built
from the EHRSQL MIMIC-IV demo, a temporary memory file and the fake OpenAI-compatible
server as the model. Headless Chromium (Debian's, through Playwright) opens the panel
with its keyboard shortcut, loads ehr_magic with the panel's button, asks a question
whose first attempt fails and is debugged, presses Insert & run, and checks the new
cell, its output and the memory store. Screenshots go to docs/panel-*.png.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ehr_magic.memory import MemoryStore
from fake_llm import FakeLLMServer, FakeReply

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
CHROMIUM = os.environ.get("EHR_MAGIC_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
QUESTION = "How many patients are there of each gender?"
BAD_CODE = 'answer = ehr.sql("SELECT gender, count(*) AS n FROM patient GROUP BY gender")'
GOOD_CODE = ('answer = ehr.sql("""\n    SELECT gender, count(*) AS n\n    FROM patients\n    GROUP BY gender\n'
             '    ORDER BY gender\n""")\nanswer')
NOTE = "The table is called `patients`, not `patient`; query `patients`."

pytestmark = pytest.mark.slow


def _skip_reason() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium; or set EHR_MAGIC_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    from jupyter_core.paths import jupyter_path

    if not any((Path(p) / "@ehr-magic" / "panel" / "package.json").exists() for p in jupyter_path("labextensions")):
        return "the @ehr-magic/panel JupyterLab extension is not installed (pip install -e . builds it)"
    return None


def _fenced(code: str, knowledge: str = "- patients has one row per patient, with gender 'f' or 'm'") -> str:
    return f"Knowledge:\n{knowledge}\n```python\n{code}\n```"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _responder(request: dict) -> FakeReply:
    """Attempt 1 uses a wrong table; the debugger names it; attempt 2 streams the fix slowly."""
    text = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    if "rubber-duck" in text:
        return FakeReply(text=NOTE, delay=0.5)
    if "Catalog Error" in text or "patient does not exist" in text or "Debugger's note" in text:
        return FakeReply(text=_fenced(GOOD_CODE), chunk_delay=0.12)
    return FakeReply(text=_fenced(BAD_CODE), chunk_delay=0.03)


@pytest.fixture()
def lab(ehrsql_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    server = FakeLLMServer().start()
    server.responder = _responder
    root = tmp_path / "work"
    root.mkdir()
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "id": "first", "metadata": {},
                           "outputs": [], "source": "import polars as pl"}],
                "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                            "name": "python3"}},
                "nbformat": 4, "nbformat_minor": 5}
    (root / "analysis.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    settings = tmp_path / "lab-settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True}))
    memory = tmp_path / "memory.sqlite"
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, EHR_MAGIC_DB=str(ehrsql_db), EHR_MAGIC_MEMORY=str(memory),
               OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key", EHR_MAGIC_MODEL="fake-model",
               JUPYTERLAB_SETTINGS_DIR=str(settings), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), PYTHONUNBUFFERED="1")
    log = (tmp_path / "lab.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.allow_root=True",
         f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={root}", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         "--LabApp.expose_app_in_browser=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise RuntimeError("JupyterLab did not start:\n"
                                       + (tmp_path / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.3)
        yield {"url": f"{base}/lab/tree/analysis.ipynb?token={token}&reset", "memory": memory, "llm": server,
               "log": tmp_path / "lab.log"}
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        server.stop()


def test_ask_insert_and_run_from_the_panel(lab, tmp_path: Path) -> None:
    DOCS.mkdir(exist_ok=True)
    in_browser(lab, tmp_path, lambda page, expect: _run_scenario(page, expect, lab, tmp_path))


def _run_scenario(page, expect, lab, tmp_path: Path) -> None:
    page.set_default_timeout(60_000)
    expect.set_options(timeout=45_000)  # a loaded CI machine: the kernel and the model take their time
    page.goto(lab["url"])
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(notebook.locator(".jp-Cell")).to_have_count(1)
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_attached()
    notebook.locator(".jp-Cell").first.click()

    # open the panel with its shortcut; the kernel has not loaded ehr_magic yet
    page.keyboard.press("Escape")
    page.keyboard.press("Alt+Shift+E")
    panel = page.locator("#ehr-magic-assistant")
    expect(panel).to_be_visible()
    _widen(page, panel, 400)
    expect(panel.get_by_text("analysis.ipynb")).to_be_visible()
    load = panel.get_by_role("button", name="Load ehr_magic")
    expect(load).to_be_visible()
    panel.screenshot(path=str(tmp_path / "panel-not-loaded.png"))  # kept with the test's temporary files
    load.click()
    expect(panel.get_by_text("connected", exact=True)).to_be_visible()
    expect(panel.locator(".jp-EhrAssistant-status")).to_contain_text("ehrsql_mimic_iv")
    expect(panel.locator(".jp-EhrAssistant-status")).to_contain_text("fake-model")

    # ask; the run shows the failed first attempt, the debugger's note, and the fix streaming
    box = panel.get_by_role("textbox", name="Question")
    box.fill(QUESTION)
    panel.get_by_role("button", name="Ask", exact=True).click()
    expect(panel.locator(".jp-EhrAssistant-attempt-failed")).to_contain_text("patient")
    expect(panel.locator(".jp-EhrAssistant-debugger")).to_contain_text("patients")
    expect(panel.locator(".jp-EhrAssistant-streaming")).to_contain_text("SELECT gender")
    page.screenshot(path=str(DOCS / "panel-running.png"))

    # the answer: a table, the final code and the buttons
    expect(panel.locator(".jp-EhrAssistant-badge-answered")).to_be_visible()
    table = panel.locator(".jp-EhrAssistant-table")
    expect(table.locator("th")).to_have_text(["gender", "n"])
    expect(table.locator("tbody tr")).to_have_count(2)
    counts = [int(t) for t in table.locator("tbody td.jp-EhrAssistant-num").all_inner_texts()]
    assert sum(counts) == 94
    expect(panel.locator(".jp-EhrAssistant-examples li").first).to_be_attached()

    # Insert & run: a new cell below the active one, run by JupyterLab, accepted into memory
    panel.get_by_role("button", name="Insert & run").click()
    expect(panel.locator(".jp-EhrAssistant-insertion")).to_contain_text("stored in memory as #1")
    cells = notebook.locator(".jp-Cell")
    expect(cells).to_have_count(2)
    new_cell = cells.nth(1)
    source = new_cell.locator(".cm-content").inner_text()
    assert source.startswith("# ehr-magic #") and QUESTION in source.splitlines()[0]
    assert "FROM patients" in source and "GROUP BY gender" in source
    output = new_cell.locator(".jp-OutputArea-output")
    expect(output).to_contain_text("gender")
    expect(output).to_contain_text(str(max(counts)))
    expect(new_cell.locator(".jp-InputPrompt")).to_contain_text("[1]")
    page.wait_for_timeout(300)
    page.screenshot(path=str(DOCS / "panel-inserted.png"))

    entries = MemoryStore(lab["memory"]).list()
    assert [(e.question, e.origin) for e in entries] == [(QUESTION, "accepted")]
    assert "FROM patients" in entries[0].code and "ehr-magic" not in entries[0].code

    # the memory tab lists it; asking again answers from memory without the model
    panel.get_by_role("tab", name="Memory (1)").click()
    expect(panel.locator(".jp-EhrAssistant-entryQuestion")).to_have_text([QUESTION])
    panel.locator(".jp-EhrAssistant-entry summary").click()
    panel.screenshot(path=str(DOCS / "panel-memory.png"))
    panel.get_by_role("tab", name="Ask").click()
    calls = len(lab["llm"].chat_requests())
    box.fill(QUESTION)
    box.press("Enter")
    expect(panel.locator(".jp-EhrAssistant-badge-answered")).to_have_text("Answered from memory")
    assert len(lab["llm"].chat_requests()) == calls

    # without a model the status says what to set (answers in memory still work)
    page.evaluate("""async () => {
        const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
        await kernel.requestExecute({code: "import os; os.environ.pop('EHR_MAGIC_MODEL', None)"}).done;
    }""")
    panel.get_by_title("Reconnect to the kernel and refresh the status").click()
    expect(panel.locator(".jp-EhrAssistant-callout-warn")).to_contain_text("EHR_MAGIC_MODEL")
    panel.screenshot(path=str(tmp_path / "panel-no-model.png"))

    # dark theme screenshot (styling uses only JupyterLab variables)
    if os.environ.get("EHR_MAGIC_DARK_SCREENSHOT"):
        page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
        page.wait_for_timeout(1500)
        page.screenshot(path=str(DOCS / "panel-dark.png"))



def _widen(page, panel, width: int) -> None:
    """Drag the split handle left of the side panel until the panel is ``width`` px wide."""
    box = panel.bounding_box()
    if box is None or box["width"] >= width:
        return
    x, y = box["x"] - 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - (width - box["width"]), y, steps=5)
    page.mouse.up()


WOMEN = "How many female patients are there?"
COHORT_QUESTION = "How many of the patients in cohort are women?"


def _conversation_responder(request: dict) -> FakeReply:
    """Answers by the question in the last user message; follow-ups state their standalone question."""
    last = str(request.get("messages", [{}])[-1].get("content", ""))
    if COHORT_QUESTION in last:
        return FakeReply(text="Standalone question: " + COHORT_QUESTION + "\n" + _fenced(
            "women = ehr.sql(\"SELECT subject_id FROM patients WHERE gender = 'f'\")\n"
            "answer = cohort.filter(pl.col('subject_id').is_in(women['subject_id'].to_list())).height"))
    if "now only the men" in last and "Turn 1:" not in last:  # a first question: nothing to refer to
        return FakeReply(text="CLARIFY: Only the men of which question?")
    if "now only the women" in last:
        return FakeReply(text="Standalone question: " + WOMEN + "\n" + _fenced(
            "answer = ehr.sql(\"SELECT count(*) AS n FROM patients WHERE gender = 'f'\")"))
    return FakeReply(text=_fenced(GOOD_CODE))


def test_conversation_thread_in_the_panel(lab, tmp_path: Path) -> None:
    lab["llm"].responder = _conversation_responder
    in_browser(lab, tmp_path, lambda page, expect: _thread_scenario(page, expect, lab))


def open_panel(page, expect, lab, width: int):
    """Open the notebook and the panel (Alt+Shift+E), widen it, load ehr_magic; the panel."""
    page.set_default_timeout(60_000)
    expect.set_options(timeout=45_000)
    page.goto(lab["url"])
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(notebook.locator(".jp-Cell")).to_have_count(1)
    expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")).to_be_attached()
    notebook.locator(".jp-Cell").first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Alt+Shift+E")
    panel = page.locator("#ehr-magic-assistant")
    expect(panel).to_be_visible()
    _widen(page, panel, width)
    panel.get_by_role("button", name="Load ehr_magic").click()
    expect(panel.get_by_text("connected", exact=True)).to_be_visible()
    return panel


def _thread_scenario(page, expect, lab) -> None:
    panel = open_panel(page, expect, lab, 440)
    page.evaluate("""async () => {
        const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
        await kernel.requestExecute({code: "import polars as pl\\n"
            + "cohort = pl.DataFrame({'subject_id': [10004235, 10001217, 10002428]})"}).done;
    }""")
    box = panel.get_by_role("textbox", name="Question")
    ask = panel.get_by_role("button", name="Ask", exact=True)
    badge = panel.locator(".jp-EhrAssistant-badge-answered")

    box.fill(QUESTION)
    ask.click()
    expect(badge).to_be_visible()
    expect(panel.locator(".jp-EhrAssistant-threadTitle")).to_have_text("Conversation · 1 question")
    box.fill("now only the women")
    ask.click()
    expect(panel.locator(".jp-EhrAssistant-runMeaning")).to_have_text("meaning: " + WOMEN)
    expect(badge).to_be_visible()
    box.fill(COHORT_QUESTION)
    ask.click()
    expect(panel.locator(".jp-EhrAssistant-threadTitle")).to_have_text("Conversation · 3 questions")
    turns = panel.locator(".jp-EhrAssistant-turn")
    expect(turns).to_have_count(2)
    expect(turns.nth(0).locator(".jp-EhrAssistant-turnQuestion")).to_have_text(QUESTION)
    expect(turns.nth(1).locator(".jp-EhrAssistant-turnMeaning")).to_have_text("meaning: " + WOMEN)
    expect(badge).to_be_visible()
    requests = lab["llm"].chat_requests()
    last = requests[-1].last_user_message
    assert "now only the women" in last and "Notebook variables described to the model: cohort" in last
    assert "`cohort`: polars DataFrame, 3 rows x 1 columns" in last  # the open demo is at privacy `full`
    page.wait_for_timeout(300)
    panel.screenshot(path=str(DOCS / "panel-thread.png"))

    panel.get_by_role("button", name="New conversation").click()
    expect(panel.locator(".jp-EhrAssistant-thread")).to_have_count(0)
    box.fill("now only the men")
    ask.click()
    # Wording never refuses: the question reaches the model, which sees no earlier turn and asks.
    expect(panel.locator(".jp-EhrAssistant-run")).to_contain_text("Only the men of which question?")
    assert len(lab["llm"].chat_requests()) == len(requests) + 1


def in_browser(lab, tmp_path: Path, scenario) -> None:
    """Run ``scenario(page, expect)`` in headless Chromium on ``lab``; on failure keep a
    screenshot with the test's files and print the JupyterLab log's tail."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium"), executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True,
            viewport={"width": 1360, "height": 900}, device_scale_factor=1)
        page = browser.pages[0] if browser.pages else browser.new_page()
        try:
            scenario(page, expect)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            print("JupyterLab log tail:\n" + lab["log"].read_text()[-4000:])
            raise
        finally:
            browser.close()
