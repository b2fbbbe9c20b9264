"""Ctrl-C while waiting for the model stops at once and leaves things usable.

Each case runs in a fresh process (`tests/scripts/press_stop.py`), as in a new kernel:
inside the long test session SIGINT sometimes went unnoticed (state left by earlier
tests that we have not pinned down), which made the in-process versions flaky.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "scripts" / "press_stop.py"


def press_stop(*args: str, env_dir: Path) -> dict[str, str]:
    env = {"HOME": str(env_dir), "XDG_CONFIG_HOME": str(env_dir / "config"), "XDG_DATA_HOME": str(env_dir / "data"),
           "XDG_CACHE_HOME": str(env_dir / "cache")}
    import os
    completed = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                               env={**os.environ, **env})
    assert completed.returncode == 0, completed.stderr[-2000:]
    facts = {}
    for line in completed.stdout.splitlines():
        key, _, value = line.partition(" ")
        facts[key] = value
    facts["_stdout"] = completed.stdout
    return facts


@pytest.mark.parametrize("stream", ["1", "0"])
def test_ctrl_c_while_waiting_for_the_server_is_prompt(tmp_path: Path, stream: str) -> None:
    facts = press_stop("client", stream, env_dir=tmp_path)
    assert "interrupted" in facts, facts["_stdout"]
    assert float(facts["seconds"]) < 30  # from the stop to the return; the model would answer after 60 s
    assert facts["audit"] == "interrupted"


def test_interrupting_ehr_stops_cleanly_and_the_next_question_works(tmp_path: Path, ehrsql_db: Path) -> None:
    facts = press_stop("magic", str(ehrsql_db), str(tmp_path / "memory.sqlite"), env_dir=tmp_path)
    assert "interrupted" in facts["_stdout"], facts["_stdout"]
    assert facts["success"] == "True" and float(facts["seconds"]) < 30  # the model would answer after 60 s
    assert facts["next"] == "2"
