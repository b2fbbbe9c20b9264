"""Where the shared open data lives (../shared/data beside the checkout, also in CI).

A plain module, not conftest: two conftest modules (tests/ and notebooks/) would
shadow each other under `import conftest`.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
MIMIC_IV_DEMO = SHARED_DATA / "mimic-iv-clinical-database-demo-2.2"
MIMIC_III_DEMO = SHARED_DATA / "mimic-iii-clinical-database-demo-1.4"
EICU_DEMO = SHARED_DATA / "eicu-collaborative-research-database-demo-2.0.1"
CHARTEVENTS_RECONSTRUCTED = SHARED_DATA / "mimic-iv-demo-2.2-chartevents-reconstructed"
EHRSQL_DIR = SHARED_DATA / "ehrsql-2024"
EHRSQL_SQLITE = EHRSQL_DIR / "mimic_iv.sqlite"
EICU_DEMO = SHARED_DATA / "eicu-collaborative-research-database-demo-2.0.1"
