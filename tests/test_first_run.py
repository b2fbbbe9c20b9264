"""The first commands a new user types: ``ask`` and ``chat`` with no ``--db`` start where
the magic starts (EHR_MAGIC_DB, else the demo database) and say which database they used;
with no model, the message says first how to set one, and why memory could not answer after."""

from __future__ import annotations

import contextlib
import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from ehr_magic.cli import main
from ehr_magic.sources.demo import demo_dir, failed_fetch_marker
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


@pytest.mark.parametrize(("argv", "message"), [
    (["ask", QUESTION], "No model configured: set EHR_MAGIC_MODEL"),
    (["ask", QUESTION, "--db", "{tmp}/missing.duckdb"], "No database file at {tmp}/missing.duckdb"),
    (["ask", QUESTION, "--db", "{tmp}"], "{tmp} is a folder, not a database file; load its table files into one "
                                         "with `ehr-magic data load csv {tmp} --out FILE.duckdb`"),
    (["ask", "  "], "The question is empty"),
], ids=["no model", "no database", "a folder", "empty question"])
def test_ask_json_fails_with_one_json_document(argv: list[str], message: str, offline: Path, tmp_path: Path,
                                               capsys) -> None:
    argv = [arg.format(tmp=tmp_path) for arg in argv]
    message = message.format(tmp=tmp_path)
    assert main(argv) == 2
    plain = capsys.readouterr()
    assert plain.out == "" and f"error: {message}" in plain.err

    assert main([*argv, "--json"]) == 2  # the same exit code
    captured = capsys.readouterr()
    result = json.loads(captured.out)  # one document: anything after it would not parse
    assert captured.out.count("\n") == 1
    assert result["status"] == "error" and result["message"].startswith(message), result
    assert result["question"] == argv[1] and result["answer"] is None
    assert f"error: {result['message']}" in captured.err  # as without --json


class _CountingHandler(BaseHTTPRequestHandler):
    """A download server that is down: every request is counted and answered 503."""

    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        self.send_error(503)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def down_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """EHR_MAGIC_DEMO_URL points at a local server that fails every request; yields the
    paths it was asked for."""
    handler = type("Counting", (_CountingHandler,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.delenv("EHR_MAGIC_DB", raising=False)
    monkeypatch.delenv("EHR_MAGIC_DEMO_DIR", raising=False)
    monkeypatch.setenv("EHR_MAGIC_DEMO_URL", f"http://127.0.0.1:{server.server_address[1]}/")
    yield handler.requests
    server.shutdown()
    server.server_close()


def test_a_failed_download_is_not_tried_again_on_the_next_start(down_server: list[str], monkeypatch,
                                                                 tmp_path: Path, capsys) -> None:
    # The first start tries PhysioNet (here: the local server), fails, says so and remembers it.
    assert main(["ask", QUESTION]) == 2
    first = capsys.readouterr().err
    assert down_server == ["/SHA256SUMS.txt"]
    assert "Could not fetch the MIMIC-IV demo" in first and "HTTP 503" in first
    marker = json.loads(failed_fetch_marker().read_text())
    assert "HTTP 503" in marker["why"] and marker["url"].startswith("http://127.0.0.1:") and marker["when"]

    # The next starts use the synthetic database without the network, in one line.
    assert main(["ask", QUESTION]) == 2
    second = capsys.readouterr().err
    assert down_server == ["/SHA256SUMS.txt"], "the second start tried the download again"
    database_lines = [line for line in second.splitlines() if not line.startswith("error:")]
    assert len(database_lines) == 1 and "Fetching" not in second and "Could not fetch" not in second
    assert database_lines[0].startswith(f"Database: {demo_dir() / 'synthetic-100-seed0.duckdb'}, synthetic")
    assert "could not be fetched on " in database_lines[0] and "`ehr-magic demo` tries again" in database_lines[0]

    with contextlib.contextmanager(ipython_shell)(None, monkeypatch, tmp_path) as shell:
        out = capsys.readouterr().out
        assert shell.user_ns["ehr"].dataset.startswith("synthetic")
    assert down_server == ["/SHA256SUMS.txt"], "%load_ext tried the download again"
    assert len(out.strip().splitlines()) == 1 and out.startswith("ehr = synthetic"), out

    # `ehr-magic demo` and `ehr-magic data fetch` try again.
    assert main(["demo", "--no-lab", "--dir", str(tmp_path / "nb")]) == 0
    assert down_server == ["/SHA256SUMS.txt"] * 2
    assert "Could not fetch the MIMIC-IV demo" in capsys.readouterr().err
    assert main(["data", "fetch", "mimic-iv-demo", "--quiet"]) == 2
    assert down_server == ["/SHA256SUMS.txt"] * 3
