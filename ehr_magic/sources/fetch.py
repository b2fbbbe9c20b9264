"""Fetching the open MIMIC-IV demo from PhysioNet (open access, no login), or taking it
from a local copy.

Every file listed in the release's SHA256SUMS.txt is downloaded into a cache folder,
checked against its checksum, and only then moved into place, so an interrupted fetch
resumes where it stopped and a corrupt file is never kept. The folder is marked
complete (``.complete``) only once every file is in; a folder without the mark is a
partial download, to be resumed, never built. The base URL is configurable (argument
or ``EHR_MAGIC_DEMO_URL``) for mirrors and for tests.

A local copy (``--from DIR``) is verified the same way: every MIMIC-IV table present,
and every file a folder's own SHA256SUMS.txt lists matching its checksum. A file found
in a folder that publishes no checksum for it (e.g. a separately obtained chartevents)
is taken and reported as not verified.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ehr_magic import files
from ehr_magic.sources import mimic_iv
from ehr_magic.errors import DataSourceError
from ehr_magic.paths import cache_dir

MIMIC_IV_DEMO_URL = "https://physionet.org/files/mimic-iv-demo/2.2/"
CHECKSUM_FILE = "SHA256SUMS.txt"
COMPLETE_MARKER = ".complete"
_BLOCK = 1 << 20

FileProgress = Callable[[str, int, int], None]  # (file, bytes done, bytes total or 0)


@dataclass
class FetchReport:
    directory: Path
    downloaded: list[str] = field(default_factory=list)
    already_present: list[str] = field(default_factory=list)
    missing_on_server: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)  # taken from a folder that publishes no checksum for it


@dataclass(frozen=True)
class LocalCopy:
    """A complete, verified copy of the MIMIC-IV demo on disk."""

    roots: tuple[Path, ...]
    files: dict[str, Path]  # name relative to its folder (hosp/admissions.csv.gz) -> file
    checksums: dict[str, str]  # name -> sha256, for the files a published checksum verified

    @property
    def unverified(self) -> list[str]:
        """The files no published checksum covers, each with the folder it is in."""
        return [f"{name} in {path.parents[len(Path(name).parts) - 1]}"
                for name, path in self.files.items() if name not in self.checksums]


def default_demo_dir() -> Path:
    return cache_dir() / "mimic-iv-demo-2.2"


def demo_url() -> str:
    return os.environ.get("EHR_MAGIC_DEMO_URL", MIMIC_IV_DEMO_URL)


def parse_checksums(text: str) -> dict[str, str]:
    """``relative path -> sha256`` from a SHA256SUMS.txt body."""
    sums: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) == 2 and len(parts[0]) == 64:
            name = parts[1].lstrip("*").strip()
            if name.startswith("/") or ".." in Path(name).parts:
                raise DataSourceError(f"Refusing unsafe path {name!r} in {CHECKSUM_FILE}.")
            sums[name] = parts[0].lower()
    return sums


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def fetch_mimic_iv_demo(
    url: str | None = None,
    directory: str | os.PathLike[str] | None = None,
    *,
    timeout: float = 30.0,
    progress: FileProgress | None = None,
) -> FetchReport:
    """Download and verify the MIMIC-IV demo into ``directory`` (default: the user cache)."""
    base = (url or demo_url()).rstrip("/") + "/"
    target = Path(directory).expanduser() if directory else default_demo_dir()
    target.mkdir(parents=True, exist_ok=True)
    report = FetchReport(directory=target)
    try:
        listing = _get(base + CHECKSUM_FILE, timeout).decode("utf-8")
    except urllib.error.HTTPError as exc:
        raise DataSourceError(f"Cannot download {base}{CHECKSUM_FILE}: HTTP {exc.code}; check the URL.") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise DataSourceError(f"Cannot reach {base}: {_reason(exc)}. Check the network or pass --url.") from None
    sums = parse_checksums(listing)
    if not sums:
        raise DataSourceError(f"{base}{CHECKSUM_FILE} lists no files; is this the right URL?")
    for name, expected in sums.items():
        destination = target / name
        if destination.is_file() and sha256_of(destination) == expected:
            report.already_present.append(name)
            continue
        try:
            _download(base + name, destination, expected, timeout, progress)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                report.missing_on_server.append(name)
                continue
            raise DataSourceError(f"Cannot download {base}{name}: HTTP {exc.code}.") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise DataSourceError(
                f"The download of {name} broke off: {_reason(exc)}. Run `ehr-magic data fetch mimic-iv-demo` "
                "again to resume it."
            ) from None
        report.downloaded.append(name)
    (target / CHECKSUM_FILE).write_text(listing)
    if not report.missing_on_server:
        (target / COMPLETE_MARKER).write_text("ok\n")
    return report


def _reason(exc: BaseException) -> str:
    """The cause of a network failure as a sentence fragment, without a final full stop."""
    if isinstance(exc, http.client.IncompleteRead):
        return f"the connection closed after {len(exc.partial):,} bytes"
    reason = getattr(exc, "reason", None) or exc
    text = (getattr(reason, "strerror", None) or str(reason) or type(reason).__name__).strip()
    return text.rstrip(".")


def cache_is_complete(directory: Path) -> bool:
    """Whether ``directory`` holds a finished fetch (or copy) of the demo."""
    return (directory / COMPLETE_MARKER).is_file()


def cache_has_files(directory: Path) -> bool:
    """Whether ``directory`` holds anything of an unfinished fetch."""
    return directory.is_dir() and any(p.is_file() for p in directory.rglob("*"))


def verify_local_copy(dirs: list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...]) -> LocalCopy:
    """Check that ``dirs`` hold every MIMIC-IV demo table, each matching the checksum its
    folder's SHA256SUMS.txt publishes; raises ``DataSourceError`` in one sentence if not."""
    files, missing = mimic_iv.find_files(dirs)
    roots = tuple(Path(d).expanduser() for d in dirs)
    where = " and ".join(str(r) for r in roots)
    if missing:
        raise DataSourceError(
            f"The MIMIC-IV demo in {where} is incomplete ({len(missing)} of {len(files) + len(missing)} tables "
            f"missing: {', '.join(missing)}), so no database was built from it; add the folder that holds them "
            "(--from DIR OTHER_DIR) or fetch the demo again.")
    sums = {root: _published_sums(root) for root in roots}
    named: dict[str, Path] = {}
    verified: dict[str, str] = {}
    for path in files.values():
        root = next(r for r in roots if path.is_relative_to(r))
        name = path.relative_to(root).as_posix()
        expected = sums[root].get(name)
        if expected is not None:
            if sha256_of(path) != expected:
                raise DataSourceError(
                    f"{path} does not match the checksum in {root / CHECKSUM_FILE}, so it is corrupt or changed; "
                    "replace it with a fresh copy (or run `ehr-magic data fetch mimic-iv-demo`).")
            verified[name] = expected
        named[name] = path
    return LocalCopy(roots, named, verified)


def _published_sums(root: Path) -> dict[str, str]:
    listing = root / CHECKSUM_FILE
    return parse_checksums(listing.read_text(encoding="utf-8")) if listing.is_file() else {}


def copy_mimic_iv_demo(
    dirs: list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...],
    directory: str | os.PathLike[str] | None = None,
) -> FetchReport:
    """Verify a local copy of the demo and copy it into ``directory`` (default: the user
    cache), marked complete, as a fetch would leave it."""
    local = verify_local_copy(dirs)
    target = Path(directory).expanduser() if directory else default_demo_dir()
    target.mkdir(parents=True, exist_ok=True)
    (target / COMPLETE_MARKER).unlink(missing_ok=True)
    report = FetchReport(directory=target, unverified=local.unverified)
    for name, source in local.files.items():
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        if destination.is_file() and os.path.samefile(source, destination):
            report.already_present.append(name)
            continue
        with files.replacing(destination) as partial:
            shutil.copyfile(source, partial)
        report.downloaded.append(name)
    # The copy's own listing covers only what was verified, so the copy verifies as the original did.
    (target / CHECKSUM_FILE).write_text("".join(f"{sha}  {name}\n" for name, sha in local.checksums.items()))
    (target / COMPLETE_MARKER).write_text("ok\n")
    return report


def _get(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # the URL is http(s) by construction
        return response.read()


def _download(url: str, destination: Path, expected: str, timeout: float,
              progress: FileProgress | None) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    # a short or corrupt download raises inside the block, so it never replaces the destination
    with urllib.request.urlopen(url, timeout=timeout) as response, files.atomic_write(destination, binary=True) as out:
        total = int(response.headers.get("Content-Length") or 0)
        done = 0
        while block := response.read(_BLOCK):
            out.write(block)
            digest.update(block)
            done += len(block)
            if progress:
                progress(destination.name, done, total)
        if total and done < total:  # http.client returns a short body, not an error, when the server hangs up
            raise ConnectionError(f"the connection closed after {done:,} of {total:,} bytes")
        if digest.hexdigest() != expected:
            raise DataSourceError(
                f"Checksum mismatch for {destination.name}: the download is corrupt or the server's file "
                "differs from SHA256SUMS.txt; it was not kept. Run the fetch again."
            )
