"""The linter and the type checker, run with the tests (so CI runs them): both must be clean.

Their settings live in pyproject.toml ([tool.ruff], [tool.mypy]); a finding is fixed in the
code, or, where a broad `except` is a real boundary, marked `# noqa: BLE001 - boundary: why`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing() -> None:
    done = run("ruff", "check", "ehr_magic", "tests", "bench")
    assert done.returncode == 0, f"ruff check ehr_magic tests bench:\n{done.stdout}{done.stderr}"


def test_mypy_finds_nothing_in_the_package() -> None:
    done = run("mypy")  # the files and settings of [tool.mypy]
    assert done.returncode == 0, f"mypy:\n{done.stdout}{done.stderr}"
