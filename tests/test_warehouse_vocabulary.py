"""The packaged warehouse-abbreviation vocabulary is well-formed, versioned data."""

from __future__ import annotations

import csv
from pathlib import Path

VOCABULARY = (Path(__file__).resolve().parents[1] / "ehr_magic" / "linking" / "vocabulary"
              / "warehouse_abbreviations.tsv")
KINDS = {"table-word", "column-word", "suffix"}


def _read() -> tuple[list[str], list[str], list[list[str]]]:
    """The comment lines, the header and the rows of the file."""
    lines = VOCABULARY.read_text(encoding="utf-8").splitlines()
    comments = [line for line in lines if line.startswith("#")]
    body = [line for line in lines if line.strip() and not line.startswith("#")]
    rows = list(csv.reader(body, delimiter="\t", quoting=csv.QUOTE_NONE))
    return comments, rows[0], rows[1:]


def test_header_version_and_license() -> None:
    comments, header, rows = _read()
    assert header == ["abbreviation", "kind", "expansions"]
    assert any(c[1:].strip().lower().startswith("version:") for c in comments)
    assert any("Apache-2.0" in c for c in comments)
    assert len(rows) >= 200


def test_rows_are_unique_and_each_has_an_expansion() -> None:
    _, _, rows = _read()
    seen: set[str] = set()
    for row in rows:
        assert len(row) == 3, row
        abbreviation, kind, expansions = row
        assert abbreviation and abbreviation == abbreviation.strip(), row
        assert abbreviation.lower() not in seen, f"{abbreviation} is listed twice"
        seen.add(abbreviation.lower())
        assert kind in KINDS, row
        meanings = [e.strip() for e in expansions.split(" | ")]
        assert meanings and all(meanings), row
        assert len(meanings) == len(set(meanings)), row


def test_common_warehouse_words_are_known() -> None:
    _, _, rows = _read()
    first = {a.lower(): e.split(" | ")[0] for a, _, e in rows}
    assert first["enc"] == "encounter" and first["dx"] == "diagnosis" and first["dttm"] == "date time"
    assert first["flwsht"] == "flowsheet" and first["uom"] == "unit of measure"
