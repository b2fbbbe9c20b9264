"""How many tokens the model reads at most: its context window.

The window bounds the prompt (``ehr_magic.agent.budget``). It comes, in this order, from:

1. the settings (``context_window`` under ``[llm]``, ``EHR_MAGIC_CONTEXT_WINDOW``);
2. the server, asked where each kind of server says it:
   - llama.cpp's ``llama-server``: ``GET /props`` -> ``default_generation_settings.n_ctx``;
   - vLLM: ``GET /v1/models`` -> ``max_model_len`` of the model;
   - llama-cpp-python and LM Studio: ``n_ctx`` / ``loaded_context_length`` in ``/v1/models``
     or LM Studio's ``/api/v0/models``;
   - Ollama: ``POST /api/show`` -> ``num_ctx`` among the model's parameters, else Ollama's own
     default (it silently cuts longer prompts, so we never assume the model's trained length);
3. a default: hosted OpenAI and Azure models read at least 128k tokens; an unknown
   OpenAI-compatible server gets 8,192, small enough for most local set-ups.

Discovery sends no patient data (only the model's name), waits at most a few seconds,
and is remembered per endpoint and model for the life of the process.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ehr_magic.llm.config import LLMSettings

__all__ = ["ContextWindow", "DEFAULT_HOSTED_WINDOW", "DEFAULT_LOCAL_WINDOW", "OLLAMA_DEFAULT_WINDOW",
           "context_window"]

DEFAULT_HOSTED_WINDOW = 128_000
DEFAULT_LOCAL_WINDOW = 8_192
OLLAMA_DEFAULT_WINDOW = 4_096  # Ollama's num_ctx when neither the model nor the server sets one
_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class ContextWindow:
    """A window size and where it came from (for messages: "window 4096 (llama.cpp /props)")."""

    tokens: int
    source: str

    def __str__(self) -> str:
        return f"{self.tokens:,} tokens ({self.source})"


_cache: dict[tuple[str, str], ContextWindow] = {}
_lock = threading.Lock()


def context_window(settings: LLMSettings) -> ContextWindow:
    """The model's window: the setting, else what the server says, else a default."""
    if settings.context_window:
        return ContextWindow(settings.context_window, settings.sources.get("context_window", "settings"))
    if settings.provider != "compatible" or not settings.base_url:
        return ContextWindow(DEFAULT_HOSTED_WINDOW, f"default for {settings.provider} models")
    key = (settings.base_url.rstrip("/"), settings.model)
    with _lock:
        found = _cache.get(key)
    if found is None:
        found = _ask_server(key[0], settings.model) or ContextWindow(
            DEFAULT_LOCAL_WINDOW, "default: the server did not say; set context_window to its real size")
        with _lock:
            _cache[key] = found
    return found


# How servers state the window in an overflow error (OpenAI/vLLM/llama-cpp-python, llama.cpp).
_WINDOW_IN_ERROR = re.compile(r"maximum context length is (\d+)|context window of (\d+)|"
                              r"n_ctx(?:_slot)?\s*[=:]?\s*(\d+)|context size (?:of |is )?\(?(\d+)", re.IGNORECASE)


def learn_from_error(settings: Any, message: str) -> ContextWindow | None:
    """The window a server's context-overflow error states, remembered for that server; ``None``
    when the message states none or the window is set explicitly."""
    match = _WINDOW_IN_ERROR.search(message)
    if match is None or not isinstance(settings, LLMSettings) or settings.context_window:
        return None
    tokens = int(next(g for g in match.groups() if g))
    learned = ContextWindow(tokens, "stated by the server when a prompt was too long")
    if settings.base_url:
        with _lock:
            _cache[(settings.base_url.rstrip("/"), settings.model)] = learned
    return learned


def forget() -> None:
    """Drop remembered windows (a server restarted with another size)."""
    with _lock:
        _cache.clear()


# -- asking servers ----------------------------------------------------------------------------


def _ask_server(base_url: str, model: str) -> ContextWindow | None:
    root = re.sub(r"/v\d+$", "", base_url)
    for probe in _PROBES:
        try:
            found = probe(base_url, root, model)
        except (OSError, ValueError, urllib.error.URLError, json.JSONDecodeError):
            found = None  # not this kind of server
        if found is not None:
            return found
    return None


def _llama_cpp(base_url: str, root: str, model: str) -> ContextWindow | None:
    props = _get_json(f"{root}/props")
    settings = props.get("default_generation_settings") if isinstance(props, dict) else None
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    n_ctx = n_ctx or (_positive(props.get("n_ctx")) if isinstance(props, dict) else None)
    return ContextWindow(n_ctx, "llama.cpp /props") if n_ctx else None


def _openai_models(base_url: str, root: str, model: str) -> ContextWindow | None:
    listing = _get_json(f"{base_url}/models")
    for entry in _entries(listing, model):
        for field, server in (("max_model_len", "vLLM"), ("n_ctx", "llama-cpp-python"),
                              ("context_length", "server"), ("loaded_context_length", "LM Studio")):
            tokens = _positive(entry.get(field)) or _positive((entry.get("meta") or {}).get(field)
                                                                if isinstance(entry.get("meta"), dict) else None)
            if tokens:
                return ContextWindow(tokens, f"{server} /v1/models {field}")
    return None


def _lm_studio(base_url: str, root: str, model: str) -> ContextWindow | None:
    for entry in _entries(_get_json(f"{root}/api/v0/models"), model):
        tokens = _positive(entry.get("loaded_context_length")) or _positive(entry.get("max_context_length"))
        if tokens:
            return ContextWindow(tokens, "LM Studio /api/v0/models")
    return None


def _ollama(base_url: str, root: str, model: str) -> ContextWindow | None:
    shown = _post_json(f"{root}/api/show", {"model": model})
    if not isinstance(shown, dict) or not ({"modelfile", "parameters", "model_info"} & shown.keys()):
        return None
    match = re.search(r"^num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.MULTILINE)
    if match:
        return ContextWindow(int(match.group(1)), "Ollama num_ctx of the model")
    return ContextWindow(OLLAMA_DEFAULT_WINDOW, "Ollama's default num_ctx (set num_ctx or OLLAMA_CONTEXT_LENGTH "
                                                "to give it more)")


_PROBES: tuple[Callable[[str, str, str], ContextWindow | None], ...] = (_llama_cpp, _openai_models, _ollama,
                                                                        _lm_studio)


def _entries(listing: Any, model: str) -> list[dict[str, Any]]:
    """The listed model named ``model``, else the only one listed (a one-model server may answer
    to any name), else none."""
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
    named = [e for e in entries if e.get("id") == model]
    return named or (entries if len(entries) == 1 else [])


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(urllib.request.Request(url), timeout=_TIMEOUT_S) as response:
        return json.loads(response.read(1_000_000))


def _post_json(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
        return json.loads(response.read(1_000_000))


def _positive(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None
