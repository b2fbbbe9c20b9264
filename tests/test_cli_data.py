"""The data CLI as a user runs it: a real subprocess, exit codes and messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from datapaths import EHRSQL_SQLITE, MIMIC_IV_DEMO


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ehr_magic", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_load_ehrsql_and_info(tmp_path: Path) -> None:
    out = tmp_path / "e.duckdb"
    done = run("data", "load", "ehrsql", str(EHRSQL_SQLITE), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "17 tables" in done.stdout and "2100-12-31 23:59:00" in done.stdout
    info = run("data", "info", str(out), "--json")
    assert info.returncode == 0
    parsed = json.loads(info.stdout)
    assert parsed["schema"] == "ehrsql_mimic_iv" and parsed["tables"]["labevents"] == 26426
    human = run("data", "info", str(out))
    assert "labevents" in human.stdout and "26,426" in human.stdout


def test_load_mimic_warns_about_missing_table(tmp_path: Path) -> None:
    out = tmp_path / "m.duckdb"
    done = run("data", "load", "mimic-iv", str(MIMIC_IV_DEMO), "--out", str(out), "--quiet",
               "--now", "2200-01-01 00:00:00")
    assert done.returncode == 0, done.stderr
    assert "table chartevents not found" in done.stderr
    assert "now = 2200-01-01 00:00:00" in done.stdout


def test_user_mistakes_are_one_line_without_traceback(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_text("hello")
    cases = [
        ("data", "load", "mimic-iv", str(tmp_path / "nope"), "--out", str(tmp_path / "o.duckdb")),
        ("data", "load", "ehrsql", str(junk), "--out", str(tmp_path / "o.duckdb")),
        ("data", "load", "ehrsql", str(EHRSQL_SQLITE), "--out", str(tmp_path / "no" / "dir" / "o.duckdb")),
        ("data", "load", "ehrsql", str(EHRSQL_SQLITE), "--out", str(tmp_path / "o.csv")),
        ("data", "info", str(junk)),
        ("data", "info", str(tmp_path / "missing.duckdb")),
        ("data", "fetch", "mimic-iv-demo", "--url", "http://127.0.0.1:9/", "--dir", str(tmp_path / "f")),
    ]
    for args in cases:
        done = run(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert "Traceback" not in done.stderr, args
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, done.stderr)
    assert not (tmp_path / "o.duckdb").exists()


def test_bad_arguments_are_usage_errors() -> None:
    done = run("data", "load", "nosuchsource", "x", "--out", "y.duckdb")
    assert done.returncode == 2 and "invalid choice" in done.stderr


def test_agent_settings_out_of_range_are_refused_before_connecting(tmp_path: Path) -> None:
    """--steps, --shots and --timeout are checked as the magic checks them, before any database is
    opened (the file named here does not exist: its error would come later)."""
    missing = str(tmp_path / "missing.duckdb")
    for args, message in ((("ask", "--steps", "0"), "argument --max-steps/--steps: steps must be a whole number "
                                                     "from 1 to 50; got 0."),
                          (("ask", "--shots", "17"), "argument --shots: shots must be a whole number from 0 to 16; "
                                                     "got 17."),
                          (("chat", "--timeout", "0"), "argument --timeout: timeout must be a number of seconds "
                                                       "above 0 and at most 86,400; got 0.0."),
                          (("eval", str(tmp_path), "--split", "valid", "--shots", "-1"),
                           "argument --shots: shots must be a whole number from 0 to 16; got -1.")):
        done = run(*args, "--db", missing, *(["How many?"] if args[0] == "ask" else []))
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr and "missing.duckdb" not in done.stderr
