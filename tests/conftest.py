"""Shared fixtures. Every user file (config, memory, audit log, cache) goes to a
temporary folder, so tests never touch the developer's own files."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
MIMIC_IV_DEMO = SHARED_DATA / "mimic-iv-clinical-database-demo-2.2"
CHARTEVENTS_RECONSTRUCTED = SHARED_DATA / "mimic-iv-demo-2.2-chartevents-reconstructed"
EHRSQL_DIR = SHARED_DATA / "ehrsql-2024"
EHRSQL_SQLITE = EHRSQL_DIR / "mimic_iv.sqlite"


@pytest.fixture(autouse=True)
def isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path_factory.mktemp("user")
    for var, sub in [
        ("EHR_MAGIC_CONFIG_DIR", "config"),
        ("EHR_MAGIC_DATA_DIR", "data"),
        ("EHR_MAGIC_CACHE_DIR", "cache"),
    ]:
        monkeypatch.setenv(var, str(root / sub))
    for var in ["EHR_MAGIC_MEMORY", "EHR_MAGIC_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION",
                "AZURE_OPENAI_DEPLOYMENT"]:
        monkeypatch.delenv(var, raising=False)
    return root
