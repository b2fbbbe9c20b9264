"""Checking logged model requests for patient identifiers and dates of a database.

``IdentifierScanner(ehr).scan_all(texts)`` finds, in each text, the patient, admission
and stay identifiers that exist in the connected database (``subject_id``, ``hadm_id``,
``stay_id``, eICU's ``patientunitstayid`` and ``uniquepid``...) and the dates that occur
in its patient-level tables. Candidates are collected from all texts first and looked up
with one query per column, so checking a long log costs a few table scans, not one per
request. The dataset's own clock (``ehr.now``), which every system prompt states, is not
reported.

A finding means the value was sent, not that it came from the data: an analyst who types
"patient 10004235" in a question sends that id too. The check answers "what left?".
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from ehr_magic.identifiers import quote_identifier as quote
from ehr_magic.safety.privacy import is_dictionary_column
from ehr_magic.safety.tables import Tables

# Identifier columns and the table that defines them (holds every value).
ID_COLUMNS = {"subject_id": "patients", "hadm_id": "admissions", "stay_id": "icustays", "icustay_id": "icustays",
              "patientunitstayid": "patient", "patienthealthsystemstayid": "patient", "uniquepid": "patient",
              "person_id": "person", "visit_occurrence_id": "visit_occurrence"}
_ID_TOKEN = re.compile(r"(?<![\w-])(?=[\w-]*\d)[\w-]{4,40}(?![\w-])")
_DATE = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}:\d{2}(?::\d{2})?))?(?!\d)")


@dataclass(frozen=True)
class Finding:
    kind: Literal["id", "date"]
    value: str
    where: str  # table.column where the value occurs


@dataclass
class RequestCheck:
    """What one request contained."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def ids(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "id"]

    @property
    def dates(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == "date"]

    @property
    def clean(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        """``clean`` or e.g. ``contains 3 patient ids, 2 dates``."""
        if self.clean:
            return "clean"
        ids, dates = len({f.value for f in self.ids}), len({f.value for f in self.dates})
        parts = []
        if ids:
            parts.append(f"{ids} patient id{'s' if ids != 1 else ''}")
        if dates:
            parts.append(f"{dates} date{'s' if dates != 1 else ''}")
        return "contains " + ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "ids": [[f.value, f.where] for f in self.ids],
                "dates": [[f.value, f.where] for f in self.dates]}


def request_text(request: dict[str, Any], *, include_assistant: bool = False) -> str:
    """The text of a logged chat request: its messages (without the model's own turns)."""
    parts = []
    for message in request.get("messages", []) or []:
        if not isinstance(message, dict) or message.get("role") == "assistant" and not include_assistant:
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if content:
            parts.append(str(content))
    return "\n".join(parts)


class IdentifierScanner:
    """Finds identifiers and dates of one ``EHR`` in texts."""

    def __init__(self, ehr: Tables) -> None:
        self.ehr = ehr
        self.id_columns = self._id_columns()
        self.date_columns = [(t, c, dtype) for t in ehr.tables() if not t.startswith("d_")
                             for c, dtype in ehr.columns(t).items()
                             if dtype.startswith(("TIMESTAMP", "DATE")) and not is_dictionary_column(ehr, t, c)]
        now = getattr(ehr, "now", None)
        self.ignored_dates = {now.strftime("%Y-%m-%d")} if isinstance(now, dt.datetime) else set()

    def _id_columns(self) -> list[tuple[str, str, str]]:
        """Where to look each identifier up: its defining table, else every table holding it."""
        chosen = []
        for column, defining in ID_COLUMNS.items():
            tables = [t for t in self.ehr.tables() if column in self.ehr.columns(t)]
            if defining in tables:
                tables = [defining]
            chosen += [(table, column, self.ehr.columns(table)[column]) for table in tables]
        return chosen

    def scan(self, text: str) -> RequestCheck:
        return self.scan_all([text])[0]

    def scan_all(self, texts: Iterable[str]) -> list[RequestCheck]:
        texts = list(texts)
        tokens = [set(_ID_TOKEN.findall(t)) for t in texts]
        dates = [{m.group(1) for m in _DATE.finditer(t)} - self.ignored_dates for t in texts]
        found_ids = self._lookup_ids(set().union(*tokens) if tokens else set())
        found_dates = self._lookup_dates(set().union(*dates) if dates else set())
        checks = []
        for text_tokens, text_dates in zip(tokens, dates):
            findings = [Finding("id", value, where) for value in sorted(text_tokens)
                        for where in found_ids.get(value, [])[:1]]
            findings += [Finding("date", value, where) for value in sorted(text_dates)
                         for where in found_dates.get(value, [])[:1]]
            checks.append(RequestCheck(findings))
        return checks

    def _lookup_ids(self, candidates: set[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        if not candidates:
            return found
        numeric = sorted({int(c) for c in candidates if c.isdigit() and len(c) <= 18})
        text = sorted(candidates)
        for table, column, dtype in self.id_columns:
            if dtype.startswith(("BIGINT", "INTEGER", "HUGEINT", "UBIGINT", "UINTEGER", "SMALLINT")):
                if not numeric:
                    continue
                rows = self.ehr.sql(f"SELECT DISTINCT CAST({quote(column)} AS VARCHAR) AS v FROM {quote(table)} "
                                    f"WHERE {quote(column)} IN (SELECT unnest(?::BIGINT[]))", [numeric])
            else:
                rows = self.ehr.sql(f"SELECT DISTINCT CAST({quote(column)} AS VARCHAR) AS v FROM {quote(table)} "
                                    f"WHERE CAST({quote(column)} AS VARCHAR) IN (SELECT unnest(?::VARCHAR[]))", [text])
            for value in rows["v"].to_list():
                found.setdefault(value, []).append(f"{table}.{column}")
        return found

    def _lookup_dates(self, candidates: set[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        valid = sorted(c for c in candidates if _is_date(c))
        if not valid:
            return found
        for table, column, _dtype in self.date_columns:
            rows = self.ehr.sql(f"SELECT DISTINCT CAST(CAST({quote(column)} AS DATE) AS VARCHAR) AS v "
                                f"FROM {quote(table)} "
                                f"WHERE CAST({quote(column)} AS DATE) IN (SELECT unnest(?::DATE[]))", [valid])
            for value in rows["v"].to_list():
                found.setdefault(value, []).append(f"{table}.{column}")
        return found


def _is_date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True
