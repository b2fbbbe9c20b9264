"""The LLM client and its settings, against the fake OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
from email.utils import formatdate
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer, FakeReply, load_script

from ehr_magic.errors import ConfigError
from ehr_magic.llm import (
    AuditLog,
    LLMAuthError,
    LLMClient,
    LLMConnectionError,
    LLMRateLimitError,
    LLMRequestError,
    LLMResponseError,
    LLMServerError,
    LLMSettings,
    LLMTimeoutError,
    config_path,
    describe_settings,
    estimate_tokens,
    resolve_settings,
    save_setting,
)
from ehr_magic.llm.client import _retry_after

MESSAGES = [
    {"role": "system", "content": "You write Python."},
    {"role": "user", "content": "How many patients are there?"},
]


@pytest.fixture(autouse=True)
def _no_stray_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("AZURE_OPENAI_API_VERSION", "AZURE_OPENAI_AD_TOKEN", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(var, raising=False)


def make_client(**settings_and_policy) -> LLMClient:
    policy = {k: settings_and_policy.pop(k) for k in ("backoff_base", "backoff_max", "retry_after_max", "audit")
              if k in settings_and_policy}
    policy.setdefault("backoff_base", 0.01)
    policy.setdefault("backoff_max", 0.05)
    audit = policy.pop("audit", None)
    return LLMClient(resolve_settings(**settings_and_policy), audit, **policy)


@pytest.fixture
def client(fake_llm: FakeLLMServer) -> LLMClient:
    with make_client() as c:
        yield c


# --------------------------------------------------------------------------- happy paths


def test_non_streaming_completion_reports_usage(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(text="print(len(patients))", usage={"prompt_tokens": 17, "completion_tokens": 5}))

    answer = client.chat(MESSAGES, stream=False)

    assert answer.text == "print(len(patients))"
    assert (answer.prompt_tokens, answer.completion_tokens, answer.tokens_estimated) == (17, 5, False)
    assert answer.model == "fake-model"
    assert answer.finish_reason == "stop"
    assert answer.attempts == 1
    assert 0 < answer.latency_s < 5
    sent = fake_llm.last_request
    assert sent.path == "/v1/chat/completions"
    assert sent.json["model"] == "fake-model"
    assert sent.json["messages"] == MESSAGES
    assert sent.json["temperature"] == 0.0
    assert "stream" not in sent.json or not sent.json["stream"]
    assert sent.headers["authorization"] == "Bearer test-key"


def test_streaming_sends_pieces_to_on_token(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    text = "import polars as pl\nprint(pl.read_csv('patients.csv').height)"
    fake_llm.enqueue(FakeReply(text=text, usage={"prompt_tokens": 30, "completion_tokens": 12}))
    pieces: list[str] = []

    answer = client.chat(MESSAGES, stream=True, on_token=pieces.append)

    assert len(pieces) > 2
    assert "".join(pieces) == answer.text == text
    assert (answer.prompt_tokens, answer.completion_tokens, answer.tokens_estimated) == (30, 12, False)
    assert fake_llm.last_request.json["stream"] is True
    assert fake_llm.last_request.json["stream_options"] == {"include_usage": True}


def test_stream_defaults_to_settings(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue("a", "b")
    with make_client(stream=False) as c:
        c.chat(MESSAGES)
    assert not fake_llm.last_request.json.get("stream")
    with make_client() as c:
        c.chat(MESSAGES)
    assert fake_llm.last_request.json["stream"] is True


@pytest.mark.parametrize("stream", [True, False])
def test_tokens_are_estimated_when_server_omits_usage(fake_llm: FakeLLMServer, client: LLMClient, stream: bool) -> None:
    text = "SELECT count(*) FROM patients WHERE anchor_age > 65"
    fake_llm.enqueue(FakeReply(text=text, usage=False))

    answer = client.chat(MESSAGES, stream=stream)

    assert answer.text == text
    assert answer.tokens_estimated is True
    assert answer.completion_tokens == estimate_tokens(text)
    assert answer.prompt_tokens > estimate_tokens("How many patients are there?")


def test_estimate_tokens_is_in_the_right_range() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("Hello world") == 2
    sentence = "The quick brown fox jumps over the lazy dog. " * 20
    assert 0.8 <= estimate_tokens(sentence) / (len(sentence) / 4) <= 1.5


def test_temperature_default_is_not_sent(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue("ok")
    with make_client(temperature="default") as c:
        assert c.settings.temperature is None
        c.chat(MESSAGES)
    assert "temperature" not in fake_llm.last_request.json


def test_responder_chooses_reply_from_the_prompt(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.responder = lambda req: "fixed code" if "NameError" in str(req["messages"]) else "buggy code"
    assert client.chat(MESSAGES).text == "buggy code"
    retry = [*MESSAGES, {"role": "user", "content": "NameError: name 'pl' is not defined"}]
    assert client.chat(retry).text == "fixed code"


def _bare_client(server: FakeLLMServer) -> LLMClient:
    settings = LLMSettings(provider="compatible", model="m", api_key="k", base_url=server.base_url, max_retries=0)
    return LLMClient(settings, audit=False)


def test_fake_server_says_when_nothing_is_scripted() -> None:
    with FakeLLMServer() as server, _bare_client(server) as c:
        with pytest.raises(LLMServerError, match="no reply for request #1.*enqueue"):
            c.chat(MESSAGES)
        assert len(server.unscripted) == 1

        server.responder = lambda req: req["no such key"]
        with pytest.raises(LLMServerError, match="responder raised KeyError"):
            c.chat(MESSAGES)
        assert server.responder_errors


def test_fake_server_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        '["first", {"text": "busy", "status": 503}, '
        '{"if_contains": "Traceback", "reply": "fixed"}, {"default": "buggy"}]'
    )
    queued, responder = load_script(script)
    with FakeLLMServer() as server, _bare_client(server) as c:
        server.enqueue(*queued)
        server.responder = responder
        assert c.chat(MESSAGES).text == "first"
        with pytest.raises(LLMServerError, match="503"):
            c.chat(MESSAGES)
        assert c.chat(MESSAGES).text == "buggy"
        assert c.chat([{"role": "user", "content": "Traceback (most recent call last)"}]).text == "fixed"


# --------------------------------------------------------------------------- retries


def _gaps(server: FakeLLMServer) -> list[float]:
    times = [r.received_at for r in server.requests]
    return [b - a for a, b in zip(times, times[1:])]


def test_429_honours_retry_after_seconds(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(status=429, headers={"Retry-After": "0.2"}), "ok")

    answer = client.chat(MESSAGES)

    assert answer.text == "ok" and answer.attempts == 2
    assert len(fake_llm.requests) == 2
    assert 0.19 <= _gaps(fake_llm)[0] < 0.6


def test_429_honours_retry_after_ms(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(status=429, headers={"retry-after-ms": "250"}), "ok")
    assert client.chat(MESSAGES).attempts == 2
    assert 0.24 <= _gaps(fake_llm)[0] < 0.7


def test_retry_after_wait_is_capped(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(FakeReply(status=429, headers={"Retry-After": "30"}), "ok")
    with make_client(retry_after_max=0.1) as c:
        assert c.chat(MESSAGES).attempts == 2
    assert _gaps(fake_llm)[0] < 0.6


def test_retry_after_http_date() -> None:
    assert _retry_after({"retry-after": "3"}) == 3.0
    assert _retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    in_two = _retry_after({"retry-after": formatdate(time.time() + 2, usegmt=True)})
    assert in_two is not None and 0.5 < in_two <= 2.0
    assert _retry_after({"retry-after": formatdate(time.time() - 60, usegmt=True)}) == 0.0
    assert _retry_after({"retry-after": "soon"}) is None
    assert _retry_after({}) is None


def test_429_without_retry_after_uses_backoff(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(FakeReply(status=429), FakeReply(status=429), "ok")
    with make_client(backoff_base=0.05, backoff_max=0.1) as c:
        answer = c.chat(MESSAGES)
    assert answer.attempts == 3 and len(fake_llm.requests) == 3
    assert all(gap < 0.5 for gap in _gaps(fake_llm))


def test_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    settings = LLMSettings(provider="compatible", model="m", api_key="k", base_url="http://127.0.0.1:1/v1")
    with LLMClient(settings, audit=False, backoff_base=0.1, backoff_max=1.0) as c:
        first = [c._wait(1, None) for _ in range(200)]
        third = [c._wait(3, None) for _ in range(200)]
        late = [c._wait(20, None) for _ in range(200)]
        assert all(0 <= w <= 0.1 for w in first) and max(first) > 0.05
        assert all(0 <= w <= 0.4 for w in third) and max(third) > 0.2
        assert all(0 <= w <= 1.0 for w in late)
        assert c._wait(1, 0.3) == 0.3
        assert c._wait(1, 500) == c.retry_after_max


def test_429_exhausted_raises_rate_limit_error(fake_llm: FakeLLMServer) -> None:
    fake_llm.responder = lambda req: FakeReply(status=429, text="slow down")
    with make_client(max_retries=2) as c, pytest.raises(LLMRateLimitError, match="429") as err:
        c.chat(MESSAGES)
    assert len(fake_llm.requests) == 3
    assert err.value.attempts == 3


def test_500_then_success(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(status=500), FakeReply(status=503), "ok")
    answer = client.chat(MESSAGES)
    assert answer.text == "ok" and answer.attempts == 3


def test_retries_are_bounded(fake_llm: FakeLLMServer) -> None:
    fake_llm.responder = lambda req: FakeReply(status=500, text="boom")
    with make_client(max_retries=3) as c, pytest.raises(LLMServerError, match="500") as err:
        c.chat(MESSAGES)
    assert len(fake_llm.requests) == 4
    assert "4 attempts" in str(err.value)


def test_no_retries_when_max_retries_is_zero(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue(FakeReply(status=500))
    with make_client(max_retries=0) as c, pytest.raises(LLMServerError):
        c.chat(MESSAGES)
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_a_read_timeout_is_not_sent_again(fake_llm: FakeLLMServer, stream: bool) -> None:
    # Issue 23: a slow reply (a long prompt on a local model; a proxy holding the stream until it is
    # complete) was sent again after the timeout, so the server answered the same request twice.
    fake_llm.enqueue(FakeReply(text="late", delay=1.0), "second")
    with make_client(timeout=0.3, max_retries=2) as c, pytest.raises(LLMTimeoutError, match="within 0.3 s") as err:
        c.chat(MESSAGES, stream=stream)
    assert len(fake_llm.requests) == 1
    assert "not sent again" in str(err.value) and "timeout under [llm]" in str(err.value)
    assert err.value.attempts == 1


def test_a_connect_timeout_is_retried(fake_llm: FakeLLMServer) -> None:
    # A request that never reached the server is safe to send again.
    import httpx2

    real_send, calls = httpx2.Client.send, []

    def send(self, request, **kwargs):
        calls.append(request.url)
        if len(calls) == 1:
            raise httpx2.ConnectTimeout("connect timed out", request=request)
        return real_send(self, request, **kwargs)

    fake_llm.enqueue("in time")
    with pytest.MonkeyPatch.context() as patch, make_client(timeout=5) as c:
        patch.setattr(httpx2.Client, "send", send)
        answer = c.chat(MESSAGES, stream=False)
    assert answer.text == "in time" and answer.attempts == 2
    assert len(calls) == 2 and len(fake_llm.requests) == 1


# --------------------------------------------------------------------------- errors that are not retried


@pytest.mark.parametrize("status", [401, 403])
def test_auth_error_is_immediate(fake_llm: FakeLLMServer, client: LLMClient, status: int) -> None:
    fake_llm.enqueue(FakeReply(status=status, text="Incorrect API key provided"))
    with pytest.raises(LLMAuthError, match=rf"\({status}") as err:
        client.chat(MESSAGES)
    assert len(fake_llm.requests) == 1
    assert "OPENAI_API_KEY" in str(err.value)
    assert str(config_path()) in str(err.value)
    assert err.value.status_code == status


def test_400_is_not_retried(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(status=400, text="temperature is not supported with this model"))
    with pytest.raises(LLMRequestError, match="400: temperature is not supported"):
        client.chat(MESSAGES)
    assert len(fake_llm.requests) == 1


def test_404_names_the_model(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(status=404, text="The model `fake-model` does not exist"))
    with pytest.raises(LLMRequestError, match="no model 'fake-model'.*EHR_MAGIC_MODEL"):
        client.chat(MESSAGES)
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_malformed_json(fake_llm: FakeLLMServer, client: LLMClient, stream: bool) -> None:
    fake_llm.enqueue(FakeReply(body='{"choices": [{"message": '))
    with pytest.raises(LLMResponseError, match="malformed JSON|no stream events"):
        client.chat(MESSAGES, stream=stream)
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("stream", [True, False])
def test_empty_choices(fake_llm: FakeLLMServer, client: LLMClient, stream: bool) -> None:
    fake_llm.enqueue(FakeReply(empty_choices=True))
    with pytest.raises(LLMResponseError, match="no choices"):
        client.chat(MESSAGES, stream=stream)
    assert len(fake_llm.requests) == 1


def test_truncated_stream(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(text="one two three four five six seven eight", truncate_stream=True))
    pieces: list[str] = []
    with pytest.raises(LLMResponseError, match="ended early"):
        client.chat(MESSAGES, stream=True, on_token=pieces.append)
    assert pieces and len(fake_llm.requests) == 1


def test_stream_without_finish_reason_counts_as_truncated(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(text="half an answer", finish_reason=None))
    with pytest.raises(LLMResponseError, match="no finish_reason"):
        client.chat(MESSAGES, stream=True)


def test_finish_reason_length_is_returned(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(text="cut", finish_reason="length"))
    assert client.chat(MESSAGES).finish_reason == "length"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_names_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("EHR_MAGIC_MODEL", "fake-model")
    with make_client(max_retries=1) as c, pytest.raises(LLMConnectionError) as err:
        c.chat(MESSAGES)
    assert str(err.value).startswith(f"Cannot reach the model server at {url}")
    assert "OPENAI_BASE_URL" in str(err.value)
    assert err.value.attempts == 2


# --------------------------------------------------------------------------- azure


def test_azure_client_uses_deployment_route(fake_llm: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", fake_llm.root_url)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-test-key")
    monkeypatch.setenv("AZURE_OPENAI_DEPLOYMENT", "gpt4o-ehr")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-10-21")
    fake_llm.enqueue("from azure", "streamed from azure")

    with make_client() as c:
        assert c.settings.provider == "azure"
        assert c.chat(MESSAGES, stream=False).text == "from azure"
        pieces: list[str] = []
        assert c.chat(MESSAGES, stream=True, on_token=pieces.append).text == "streamed from azure"
        assert c.endpoint == f"{fake_llm.root_url}/openai/deployments/gpt4o-ehr"

    for request in fake_llm.requests:
        assert request.path == "/openai/deployments/gpt4o-ehr/chat/completions"
        assert request.query["api-version"] == "2024-10-21"
        assert request.headers["api-key"] == "azure-test-key"
        assert "authorization" not in request.headers
    assert len(pieces) > 1


# --------------------------------------------------------------------------- interrupts and threads


def test_keyboard_interrupt_propagates_and_is_logged(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue("a long streamed answer")

    def stop(piece: str) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        client.chat(MESSAGES, stream=True, on_token=stop)
    (entry,) = client.audit.entries()
    assert entry.status == "interrupted"
    assert entry.response_text == "a "



def test_one_client_shared_by_threads(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.responder = lambda req: "answer to " + req["messages"][-1]["content"]
    results: dict[str, str] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(5):
                question = f"q{n}-{i}"
                text = client.chat([{"role": "user", "content": question}], stream=bool(i % 2)).text
                results[question] = text
        except BaseException as exc:  # noqa: BLE001 - the thread's boundary: reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 40 and all(v == f"answer to {k}" for k, v in results.items())
    assert len(client.audit.entries()) == 40


# --------------------------------------------------------------------------- audit rows from calls


def test_successful_call_is_audited(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(text="df.height", usage={"prompt_tokens": 21, "completion_tokens": 3}))
    answer = client.chat(MESSAGES, purpose="debug")

    entry = client.audit.get(answer.call_id)
    assert entry.status == "ok" and entry.error is None
    assert entry.endpoint == fake_llm.base_url
    assert (entry.provider, entry.model, entry.purpose) == ("compatible", "fake-model", "debug")
    assert entry.messages == MESSAGES
    assert entry.request["temperature"] == 0.0
    assert entry.response_text == "df.height"
    assert (entry.prompt_tokens, entry.completion_tokens, entry.tokens_estimated) == (21, 3, False)
    assert entry.latency_s == pytest.approx(answer.latency_s)
    assert entry.attempts == 1 and entry.finish_reason == "stop"


def test_failed_call_is_audited(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(status=500), FakeReply(status=400, text="bad request"))
    with pytest.raises(LLMRequestError):
        client.chat(MESSAGES)
    (entry,) = client.audit.entries()
    assert entry.status == "error"
    assert "400: bad request" in entry.error
    assert entry.attempts == 2
    assert entry.response_text is None


def test_estimated_tokens_are_audited(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue(FakeReply(text="x = 1", usage=False))
    answer = client.chat(MESSAGES)
    entry = client.audit.get(answer.call_id)
    assert entry.tokens_estimated is True
    assert (entry.prompt_tokens, entry.completion_tokens) == (answer.prompt_tokens, answer.completion_tokens)


def test_api_key_is_never_stored(fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    key = "sk-proj-VERYSECRET-0123456789abcdef"
    fake_llm.enqueue("ok", FakeReply(status=401, text=f"Incorrect API key provided: {key}"))
    log = AuditLog(tmp_path / "audit.sqlite")
    with make_client(api_key=key, audit=log) as c:
        c.chat([{"role": "user", "content": "hello"}])
        with pytest.raises(LLMAuthError):
            c.chat([{"role": "user", "content": "hello again"}])
    assert fake_llm.requests[0].headers["authorization"] == f"Bearer {key}"
    assert len(log.entries()) == 2
    files = list(tmp_path.glob("audit.sqlite*"))
    assert files
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    assert "[API KEY]" in log.entries()[1].error


def test_audit_failure_does_not_break_the_call(fake_llm: FakeLLMServer, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where a folder should be")
    fake_llm.enqueue("one", "two")
    with make_client(audit=AuditLog(blocker / "audit.sqlite")) as c:
        with pytest.warns(RuntimeWarning, match="Cannot write the audit log"):
            first = c.chat(MESSAGES)
        second = c.chat(MESSAGES)  # warns only once
    assert (first.text, first.call_id, second.text) == ("one", None, "two")


def test_audit_can_be_turned_off(fake_llm: FakeLLMServer) -> None:
    fake_llm.enqueue("ok")
    with make_client(audit=False) as c:
        assert c.chat(MESSAGES).call_id is None
    assert not AuditLog().path.exists()


def test_default_audit_log_lives_in_the_data_dir(fake_llm: FakeLLMServer, client: LLMClient) -> None:
    fake_llm.enqueue("ok")
    answer = client.chat(MESSAGES)
    assert client.audit.path == Path(os.environ["EHR_MAGIC_DATA_DIR"]) / "audit.sqlite"
    assert AuditLog().get(answer.call_id).response_text == "ok"


# --------------------------------------------------------------------------- settings


def write_config(text: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence_explicit_over_overrides_over_file_over_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    monkeypatch.setenv("EHR_MAGIC_MODEL", "env-model")
    assert resolve_settings().model == "env-model"

    write_config('[llm]\nmodel = "file-model"\ntimeout = 12\n')
    assert resolve_settings().model == "file-model"

    settings = resolve_settings(overrides={"model": "notebook-model"})
    assert settings.model == "notebook-model"
    assert settings.timeout == 12.0
    assert settings.api_key == "env-key"

    settings = resolve_settings(overrides={"model": "notebook-model"}, model="arg-model")
    assert settings.model == "arg-model"
    assert settings.sources["model"] == "argument"

    assert resolve_settings(model=None).model == "file-model"  # None means "not given"
    assert resolve_settings(overrides={"model": None}).model == "file-model"


def test_api_key_from_file_beats_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    write_config('[llm]\nmodel = "m"\napi_key = "file-key"\n')
    assert resolve_settings().api_key == "file-key"


def test_values_are_coerced() -> None:
    settings = resolve_settings(
        overrides={"temperature": "0.5", "stream": "false", "max_retries": "2"},
        model="m", base_url="http://localhost:8000/v1",
    )
    assert (settings.temperature, settings.stream, settings.max_retries) == (0.5, False, 2)


def test_invalid_value_is_a_config_error() -> None:
    write_config('[llm]\nmodel = "m"\nmax_retries = "many"\n')
    with pytest.raises(ConfigError, match=r"max_retries.*\[llm\].*whole number"):
        resolve_settings(base_url="http://localhost:8000/v1")


def test_provider_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EHR_MAGIC_MODEL", "m")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert resolve_settings().provider == "openai"
    assert resolve_settings().endpoint == "https://api.openai.com/v1"

    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    assert resolve_settings().provider == "compatible"

    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az")
    azure = resolve_settings()
    assert azure.provider == "azure"
    assert (azure.deployment, azure.api_key, azure.api_version) == ("m", "az", "2024-10-21")

    # a base URL set at a higher level wins over an Azure endpoint in the environment
    write_config('[llm]\nbase_url = "http://gpu-box:8000/v1"\n')
    assert resolve_settings().provider == "compatible"
    assert resolve_settings(provider="azure").provider == "azure"


def test_compatible_server_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EHR_MAGIC_MODEL", "llama3")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1")
    settings = resolve_settings()
    assert settings.api_key == "not-needed"
    assert describe_settings(settings)["api_key"] == "(none needed)"


def test_missing_model_message() -> None:
    with pytest.raises(ConfigError) as err:
        resolve_settings(api_key="k")
    message = str(err.value)
    assert message.startswith("No model configured: set EHR_MAGIC_MODEL, pass --model")
    assert str(config_path()) in message


def test_missing_key_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EHR_MAGIC_MODEL", "gpt-4o")
    with pytest.raises(ConfigError, match="No OpenAI API key found: set OPENAI_API_KEY") as err:
        resolve_settings()
    assert "OPENAI_BASE_URL" in str(err.value)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com")
    with pytest.raises(ConfigError, match="set AZURE_OPENAI_API_KEY"):
        resolve_settings()


def test_malformed_toml_names_the_file() -> None:
    path = write_config("[llm\nmodel = \n")
    with pytest.raises(ConfigError, match=f"Cannot parse {path}: .*\\. Fix the TOML syntax"):
        resolve_settings()


def test_unknown_key_suggests_the_right_one() -> None:
    write_config('[llm]\nmodle = "gpt-4o"\n')
    with pytest.raises(ConfigError, match="Unknown setting 'modle'.*did you mean 'model'"):
        resolve_settings()


def test_save_setting_round_trips_and_keeps_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_config('# my settings\n[memory]\nenabled = true\n\n[llm]\n# the model\nmodel = "old"\n')
    save_setting("model", 'gpt-4o "mini"\\x')
    save_setting("timeout", 30)
    save_setting("base_url", "http://localhost:8000/v1")

    text = path.read_text()
    assert "# my settings" in text and "# the model" in text and "[memory]" in text
    settings = resolve_settings()
    assert settings.model == 'gpt-4o "mini"\\x'
    assert settings.timeout == 30.0
    assert settings.provider == "compatible"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temp files left

    save_setting("base_url", None)
    assert "base_url" not in path.read_text()


HAND_WRITTEN = """\
# ehr-magic settings, written by hand
[memory]  # where cells are kept
enabled = true  # on for every kernel

[llm]
# the hospital's gateway
model = "old-model"  # the usual one
base_url = "http://gateway.local/v1"
timeout = 10

[notes.gateway]  # for colleagues, kept as it is
owners = [
  "data team",  # first call
  "it desk",
]
"""


def test_save_setting_keeps_the_users_comments_layout_and_other_sections() -> None:
    path = write_config(HAND_WRITTEN)
    save_setting("model", "gpt-4o")
    save_setting("temperature", 0.2)
    save_setting("base_url", None)
    assert path.read_text() == HAND_WRITTEN.replace('"old-model"', '"gpt-4o"').replace(
        'base_url = "http://gateway.local/v1"\ntimeout = 10\n', "timeout = 10\ntemperature = 0.2\n")
    settings = resolve_settings(api_key="sk-test")
    assert (settings.model, settings.temperature, settings.timeout) == ("gpt-4o", 0.2, 10.0)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("layout", ['llm.model = "old"  # a dotted key\n', 'llm = { model = "old" }  # inline\n'])
def test_save_setting_keeps_comments_in_any_layout(layout: str) -> None:
    """Layouts the old line editor could not edit made it rewrite the file without its comments."""
    path = write_config(f"# top comment\n{layout}\n[memory]\nenabled = true  # stays\n")
    save_setting("timeout", 30)
    text = path.read_text()
    assert "# top comment" in text and "enabled = true  # stays" in text and layout.split("#")[1] in text
    assert (resolve_settings(api_key="sk-test").model, resolve_settings(api_key="sk-test").timeout) == ("old", 30.0)


def test_save_setting_refuses_an_llm_that_is_not_a_table() -> None:
    path = write_config('llm = "gpt-4o"  # a mistake\n')
    with pytest.raises(ConfigError, match=r"'llm' must be a table \(\[llm\]\) with one key per setting"):
        save_setting("model", "gpt-4o")
    assert path.read_text() == 'llm = "gpt-4o"  # a mistake\n'


def test_save_setting_creates_the_file() -> None:
    path = save_setting("model", "gpt-4o")
    assert path == config_path()
    assert path.read_text() == '[llm]\nmodel = "gpt-4o"\n'


def test_save_setting_rejects_unknown_keys_and_bad_values() -> None:
    with pytest.raises(ConfigError, match="did you mean 'temperature'"):
        save_setting("temprature", 0.2)
    with pytest.raises(ConfigError, match="'stream'"):
        save_setting("stream", "maybe")


def test_describe_settings_masks_the_key() -> None:
    settings = resolve_settings(model="m", api_key="sk-abcdefghijklmnop1234")
    shown = describe_settings(settings)
    assert shown["api_key"] == "sk-...1234"
    assert "abcdefghijklmnop" not in repr(shown) + repr(settings)
    assert shown["endpoint"] == "https://api.openai.com/v1"
