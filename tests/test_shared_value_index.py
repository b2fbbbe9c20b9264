"""One value index per database: reuse's exact value lookup and value linking (``ehr.lookup``,
``ehr.find``) read a column's distinct values once, through the linking layer's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from ehr_magic.db import connect
from ehr_magic.reuse.values import ValueDetector


def test_reuse_and_lookup_read_a_column_once(ehrsql_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with connect(ehrsql_db) as ehr:
        reads: list[str] = []
        query = ehr._engine.query

        def counted(sql: str, *args, **kwargs):
            if "DISTINCT" in sql.upper() and '"label"' in sql and "d_labitems" in sql:
                reads.append(sql)
            return query(sql, *args, **kwargs)

        monkeypatch.setattr(ehr._engine, "query", counted)
        detector = ValueDetector(ehr)
        assert detector.vocabulary.add_column("d_labitems", "label")
        found = detector.detect("What was the last RDW of patient 10004235?")
        assert ("RDW", "rdw") in {(v.text, v.value) for v in found.vocab if v.type == "vocab:d_labitems.label"}
        assert ehr.lookup("d_labitems", "label", "RDW", k=1) == ["rdw"]
        ValueDetector(ehr).vocabulary.add_column("d_labitems", "label")  # another index on the same database
        assert len(reads) == 1, reads
        # the stored values reuse finds are those linking holds, however they are spelled
        stored = set(ehr.vocabulary("d_labitems", "label").values)
        assert {value for _, _, value in detector.vocabulary.find("rdw")} == {"rdw"} <= stored
