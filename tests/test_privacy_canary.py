"""Canary test: no patient-level value reaches the model at privacy level schema (or aggregates).

A small synthetic dataset carries unique marker values in every patient-level column:
text markers (all containing ``cnry``), identifiers, numbers and dates in years no other
text uses. A batch of questions runs through the real agent loop against the fake model
server: successes, and failures of every kind (binder and conversion errors, printed
rows, printed frames and series, errors raised with data in the message, data spliced
into SQL, value hints on patient-level columns, a described table) with the debugger on.
No request the server received may contain a marker. At ``aggregates``, counts of 11 or
more become visible, smaller ones are suppressed.

Needs the agent to apply the privacy level: ``AgentSettings(privacy=...)``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import ehr_magic
from ehr_magic.agent import Agent, AgentSettings
from ehr_magic.db.build import building, write_metadata
from ehr_magic.llm import AuditLog, LLMClient, resolve_settings
from ehr_magic.safety.audit_check import IdentifierScanner, request_text
from ehr_magic.safety.privacy import default_level
from fake_llm import messages_text

DEBUGGER = "rubber-duck debugger"
N = 30
SUBJECTS = [73918200 + i for i in range(1, N + 1)]
ADMISSIONS = [55510000 + i for i in range(1, N + 1)]
AGES = [9100 + i for i in range(1, N + 1)]
YEARS = ["2133", "2144", "2145", "2151", "2152", "2155"]  # dob, admit, discharge, start, stop, charttime
MARKERS = ["cnry", "7777.", *map(str, SUBJECTS), *map(str, ADMISSIONS), *map(str, AGES), *YEARS]


@pytest.fixture(scope="module")
def canary_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("canary") / "canary.duckdb"
    day = dt.timedelta(days=1)
    with building(path) as con:
        con.execute("CREATE TABLE patients (row_id BIGINT, subject_id BIGINT, gender VARCHAR, dob TIMESTAMP, "
                    "dod TIMESTAMP)")
        con.execute("CREATE TABLE admissions (row_id BIGINT, subject_id BIGINT, hadm_id BIGINT, admittime TIMESTAMP, "
                    "dischtime TIMESTAMP, admission_type VARCHAR, admission_location VARCHAR, "
                    "discharge_location VARCHAR, insurance VARCHAR, language VARCHAR, marital_status VARCHAR, "
                    "age BIGINT)")
        con.execute("CREATE TABLE d_labitems (row_id BIGINT, itemid BIGINT, label VARCHAR)")
        con.execute("CREATE TABLE labevents (row_id BIGINT, subject_id BIGINT, hadm_id BIGINT, itemid BIGINT, "
                    "charttime TIMESTAMP, valuenum DOUBLE, valueuom VARCHAR)")
        con.execute("CREATE TABLE prescriptions (row_id BIGINT, subject_id BIGINT, hadm_id BIGINT, "
                    "starttime TIMESTAMP, stoptime TIMESTAMP, drug VARCHAR, dose_val_rx VARCHAR, "
                    "dose_unit_rx VARCHAR, route VARCHAR)")
        con.executemany("INSERT INTO d_labitems VALUES (?, ?, ?)",
                        [(1, 50901, "glucose"), (2, 50902, "rdw"), (3, 50903, "potassium")])
        for i, (subject, hadm, age) in enumerate(zip(SUBJECTS, ADMISSIONS, AGES), start=1):
            con.execute("INSERT INTO patients VALUES (?, ?, ?, ?, NULL)",
                        [i, subject, f"cnrygender{i:02d}x", dt.datetime(2133, 1, 1, 4, 17) + i * day])
            admit = dt.datetime(2144, 3, 1, 8, 3) + i * day
            con.execute("INSERT INTO admissions VALUES (?, ?, ?, ?, ?, ?, 'transfer from hospital', 'home', "
                        "'medicare', ?, 'married', ?)",
                        [i, subject, hadm, admit, dt.datetime(2145, 1, 1) + i * day,
                         "emergency" if i <= 20 else "elective", f"cnrylang{i:02d}q", age])
            for k, item in enumerate((50901, 50902, 50903)):
                con.execute("INSERT INTO labevents VALUES (?, ?, ?, ?, ?, ?, 'mg/dl')",
                            [i * 10 + k, subject, hadm, item, dt.datetime(2155, 5, 5, 5, 5) + i * day + k * day / 24,
                             7777.0 + i / 100 + k / 1000])
            con.execute("INSERT INTO prescriptions VALUES (?, ?, ?, ?, ?, 'aspirin', ?, 'mg', 'po')",
                        [i, subject, hadm, dt.datetime(2151, 2, 2) + i * day, dt.datetime(2152, 2, 2) + i * day,
                         f"cnrydose{i:02d}z"])
        write_metadata(con, schema="ehrsql_mimic_iv", source="mimic-iv-credentialed",
                       now=dt.datetime(2160, 1, 1), dataset="canary")
    return path


FIX = "Check the columns and the values; do not print patient rows."
BATCH: dict[str, list[str]] = {
    "How many patients are there?": [
        "answer = ehr.sql('SELECT count(*) FROM patients').item()",
    ],
    "How many female patients are there?": [
        "answer = ehr.sql(\"SELECT count(*) FROM patients WHERE sex = 'f'\").item()",
        "print(ehr.sql('SELECT * FROM patients LIMIT 5'))",
        "answer = ehr.sql('SELECT CAST(gender AS INTEGER) AS g FROM patients')",
        "answer = ehr.sql('SELECT count(*) FROM patients').item()",
    ],
    "How many languages do the patients speak?": [
        "answer = ehr.sql(\"SELECT hadm_id FROM admissions WHERE language = 'ENGLISH'\")",
        "lang = ehr.sql('SELECT language FROM admissions LIMIT 1').item()\nraise ValueError(f'unexpected {lang}')",
        "lang = ehr.sql('SELECT language FROM admissions LIMIT 1').item()\nassert lang == 'english', lang",
        "d = {}\nanswer = d[ehr.sql('SELECT dose_val_rx FROM prescriptions LIMIT 1').item()]",
        "lang = ehr.sql('SELECT language FROM admissions LIMIT 1').item()\n"
        "answer = ehr.sql(f'SELECT * FROM admissions WHERE language = {lang}')",
        "answer = ehr.table('prescriptions').select(pl.col('dose_val_rx').cast(pl.Int64)).collect()",
        "ages = ehr.sql('SELECT age FROM admissions')['age'].to_list()\nanswer = ages[1000]",
        "answer = ehr.sql('SELECT count(DISTINCT language) FROM admissions').item()",
    ],
    "What was the last RDW value?": [
        "answer = ehr.sql(\"SELECT valuenum FROM labevents l JOIN d_labitems d USING (itemid) WHERE d.label = 'RDW'\")",
        "df = ehr.table('labevents').collect()\nprint(df.head())\nprint(df['valuenum'].to_list())\n"
        "print(df['valuenum'])\nprint(ehr.sql('SELECT * FROM admissions LIMIT 3').to_dicts())",
        "print(ehr.describe('admissions'))\nprint(ehr.sql('SELECT max(charttime) AS t FROM labevents').item())\n"
        "print(ehr.sql('SELECT min(dob) FROM patients').item(),\n"
        "      ehr.sql('SELECT dose_val_rx FROM prescriptions').rows())",
        "answer = ehr.sql(\"SELECT valuenum FROM labevents l JOIN d_labitems d USING (itemid) WHERE d.label = 'rdw' "
        "ORDER BY charttime DESC LIMIT 1\")",
    ],
    "How many admissions are there of each type?": [
        "print(ehr.sql('SELECT admission_type, count(*) AS n FROM admissions GROUP BY 1 ORDER BY 1'))\n"
        "print(ehr.sql('SELECT language, count(*) AS n FROM admissions GROUP BY 1 ORDER BY 1'))\n"
        "print(ehr.sql('SELECT subject_id, count(*) AS n FROM labevents GROUP BY 1 ORDER BY 1'))",
        "answer = ehr.sql('SELECT admission_type, count(*) AS n FROM admissions GROUP BY 1 ORDER BY 1')",
    ],
}


def _responder(request: dict[str, Any]) -> str:
    text = messages_text(request)
    if DEBUGGER in text:
        return FIX
    question = next(q for q in BATCH if q in text)
    attempt = sum(1 for m in request["messages"] if m.get("role") == "assistant")
    code = BATCH[question][min(attempt, len(BATCH[question]) - 1)]
    return f"Knowledge:\n- see the tables\n```python\n{code}\n```"


def _run_batch(fake_llm, db: Path, level: str | None, audit: AuditLog | None = None) -> list[Any]:
    fake_llm.responder = _responder
    results = []
    client = LLMClient(resolve_settings(), audit=audit if audit is not None else False, backoff_base=0.01)
    with ehr_magic.connect(db) as ehr, client:
        settings = AgentSettings(timeout=10.0, run_mode="auto", **({"privacy": level} if level else {}))
        agent = Agent(ehr, client, settings=settings)
        for question in BATCH:
            results.append(agent.run(question))
    return results


def _sent(fake_llm) -> list[str]:
    return [r.raw.decode("utf-8", errors="replace") for r in fake_llm.requests]


def _leaks(texts: list[str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for text in texts:
        lowered = text.lower()
        for marker in MARKERS:
            if marker in lowered:
                found[marker] = found.get(marker, 0) + 1
    return found


def test_canary_database_defaults_to_schema(canary_db: Path) -> None:
    with ehr_magic.connect(canary_db) as ehr:
        assert default_level(ehr) == "schema"


def test_schema_level_sends_no_patient_value(fake_llm, canary_db: Path, tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.sqlite")
    results = _run_batch(fake_llm, canary_db, None, audit)  # the default for this database: schema
    assert [r.status for r in results] == ["answered"] * len(BATCH), [r.message for r in results]
    assert sum(len(r.steps) for r in results) >= 12  # the failures did happen (hints now fix some at once)
    sent = _sent(fake_llm)
    assert _leaks(sent) == {}
    everything = "\n".join(sent)
    # structure still reaches the model: errors, names, dictionary vocabulary, shapes
    assert "BinderException" in everything and "sex" in everything
    assert "closest stored values: 'rdw'" in everything  # d_labitems.label is vocabulary
    assert "admissions.language" not in everything  # no hint about a patient-level column
    assert "columns: row_id (i64), subject_id (i64), gender (str)" in everything
    assert "emergency" not in everything.split("How many admissions are there of each type?")[-1]
    # the audit check agrees: no request carries an identifier or a date of the database
    with ehr_magic.connect(canary_db) as ehr:
        checks = IdentifierScanner(ehr).scan_all(request_text(e.request) for e in audit.entries())
    assert len(checks) == len(fake_llm.requests) and all(c.clean for c in checks), [c.summary() for c in checks]


def test_aggregates_level_shows_only_counts_of_eleven_or_more(fake_llm, canary_db: Path) -> None:
    results = _run_batch(fake_llm, canary_db, "aggregates")
    assert [r.status for r in results] == ["answered"] * len(BATCH)
    sent = _sent(fake_llm)
    assert _leaks(sent) == {}
    everything = "\n".join(sent)
    assert "emergency | 20" in everything  # an aggregate of 20 admissions is visible
    assert "elective | <11" in everything  # 10 is suppressed
    assert "<value> | <11" in everything  # per-language counts of 1: the language is hidden too


def test_full_level_does_send_values_and_the_audit_check_flags_them(fake_llm, canary_db: Path, tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.sqlite")
    _run_batch(fake_llm, canary_db, "full", audit)
    assert "cnry" in _leaks(_sent(fake_llm))  # the canary works: at full, values do leave
    with ehr_magic.connect(canary_db) as ehr:
        checks = IdentifierScanner(ehr).scan_all(request_text(e.request) for e in audit.entries())
    flagged = [c for c in checks if not c.clean]
    assert flagged and any(c.ids for c in flagged) and any(c.dates for c in flagged)


def test_kernel_variables_and_earlier_turns_leak_no_marker_at_schema(fake_llm, canary_db: Path) -> None:
    """Notebook context: a user frame full of markers, named by the question, and an
    earlier turn whose answer held markers; at ``schema`` no request carries a marker,
    while the frame's name and columns do reach the model."""
    from ehr_magic.session import Session

    first = "answer = ehr.sql('SELECT subject_id, gender FROM patients ORDER BY subject_id')"
    second = ["print(cohort)\nanswer = cohort['nope']", "answer = cohort.height"]
    replies = iter([first, *second])
    fake_llm.responder = lambda request: FIX if DEBUGGER in messages_text(request) else \
        f"Standalone question: How many patients are in the cohort?\n```python\n{next(replies)}\n```"
    client = LLMClient(resolve_settings(), audit=False, backoff_base=0.01)
    with ehr_magic.connect(canary_db) as ehr, client:
        cohort = ehr.sql("SELECT subject_id, dob, admission_type AS note FROM patients "
                         "JOIN admissions USING (subject_id)")
        session = Session(ehr, llm=client, settings=AgentSettings(timeout=10.0, privacy="schema"))
        assert session.ask("Which patients are there, with their gender?").status == "answered"
        answer = session.ask("How many are in cohort?", variables={"cohort": cohort})
    assert answer.status == "answered" and answer.answer == N and answer.variables == ["cohort"]
    sent = _sent(fake_llm)
    assert _leaks(sent) == {}
    assert "cohort" in sent[-1] and "subject_id" in sent[-1] and "note" in sent[-1]
