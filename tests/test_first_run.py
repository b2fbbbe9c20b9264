"""The first commands a new user types: ``ask`` and ``chat`` with no ``--db`` start where
the magic starts (EHR_MAGIC_DB, else the demo database) and say which database they used;
with no model, the message says first how to set one, and why memory could not answer after."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from ehr_magic.cli import main
from ehr_magic.sources.demo import demo_dir
from test_magic import COUNT_CODE, fenced, ipython_shell

UNREACHABLE = "http://127.0.0.1:9/"  # nothing listens on the discard port
QUESTION = "How many patients are in the database?"


@pytest.fixture()
def offline(monkeypatch: pytest.MonkeyPatch) -> Path:
    """No EHR_MAGIC_DB and no network: the demo database is the synthetic one."""
    monkeypatch.delenv("EHR_MAGIC_DB", raising=False)
    monkeypatch.delenv("EHR_MAGIC_DEMO_DIR", raising=False)
    monkeypatch.setenv("EHR_MAGIC_DEMO_URL", UNREACHABLE)
    return demo_dir() / "synthetic-100-seed0.duckdb"


def test_ask_without_db_uses_the_demo_database_and_says_so(fake_llm, offline: Path, capsys) -> None:
    fake_llm.enqueue(fenced(COUNT_CODE))
    assert main(["ask", "How many patients are there?", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["answer"] == 100  # stdout stays one JSON document
    assert (f"Database: {offline}, synthetic MIMIC-IV-shaped data, 100 patients, as the MIMIC-IV demo could not be "
            "fetched. It is the default, as neither --db nor EHR_MAGIC_DB names one.") in captured.err
    assert "ehr-magic demo --from DIR" in captured.err  # how to use a local copy instead


def test_chat_without_db_uses_EHR_MAGIC_DB_and_says_so(fake_llm, offline: Path, monkeypatch, capsys) -> None:
    assert main(["demo", "--synthetic", "--no-lab", "--dir", str(offline.parent / "nb")]) == 0  # builds it
    monkeypatch.setenv("EHR_MAGIC_DB", str(offline))
    monkeypatch.setattr("sys.stdin", io.StringIO("How many patients are there?\n"))
    fake_llm.enqueue(fenced(COUNT_CODE))
    capsys.readouterr()
    assert main(["chat", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert f"Database: {offline}, synthetic. EHR_MAGIC_DB names it." in captured.err
    assert "answer:\n100" in captured.out


def test_with_no_model_the_message_says_first_how_to_set_one(offline: Path, monkeypatch, tmp_path: Path,
                                                             capsys) -> None:
    assert main(["ask", QUESTION]) == 2
    error = capsys.readouterr().err.split("error: ", 1)[1]
    assert error.startswith("No model configured: set EHR_MAGIC_MODEL")
    for way in ("EHR_MAGIC_MODEL", "%config EhrMagics.model", "under [llm] in"):
        assert way in error
    assert error.index("under [llm] in") < error.index("Memory reuse declined:")

    with contextlib.contextmanager(ipython_shell)(offline, monkeypatch, tmp_path) as shell:
        capsys.readouterr()
        shell.run_cell_magic("ehr", "", QUESTION)
        out = capsys.readouterr().out.strip()
    assert out.startswith("ehr-magic: No model configured: set EHR_MAGIC_MODEL") and len(out.splitlines()) == 1
    assert out.index("under [llm] in") < out.index("Memory reuse declined:")
