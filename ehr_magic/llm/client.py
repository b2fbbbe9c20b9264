"""One way to call a chat model: ``LLMClient.chat(messages) -> Completion``.

All traffic goes through the ``openai`` package (``OpenAI`` or ``AzureOpenAI``, built
once per client) with the SDK's own retries turned off: this module owns the retry
policy so that it is bounded, visible in the audit log and testable:

* retried: connection errors and timeouts before the request reached the server, 408, 429
  and 5xx, with exponential backoff
  and full jitter, or exactly the server's ``Retry-After`` / ``retry-after-ms``
  (capped at ``retry_after_max``);
* not retried: a read timeout (the server has the request and may still be answering it:
  sent again, the same work would run twice), other 4xx (a bad key or model name does
  not get better), malformed responses, and a stream that breaks after text has arrived
  (the text was already shown through ``on_token``).

Every call, successful or not, is one row in the ``AuditLog`` (API keys never go
there). Failures raise an ``LLMError`` subclass whose message says what to check; a
``KeyboardInterrupt`` propagates at once and is logged as ``interrupted``.

One ``LLMClient`` may be shared by worker threads: the SDK client is thread-safe and
each call keeps its state on the stack.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, Mapping

import openai

from ehr_magic.errors import ConfigError, sentences
from ehr_magic.llm.audit import AuditLog
from ehr_magic.llm.config import NO_KEY_PLACEHOLDER, OPENAI_BASE_URL, LLMSettings, config_path, resolve_settings
from ehr_magic.llm.errors import (
    LLMAuthError,
    LLMConnectionError,
    LLMContextError,
    LLMError,
    LLMRateLimitError,
    LLMRequestError,
    LLMResponseError,
    LLMServerError,
    LLMTimeoutError,
)
from ehr_magic.llm.tokens import estimate_prompt_tokens, estimate_tokens

# --------------------------------------------------------------------------- results


# How servers word a prompt longer than the model's window (OpenAI, llama.cpp, vLLM, Ollama).
_CONTEXT_OVERFLOW = re.compile(r"context[_ ]length|context window|exceeds? the (?:available )?context|"
                               r"maximum context|too many tokens|prompt is too long|n_ctx", re.IGNORECASE)

@dataclass(frozen=True)
class Completion:
    """One model answer with its accounting."""

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    tokens_estimated: bool
    latency_s: float
    attempts: int
    finish_reason: str | None
    call_id: int | None
    """Id of the audit log row, or ``None`` if the log is off or could not be written."""

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


# --------------------------------------------------------------------------- internals


@dataclass
class _Failure:
    """A failed attempt that may be retried."""

    kind: str  # "timeout" | "connection" | "status"
    status_code: int | None = None
    retry_after: float | None = None
    detail: str = ""


class _EmptyStream(Exception):
    """The server opened an event stream and closed it without a single event."""


class _Retryable(Exception):
    def __init__(self, failure: _Failure) -> None:
        super().__init__(failure.kind)
        self.failure = failure


@dataclass
class _Call:
    """Mutable state of one ``chat()`` call (lives on the caller's stack)."""

    parts: list[str] = field(default_factory=list)
    attempts: int = 0


@dataclass
class _Answer:
    text: str
    model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: str | None


def _whole(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` asking for the whole answer at once rather than a stream."""
    return {k: v for k, v in request.items() if k not in ("stream", "stream_options")}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms``, ``Retry-After`` as
    seconds or as an HTTP date), or ``None``."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            value = float(raw_ms) / 1000
            if math.isfinite(value):
                return max(0.0, value)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        value = float(raw)
        return max(0.0, value) if math.isfinite(value) else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _server_detail(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, Mapping) else inner
        text = str(message or body)
    elif body:
        text = str(body)
    else:
        text = exc.response.reason_phrase or ""
    return _shorten(text)


def _shorten(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _cause(exc: BaseException) -> str:
    inner = exc.__cause__ or exc.__context__
    return _shorten(str(inner) or type(inner).__name__) if inner else _shorten(str(exc))


# --------------------------------------------------------------------------- client


class LLMClient:
    """Calls one chat model as configured by ``settings``.

    ``audit``: the log to write (default: ``AuditLog()`` under ``data_dir()``); pass
    ``False`` to log nothing. ``backoff_base`` / ``backoff_max`` shape the exponential
    backoff (seconds); ``retry_after_max`` caps a server-requested wait.
    """

    def __init__(
        self,
        settings: LLMSettings,
        audit: AuditLog | None | bool = None,
        *,
        backoff_base: float = 0.5,
        backoff_max: float = 20.0,
        retry_after_max: float = 60.0,
    ) -> None:
        self.settings = settings
        if audit is None or audit is True:
            audit = AuditLog()
        self.audit: AuditLog | None = audit if isinstance(audit, AuditLog) else None
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self._sdk = self._make_sdk(settings)

    @classmethod
    def from_config(
        cls,
        *,
        overrides: Mapping[str, Any] | None = None,
        audit: AuditLog | None | bool = None,
        **explicit: Any,
    ) -> LLMClient:
        """``LLMClient(resolve_settings(overrides=..., **explicit), audit)``."""
        return cls(resolve_settings(overrides=overrides, **explicit), audit)

    @staticmethod
    def _make_sdk(settings: LLMSettings) -> openai.OpenAI:
        common: dict[str, Any] = {"api_key": settings.api_key, "timeout": settings.timeout, "max_retries": 0}
        if settings.provider == "azure" and not settings.azure_endpoint:
            raise ConfigError("No Azure endpoint configured: set AZURE_OPENAI_ENDPOINT, or add "
                              f'azure_endpoint = "https://<resource>.openai.azure.com" under [llm] in {config_path()}.')
        try:
            if settings.provider == "azure" and settings.azure_endpoint:
                return openai.AzureOpenAI(
                    azure_endpoint=settings.azure_endpoint,
                    azure_deployment=settings.deployment or settings.model,
                    api_version=settings.api_version,
                    **common,
                )
            return openai.OpenAI(base_url=settings.base_url or OPENAI_BASE_URL, **common)
        except (openai.OpenAIError, ValueError) as exc:
            raise ConfigError(f"Cannot set up the {settings.provider} client: {sentences(exc)} Check the [llm] "
                              "settings.") from None

    @property
    def endpoint(self) -> str:
        """Base URL requests go to (the Azure deployment URL for Azure)."""
        return str(self._sdk.base_url).rstrip("/")

    def close(self) -> None:
        self._sdk.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"LLMClient(provider={self.settings.provider!r}, model={self.settings.model!r}, "
                f"endpoint={self.endpoint!r})")

    # ------------------------------------------------------------------ the call

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        purpose: str = "code",
        stream: bool | None = None,
        on_token: Callable[[str], None] | None = None,
    ) -> Completion:
        """Send ``messages``; return the answer. ``on_token`` receives each streamed
        piece of text as it arrives (streaming defaults to ``settings.stream``).
        ``purpose`` labels the audit row (``"code"``, ``"debug"``, ``"eval"``...)."""
        use_stream = self.settings.stream if stream is None else bool(stream)
        request: dict[str, Any] = {"model": self.settings.model, "messages": list(messages)}
        if self.settings.temperature is not None:
            request["temperature"] = self.settings.temperature
        if use_stream:
            request["stream"] = True
            request["stream_options"] = {"include_usage": True}

        started_at = datetime.now(timezone.utc)
        t0 = time.monotonic()
        call = _Call()
        audit = dict(started_at=started_at, purpose=purpose, request=request)
        try:
            answer = self._with_retries(request, use_stream, on_token, call)
        except LLMError as exc:
            self._record(audit, call, t0, status="error", error=str(exc))
            raise
        except Exception as exc:  # a bug (ours or in on_token): audit it, then re-raise with its traceback
            self._record(audit, call, t0, status="error", error=f"{type(exc).__name__}: {exc}")
            raise
        except BaseException as exc:  # KeyboardInterrupt, SystemExit: log and let it go
            self._record(audit, call, t0, status="interrupted", error=f"interrupted ({type(exc).__name__})")
            raise

        latency = time.monotonic() - t0
        estimated = answer.prompt_tokens is None or answer.completion_tokens is None
        prompt_tokens = answer.prompt_tokens if answer.prompt_tokens is not None else estimate_prompt_tokens(messages)
        completion_tokens = (
            answer.completion_tokens if answer.completion_tokens is not None else estimate_tokens(answer.text)
        )
        call_id = self._record(
            audit, call, t0, status="ok", text=answer.text, model=answer.model,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            tokens_estimated=estimated, finish_reason=answer.finish_reason, latency=latency,
        )
        return Completion(
            text=answer.text,
            model=answer.model or self.settings.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            tokens_estimated=estimated,
            latency_s=latency,
            attempts=call.attempts,
            finish_reason=answer.finish_reason,
            call_id=call_id,
        )

    def _with_retries(
        self,
        request: dict[str, Any],
        use_stream: bool,
        on_token: Callable[[str], None] | None,
        call: _Call,
    ) -> _Answer:
        max_attempts = self.settings.max_retries + 1
        streaming = use_stream
        while True:
            call.attempts += 1
            call.parts.clear()
            try:
                answer = self._attempt(request if streaming else _whole(request), streaming, on_token, call)
            except LLMError as exc:
                exc.attempts = call.attempts
                raise
            except _EmptyStream:
                # llama-cpp-python fails a streamed request after its 200 (a prompt longer than the window)
                # by closing the stream empty, the error only in its log; asked whole, it gives the status.
                streaming = False
                continue
            except _Retryable as retry:
                if call.attempts >= max_attempts:
                    raise self._final_error(retry.failure, call.attempts) from None
                if retry.failure.kind == "connection":
                    streaming = False  # ... or by resetting the connection: the retries ask for a whole answer
                time.sleep(self._wait(call.attempts, retry.failure.retry_after))
                continue
            if use_stream and not streaming and answer.text and on_token is not None:
                on_token(answer.text)  # what the stream would have shown, at once
            return answer

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before the next attempt (attempt counts from 1)."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max)
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return random.uniform(0.0, ceiling)  # full jitter

    def _attempt(
        self,
        request: dict[str, Any],
        use_stream: bool,
        on_token: Callable[[str], None] | None,
        call: _Call,
    ) -> _Answer:
        try:
            if use_stream:
                return self._read_stream(request, on_token, call)
            return self._read_completion(request)
        except openai.APITimeoutError as exc:
            # Only a request that never reached the server is sent again. After a read timeout the
            # server has it and may still be generating (a long prompt on a local model, a proxy that
            # holds a stream back until it is complete): sending it again doubled the work and the cost,
            # the first reply completing unread while the identical second one started.
            if type(exc.__cause__).__name__ in ("ConnectTimeout", "PoolTimeout"):
                raise _Retryable(_Failure("timeout")) from None
            raise LLMTimeoutError(
                f"The model server at {self.endpoint} did not answer within {self.settings.timeout:g} s; it may "
                "still be working on the request, so it was not sent again: raise timeout under [llm] in "
                f"{config_path()} (a long prompt on a local model can take minutes), or try again.",
                attempts=call.attempts) from None
        except openai.APIConnectionError as exc:
            raise _Retryable(_Failure("connection", detail=_cause(exc))) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            detail = _server_detail(exc)
            if status in (408, 429) or status >= 500:
                retry_after = _retry_after(exc.response.headers)
                raise _Retryable(_Failure("status", status, retry_after, detail)) from None
            raise self._status_error(status, detail) from None
        except openai.APIError as exc:  # an error event inside a stream
            raise LLMResponseError(
                f"The model server at {self.endpoint} reported an error mid-answer: {sentences(_shorten(exc.message))} "
                "Try again."
            ) from None
        except json.JSONDecodeError as exc:
            raise LLMResponseError(
                f"The model server at {self.endpoint} sent malformed JSON: {exc.msg} at position {exc.pos}. "
                "Check that the base URL points to an OpenAI-compatible API (it usually ends in /v1)."
            ) from None

    def _read_completion(self, request: dict[str, Any]) -> _Answer:
        response: Any = self._sdk.chat.completions.create(**request)
        if isinstance(response, (str, bytes)) or response is None:
            peek = _shorten(str(response or "(empty body)"), 80)
            raise LLMResponseError(
                f"The model server at {self.endpoint} answered with something that is not JSON ({peek!r}): "
                "check that the base URL points to an OpenAI-compatible API (it usually ends in /v1)."
            )
        choices = getattr(response, "choices", None)
        if not choices:
            raise self._no_choices()
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None)
        finish = getattr(choice, "finish_reason", None)
        refusal = getattr(message, "refusal", None)
        if text is None and refusal:
            text, finish = refusal, "refusal"
        usage = getattr(response, "usage", None)
        return _Answer(
            text=text or "",
            model=getattr(response, "model", None),
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            finish_reason=finish,
        )

    def _read_stream(
        self,
        request: dict[str, Any],
        on_token: Callable[[str], None] | None,
        call: _Call,
    ) -> _Answer:
        stream: Any = self._sdk.chat.completions.create(**request)
        if not isinstance(stream, openai.Stream):
            raise LLMResponseError(
                f"The model server at {self.endpoint} did not stream its answer: set stream = false under [llm] "
                f"in {config_path()} if it cannot stream."
            )
        received = False
        saw_choices = False
        model = None
        usage = None
        finish = None
        try:
            for chunk in stream:
                received = True
                model = getattr(chunk, "model", None) or model
                usage = getattr(chunk, "usage", None) or usage
                for choice in getattr(chunk, "choices", None) or []:
                    if getattr(choice, "index", 0) != 0:
                        continue
                    saw_choices = True
                    delta = getattr(choice, "delta", None)
                    piece = getattr(delta, "content", None) or getattr(delta, "refusal", None)
                    if piece:
                        call.parts.append(piece)
                        if on_token is not None:
                            on_token(piece)
                    finish = getattr(choice, "finish_reason", None) or finish
        except openai.APITimeoutError:
            if not received:
                raise
            raise LLMTimeoutError(
                f"The response stream from {self.endpoint} stalled for more than {self.settings.timeout:g} s "
                f"after {len(''.join(call.parts))} characters: try again, or raise timeout under [llm] in "
                f"{config_path()}."
            ) from None
        except openai.APIConnectionError as exc:
            if not received:
                raise
            raise self._truncated(call, _cause(exc)) from None
        finally:
            stream.close()

        if not received and "text/event-stream" in stream.response.headers.get("content-type", ""):
            raise _EmptyStream()
        if not received:
            raise LLMResponseError(
                f"The model server at {self.endpoint} sent no stream events: check that the base URL points to "
                f"an OpenAI-compatible API, or set stream = false under [llm] in {config_path()} if it cannot stream."
            )
        if not saw_choices:
            raise self._no_choices()
        if finish is None:
            raise self._truncated(call, "no finish_reason")
        return _Answer(
            text="".join(call.parts),
            model=model,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            finish_reason=finish,
        )

    # ------------------------------------------------------------------ messages

    def _key_hint(self) -> str:
        var = "AZURE_OPENAI_API_KEY" if self.settings.provider == "azure" else "OPENAI_API_KEY"
        return f"check {var} or api_key under [llm] in {config_path()}"

    def _url_var(self) -> str:
        return "AZURE_OPENAI_ENDPOINT" if self.settings.provider == "azure" else "OPENAI_BASE_URL"

    def _no_choices(self) -> LLMResponseError:
        return LLMResponseError(
            f"The model server at {self.endpoint} returned no choices for model '{self.settings.model}': "
            "the server may have filtered the answer; try again or rephrase."
        )

    def _truncated(self, call: _Call, why: str) -> LLMResponseError:
        return LLMResponseError(
            f"The response stream from {self.endpoint} ended early after {len(''.join(call.parts))} characters: "
            f"{sentences(why)} The server or a proxy cut it off; try again."
        )

    def _status_error(self, status: int, detail: str) -> LLMError:
        if status in (401, 403):
            what = "rejected the API key" if status == 401 else "refused access with this API key"
            return LLMAuthError(
                f"The model server {what} ({status}: {detail}): {self._key_hint()}.", status_code=status
            )
        if status in (400, 413) and _CONTEXT_OVERFLOW.search(detail):
            return LLMContextError(
                f"The prompt does not fit the model's context window ({status}: {detail}): give the model a larger "
                "window (llama.cpp --ctx-size, Ollama num_ctx, vLLM --max-model-len) or ask with fewer examples "
                "(--shots).", status_code=status)
        if status == 404:
            return LLMRequestError(
                f"The model server at {self.endpoint} has no model '{self.settings.model}' or no such route "
                f"(404: {detail}): check EHR_MAGIC_MODEL and {self._url_var()}.",
                status_code=status,
            )
        return LLMRequestError(
            f"The model server at {self.endpoint} rejected the request ({status}: {detail}): "
            f"check the model name '{self.settings.model}' and the [llm] settings.",
            status_code=status,
        )

    def _final_error(self, failure: _Failure, attempts: int) -> LLMError:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if failure.kind == "timeout":
            return LLMTimeoutError(
                f"The model server at {self.endpoint} did not answer within {self.settings.timeout:g} s "
                f"({tries}): try again, or raise timeout under [llm] in {config_path()}.",
                attempts=attempts,
            )
        if failure.kind == "connection":
            return LLMConnectionError(
                f"Cannot reach the model server at {self.endpoint} ({failure.detail}; {tries}): "
                f"check that it is running and that {self._url_var()} is right.",
                attempts=attempts,
            )
        status = failure.status_code or 0
        if status == 429:
            return LLMRateLimitError(
                f"The model server at {self.endpoint} is rate-limiting requests (429: {failure.detail}; {tries}): "
                "wait a minute and try again, or send fewer requests at once.",
                status_code=status,
                attempts=attempts,
            )
        if status == 408:
            return LLMTimeoutError(
                f"The model server at {self.endpoint} timed out the request (408; {tries}): try again later.",
                status_code=status,
                attempts=attempts,
            )
        if status == 503:
            return LLMServerError(
                f"The model server at {self.endpoint} is not ready (503: {failure.detail}; {tries}): a local server "
                "answers 503 while it loads the model, so wait until it has loaded and try again.",
                status_code=status,
                attempts=attempts,
            )
        return LLMServerError(
            f"The model server at {self.endpoint} failed with {status} ({failure.detail}; {tries}): try again later.",
            status_code=status,
            attempts=attempts,
        )

    # ------------------------------------------------------------------ audit

    def _redact(self, text: str | None) -> str | None:
        key = self.settings.api_key
        if text is None or not key or key == NO_KEY_PLACEHOLDER or len(key) < 6:
            return text
        return text.replace(key, "[API KEY]")

    def _record(
        self,
        audit: dict[str, Any],
        call: _Call,
        t0: float,
        *,
        status: str,
        text: str | None = None,
        error: str | None = None,
        model: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        tokens_estimated: bool = False,
        finish_reason: str | None = None,
        latency: float | None = None,
    ) -> int | None:
        if self.audit is None:
            return None
        try:
            request_json = json.dumps(audit["request"], default=str, ensure_ascii=False)
            return self.audit.record(
                started_at=audit["started_at"],
                endpoint=self.endpoint,
                provider=self.settings.provider,
                model=model or self.settings.model,
                purpose=audit["purpose"],
                request=self._redact(request_json) or "{}",
                response_text=self._redact(text if text is not None else ("".join(call.parts) or None)),
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                tokens_estimated=tokens_estimated,
                latency_s=latency if latency is not None else time.monotonic() - t0,
                status=status,  # type: ignore[arg-type]
                error=self._redact(error),
                attempts=max(call.attempts, 1),
                finish_reason=finish_reason,
            )
        except Exception as exc:  # noqa: BLE001 - boundary: writing the audit log must never break the call
            self.audit._warn(exc)
            return None
