"""Real database servers for the tests, started once per session.

PostgreSQL: a throwaway cluster from the Debian ``postgresql`` package (initdb + pg_ctl)
in a temporary folder, listening on 127.0.0.1 on a free port, with password
authentication for TCP. As root, the cluster runs as the ``postgres`` user (PostgreSQL
refuses to run as root).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_PASSWORD = "ehr-test-pw"  # a throwaway cluster's superuser password
PG_USER = "ehr"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pg_bindir() -> Path | None:
    """The folder with initdb and pg_ctl: PATH, pg_config, then Debian's versioned folders."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent  # Debian links them from /usr/local/bin at times
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        bindir = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True,
                                     check=True).stdout.strip())
        if (bindir / "initdb").is_file():
            return bindir
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(candidates[-1]).parent if candidates else None


@dataclass
class PostgresServer:
    host: str
    port: int
    user: str
    password: str
    folder: Path

    def url(self, database: str = "postgres", *, password: bool = True, query: str = "") -> str:
        secret = f":{self.password}" if password else ""
        return f"postgresql://{self.user}{secret}@{self.host}:{self.port}/{database}" + (f"?{query}" if query else "")

    def execute(self, sql: str, database: str = "postgres") -> list[tuple]:
        """Run SQL as the superuser, outside the read-only analysis path (to set up fixtures).

        Several statements may be separated by ``;`` (each is sent alone); the last one's rows are returned.
        """
        import adbc_driver_postgresql.dbapi as pg

        rows: list[tuple] = []
        with pg.connect(self.url(database), autocommit=True) as con, con.cursor() as cursor:
            for statement in filter(str.strip, sql.split(";")):
                cursor.execute(statement)
                rows = cursor.fetchall() if cursor.description else []
        return rows


def _as_postgres(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    runuser = shutil.which("runuser")
    return [runuser, "-u", "postgres", "--", *command] if runuser else ["su", "postgres", "-c", " ".join(command)]


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    bindir = pg_bindir()
    if bindir is None:
        pytest.fail("PostgreSQL's initdb/pg_ctl are missing: run .ci/install-servers (installs Debian's postgresql).")
    folder = Path(tempfile.mkdtemp(prefix="ehr-pg-"))
    data = folder / "data"
    pwfile = folder / "pw"
    pwfile.write_text(PG_PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
        folder.chmod(0o700)
    port = free_port()
    log = folder / "log"
    try:
        subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, "--pwfile", str(pwfile),
                                     "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8",
                                     "--locale=C.UTF-8" if _has_c_utf8() else "--no-locale"]),
                       check=True, capture_output=True)
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c full_page_writes=off"
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                                     "-o", options, "start"]), check=True, capture_output=True)
        yield PostgresServer("127.0.0.1", port, PG_USER, PG_PASSWORD, folder)
    finally:
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def _has_c_utf8() -> bool:
    result = subprocess.run(["locale", "-a"], capture_output=True, text=True)
    return any(name.lower().replace("-", "") == "c.utf8" for name in result.stdout.split())


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the whole test session."""
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="session")
def pg_ehrsql(pg_server: PostgresServer, ehrsql_db: Path) -> str:
    """The EHRSQL database published into the database ``ehrsql`` of the test server; its URL."""
    from ehr_magic.engines import publish

    pg_server.execute("CREATE DATABASE ehrsql")
    url = pg_server.url("ehrsql")
    publish(ehrsql_db, url)
    return url
