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
from llama_server import LlamaServer

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
