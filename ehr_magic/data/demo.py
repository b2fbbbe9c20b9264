"""The demo database: the real MIMIC-IV demo when it is cached or can be fetched,
otherwise the built-in synthetic data. Built once into the user cache, then reused."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ehr_magic.data.sources import fetch, mimic_iv
from ehr_magic.data.sources.csvdir import Progress
from ehr_magic.errors import DataSourceError
from ehr_magic.paths import cache_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoDatabase:
    path: Path
    kind: str  # "mimic-iv-demo" or "synthetic"
    reason: str  # one line: why this one


def demo_dir() -> Path:
    return cache_dir() / "demo"


def synthetic_database(patients: int = 100, seed: int = 0, *, rebuild: bool = False,
                       progress: Progress | None = None) -> Path:
    """The cached synthetic database with ``patients`` patients, built if needed."""
    from ehr_magic.data.sources import synthetic

    path = demo_dir() / f"synthetic-{patients}-seed{seed}.duckdb"
    if rebuild or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        synthetic.generate(path, patients=patients, seed=seed, progress=progress)
    return path


def demo_database(
    *,
    synthetic_only: bool = False,
    rebuild: bool = False,
    url: str | None = None,
    progress: Progress | None = None,
    say: Callable[[str], None] = log.info,
) -> DemoDatabase:
    """Find or build the demo database, preferring the real MIMIC-IV demo."""
    if not synthetic_only:
        real = demo_dir() / "mimic-iv-demo.duckdb"
        if real.exists() and not rebuild:
            return DemoDatabase(real, "mimic-iv-demo", "the MIMIC-IV demo (cached)")
        files = _demo_files(url, say)
        if files is not None:
            real.parent.mkdir(parents=True, exist_ok=True)
            mimic_iv.load([files], real, progress=progress, dataset="mimic-iv-demo")
            return DemoDatabase(real, "mimic-iv-demo", f"the MIMIC-IV demo from {files}")
    path = synthetic_database(rebuild=rebuild, progress=progress)
    why = "requested" if synthetic_only else "the MIMIC-IV demo could not be fetched"
    return DemoDatabase(path, "synthetic", f"synthetic MIMIC-IV-shaped data, 100 patients ({why})")


def _demo_files(url: str | None, say: Callable[[str], None]) -> Path | None:
    """A folder with the demo's files: EHR_MAGIC_DEMO_DIR, the cache, or a fresh fetch."""
    local = os.environ.get("EHR_MAGIC_DEMO_DIR")
    if local:
        return Path(local).expanduser()
    cached = fetch.default_demo_dir()
    if (cached / fetch.COMPLETE_MARKER).exists() or (cached / "hosp" / "patients.csv.gz").exists():
        return cached
    say(f"Fetching the MIMIC-IV demo from {url or fetch.demo_url()} ...")
    try:
        fetch.fetch_mimic_iv_demo(url, cached, timeout=10)
    except DataSourceError as exc:
        say(f"Could not fetch the MIMIC-IV demo: {exc}")
        return None
    return cached
