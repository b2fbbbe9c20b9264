"""A real Spark Connect server for the tests, started once per session.

pyspark 4's pip package carries the whole Spark distribution, Spark Connect server
included, so ``$SPARK_HOME/sbin/start-connect-server.sh`` (SPARK_HOME = pyspark's
folder) starts one with no download. It runs ``--master local[2]`` with 1 GB of driver
memory, bound to 127.0.0.1 on a free port, with its warehouse, logs and pid file in a
temporary folder, and an in-memory catalog (managed tables live in the warehouse
folder; the catalog dies with the server). Needs Java 17 (.ci/install-servers).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

START_TIMEOUT_SECONDS = 120


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class SparkServer:
    host: str
    port: int
    folder: Path
    env: dict[str, str]
    spark_home: Path

    def url(self, database: str | None = None) -> str:
        return f"sc://{self.host}:{self.port}" + (f"/;database={database}" if database else "")

    def stop(self) -> None:
        pids = [int(p.read_text().strip()) for p in (self.folder / "pid").glob("*.pid") if p.read_text().strip()]
        try:
            subprocess.run([str(self.spark_home / "sbin" / "stop-connect-server.sh")], env=self.env,
                           capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            pass
        # The script only asks; a JVM still busy with a query can outlive it, so make sure.
        deadline = time.monotonic() + 10
        for pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-3000:] for p in (self.folder / "log").glob("*.out"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def spark_home() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).resolve().parent
    return home if (home / "sbin" / "start-connect-server.sh").is_file() else None


def _listening(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
        return True
    return False


@contextlib.contextmanager
def spark_connect_server() -> Iterator[SparkServer]:
    home = spark_home()
    if home is None:
        pytest.fail("pyspark 4 with its Spark Connect server is missing: pip install 'ehr-magic[spark]'.")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("Java is missing for the Spark Connect server: run .ci/install-servers (Debian's openjdk-17).")
    folder = Path(tempfile.mkdtemp(prefix="ehr-spark-"))
    port = free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(folder / "log"),
        "SPARK_PID_DIR": str(folder / "pid"),
        "SPARK_IDENT_STRING": f"ehr-test-{port}",
        "SPARK_CONF_DIR": str(folder / "conf"),  # no site config leaks in
    }
    (folder / "conf").mkdir()
    env.pop("PYTHONPATH", None)  # the server is Java; keep our test path out of its workers
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
        "spark.sql.catalogImplementation": "in-memory",
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={folder} -Dderby.system.home={folder}",
    }
    command = [str(home / "sbin" / "start-connect-server.sh"), "--master", "local[2]", "--driver-memory", "1g"]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    server = SparkServer("127.0.0.1", port, folder, env, home)
    try:
        subprocess.run(command, env=env, check=True, capture_output=True, timeout=60)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not _listening(server.host, port):
            if time.monotonic() > deadline:
                pytest.fail(f"The Spark Connect server did not start in {START_TIMEOUT_SECONDS}s:\n{server.log()}")
            time.sleep(0.5)
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def spark_server() -> Iterator[SparkServer]:
    """A Spark Connect server for the whole test session."""
    with spark_connect_server() as server:
        yield server


@pytest.fixture(scope="session")
def spark_ehrsql(spark_server: SparkServer, ehrsql_db: Path) -> str:
    """The EHRSQL database published into the Spark database ``ehrsql``; its URL."""
    from ehr_magic.engines import publish

    url = spark_server.url("ehrsql")
    publish(ehrsql_db, url)
    return url
