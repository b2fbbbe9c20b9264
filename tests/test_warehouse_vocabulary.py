"""The packaged warehouse-abbreviation vocabulary is well-formed, versioned data, and its loader reads it."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ehr_magic.errors import EhrMagicError
from ehr_magic.linking.warehouse_vocabulary import parse, warehouse_abbreviations

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


# -- the loader ------------------------------------------------------------------------------------


def test_the_packaged_file_loads_with_its_version_and_every_row() -> None:
    vocabulary = warehouse_abbreviations()
    _, _, rows = _read()
    assert vocabulary.version == "1" and len(vocabulary) == len(rows)
    assert vocabulary.words("HSP") == ("hospital",) and vocabulary.words("dttm") == ("date", "time")
    assert vocabulary.expand("flwsht") == ("flowsheet",) and vocabulary.expand("admitted") == ()
    assert vocabulary.kinds["dttm"] == "suffix" and "flowsheet" in vocabulary.spelled


def test_a_malformed_vocabulary_names_its_line() -> None:
    header = "# version: 2\n# Provenance: a test\nabbreviation\tkind\texpansions\n"
    vocabulary = parse(header + "enc\ttable-word\tencounter | visit\n", source="t.tsv")
    assert vocabulary.expand("ENC") == ("encounter", "visit")
    with pytest.raises(EhrMagicError, match="t.tsv, line 4"):
        parse(header + "enc\tnoun\tencounter\n", source="t.tsv")
    with pytest.raises(EhrMagicError, match="listed twice"):
        parse(header + "enc\ttable-word\tencounter\nENC\ttable-word\tvisit\n", source="t.tsv")
    with pytest.raises(EhrMagicError, match="Provenance"):
        parse("# version: 2\nabbreviation\tkind\texpansions\nenc\ttable-word\tencounter\n", source="t.tsv")
