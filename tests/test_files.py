"""Files written whole or not at all (``ehr_magic.files``), on real files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import duckdb
import pytest

from ehr_magic import files
from ehr_magic.errors import EhrMagicError


def test_write_text_replaces_the_file_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "notes.yaml"
    target.write_text("old\n")
    files.write_text(target, "new: é\n")
    assert target.read_text(encoding="utf-8") == "new: é\n"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.yaml"]


def test_a_failed_write_keeps_the_old_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    target.write_text("line 1\nline 2\n")
    with pytest.raises(RuntimeError, match="disk full"):
        with files.atomic_write(target) as handle:
            handle.write("half of a new")
            raise RuntimeError("disk full")
    assert target.read_text() == "line 1\nline 2\n"
    assert [p.name for p in tmp_path.iterdir()] == ["export.jsonl"]


def test_a_failed_first_write_leaves_no_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        with files.atomic_write(tmp_path / "new.bin", binary=True) as handle:
            handle.write(b"\x00" * 10)
            raise ValueError("checksum mismatch")
    assert list(tmp_path.iterdir()) == []


def test_private_files_are_the_owners_only_and_others_follow_the_umask(tmp_path: Path) -> None:
    secret, plain = tmp_path / "config.toml", tmp_path / "plain.txt"
    files.write_text(secret, 'api_key = "sk-1"\n', private=True)
    files.write_text(plain, "x\n")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~umask


def test_binary_and_newline_modes(tmp_path: Path) -> None:
    with files.atomic_write(tmp_path / "a.bin", binary=True) as handle:
        handle.write(b"\x01\x02")
    assert (tmp_path / "a.bin").read_bytes() == b"\x01\x02"
    with files.atomic_write(tmp_path / "a.jsonl", newline="\n") as handle:
        handle.write("{}\n{}\n")
    assert (tmp_path / "a.jsonl").read_bytes() == b"{}\n{}\n"


def test_a_missing_folder_is_one_clear_sentence(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "file.yaml"
    with pytest.raises(EhrMagicError, match=r"Folder .*nowhere does not exist; create it or choose another file\."):
        files.write_text(missing, "x")
    assert not missing.parent.exists()


def test_replacing_gives_a_path_for_writers_that_need_one(tmp_path: Path) -> None:
    target = tmp_path / "data.duckdb"
    with files.replacing(target) as temporary:
        assert temporary.parent == tmp_path and temporary.name.startswith(".data.duckdb.")
        assert temporary.name.endswith(files.TEMPORARY_SUFFIX) and not target.exists()
        con = duckdb.connect(str(temporary))
        con.execute("CREATE TABLE t AS SELECT 42 AS x")
        con.close()
    with duckdb.connect(str(target), read_only=True) as con:
        assert con.execute("SELECT x FROM t").fetchone() == (42,)
    assert [p.name for p in tmp_path.iterdir()] == ["data.duckdb"]


def test_two_writers_never_share_a_temporary_name(tmp_path: Path) -> None:
    target = tmp_path / "calibration.json"
    with files.replacing(target) as first, files.replacing(target) as second:
        assert first != second
        first.write_text("1")
        second.write_text("2")
    assert target.read_text() == "1"  # the outer block ends last: its rename wins
