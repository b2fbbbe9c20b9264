"""Fetching the MIMIC-IV demo, against a local HTTP server that serves the real files."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from datapaths import CHARTEVENTS_RECONSTRUCTED, MIMIC_IV_DEMO
from ehr_magic.sources.demo import demo_database, demo_dir
from ehr_magic.sources import fetch
from ehr_magic.sources import mimic_iv
from ehr_magic.errors import DataSourceError
from test_magic import ipython_shell

UNREACHABLE = "http://127.0.0.1:9/"  # nothing listens on the discard port


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


class _DroppingHandler(_QuietHandler):
    """Serves every file but one, whose connection it drops halfway through the body."""

    dropped = "icu/d_items.csv.gz"  # after hosp/patients, which a partial cache then holds

    def do_GET(self) -> None:
        if self.path.lstrip("/") != self.dropped:
            return super().do_GET()
        body = (Path(self.directory) / self.dropped).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.close_connection = True


@pytest.fixture()
def serve() -> Iterator:
    servers = []

    def start(directory: Path, handler_class: type[SimpleHTTPRequestHandler] = _QuietHandler) -> str:
        handler = functools.partial(handler_class, directory=str(directory))
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
    assert not list(target.rglob(".*"))  # no temporary file left
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
        f"{real['hosp/patients.csv.gz']} hosp/patients.csv.gz\n"
        f"{real['hosp/admissions.csv.gz']} hosp/admissions.csv.gz\n"
    )
    target = tmp_path / "out"
    with pytest.raises(DataSourceError, match="Checksum mismatch for admissions.csv.gz"):
        fetch.fetch_mimic_iv_demo(serve(mirror), target)
    assert not (target / "hosp" / "admissions.csv.gz").exists()
    assert not list(target.rglob(".*"))  # no temporary file left


def test_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match="Cannot reach"):
        fetch.fetch_mimic_iv_demo("http://127.0.0.1:9/", tmp_path / "x", timeout=2)


def test_unsafe_paths_in_checksum_file_are_refused() -> None:
    with pytest.raises(DataSourceError, match="unsafe"):
        fetch.parse_checksums("0" * 64 + " ../../etc/passwd\n")


def complete_mirror(folder: Path) -> Path:
    """The shared MIMIC-IV demo plus the reconstructed chartevents, as a mirror that
    publishes its own checksums (links to the shared files, nothing copied)."""
    for source in MIMIC_IV_DEMO.rglob("*"):
        if source.is_file():
            (folder / source.relative_to(MIMIC_IV_DEMO)).parent.mkdir(parents=True, exist_ok=True)
            (folder / source.relative_to(MIMIC_IV_DEMO)).symlink_to(source)
    chartevents = CHARTEVENTS_RECONSTRUCTED / "icu" / "chartevents.csv.gz"
    (folder / "icu" / "chartevents.csv.gz").symlink_to(chartevents)
    sums = fetch.parse_checksums((MIMIC_IV_DEMO / "SHA256SUMS.txt").read_text())
    sums["icu/chartevents.csv.gz"] = fetch.sha256_of(chartevents)
    (folder / "SHA256SUMS.txt").unlink()
    (folder / "SHA256SUMS.txt").write_text("".join(f"{sha}  {name}\n" for name, sha in sums.items()))
    return folder


def test_demo_is_not_built_from_a_server_that_lacks_a_file(serve) -> None:
    said: list[str] = []
    demo = demo_database(url=serve(MIMIC_IV_DEMO), say=said.append)  # the shared copy lacks chartevents
    assert demo.kind == "synthetic" and "incomplete" in demo.reason
    assert not (demo_dir() / "mimic-iv-demo.duckdb").exists()
    assert any("lacks icu/chartevents.csv.gz" in line for line in said), said
    assert "ehr-magic demo --from DIR" in said[-1]


def test_demo_uses_a_complete_fetched_demo(serve, tmp_path: Path) -> None:
    demo = demo_database(url=serve(complete_mirror(tmp_path / "mirror")))
    assert demo.kind == "mimic-iv-demo"
    import ehr_magic

    with ehr_magic.connect(demo.path) as ehr:
        assert ehr.count("admissions") == 275 and ehr.count("chartevents") == 668_862
    # Built once, then reused.
    assert demo_database().reason == "the MIMIC-IV demo (cached)"


def test_an_interrupted_fetch_is_neither_built_nor_announced(serve, tmp_path: Path, monkeypatch, capsys) -> None:
    said: list[str] = []
    demo = demo_database(url=serve(MIMIC_IV_DEMO, _DroppingHandler), say=said.append)
    assert demo.kind == "synthetic"
    assert any(f"The download of {_DroppingHandler.dropped} broke off" in line for line in said), "\n".join(said)
    cached = fetch.default_demo_dir()
    assert (cached / "hosp" / "patients.csv.gz").is_file()  # kept, to resume from
    assert not (cached / fetch.COMPLETE_MARKER).exists() and not list(cached.rglob(".*"))

    # The next connect: %load_ext in a real IPython shell, the network gone.
    monkeypatch.setenv("EHR_MAGIC_DEMO_URL", UNREACHABLE)
    capsys.readouterr()
    with contextlib.contextmanager(ipython_shell)(None, monkeypatch, tmp_path) as shell:
        out = capsys.readouterr().out
        assert shell.user_ns["ehr"].dataset.startswith("synthetic")
    assert not (demo_dir() / "mimic-iv-demo.duckdb").exists()
    assert "MIMIC-IV demo (cached)" not in out and "ehr = the MIMIC-IV demo" not in out
    assert "Resuming the unfinished download" in out and "is unfinished, so no database was built" in out
    assert "ehr-magic demo --from DIR" in out  # how to point it at a local copy
    assert "ehr = synthetic MIMIC-IV-shaped data" in out

    # The failure is remembered: the start after it does not try again, and says in one line how to resume.
    with contextlib.contextmanager(ipython_shell)(None, monkeypatch, tmp_path) as shell:
        out = capsys.readouterr().out
    assert "Resuming" not in out and len(out.strip().splitlines()) == 1, out
    assert "the MIMIC-IV demo download is unfinished (`ehr-magic demo` resumes it)" in out


def test_a_database_built_from_a_partial_copy_is_detected(tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    (partial / "hosp").mkdir(parents=True)
    for name in ("patients", "admissions"):
        (partial / "hosp" / f"{name}.csv.gz").symlink_to(MIMIC_IV_DEMO / "hosp" / f"{name}.csv.gz")
    stale = demo_dir() / "mimic-iv-demo.duckdb"
    stale.parent.mkdir(parents=True)
    mimic_iv.load([partial], stale, dataset="mimic-iv-demo")  # as an older version built it
    said: list[str] = []
    demo = demo_database(url=UNREACHABLE, say=said.append)
    assert demo.kind == "synthetic" and not stale.exists()
    assert "was built from an incomplete copy of the MIMIC-IV demo (it lacks d_hcpcs" in said[0]
    assert "and 24 more tables), so it was removed" in said[0]


def test_a_local_copy_must_be_complete_and_match_its_checksums(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match=r"is incomplete \(1 of 31 tables missing: chartevents\)"):
        fetch.verify_local_copy([MIMIC_IV_DEMO])
    tampered = complete_mirror(tmp_path / "copy")
    sums = tampered / "SHA256SUMS.txt"
    sums.write_text(sums.read_text().replace(fetch.sha256_of(CHARTEVENTS_RECONSTRUCTED / "icu" / "chartevents.csv.gz"),
                                             "0" * 64))
    with pytest.raises(DataSourceError, match=r"chartevents.csv.gz does not match the checksum in .*SHA256SUMS.txt"):
        fetch.verify_local_copy([tampered])


def test_fetch_from_a_local_copy_fills_the_cache(tmp_path: Path, capsys) -> None:
    from ehr_magic.cli import main

    target = tmp_path / "cache"
    assert main(["data", "fetch", "mimic-iv-demo", "--from", str(MIMIC_IV_DEMO), str(CHARTEVENTS_RECONSTRUCTED),
                 "--dir", str(target)]) == 0
    captured = capsys.readouterr()
    assert "31 files copied" in captured.out
    assert f"icu/chartevents.csv.gz in {CHARTEVENTS_RECONSTRUCTED} is not verified" in captured.err
    assert fetch.cache_is_complete(target)
    again = fetch.verify_local_copy([target])  # the copy verifies as the original did
    assert again.unverified == [f"icu/chartevents.csv.gz in {target}"]
    assert main(["data", "fetch", "mimic-iv-demo", "--from", str(MIMIC_IV_DEMO), "--dir", str(tmp_path / "x")]) == 2
    assert "no database was built" in capsys.readouterr().err
