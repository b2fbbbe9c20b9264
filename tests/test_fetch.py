"""Fetching the MIMIC-IV demo, against a local HTTP server that serves the real files."""

from __future__ import annotations

import functools
import hashlib
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from datapaths import MIMIC_IV_DEMO
from ehr_magic.data.demo import demo_database
from ehr_magic.data.sources import fetch
from ehr_magic.errors import DataSourceError


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def serve() -> Iterator:
    servers = []

    def start(directory: Path) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_fetch_verifies_and_resumes(serve, tmp_path: Path) -> None:
    url = serve(MIMIC_IV_DEMO)
    target = tmp_path / "demo"
    report = fetch.fetch_mimic_iv_demo(url, target)
    # The shared copy lacks chartevents, which SHA256SUMS.txt lists: reported, not fatal.
    assert report.missing_on_server == ["icu/chartevents.csv.gz"]
    assert "hosp/admissions.csv.gz" in report.downloaded
    sums = fetch.parse_checksums((MIMIC_IV_DEMO / "SHA256SUMS.txt").read_text())
    for name in report.downloaded:
        assert hashlib.sha256((target / name).read_bytes()).hexdigest() == sums[name]
    assert not list(target.rglob("*.part"))
    again = fetch.fetch_mimic_iv_demo(url, target)
    assert again.downloaded == [] and len(again.already_present) == len(report.downloaded)


def test_checksum_mismatch_is_not_kept(serve, tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "hosp").mkdir(parents=True)
    good = MIMIC_IV_DEMO / "hosp" / "patients.csv.gz"
    shutil.copy(good, mirror / "hosp" / "patients.csv.gz")
    (mirror / "hosp" / "admissions.csv.gz").write_bytes(b"tampered")
    real = fetch.parse_checksums((MIMIC_IV_DEMO / "SHA256SUMS.txt").read_text())
    (mirror / "SHA256SUMS.txt").write_text(
        f"{real['hosp/patients.csv.gz']} hosp/patients.csv.gz\n{real['hosp/admissions.csv.gz']} hosp/admissions.csv.gz\n"
    )
    target = tmp_path / "out"
    with pytest.raises(DataSourceError, match="Checksum mismatch for admissions.csv.gz"):
        fetch.fetch_mimic_iv_demo(serve(mirror), target)
    assert not (target / "hosp" / "admissions.csv.gz").exists()
    assert not list(target.rglob("*.part"))


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match="Cannot reach"):
        fetch.fetch_mimic_iv_demo("http://127.0.0.1:9/", tmp_path / "x", timeout=2)


def test_unsafe_paths_in_checksum_file_are_refused() -> None:
    with pytest.raises(DataSourceError, match="unsafe"):
        fetch.parse_checksums("0" * 64 + " ../../etc/passwd\n")


def test_demo_uses_fetched_demo(serve, tmp_path: Path) -> None:
    demo = demo_database(url=serve(MIMIC_IV_DEMO))
    assert demo.kind == "mimic-iv-demo"
    import ehr_magic

    with ehr_magic.connect(demo.path) as ehr:
        assert ehr.count("admissions") == 275
    # Built once, then reused.
    assert demo_database().reason == "the MIMIC-IV demo (cached)"
