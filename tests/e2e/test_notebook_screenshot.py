"""The quickstart in a real JupyterLab and a real browser, as an analyst runs it.

JupyterLab serves a copy of the quickstart without its saved accepted cells; headless
Chromium (Debian's, driven by Playwright) runs the cells one by one against the
scripted model. The test checks what only a browser shows: ``%%ehr`` inserts its code
as a new cell right below (``set_next_input``), running that cell (here after an
edit) accepts it, and asking again is answered from memory. It ends with a tall
screenshot of the notebook; set ``EHR_MAGIC_UPDATE_SCREENSHOT=1`` (or run this file
with Python) to save it as ``docs/quickstart.png``.

Skipped when Chromium or Playwright is missing. Takes about a minute.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from ehr_magic.cli.demo import lab_command
from ehr_magic.magic.command import read_marker

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "notebooks" / "quickstart.ipynb"
SCREENSHOT = REPO / "docs" / "quickstart.png"
CHROMIUM = Path(os.environ.get("EHR_MAGIC_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TOKEN = "ehr-magic-screenshot"
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none", "scrollPastEnd": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
}

sys.path.insert(0, str(REPO / "notebooks" / "replies"))
from scripted import ScriptedModel  # noqa: E402

sync_api = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _live_copy(folder: Path) -> dict[str, str]:
    """Write the quickstart as it is before the analyst's session: without the accepted
    cells. Returns their code by question (what the analyst ran, edits included)."""
    nb = nbformat.read(QUICKSTART, as_version=4)
    accepted = {m[1]: m[2].strip() for c in nb.cells if c.cell_type == "code" and (m := read_marker(c.source))}
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and read_marker(c.source))]
    nbformat.write(nb, folder / QUICKSTART.name)
    return accepted


@pytest.fixture()
def lab(tmp_path: Path, mimic_demo_db: Path, fake_llm):
    """JupyterLab on a live copy of the quickstart, its kernels talking to the scripted model."""
    fake_llm.responder = model = ScriptedModel.for_notebook(QUICKSTART)
    folder = tmp_path / "notebooks"
    folder.mkdir()
    accepted = _live_copy(folder)
    settings = tmp_path / "lab-settings"
    for name, values in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values))
    port = _free_port()
    env = {**os.environ, "EHR_MAGIC_DB": str(mimic_demo_db), "EHR_MAGIC_MEMORY": str(tmp_path / "memory.sqlite"),
           "EHR_MAGIC_MODEL": "scripted-model", "JUPYTER_TOKEN": TOKEN,
           "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"), "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime")}
    command = lab_command(folder, no_browser=True, port=port) + [f"--LabApp.user_settings_dir={settings}",
                                                                 "--ServerApp.ip=127.0.0.1"]
    log = (tmp_path / "lab.log").open("wb")
    process = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start:\n{(tmp_path / 'lab.log').read_text()[-3000:]}")
                time.sleep(0.3)
        yield url, model, accepted
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the process group this fixture started
            process.wait()
        log.close()


def _cells(page):
    return page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")


def _run_cell(page, index: int, timeout: float = 120) -> None:
    """Run one cell in place and wait until it has finished (its prompt shows a number)."""
    prompt = _cells(page).nth(index).locator(".jp-InputPrompt").first
    prompt.click()  # select the cell, in command mode
    page.keyboard.press("Control+Enter")
    deadline = time.monotonic() + timeout
    while not re.search(r"\[\d+\]", prompt.inner_text()):
        assert time.monotonic() < deadline, f"cell {index} did not finish"
        time.sleep(0.2)
    page.wait_for_timeout(400)  # the inserted cell (set_next_input) arrives with the reply


def _edit(page, index: int, new_source: str) -> None:
    """The analyst's edit of an inserted cell: select all of it and type the new version."""
    _cells(page).nth(index).locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(new_source)
    page.keyboard.press("Escape")


def _lines(code: str) -> list[str]:
    """Code lines without the blank ones (the editor's text shows blank lines doubled)."""
    return [line.rstrip() for line in code.splitlines() if line.strip()]


def _source(page, index: int) -> str:
    return _cells(page).nth(index).locator(".cm-content").inner_text().replace("\u00a0", " ")


def test_quickstart_live_in_jupyterlab(lab, tmp_path: Path) -> None:
    url, model, accepted = lab
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1240, "height": 1000})
        page.goto(f"{url}/doc/tree/{QUICKSTART.name}?token={TOKEN}")
        text = run_quickstart(page, accepted)
        assert "answer: 100" in text and "# edited" in text
        assert "reused accepted cell #2 (no model call)" in text
        assert re.search(r"#2\s+accepted", text) and re.search(r"#4\s+accepted", text)
        assert page.locator(".jp-NotebookPanel .widget-button").count() >= 4 * 3  # Accept, Regenerate, Reject
        assert page.locator(".jp-NotebookPanel .jp-RenderedImage img").count() >= 2  # the chart, twice
        assert model.problems() == []
        shot = screenshot(page, tmp_path / "quickstart.png")
        browser.close()
    if os.environ.get("EHR_MAGIC_UPDATE_SCREENSHOT"):
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, SCREENSHOT)


def run_quickstart(page, accepted: dict[str, str]) -> str:
    """Run every code cell in order, as the analyst would, editing an inserted cell where
    the saved notebook has an edited version; returns the notebook's text."""
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
    page.get_by_text(re.compile(r"\| Idle")).wait_for(timeout=60_000)  # the kernel is up
    asked: set[str] = set()
    index = 0
    while index < _cells(page).count():
        if "jp-CodeCell" not in (_cells(page).nth(index).get_attribute("class") or ""):
            index += 1
            continue
        source = _source(page, index)
        before = _cells(page).count()
        _run_cell(page, index)
        question = " ".join(source.split("\n", 1)[1].split()) if source.startswith("%%ehr") else None
        if question and question not in asked:  # a new question: its code appears right below
            asked.add(question)
            assert _cells(page).count() == before + 1, f"no cell inserted for {question!r}"
            marked = read_marker(_source(page, index + 1))
            assert marked is not None and marked[1] == question, _source(page, index + 1)
            if _lines(marked[2]) != _lines(accepted[question]):  # the analyst edited this one
                _edit(page, index + 1, f"{_source(page, index + 1).splitlines()[0]}\n{accepted[question]}\n")
                assert _lines(read_marker(_source(page, index + 1))[2]) == _lines(accepted[question])
        if "creatinine" in source and question:
            _cells(page).nth(index).get_by_text("attempts", exact=True).click()  # show how the first attempt was fixed
        index += 1
    outputs = page.locator(".jp-NotebookPanel .jp-OutputArea-output")
    errors = page.locator(".jp-NotebookPanel .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, errors.first.inner_text()
    assert outputs.count() > 20
    return page.locator(".jp-NotebookPanel .jp-Notebook").inner_text()


def screenshot(page, path: Path) -> Path:
    """The whole notebook in one tall image: grow the window to the notebook's height."""
    _cells(page).last.click()  # the last cell active: its blue bar, not the first one's, is in the picture
    page.keyboard.press("Escape")
    page.evaluate("() => document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer').scrollTo(0, 0)")
    height = page.evaluate("""() => {
        const outer = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');
        return document.documentElement.clientHeight - outer.clientHeight + outer.scrollHeight;
    }""")
    page.set_viewport_size({"width": 1240, "height": int(height) + 40})
    page.wait_for_timeout(800)
    page.screenshot(path=str(path))
    from PIL import Image  # 256 colours lose nothing visible in a notebook and save two thirds

    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)
    return path


if __name__ == "__main__":  # python tests/e2e/test_notebook_screenshot.py: refresh docs/quickstart.png
    os.environ["EHR_MAGIC_UPDATE_SCREENSHOT"] = "1"
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO)]))
