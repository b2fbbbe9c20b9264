"""Durability: two processes writing at once, and writers killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ehr_magic.memory import MemoryStore

REPO = Path(__file__).resolve().parents[1]


def _python(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


WRITER = """
    import sys
    from ehr_magic.memory import MemoryStore
    path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = MemoryStore(path)
    for i in range(count):
        store.add(f"question {i} from writer {name}", f"code {i} from {name}", schema="s",
                  origin="auto" if i % 3 else "accepted")
    store.close()
"""


def test_two_processes_adding_500_entries_each(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"  # does not exist yet: both also race to create it
    writers = [_python(WRITER, str(path), name, "500") for name in ("a", "b")]
    for w in writers:
        _, err = w.communicate(timeout=300)
        assert w.returncode == 0, err
    with MemoryStore(path) as store:
        assert len(store) == 1000
        for name in ("a", "b"):
            entries = store.list(schema="s", limit=None)
            mine = {e.question: e.code for e in entries if e.question.endswith(f"writer {name}")}
            assert len(mine) == 500
            assert all(code == f"code {q.split()[1]} from {name}" for q, code in mine.items())
        # the search index sees all of them (numbers are masked by the default method)
        assert len(store.search("question 7 from writer b", k=2000, schema="s")) == 1000
        hit = store.search("question 7 from writer b", k=1, schema="s", method="levenshtein")[0]
        assert hit.question == "question 7 from writer b"
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


KILLED_IN_BIG_TRANSACTION = """
    import sys
    from ehr_magic.memory import MemoryStore
    path, jsonl = sys.argv[1], sys.argv[2]
    store = MemoryStore(path)
    for i in range(50):
        entry_id = store.add(f"committed question {i}", f"committed code {i}")
        print(entry_id, flush=True)
    print("importing", flush=True)
    store.import_(jsonl)  # one long transaction, killed part-way
    print("finished", flush=True)
"""


def _assert_healthy(path: Path) -> None:
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_writer_killed_mid_transaction_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    jsonl = tmp_path / "big.jsonl"
    with jsonl.open("w") as fh:
        for i in range(120_000):
            fh.write(json.dumps({"question": f"bulk question {i}", "code": f"bulk code {i}"}) + "\n")
    child = _python(KILLED_IN_BIG_TRANSACTION, str(path), str(jsonl))
    committed = []
    assert child.stdout is not None
    for line in child.stdout:
        if line.strip() == "importing":
            break
        committed.append(int(line))
    time.sleep(1.0)  # parsing is done and rows are being written
    wal = Path(f"{path}-wal")
    assert child.poll() is None, "the import finished before it could be interrupted"
    deadline = time.time() + 30
    while wal.stat().st_size < 1_000_000 and time.time() < deadline:  # uncommitted pages on disk
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    _assert_healthy(path)
    with MemoryStore(path) as store:
        entries = store.list()
        assert sorted(e.id for e in entries) == sorted(committed)
        assert all(e.code == e.question.replace("question", "code") for e in entries)
        assert not [e for e in entries if e.question.startswith("bulk")]
        # and the store is writable again
        store.add("after the crash", "ok")


KILLED_ANYWHERE = """
    import sys
    from ehr_magic.memory import MemoryStore
    store = MemoryStore(sys.argv[1])
    i = 0
    while True:
        entry_id = store.add(f"question {i}", f"code {i}", knowledge=f"knowledge {i}" * 50)
        print(entry_id, flush=True)
        i += 1
"""


@pytest.mark.parametrize("reports", [20, 300])
def test_writer_killed_at_a_random_moment(tmp_path: Path, reports: int) -> None:
    # Killed once it has reported `reports` commits; it keeps writing while we read, so the
    # kill lands wherever it happens to be (between commits, or inside one).
    path = tmp_path / "memory.sqlite"
    child = _python(KILLED_ANYWHERE, str(path))
    assert child.stdout is not None and child.stderr is not None
    reported = []
    for line in child.stdout:
        reported.append(int(line))
        if len(reported) == reports:
            break
    assert len(reported) == reports, f"the writer stopped on its own: {child.stderr.read()}"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL  # killed while writing, not crashed or finished
    reported += [int(x) for x in child.stdout.read().split()]  # what it reported before the kill
    _assert_healthy(path)
    with MemoryStore(path) as store:
        entries = {e.id: e for e in store.list(limit=None)}
    assert len(entries) >= reports and set(reported) <= set(entries)
    # at most the entry committed just before the kill was not yet reported
    assert len(entries) - len(reported) in (0, 1)
    for e in entries.values():
        n = e.question.split()[1]
        assert e.code == f"code {n}" and e.knowledge == f"knowledge {n}" * 50
