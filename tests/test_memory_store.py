"""MemoryStore basics: add, de-duplication, accept/edit history, delete, list, stats,
the default path and opening files that are not ours."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ehr_magic.errors import EhrMagicError
from ehr_magic.memory import (
    EntryNotFoundError,
    MemoryEntry,
    MemoryStore,
    MemoryStoreError,
    default_store_path,
)

Q = "How many patients were admitted in 2100?"
CODE = "SELECT count(DISTINCT subject_id) FROM admissions WHERE strftime('%Y', admittime) = '2100'"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    with MemoryStore(tmp_path / "memory.sqlite") as s:
        yield s


def test_add_and_get_round_trip(store: MemoryStore) -> None:
    entry_id = store.add(Q, CODE, knowledge="admissions holds admittime", schema="mimic-iv:abc",
                         dataset="demo", answer_preview="42", model="gpt-x", tags=["count"], note="n")
    e = store.get(entry_id)
    assert isinstance(e, MemoryEntry)
    assert (e.question, e.code, e.knowledge, e.schema, e.dataset) == (Q, CODE, "admissions holds admittime",
                                                                     "mimic-iv:abc", "demo")
    assert (e.origin, e.answer_preview, e.model, e.tags, e.note) == ("accepted", "42", "gpt-x", ("count",), "n")
    assert e.use_count == 0 and e.generated_code is None and e.created_at and e.updated_at


def test_memory_store_error_is_a_user_error() -> None:
    assert issubclass(MemoryStoreError, EhrMagicError)
    assert issubclass(EntryNotFoundError, MemoryStoreError)


def test_invalid_input_is_refused(store: MemoryStore) -> None:
    with pytest.raises(MemoryStoreError, match="non-empty question"):
        store.add("  ", CODE)
    with pytest.raises(MemoryStoreError, match="origin"):
        store.add(Q, CODE, origin="guess")
    with pytest.raises(MemoryStoreError, match="method"):
        store.search(Q, method="cosine")


def test_same_case_is_stored_once_and_origin_is_promoted(store: MemoryStore) -> None:
    first = store.add(Q, CODE, origin="auto", schema="s", tags=["a"])
    # case, punctuation and whitespace differences do not make a new entry
    again = store.add("how many patients were admitted in 2100", CODE + "\n\n", origin="accepted",
                      schema="s", knowledge="k", tags=["b"])
    assert again == first
    assert len(store) == 1
    e = store.get(first)
    assert e.origin == "accepted" and e.knowledge == "k" and e.tags == ("a", "b")
    # a less trusted origin never demotes
    store.add(Q, CODE, origin="auto", schema="s")
    assert store.get(first).origin == "accepted"
    # another schema, question or code is another entry
    assert store.add(Q, CODE, schema="t") != first
    assert store.add(Q + " Exactly?", CODE, schema="s") != first
    assert store.add(Q, CODE + " LIMIT 1", schema="s") != first
    assert len(store) == 4


def test_accept_promotes_an_auto_entry(store: MemoryStore) -> None:
    entry_id = store.add(Q, CODE, origin="auto")
    accepted = store.accept(entry_id)
    assert accepted.id == entry_id and accepted.origin == "accepted"
    assert accepted.code == CODE and accepted.generated_code is None and not accepted.edited


def test_accept_with_edited_code_keeps_the_generated_version(store: MemoryStore) -> None:
    entry_id = store.add(Q, "SELECT 1", origin="auto", schema="s")
    accepted = store.accept(entry_id, code=CODE)
    assert accepted.id == entry_id
    assert accepted.code == CODE and accepted.generated_code == "SELECT 1" and accepted.edited
    # a second edit keeps the first generated version, not the intermediate one
    again = store.accept(entry_id, code=CODE + " LIMIT 5")
    assert again.generated_code == "SELECT 1" and again.code.endswith("LIMIT 5")
    # the edited code is what de-duplication now sees
    assert store.add(Q, CODE + " LIMIT 5", schema="s") == entry_id


def test_accept_edit_that_matches_another_entry_merges_them(store: MemoryStore) -> None:
    keep = store.add(Q, CODE, origin="auto", schema="s")
    draft = store.add(Q, "SELECT 2", origin="auto", schema="s")
    result = store.accept(draft, code=CODE)
    assert result.id == keep and result.origin == "accepted" and result.generated_code == "SELECT 2"
    with pytest.raises(EntryNotFoundError):
        store.get(draft)


def test_delete_get_and_unknown_ids(store: MemoryStore) -> None:
    entry_id = store.add(Q, CODE)
    store.delete(entry_id)
    assert len(store) == 0
    for call in (lambda: store.get(entry_id), lambda: store.delete(entry_id), lambda: store.accept(entry_id)):
        with pytest.raises(EntryNotFoundError, match=f"id {entry_id}"):
            call()


def test_list_filters_and_orders_newest_first(store: MemoryStore) -> None:
    a = store.add("q a", "a", schema="s1")
    b = store.add("q b", "b", schema="s2", origin="auto")
    c = store.add("q c", "c", schema="s1", origin="auto")
    assert [e.id for e in store.list()] == [c, b, a]
    assert [e.id for e in store.list(schema="s1")] == [c, a]
    assert [e.id for e in store.list(origin="auto")] == [c, b]
    assert [e.id for e in store.list(limit=1)] == [c]


def test_mark_used_and_stats(store: MemoryStore) -> None:
    a = store.add("q a", "a", schema="s1")
    store.add("q b", "b", origin="auto")
    store.mark_used([a, a])
    e = store.get(a)
    assert e.use_count == 2 and e.last_used_at
    stats = store.stats()
    assert stats.total == 2
    assert stats.by_origin == {"accepted": 1, "seed": 0, "imported": 0, "auto": 1}
    assert stats.by_schema == {"s1": 1, "": 1}
    assert stats.most_used[0]["id"] == a and stats.schema_version >= 1 and stats.file_bytes > 0


def test_default_path_follows_env_and_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                isolated_user_dirs: Path) -> None:
    assert default_store_path() == isolated_user_dirs / "data" / "memory.sqlite"
    with MemoryStore() as s:  # creates the data folder as needed
        s.add(Q, CODE)
    assert (isolated_user_dirs / "data" / "memory.sqlite").exists()
    target = tmp_path / "project" / "notebook-memory.sqlite"
    monkeypatch.setenv("EHR_MAGIC_MEMORY", str(target))
    assert default_store_path() == target
    with MemoryStore() as s:
        assert s.path == target and len(s) == 0
    assert target.exists()


def test_reopening_keeps_entries(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    with MemoryStore(path) as s:
        entry_id = s.add(Q, CODE)
    with MemoryStore(path) as s:
        assert s.get(entry_id).code == CODE
        assert s.search(Q)[0].id == entry_id
        wal = s._conn.execute("PRAGMA journal_mode").fetchone()[0]
        assert wal == "wal"


# -- files that are not ours ---------------------------------------------------------
def _refused(path: Path, match: str) -> None:
    before = path.read_bytes()
    with pytest.raises(MemoryStoreError, match=match) as info:
        MemoryStore(path)
    assert path.read_bytes() == before, "the file must be left untouched"
    assert "\n" not in str(info.value)
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


def test_non_sqlite_file_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 50)
    _refused(path, "is not a SQLite file")


def test_foreign_sqlite_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ehr.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE patients (subject_id INTEGER, gender TEXT)")
    conn.execute("INSERT INTO patients VALUES (1, 'F')")
    conn.commit()
    conn.close()
    _refused(path, r"not an ehr-magic memory store \(it holds: patients\)")


def test_corrupt_store_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    with MemoryStore(path) as s:
        for i in range(50):
            s.add(f"question {i}", f"code {i}")
    # checkpoint everything into the main file, then damage its schema page
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    data = bytearray(path.read_bytes())
    data[100:600] = b"\xde\xad\xbe\xef" * 125
    path.write_bytes(bytes(data))
    _refused(path, "damaged")


def test_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    MemoryStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()
    with pytest.raises(MemoryStoreError, match="newer ehr-magic"):
        MemoryStore(path)


def test_empty_file_and_directory(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    with MemoryStore(empty) as s:  # an empty file is a new store
        s.add(Q, CODE)
    with pytest.raises(MemoryStoreError, match="not a file"):
        MemoryStore(tmp_path)


def test_closed_store_says_so(tmp_path: Path) -> None:
    s = MemoryStore(tmp_path / "m.sqlite")
    s.close()
    with pytest.raises(MemoryStoreError, match="closed"):
        s.add(Q, CODE)
