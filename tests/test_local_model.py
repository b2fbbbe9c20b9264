"""ehr-magic against a real local model: llama-cpp-python's server with SmolLM2-135M-Instruct
and a 4096-token window (tests/llama_server.py).

A 135M model answers badly, so these tests assert the plumbing, not accuracy: every run
ends in one clear status (answered; failed after T steps with each step's error; abstained
or asked to clarify; or the prompt does not fit the window, with what to do), never a
traceback; streaming and token usage work; an over-long prompt is named, not truncated.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

from ehr_magic.llm import LLMClient, LLMContextError, resolve_settings
from ehr_magic.llm.audit import AuditLog
from llama_server import LlamaServer, missing_server
from test_magic import ipython_shell

QUESTION = "How many patients are there?"
MAX_STEPS = 2
SHORT_CHAT = [{"role": "system", "content": "You answer in a few words."},
              {"role": "user", "content": "Name one colour of the sky."}]

# The prompt-too-long message: ours before the call ("the prompt needs N tokens but the model's
# window is M"), or the server's 400 turned into LLMContextError ("does not fit the model's context window").
_WINDOW = re.compile(r"the prompt needs \d+ tokens but the model's window is \d+|"
                     r"does not fit the model's context window", re.IGNORECASE)


def _client(tmp_path: Path, **settings) -> LLMClient:
    return LLMClient(resolve_settings(**settings), audit=AuditLog(tmp_path / "audit.sqlite"), backoff_base=0.01,
                     backoff_max=0.05)


# --------------------------------------------------------------------------- the server


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_server_is_skipped_only_outside_ci(monkeypatch: pytest.MonkeyPatch, ci: str, outcome) -> None:
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome) as caught:
        missing_server("llama-cpp-python's server is not installed")
    assert "pip install -e '.[local-llm]'" in str(caught.value)


def test_the_server_lists_its_model_and_tells_nothing_of_its_window(local_llm: LlamaServer) -> None:
    status, body = local_llm.get("/v1/models")
    assert status == 200 and [m["id"] for m in body["data"]] == [local_llm.model]
    assert set(body["data"][0]) == {"id", "object", "owned_by", "permissions"}  # no max_model_len, no n_ctx
    # llama.cpp's own llama-server answers /props with n_ctx; llama-cpp-python has no such route
    assert local_llm.get("/props")[0] == 404


# --------------------------------------------------------------------------- the client


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_chat_has_text_and_token_counts_and_is_audited(local_llm: LlamaServer, tmp_path: Path,
                                                         stream: bool) -> None:
    pieces: list[str] = []
    with _client(tmp_path) as llm:
        completion = llm.chat(SHORT_CHAT, stream=stream, on_token=pieces.append)
    assert completion.text.strip() and completion.finish_reason in ("stop", "length")
    assert completion.prompt_tokens > 10 and completion.completion_tokens > 0
    if stream:
        assert len(pieces) > 1 and "".join(pieces) == completion.text
    (entry,) = AuditLog(tmp_path / "audit.sqlite").entries()
    assert (entry.status, entry.prompt_tokens, entry.completion_tokens, entry.tokens_estimated) == \
        ("ok", completion.prompt_tokens, completion.completion_tokens, completion.tokens_estimated)
    assert entry.endpoint == local_llm.base_url and entry.response_text == completion.text


def test_the_server_counts_tokens_itself_unless_streaming(local_llm: LlamaServer, tmp_path: Path) -> None:
    """llama-cpp-python reports usage on whole answers only; a streamed answer's counts are our estimate."""
    with _client(tmp_path) as llm:
        whole = llm.chat(SHORT_CHAT, stream=False)
        streamed = llm.chat(SHORT_CHAT, stream=True)
    assert not whole.tokens_estimated
    assert streamed.tokens_estimated
    assert abs(streamed.prompt_tokens - whole.prompt_tokens) < whole.prompt_tokens  # same prompt, same order


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_prompt_longer_than_the_window_is_named_not_truncated(local_llm: LlamaServer, tmp_path: Path,
                                                                stream: bool) -> None:
    long_text = "The patient was seen again in the clinic today. " * 600  # about 6000 tokens
    with _client(tmp_path) as llm, pytest.raises(LLMContextError) as caught:
        llm.chat([{"role": "user", "content": long_text + "Summarise."}], stream=stream)
    message = str(caught.value)
    assert _WINDOW.search(message) and "4096" in message and "--ctx-size" in message
    assert "\n" not in message
    (entry,) = AuditLog(tmp_path / "audit.sqlite").entries()
    assert entry.status == "error" and entry.error == message


def test_any_model_name_is_served(local_llm: LlamaServer, tmp_path: Path) -> None:
    """llama-cpp-python answers an unknown model name with its one model: there is no 'not found' to show."""
    with _client(tmp_path, model="no-such-model") as llm:
        completion = llm.chat(SHORT_CHAT, stream=False)
    assert completion.text.strip()


# --------------------------------------------------------------------------- ask and %%ehr

# What ends a run, as the analyst reads it. Exactly one must match; a traceback never.
_ENDINGS = {
    "answered": re.compile(r"^status: answered\b", re.MULTILINE),
    "failed": re.compile(r"^status: failed\b", re.MULTILINE),
    "abstained": re.compile(r"^status: (?:abstained|clarify)\b", re.MULTILINE),
    "window": re.compile(r"^error: .*(?:" + _WINDOW.pattern + ")", re.MULTILINE | re.IGNORECASE),
}


def _window_advice(message: str) -> None:
    """A prompt-too-long message says what to do: a larger window, or the window setting."""
    assert re.search(r"--ctx-size|n_ctx|num_ctx|--max-model-len|context_window|CONTEXT_WINDOW", message), message


def _ask_env(server: LlamaServer) -> dict[str, str]:
    # the window llama-cpp-python cannot report (no /props): the README tells users to set it
    return {**os.environ, "OPENAI_BASE_URL": server.base_url, "EHR_MAGIC_MODEL": server.model,
            "EHR_MAGIC_CONTEXT_WINDOW": str(server.n_ctx)}


def test_ask_ends_in_one_clear_status(local_llm: LlamaServer, ehrsql_db: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ehr_magic", "ask", QUESTION, "--db", str(ehrsql_db),
                           "--max-steps", str(MAX_STEPS), "--memory", str(tmp_path / "memory.sqlite")],
                          capture_output=True, text=True, env=_ask_env(local_llm), timeout=1200)
    shown = done.stdout + done.stderr
    assert "Traceback" not in shown, f"{shown}\n--- server log ---\n{local_llm.log()}"
    endings = [name for name, pattern in _ENDINGS.items() if pattern.search(shown)]
    assert len(endings) == 1, f"not one clear ending {endings}:\n{shown}"
    (ending,) = endings
    assert done.returncode == {"answered": 0, "failed": 1, "abstained": 1, "window": 2}[ending], shown
    if ending == "window":
        error_lines = done.stderr.strip().splitlines()
        assert error_lines[-1].startswith("error: ") and "\n" not in error_lines[-1]
        _window_advice(error_lines[-1])
        return
    steps = int(re.search(r"^\((\d+) steps, (\d+) model calls", done.stdout, re.MULTILINE).group(1))
    assert steps <= MAX_STEPS
    if ending == "failed":
        failed_steps = re.findall(r"^\s+step (\d+) failed: \S", done.stderr, re.MULTILINE)
        # every step that ran shows its error; no step at all means the model never wrote code, which is said
        assert failed_steps == [str(i) for i in range(1, steps + 1)], shown
        assert steps or "without code" in done.stdout or "token limit" in done.stdout, shown


@pytest.fixture()
def shell(ehrsql_db: Path, local_llm: LlamaServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("EHR_MAGIC_CONTEXT_WINDOW", str(local_llm.n_ctx))
    yield from ipython_shell(ehrsql_db, monkeypatch, tmp_path)


def test_a_notebook_question_ends_in_one_clear_status(shell: InteractiveShell, local_llm: LlamaServer,
                                                      capsys) -> None:
    capsys.readouterr()
    result = shell.run_cell(f"%%ehr --steps 1\n{QUESTION}")
    out = capsys.readouterr()
    shown = out.out + out.err
    assert result.success and result.error_in_exec is None, shown
    assert "Traceback" not in shown, f"{shown}\n--- server log ---\n{local_llm.log()}"
    endings = {
        # a plain shell prints the display's text/plain inside its mime dict, so no line anchors
        "answered": "answer" in shell.user_ns and re.search(r"\b1 steps, \d+ model calls", out.out),
        "failed": re.search(r"\bfailed: \S", out.out),
        "abstained": re.search(r"\b(?:abstained|clarify): \S", out.out),
        "window": re.search(r"^ehr-magic: .*(?:" + _WINDOW.pattern + ")", out.out, re.MULTILINE | re.IGNORECASE),
    }
    found = [name for name, hit in endings.items() if hit]
    assert len(found) == 1, f"not one clear ending {found}:\n{shown}"
    if found == ["window"]:
        _window_advice(out.out)
