"""Where the shared open data lives (../shared/data beside the checkout, also in CI).

A plain module, not conftest: two conftest modules (tests/ and notebooks/) would
shadow each other under `import conftest`.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
MIMIC_IV_DEMO = SHARED_DATA / "mimic-iv-clinical-database-demo-2.2"
MIMIC_III_DEMO = SHARED_DATA / "mimic-iii-clinical-database-demo-1.4"
EICU_DEMO = SHARED_DATA / "eicu-collaborative-research-database-demo-2.0.1"
CHARTEVENTS_RECONSTRUCTED = SHARED_DATA / "mimic-iv-demo-2.2-chartevents-reconstructed"
EHRSQL_DIR = SHARED_DATA / "ehrsql-2024"
EHRSQL_SQLITE = EHRSQL_DIR / "mimic_iv.sqlite"


def need_shared(*paths: Path) -> None:
    """Skip the calling test when shared data it needs is missing on a developer's machine;
    under ``CI=true``, where ../shared/data must be in place, fail instead (a skipped test
    would hide that CI tested nothing). Conftest applies it to ``@pytest.mark.shared_data(...)``."""
    missing = [str(path) for path in paths if not path.exists()]
    if not missing:
        return
    import pytest  # here, so that bench/ scripts can import the paths without pytest

    message = f"the shared open data is missing: {', '.join(missing)}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run with ../shared/data in place, but {message}", pytrace=False)
    pytest.skip(message)
