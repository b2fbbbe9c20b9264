"""``ehr-magic memory ...``: every action, text and --json output, clean errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ehr_magic.cli import memory as memory_cli
from ehr_magic.errors import EhrMagicError
from ehr_magic.memory import MemoryStore


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Parse and run like ``ehr_magic.cli.main`` does (it gets 'memory' in SUBCOMMANDS)."""
    parser = argparse.ArgumentParser(prog="ehr-magic")
    memory_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["memory", *argv])
    try:
        code = int(args.func(args) or 0)
    except EhrMagicError as exc:
        print(f"error: {exc}", file=__import__("sys").stderr)
        code = 2
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "memory.sqlite"
    with MemoryStore(path) as store:
        store.add("How many patients were admitted in 2100?", "SELECT count(*) FROM admissions",
                  schema="mimic", knowledge="admissions: one row per stay")
        draft = store.add("What is the gender of patient 10004235?", "SELECT 1", origin="auto", schema="mimic")
        store.accept(draft, code="SELECT gender FROM patients WHERE subject_id = 10004235")
        store.add("Top five drugs?", "SELECT drug FROM medication", origin="auto", schema="eicu")
    return path


def test_list(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["list", "--store", str(store_path)], capsys)
    assert code == 0
    assert "How many patients" in out and "Top five drugs" in out and "origin" in out
    code, out, _ = run(["list", "--store", str(store_path), "--schema", "eicu", "--json"], capsys)
    data = json.loads(out)
    assert [e["question"] for e in data] == ["Top five drugs?"]


def test_search_text_and_json(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["search", "how many patients were admitted in 2101", "--store", str(store_path),
                        "--schema", "mimic", "-k", "1"], capsys)
    assert code == 0 and out.startswith("1. #1") and "SELECT count(*)" in out
    code, out, _ = run(["search", "gender of patient 1", "--store", str(store_path), "--json",
                        "--method", "levenshtein", "--origin", "accepted"], capsys)
    data = json.loads(out)
    assert data and all(e["origin"] == "accepted" for e in data) and all(e["score"] <= 0 for e in data)
    code, out, _ = run(["search", "anything", "--store", str(store_path), "--schema", "omop"], capsys)
    assert code == 0 and "No matching entries" in out


def test_show(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["show", "2", "--store", str(store_path)], capsys)
    assert code == 0
    assert "subject_id = 10004235" in out and "generated code" in out and "SELECT 1" in out
    code, out, _ = run(["show", "1", "--store", str(store_path), "--json"], capsys)
    assert json.loads(out)["knowledge"] == "admissions: one row per stay"


def test_unknown_id_is_a_clean_error(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for action in (["show", "99"], ["delete", "1", "99"]):
        code, out, err = run([*action, "--store", str(store_path)], capsys)
        assert code == 2 and out == ""
        assert err.startswith("error: No memory entry has id 99") and err.count("\n") == 1
    with MemoryStore(store_path) as store:
        assert len(store) == 3  # nothing deleted when one id is wrong


def test_delete(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["delete", "1", "3", "--store", str(store_path)], capsys)
    assert code == 0 and "Deleted 2 entries" in out
    with MemoryStore(store_path) as store:
        assert [e.id for e in store.list()] == [2]


def test_clear_starts_an_empty_memory(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["clear", "--store", str(store_path)], capsys)  # no terminal to ask at: nothing deleted
    assert code == 1 and "Nothing deleted" in out and "--yes" in out
    code, out, _ = run(["clear", "--schema", "eicu", "--yes", "--store", str(store_path)], capsys)
    assert code == 0 and "Deleted 1 entry" in out
    code, out, _ = run(["clear", "--yes", "--store", str(store_path)], capsys)
    assert code == 0 and "Deleted 2 entries" in out and "memory starts empty" in out
    with MemoryStore(store_path) as store:
        assert len(store) == 0 and store.search("How many patients were admitted in 2100?", k=4) == []


def test_export_and_import(store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "mimic.jsonl"
    code, out, _ = run(["export", str(out_file), "--schema", "mimic", "--store", str(store_path)], capsys)
    assert code == 0 and "Exported 2 entries" in out
    other = tmp_path / "other.sqlite"
    code, out, _ = run(["import", str(out_file), "--store", str(other)], capsys)
    assert code == 0 and "Imported 2 new entries" in out
    code, out, _ = run(["import", str(out_file), "--store", str(other)], capsys)
    assert "Imported 0 new entries" in out
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n')
    code, out, err = run(["import", str(bad), "--store", str(other)], capsys)
    assert code == 2 and "line 1 needs a non-empty string 'code'" in err


def test_stats(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["stats", "--store", str(store_path)], capsys)
    assert code == 0 and "3 entries" in out and "accepted 2" in out and "mimic 2" in out
    code, out, _ = run(["stats", "--store", str(store_path), "--json"], capsys)
    data = json.loads(out)
    assert data["total"] == 3 and data["by_origin"]["auto"] == 1 and data["by_schema"] == {"mimic": 2, "eicu": 1}


def test_env_override_is_the_default_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "beside-the-notebook.sqlite"
    monkeypatch.setenv("EHR_MAGIC_MEMORY", str(path))
    with MemoryStore() as store:
        store.add("from the env store", "x = 1")
    code, out, _ = run(["list"], capsys)
    assert code == 0 and "from the env store" in out and path.exists()


def test_not_a_store_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "data.csv"
    path.write_text("a,b\n1,2\n")
    code, out, err = run(["stats", "--store", str(path)], capsys)
    assert code == 2 and "is not a SQLite file" in err and path.read_text() == "a,b\n1,2\n"


def test_registered_in_the_main_cli(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ehr_magic import cli

    assert "memory" in cli.SUBCOMMANDS
    assert cli.main(["memory", "stats", "--store", str(store_path)]) == 0
    assert cli.main(["memory", "show", "42", "--store", str(store_path)]) == 2
