"""Fetching the open MIMIC-IV demo from PhysioNet (open access, no login).

Every file listed in the release's SHA256SUMS.txt is downloaded into a cache folder,
checked against its checksum, and only then moved into place, so an interrupted fetch
resumes where it stopped and a corrupt file is never kept. The base URL is
configurable (argument or ``EHR_MAGIC_DEMO_URL``) for mirrors and for tests.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DataSourceError(f"Cannot reach {base}: {reason}. Check the network or pass --url.") from None
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
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise DataSourceError(
                f"Download of {name} failed ({getattr(exc, 'reason', exc)}); run the fetch again to resume."
            ) from None
        report.downloaded.append(name)
    (target / CHECKSUM_FILE).write_text(listing)
    if not report.missing_on_server:
        (target / COMPLETE_MARKER).write_text("ok\n")
    return report


def _get(url: str, timeout: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (URL is http(s) by construction)
        return response.read()


def _download(url: str, destination: Path, expected: str, timeout: float,
              progress: FileProgress | None) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    partial = destination.with_name(destination.name + ".part")
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(partial, "wb") as out:  # noqa: S310
            total = int(response.headers.get("Content-Length") or 0)
            done = 0
            while block := response.read(_BLOCK):
                out.write(block)
                digest.update(block)
                done += len(block)
                if progress:
                    progress(destination.name, done, total)
        if digest.hexdigest() != expected:
            raise DataSourceError(
                f"Checksum mismatch for {destination.name}: the download is corrupt or the server's file "
                "differs from SHA256SUMS.txt; it was not kept. Run the fetch again."
            )
        os.replace(partial, destination)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(partial)
