"""Replies real model servers were seen to give, replayed on the fake server (tests/fake_llm.py):
a program without a code fence, a reply cut off at the token limit, the window errors of
llama.cpp and of OpenAI/vLLM, a 503 while llama.cpp's server loads its model, and the empty
event stream llama-cpp-python sends for a streamed prompt longer than its window. Each ends
in one clear sentence. A replay lets each shape be tested exactly, which a real model does
not give on demand; what our own real server (llama-cpp-python with SmolLM2, tests/llama_server.py)
can be made to do, such as a prompt longer than its window, whole and streamed, is tested on it
in tests/test_local_model.py."""

from __future__ import annotations

from pathlib import Path

import pytest

import ehr_magic
from ehr_magic.agent.replies import parse_reply
from ehr_magic.llm import LLMClient, LLMContextError, LLMServerError, resolve_settings
from fake_llm import FakeReply

MESSAGES = [{"role": "user", "content": "hello"}]


@pytest.fixture()
def ehr(ehrsql_db: Path):
    with ehr_magic.connect(ehrsql_db) as handle:
        yield handle


def client() -> LLMClient:
    return LLMClient(resolve_settings(), audit=False, backoff_base=0.01, backoff_max=0.02)


def test_a_bare_program_is_taken_as_code() -> None:
    reply = parse_reply("answer = ehr.sql('SELECT count(*) FROM patients')")
    assert reply.kind == "code" and reply.code.startswith("answer = ehr.sql")
    # prose, or code that never sets `answer`, is not
    assert parse_reply("The answer is that there are 100 patients.").kind == "none"
    assert parse_reply("x = 1").kind == "none"


def test_the_agent_runs_a_reply_without_a_fence(fake_llm, make_agent) -> None:
    fake_llm.enqueue("answer = ehr.sql('SELECT count(*) AS n FROM patients')['n'][0]")
    result = make_agent().run("How many patients are there?")
    assert result.status == "answered" and result.answer > 0


def test_a_reply_cut_off_at_the_token_limit_says_so(fake_llm, make_agent) -> None:
    fake_llm.enqueue(FakeReply(text="Knowledge:\n- patients holds one row per patient\n```python\nanswer = ehr.sql(",
                               finish_reason="length"))
    result = make_agent().run("How many patients are there?")
    assert result.status == "failed"
    assert "cut off at its token limit" in result.message
    assert len(fake_llm.chat_requests()) == 1  # no reminder: a longer reply would be cut off again


@pytest.mark.parametrize("detail", [
    "the request exceeds the available context size, try increasing it",  # llama.cpp
    "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens",  # OpenAI, vLLM
])
def test_a_prompt_longer_than_the_window_is_named(fake_llm, detail: str) -> None:
    fake_llm.enqueue(FakeReply(text=detail, status=400))
    with client() as llm, pytest.raises(LLMContextError) as caught:
        llm.chat(MESSAGES)
    message = str(caught.value)
    assert "does not fit the model's context window" in message and "--ctx-size" in message
    assert "\n" not in message


def test_a_server_still_loading_its_model_is_retried_then_explained(fake_llm) -> None:
    attempts = resolve_settings().max_retries + 1
    for _ in range(attempts):
        fake_llm.enqueue(FakeReply(text="Loading model", status=503))
    with client() as llm, pytest.raises(LLMServerError) as caught:
        llm.chat(MESSAGES)
    assert "while it loads the model" in str(caught.value)
    assert len(fake_llm.requests) == attempts  # retried, bounded


def test_a_server_that_finishes_loading_answers(fake_llm) -> None:
    fake_llm.enqueue(FakeReply(text="Loading model", status=503))
    fake_llm.enqueue("hello back")
    with client() as llm:
        assert llm.chat(MESSAGES).text == "hello back"


# llama-cpp-python's answer to a streamed prompt longer than its window: 200 and an event stream closed empty
EMPTY_STREAM = FakeReply(body=b"", content_type="text/event-stream; charset=utf-8")


def test_a_stream_closed_empty_is_asked_again_whole(fake_llm) -> None:
    fake_llm.enqueue(EMPTY_STREAM)
    fake_llm.enqueue(FakeReply(text="This model's maximum context length is 4096 tokens. However, you requested "
                                    "6031 tokens (6031 in the messages, None in the completion).", status=400))
    with client() as llm, pytest.raises(LLMContextError, match="does not fit the model's context window"):
        llm.chat(MESSAGES, stream=True)
    assert [r.json.get("stream") for r in fake_llm.requests] == [True, None]


def test_a_whole_answer_in_place_of_an_empty_stream_is_shown(fake_llm) -> None:
    fake_llm.enqueue(EMPTY_STREAM)
    fake_llm.enqueue("hello back")
    shown: list[str] = []
    with client() as llm:
        completion = llm.chat(MESSAGES, stream=True, on_token=shown.append)
    assert completion.text == "hello back" and shown == ["hello back"]
