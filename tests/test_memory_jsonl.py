"""JSONL export/import: round trip, origins, de-duplication, schema override, bad lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ehr_magic.memory import JsonlFormatError, MemoryStore, MemoryStoreError


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    with MemoryStore(tmp_path / "memory.sqlite") as s:
        yield s


def _fill(store: MemoryStore) -> None:
    store.add("How many patients were admitted in 2100?", "SELECT 1", knowledge="k1", schema="mimic",
              dataset="demo", answer_preview="42", model="m", tags=["count"], note="checked")
    auto = store.add("What is the gender of patient 1?", "SELECT 'F'", origin="auto", schema="mimic")
    store.accept(auto, code="SELECT gender FROM patients WHERE subject_id = 1")
    store.add("Top drugs?", "SELECT drug FROM prescriptions", origin="seed", schema="eicu")
    store.add("Ünïcode question — ok?", "print('é')", schema=None)


def test_round_trip(store: MemoryStore, tmp_path: Path) -> None:
    _fill(store)
    out = tmp_path / "team.jsonl"
    assert store.export(out) == 4
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and all(isinstance(json.loads(line), dict) for line in lines)
    with MemoryStore(tmp_path / "other.sqlite") as other:
        assert other.import_(out) == 4
        before = {e.question: e for e in store.list()}
        for e in other.list():
            original = before[e.question]
            for field in ("code", "knowledge", "generated_code", "answer_preview", "schema", "dataset",
                          "model", "tags", "note", "created_at"):
                assert getattr(e, field) == getattr(original, field), field
            # origins: seed stays seed, everything else becomes imported
            assert e.origin == ("seed" if original.origin == "seed" else "imported")
        # importing again adds nothing
        assert other.import_(out) == 0
        assert len(other) == 4


def test_export_one_schema(store: MemoryStore, tmp_path: Path) -> None:
    _fill(store)
    assert store.export(tmp_path / "mimic.jsonl", schema="mimic") == 2


def test_import_minimal_lines_and_schema_override(store: MemoryStore, tmp_path: Path) -> None:
    path = tmp_path / "minimal.jsonl"
    path.write_text('{"question": "q1", "code": "c1"}\n\n{"question": "q2", "code": "c2", "schema": "x",'
                    ' "future_field": 1}\n', encoding="utf-8")
    assert store.import_(path, schema="mimic") == 2
    assert {e.schema for e in store.list()} == {"mimic"}
    assert {e.origin for e in store.list()} == {"imported"}


def test_import_merges_with_existing_entries(store: MemoryStore, tmp_path: Path) -> None:
    entry_id = store.add("q1", "c1", origin="auto")
    path = tmp_path / "in.jsonl"
    path.write_text('{"question": "Q1!", "code": "c1", "origin": "accepted", "note": "from a colleague"}\n')
    assert store.import_(path) == 0
    e = store.get(entry_id)
    assert e.origin == "imported" and e.note == "from a colleague"


@pytest.mark.parametrize(
    "bad, message",
    [
        ("not json", "line 2 is not valid JSON"),
        ("[1, 2]", "line 2 is not a JSON object"),
        ('{"question": "q"}', "line 2 needs a non-empty string 'code'"),
        ('{"question": "", "code": "c"}', "line 2 needs a non-empty string 'question'"),
        ('{"question": "q", "code": "c", "origin": "guessed"}', "line 2: origin 'guessed'"),
        ('{"question": "q", "code": "c", "tags": "a,b"}', "line 2: 'tags' must be a list"),
        ('{"question": "q", "code": "c", "knowledge": 3}', "line 2: 'knowledge' must be a string"),
    ],
)
def test_bad_line_names_the_line_and_imports_nothing(store: MemoryStore, tmp_path: Path, bad: str,
                                                      message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "fine", "code": "ok"}\n' + bad + "\n", encoding="utf-8")
    with pytest.raises(JsonlFormatError, match=message) as info:
        store.import_(path)
    assert "\n" not in str(info.value)
    assert len(store) == 0


def test_import_missing_file_and_export_to_missing_folder(store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="no such file"):
        store.import_(tmp_path / "nope.jsonl")
    with pytest.raises(MemoryStoreError, match="does not exist"):
        store.export(tmp_path / "no" / "dir" / "out.jsonl")


def test_export_replaces_the_file_atomically(store: MemoryStore, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text("old content\n")
    store.add("q", "c")
    assert store.export(out) == 1
    assert json.loads(out.read_text())["question"] == "q"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
