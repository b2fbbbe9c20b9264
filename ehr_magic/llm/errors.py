"""Errors of the LLM layer. Each message says what went wrong and what to check;
front ends show it without a traceback (they are ``EhrMagicError``s)."""

from __future__ import annotations

from ehr_magic.errors import EhrMagicError


class LLMError(EhrMagicError):
    """A model call failed. ``status_code`` is the HTTP status, if there was one."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts


class LLMAuthError(LLMError):
    """401/403: the key is wrong, expired, or lacks access to the model."""


class LLMRateLimitError(LLMError):
    """429 after all retries."""


class LLMTimeoutError(LLMError):
    """No answer within the timeout, after all retries."""


class LLMConnectionError(LLMError):
    """The server cannot be reached (refused, DNS, TLS...), after all retries."""


class LLMServerError(LLMError):
    """5xx after all retries."""


class LLMRequestError(LLMError):
    """A 4xx other than 401/403/429: unknown model, bad parameters. Not retried."""


class LLMContextError(LLMRequestError):
    """The prompt is longer than the model's context window (a 400 that says so)."""


class LLMResponseError(LLMError):
    """The answer cannot be used: malformed JSON, no choices, a stream cut short."""
