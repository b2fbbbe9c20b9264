"""The LLM layer: settings, one client for OpenAI / Azure / compatible servers, and
the audit log of every call.

    from ehr_magic.llm import LLMClient, resolve_settings
    client = LLMClient(resolve_settings())          # logs to data_dir()/audit.sqlite
    answer = client.chat([{"role": "user", "content": "..."}], on_token=print)
"""

from __future__ import annotations

from ehr_magic.llm.audit import AuditEntry, AuditLog, AuditLogError
from ehr_magic.llm.client import Completion, LLMClient
from ehr_magic.llm.config import (
    LLMSettings,
    config_path,
    describe_settings,
    mask_key,
    resolve_settings,
    save_setting,
)
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

__all__ = [
    "AuditEntry",
    "AuditLog",
    "AuditLogError",
    "Completion",
    "LLMAuthError",
    "LLMClient",
    "LLMConnectionError",
    "LLMContextError",
    "LLMError",
    "LLMRateLimitError",
    "LLMRequestError",
    "LLMResponseError",
    "LLMServerError",
    "LLMSettings",
    "LLMTimeoutError",
    "config_path",
    "describe_settings",
    "estimate_prompt_tokens",
    "estimate_tokens",
    "mask_key",
    "resolve_settings",
    "save_setting",
]
