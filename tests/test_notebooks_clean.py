"""The notebooks as committed: outputs cleared, nothing of the test harness in them,
consistent with their reply scripts, and reproducible without any model.

(Running them with the scripted model is the harness's job: notebooks/conftest.py.)
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
import yaml

from ehr_magic.magic.command import read_marker

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
# The session fixture (tests/conftest.py) of the database each notebook runs on, as notebooks/conftest.py chooses it.
DATABASE_FIXTURES = {"mimic-iv-demo": "mimic_demo_db", "eicu-demo": "eicu_demo_db", "eunomia": "eunomia_db"}
SCAFFOLDING = re.compile(r"fake|scripted|nbmake|pytest|monkeypatch|127\.0\.0\.1|localhost|os\.environ|%env|%set_env",
                         re.IGNORECASE)
FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cells(nb: nbformat.NotebookNode) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def question_of(source: str) -> str | None:
    """The question of a ``%%ehr`` cell, as the magic reads it."""
    first, _, body = source.partition("\n")
    return " ".join(body.split()) if first.startswith("%%ehr") else None


def test_the_notebooks_exist() -> None:
    assert {p.name for p in NOTEBOOKS} >= {"quickstart.ipynb", "cohort_analysis.ipynb"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_outputs_are_cleared(path: Path) -> None:
    nb = read(path)
    nbformat.validate(nb)
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.outputs or c.execution_count is not None)]
    assert not dirty, f"{path.name}: cells {dirty} have outputs; clear them (Edit > Clear Outputs of All Cells)"
    assert not any(c.get("attachments") for c in nb.cells)
    assert "widgets" not in nb.metadata, f"{path.name}: saved widget state; clear it before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_saved_as_jupyterlab_writes_it(path: Path) -> None:
    """Opening a notebook changes nothing, so its tab opens without the unsaved-changes dot:
    it is in nbformat's canonical form (cell ids, nbformat 4.5, sorted keys, final newline),
    and its kernelspec and language_info are what JupyterLab writes in from the kernel
    (``ehr-magic demo`` puts in the language version of the user's Python)."""
    from ipykernel.ipkernel import IPythonKernel
    from jupyter_client.kernelspec import KernelSpecManager

    text = path.read_text(encoding="utf-8")
    nb = read(path)
    assert nbformat.writes(nb) + "\n" == text, f"{path.name}: not as nbformat writes it; save it with nbformat"
    assert (nb.nbformat, nb.nbformat_minor) == (4, 5) and all(cell.get("id") for cell in nb.cells)
    spec = KernelSpecManager().get_kernel_spec("python3")
    assert nb.metadata.kernelspec == {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    language_info, kernels = dict(nb.metadata.language_info), dict(IPythonKernel.language_info)
    assert language_info.pop("version", None) and kernels.pop("version")
    assert language_info == kernels, f"{path.name}: language_info is not what the kernel reports"


@pytest.mark.slow
def test_the_demo_notebooks_open_unchanged_in_jupyterlab(tmp_path: Path) -> None:
    """``ehr-magic demo``'s copies, opened in a real JupyterLab (with the side panel) in
    headless Chromium: once the kernel has told JupyterLab its language and spec, no
    notebook has unsaved changes (JupyterLab writes them into the notebook on opening)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = Path(os.environ.get("EHR_MAGIC_CHROMIUM", "/usr/bin/chromium"))
    if not chromium.exists():
        pytest.skip(f"no Chromium at {chromium} (apt-get install chromium)")
    from ehr_magic.cli.demo import copy_notebooks, lab_command

    folder = tmp_path / "nb"
    copied, _ = copy_notebooks(folder)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings")}
    command = [*lab_command(folder, no_browser=True, port=port), "--ServerApp.ip=127.0.0.1",
               f"--IdentityProvider.token={token}", "--LabApp.expose_app_in_browser=True",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    base = f"http://127.0.0.1:{port}"
    with (tmp_path / "lab.log").open("wb") as log:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "lab.log").read_text()
                time.sleep(0.3)
        opened = {}
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(chromium), headless=True,
                                                 args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
            try:
                for name in copied:
                    page = browser.new_page()
                    page.set_default_timeout(90_000)
                    page.goto(f"{base}/lab/tree/{name}?token={token}&reset")
                    page.wait_for_function("name => window.jupyterapp?.shell.currentWidget?.context?.path === name",
                                           arg=name)
                    opened[name] = page.evaluate(_OPENED_STATE)
                    page.close()
            finally:
                browser.close()
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert set(opened) >= {"quickstart.ipynb", "cohort_analysis.ipynb"}
    for name, state in opened.items():
        assert state["language_info"].get("version"), f"{name}: the kernel did not report its language"
        assert not state["dirty"] and not state["dirty_tabs"], f"{name} has unsaved changes right after opening"


# In the page: wait until the kernel's language_info and spec reached the notebook (JupyterLab's
# handlers of these promises were registered first, so they have run), then read the dirty state.
_OPENED_STATE = """async () => {
    const widget = window.jupyterapp.shell.currentWidget;
    await widget.context.ready;
    await widget.sessionContext.ready;
    const kernel = widget.sessionContext.session.kernel;
    await kernel.info;
    await kernel.spec;
    await new Promise(resolve => setTimeout(resolve, 0));
    return {dirty: widget.context.model.dirty, language_info: widget.context.model.getMetadata('language_info'),
            dirty_tabs: document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty').length};
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_test_scaffolding(path: Path) -> None:
    nb = read(path)
    for cell in nb.cells:
        found = SCAFFOLDING.search(cell.source)
        assert found is None, f"{path.name}: {found.group(0)!r} in a {cell.cell_type} cell:\n{cell.source[:300]}"
        assert "nbmake" not in cell.metadata, f"{path.name}: nbmake settings in a cell"
        skipped = {"skip-execution", "raises-exception"} & set(cell.metadata.get("tags", []))
        assert not skipped, f"{path.name}: a cell tagged {skipped}: every cell must run cleanly"
    assert set(nb.metadata) <= {"kernelspec", "language_info"}, f"{path.name}: extra metadata {set(nb.metadata)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_question_is_reproducible_without_the_model(path: Path) -> None:
    """Each ``%%ehr`` cell is followed by its accepted cell, or asks again a question
    accepted earlier in the notebook (then memory answers it)."""
    cells = [c.source for c in read(path).cells]  # the inserted cell is right below, as JupyterLab puts it
    accepted: set[str] = set()
    for i, source in enumerate(cells):
        question = question_of(source)
        if question is None:
            continue
        marked = read_marker(cells[i + 1]) if i + 1 < len(cells) else None
        if marked is not None:
            assert marked[1] == question, f"{path.name}: the cell after {question!r} is marked for {marked[1]!r}"
            accepted.add(question)
        else:
            assert question in accepted, f"{path.name}: {question!r} has no accepted cell below it"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_accepted_cells_match_the_reply_script(path: Path) -> None:
    """The saved cells hold what the scripted model answers (or an edit, marked as such),
    and every scripted question is asked."""
    script_file = NOTEBOOKS_DIR / "replies" / f"{path.stem}.yaml"
    script = yaml.safe_load(script_file.read_text(encoding="utf-8")) if script_file.exists() else []
    final = {}
    for item in script:
        last = item["replies"][-1]
        final[item["question"]] = FENCE.search(last if isinstance(last, str) else last["reply"]).group(1).strip()
    cells = code_cells(read(path))
    asked = {question_of(c) for c in cells} - {None}
    assert asked == set(final), f"{path.name}: asked {asked ^ set(final)} differ from the reply script"
    for source in cells:
        marked = read_marker(source)
        if marked is not None:
            code = marked[2].strip()
            assert code == final[marked[1]] or "# edited" in code, (
                f"{path.name}: the accepted cell for {marked[1]!r} differs from the scripted reply "
                "and carries no '# edited' comment")


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_runs_without_a_model(path: Path, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch) -> None:
    """No model configured: each new question says what to set, nothing fails, and the
    accepted cells reproduce the results (and memory answers a repeated question)."""
    from nbclient import NotebookClient

    database = request.getfixturevalue(DATABASE_FIXTURES[_notebook_harness().database_of(path)])
    monkeypatch.setenv("EHR_MAGIC_DB", str(database))
    monkeypatch.setenv("EHR_MAGIC_MEMORY", str(tmp_path / "memory.sqlite"))
    nb = read(path)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = []
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
        texts.append("".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs))
    cells = code_cells(nb)
    accepted: set[str] = set()
    for source, text in zip(cells, texts):
        question = question_of(source)
        if question in accepted:
            assert "reused accepted cell" in text, f"{question!r} was not answered from memory:\n{text}"
        elif question is not None:
            assert "EHR_MAGIC_MODEL" in text and len(text.strip().splitlines()) == 1, text
        marked = read_marker(source)
        if marked is not None:
            accepted.add(marked[1])
            assert text.strip(), f"the accepted cell for {marked[1]!r} shows nothing"


@pytest.mark.slow
def test_the_eicu_notebook_on_another_database_stops_with_one_sentence(tmp_path: Path, monkeypatch) -> None:
    """Under `ehr-magic demo`, EHR_MAGIC_DB names the MIMIC-IV-shaped demo database: the eICU
    notebook stops in its first cell and says what to set, rather than failing further down."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from ehr_magic.sources.demo import synthetic_database

    monkeypatch.setenv("EHR_MAGIC_DB", str(synthetic_database()))
    monkeypatch.setenv("EHR_MAGIC_MEMORY", str(tmp_path / "memory.sqlite"))
    nb = read(NOTEBOOKS_DIR / "eicu_quickstart.ipynb")
    with pytest.raises(CellExecutionError):
        NotebookClient(nb, timeout=120, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    ran = [c for c in nb.cells if c.cell_type == "code" and c.get("execution_count")]
    assert len(ran) == 1  # the first cell, and no other
    shown = "".join(o.get("text", "") for o in ran[0].outputs)  # IPython shows a UsageError as one line, no traceback
    assert "UsageError: This notebook runs on the eICU demo: build it as above" in shown
    assert not [o for o in ran[0].outputs if o.output_type == "error"] and "Traceback" not in shown


@functools.cache
def _notebook_harness():
    """notebooks/conftest.py as a module (not as a conftest: it would shadow tests/conftest.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("notebook_harness", NOTEBOOKS_DIR / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
