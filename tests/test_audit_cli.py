"""``ehr-magic audit``: listing logged model requests and checking them for patient data."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import ehr_magic
from ehr_magic.cli import audit as audit_cli
from ehr_magic.errors import EhrMagicError
from ehr_magic.llm.audit import AuditLog
from ehr_magic.safety.audit_check import IdentifierScanner, RequestCheck, request_text

SYSTEM = "You are ehr-magic. The dataset's current time is 2100-12-31 23:59:00."


def _request(*messages: tuple[str, str]) -> dict:
    return {"model": "fake-model", "messages": [{"role": r, "content": c} for r, c in messages], "temperature": 0}


@pytest.fixture()
def log(tmp_path: Path) -> AuditLog:
    log = AuditLog(tmp_path / "audit.sqlite")
    now = datetime.now(timezone.utc)
    entries = [
        (now - timedelta(days=2), "code", _request(("system", SYSTEM), ("user", "How many patients are there?"))),
        (now - timedelta(minutes=5), "code", _request(
            ("system", SYSTEM), ("user", "What was the last lab value of patient 10026406 admitted on 2100-01-10?"),
            ("assistant", "```python\nanswer = ehr.sql('... subject_id = 10003046')\n```"),
            ("user", "The code failed: hadm_id 25260176 and stay 31269608 not found; value 99999999."))),
        (now - timedelta(minutes=1), "debug", _request(("user", "Question: How many patients are there?"))),
    ]
    for started, purpose, request in entries:
        log.record(started_at=started, endpoint="http://127.0.0.1:9/v1", provider="compatible", model="fake-model",
                   purpose=purpose, request=request, response_text="```python\nanswer = 1\n```", prompt_tokens=120,
                   completion_tokens=8, latency_s=0.2)
    log.record(started_at=now, endpoint="https://api.example.com/v1", provider="openai", model="gpt-x", purpose="code",
               request=_request(("user", "hi")), status="error", error="HTTP 500", tokens_estimated=True,
               prompt_tokens=3, completion_tokens=0)
    return log


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="ehr-magic")
    audit_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["audit", *argv])
    return args.func(args)


def test_list_without_a_database(log: AuditLog, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--log", str(log.path)) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["#", "time", "purpose", "model", "endpoint", "tokens", "status"]
    assert len(lines) == 6 and "4 requests. Add --db FILE to check them" in lines[-1]
    assert "127.0.0.1:9" in out and "api.example.com" in out and "~3+0" in out and "error" in out
    assert "120+8" in lines[1]


def test_list_with_a_database_flags_ids_and_dates(log: AuditLog, ehrsql_db: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--log", str(log.path), "--db", str(ehrsql_db)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "check"
    assert lines[1].endswith("clean")  # the dataset clock (2100-12-31) is not a finding
    # 10026406 (question), 25260176 and 31269608 (feedback); 10003046 is in the model's own turn; 99999999 is no id
    assert lines[2].endswith("contains 3 patient ids, 1 date")
    assert lines[3].endswith("clean") and lines[4].endswith("clean")
    assert lines[-1] == "4 requests; 1 contain patient identifiers or dates of the database."


def test_since_selects_recent_requests(log: AuditLog, capsys: pytest.CaptureFixture[str]) -> None:
    _run("--log", str(log.path), "--since", "1h")
    assert "3 requests." in capsys.readouterr().out
    _run("--log", str(log.path), "--since", (datetime.now() - timedelta(days=3)).strftime("%Y-%m-%d"))
    assert "4 requests." in capsys.readouterr().out
    _run("--log", str(log.path), "--limit", "1")
    assert "1 request." in capsys.readouterr().out


def test_show_prints_one_request_in_full(log: AuditLog, ehrsql_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("--log", str(log.path), "--show", "2", "--db", str(ehrsql_db)) == 0
    out = capsys.readouterr().out
    assert out.startswith("Request #2 ")
    assert "check: contains 3 patient ids, 1 date" in out
    assert "  patient id 10026406 (patients.subject_id)" in out and "  patient id 25260176 (admissions.hadm_id)" in out
    assert "  date 2100-01-10 (admissions.admittime)" in out or "  date 2100-01-10 (" in out
    assert "--- system ---\n" + SYSTEM in out and "--- assistant ---" in out and "--- response ---" in out


def test_json_output(log: AuditLog, ehrsql_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run("--log", str(log.path), "--json", "--db", str(ehrsql_db))
    listed = json.loads(capsys.readouterr().out)
    assert [e["id"] for e in listed] == [1, 2, 3, 4]
    assert listed[1]["check"]["summary"] == "contains 3 patient ids, 1 date"
    assert ["31269608", "icustays.stay_id"] in listed[1]["check"]["ids"]
    assert "request" not in listed[0]
    _run("--log", str(log.path), "--json", "--show", "4")
    shown = json.loads(capsys.readouterr().out)
    assert shown["request"]["messages"][0]["content"] == "hi" and shown["error"] == "HTTP 500"


def test_default_log_is_the_user_data_folder(isolated_user_dirs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run() == 0
    assert "No requests in the audit log" in capsys.readouterr().out
    assert str(isolated_user_dirs / "data" / "audit.sqlite") in AuditLog().path.as_posix()


def test_user_mistakes_are_one_line_errors(log: AuditLog, tmp_path: Path) -> None:
    with pytest.raises(EhrMagicError, match="Cannot read --since 'yesterday'"):
        _run("--log", str(log.path), "--since", "yesterday")
    with pytest.raises(EhrMagicError, match="No call #99"):
        _run("--log", str(log.path), "--show", "99")
    with pytest.raises(EhrMagicError, match="No audit log at"):
        _run("--log", str(tmp_path / "missing.sqlite"))
    with pytest.raises(EhrMagicError, match="No database file"):
        _run("--log", str(log.path), "--db", str(tmp_path / "missing.duckdb"))


def test_parse_since() -> None:
    now = datetime(2024, 5, 1, 12, 0)
    assert audit_cli.parse_since("2h", now) == datetime(2024, 5, 1, 10, 0)
    assert audit_cli.parse_since("30m", now) == datetime(2024, 5, 1, 11, 30)
    assert audit_cli.parse_since("1w", now) == datetime(2024, 4, 24, 12, 0)
    assert audit_cli.parse_since("2024-04-30 08:15", now) == datetime(2024, 4, 30, 8, 15)


def test_scanner_and_request_text(ehrsql_db: Path) -> None:
    request = _request(("system", "s"), ("assistant", "10026406"), ("user", "u 10026406"))
    assert request_text(request) == "s\nu 10026406"
    assert "10026406" in request_text(request, include_assistant=True).split("\n")[1]
    with ehr_magic.connect(ehrsql_db) as ehr:
        scanner = IdentifierScanner(ehr)
        checks = scanner.scan_all(["nothing here", "patient 10026406 on 2100-01-10 and 2100-12-31", "2100-02-30 1234"])
    assert [c.summary() for c in checks] == ["clean", "contains 1 patient id, 1 date", "clean"]
    assert RequestCheck().summary() == "clean"
