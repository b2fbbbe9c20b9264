"""The rule for tests that need ../shared/data: without it a test is skipped on a developer's
machine and fails under CI=true (tests/datapaths.need_shared, the shared_data marker)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from datapaths import REPO, SHARED_DATA, need_shared

# What the marked test needs: the shared data itself, unless the test below points it elsewhere.
NEEDED = Path(os.environ.get("EHR_MAGIC_TEST_NEEDED", str(SHARED_DATA)))


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_shared_data_is_skipped_only_outside_ci(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                        ci: str, outcome: type[BaseException]) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match=f"the shared open data is missing: {tmp_path / 'absent'}"):
        need_shared(tmp_path, tmp_path / "absent")
    need_shared(tmp_path)  # there: nothing happens


@pytest.mark.shared_data(NEEDED)
def test_marked_with_the_data_it_needs() -> None:
    assert NEEDED.exists()  # reached only when the data is there


@pytest.mark.parametrize("ci, outcome, said", [("true", "1 error", "CI must run with ../shared/data in place"),
                                               ("", "1 skipped", "the shared open data is missing")])
def test_the_marker_skips_locally_and_fails_in_ci(tmp_path: Path, ci: str, outcome: str, said: str) -> None:
    env = {**os.environ, "CI": ci, "EHR_MAGIC_TEST_NEEDED": str(tmp_path / "absent")}
    done = subprocess.run([sys.executable, "-m", "pytest", f"{__file__}::test_marked_with_the_data_it_needs",
                           "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rA"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert outcome in done.stdout and said in done.stdout, done.stdout + done.stderr
