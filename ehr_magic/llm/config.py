"""Which model to call, where, and with which key.

Settings come from four levels, highest first:

1. explicit arguments (``resolve_settings(model=...)``, a ``--model`` flag);
2. overrides from the notebook (``%config EhrMagics.model = ...``);
3. the ``[llm]`` section of ``config_dir()/config.toml``;
4. the usual environment variables (``EHR_MAGIC_MODEL``, ``OPENAI_API_KEY``,
   ``OPENAI_BASE_URL``, ``AZURE_OPENAI_*``, ``OPENAI_API_VERSION``).

The provider is inferred when not set: ``azure`` if an Azure endpoint is configured,
``compatible`` (any OpenAI-compatible server: vLLM, Ollama, llama.cpp, a gateway) if a
base URL is configured, ``openai`` otherwise. A missing setting raises one
``ConfigError`` sentence that says what to set.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Mapping

import tomlkit

from ehr_magic import files
from ehr_magic.errors import ConfigError, sentences
from ehr_magic.paths import config_dir
from ehr_magic.text import closest

Provider = Literal["openai", "azure", "compatible"]
PROVIDERS: tuple[str, ...] = ("openai", "azure", "compatible")

CONFIG_FILENAME = "config.toml"
SECTION = "llm"
OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_AZURE_API_VERSION = "2024-10-21"
NO_KEY_PLACEHOLDER = "not-needed"
MIN_CONTEXT_WINDOW = 512  # below this no useful prompt fits
"""Sent as the API key to local OpenAI-compatible servers that need none."""


@dataclass
class LLMSettings:
    """Everything needed to reach one chat model. ``api_key`` never appears in ``repr``."""

    provider: Provider
    model: str
    api_key: str = field(repr=False)
    base_url: str | None = None
    azure_endpoint: str | None = None
    api_version: str | None = None
    deployment: str | None = None
    temperature: float | None = 0.0
    """``None`` sends no temperature (set ``temperature = "default"`` in the config)."""
    timeout: float = 60.0
    max_retries: int = 4
    stream: bool = True
    context_window: int | None = None
    """Tokens the model reads at most (prompt and reply); ``None``: ask the server, else a default."""
    sources: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    """Where each value came from, e.g. ``{"model": "env EHR_MAGIC_MODEL"}``."""

    @property
    def endpoint(self) -> str:
        """The URL requests go to (without the chat path), for messages and the audit log."""
        if self.provider == "azure":
            root = (self.azure_endpoint or "").rstrip("/")
            return f"{root}/openai/deployments/{self.deployment or self.model}"
        return (self.base_url or OPENAI_BASE_URL).rstrip("/")


SETTING_KEYS: tuple[str, ...] = tuple(f.name for f in fields(LLMSettings) if f.name != "sources")

# Environment variables per setting, first match wins. The API key is provider-dependent.
_ENV: dict[str, tuple[str, ...]] = {
    "model": ("EHR_MAGIC_MODEL",),
    "base_url": ("OPENAI_BASE_URL",),
    "azure_endpoint": ("AZURE_OPENAI_ENDPOINT",),
    "api_version": ("OPENAI_API_VERSION", "AZURE_OPENAI_API_VERSION"),
    "deployment": ("AZURE_OPENAI_DEPLOYMENT",),
    "context_window": ("EHR_MAGIC_CONTEXT_WINDOW",),
}
_KEY_ENV = {"openai": "OPENAI_API_KEY", "compatible": "OPENAI_API_KEY", "azure": "AZURE_OPENAI_API_KEY"}


def config_path() -> Path:
    """The user config file: ``config_dir()/config.toml``."""
    return config_dir() / CONFIG_FILENAME


# --------------------------------------------------------------------------- reading


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"Cannot parse {path}: {sentences(exc)} Fix the TOML syntax or delete the file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {path}: {sentences(exc)} Check that the file is readable.") from None


def read_config_file(path: Path | None = None) -> dict[str, Any]:
    """The ``[llm]`` section of the config file (empty if the file does not exist)."""
    path = path or config_path()
    data = _read_toml(path)
    section = data.get(SECTION, {})
    if not isinstance(section, dict):
        raise ConfigError(f"In {path}, 'llm' must be a table ([llm]) with one key per setting.")
    _check_keys(section, f"under [llm] in {path}")
    return section


def _check_keys(values: Mapping[str, Any], where: str) -> None:
    for key in values:
        if key not in SETTING_KEYS:
            close = closest(key, SETTING_KEYS)
            hint = f"did you mean '{close}'?" if close else f"valid keys are {', '.join(SETTING_KEYS)}."
            raise ConfigError(f"Unknown setting '{key}' {where}: {hint}")


def _coerce(key: str, value: Any, where: str) -> Any:
    """Turn a value from any level into the type the field expects."""
    if value is None:
        return None
    try:
        if key == "temperature" and isinstance(value, str) and value.strip().lower() in ("default", "none", "omit"):
            return "default"  # send no temperature (models that only accept their default)
        if key in ("temperature", "timeout"):
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not math.isfinite(number) or number < 0:
                raise ValueError
            return number
        if key == "max_retries":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            number = int(value)
            if number < 0:
                raise ValueError
            return number
        if key == "context_window":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            number = int(value)
            if number < MIN_CONTEXT_WINDOW:
                raise ValueError
            return number
        if key == "stream":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if key == "provider":
            text = str(value).strip().lower()
            if text not in PROVIDERS:
                raise ValueError
            return text
        if not isinstance(value, str):
            raise ValueError
        return value.strip() or None
    except (TypeError, ValueError):
        expected = {
            "temperature": "a number >= 0, or \"default\" to send none",
            "timeout": "a number of seconds >= 0",
            "max_retries": "a whole number >= 0",
            "context_window": f"a whole number of tokens >= {MIN_CONTEXT_WINDOW}, e.g. 8192",
            "stream": "true or false",
            "provider": " or ".join(repr(p) for p in PROVIDERS),
        }.get(key, "a string")
        raise ConfigError(f"Invalid value {value!r} for '{key}' {where}: expected {expected}.") from None


def _env_level() -> dict[str, tuple[Any, str]]:
    level: dict[str, tuple[Any, str]] = {}
    for key, names in _ENV.items():
        for name in names:
            value = os.environ.get(name, "").strip()
            if value:
                level[key] = (value, f"env {name}")
                break
    return level


def resolve_settings(
    *,
    overrides: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
    **explicit: Any,
) -> LLMSettings:
    """Combine explicit arguments > ``overrides`` > config file > environment > defaults.

    Explicit arguments that are ``None`` count as not given, so a front end can pass
    ``model=args.model`` unconditionally. Raises ``ConfigError`` naming what to set.
    """
    path = config_file or config_path()
    unknown = [k for k in explicit if k not in SETTING_KEYS]
    if unknown:
        raise TypeError(f"resolve_settings() got unknown settings: {', '.join(unknown)}")
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    _check_keys(overrides, "in the notebook overrides (%config EhrMagics)")

    levels: list[dict[str, tuple[Any, str]]] = [
        {k: (_coerce(k, v, "passed as an argument"), "argument") for k, v in explicit.items() if v is not None},
        {k: (_coerce(k, v, "in %config EhrMagics"), "%config") for k, v in overrides.items()},
        {k: (_coerce(k, v, f"under [llm] in {path}"), str(path)) for k, v in read_config_file(path).items()},
        {k: (_coerce(k, v, f"in env {src[4:]}"), src) for k, (v, src) in _env_level().items()},
    ]
    for level in levels:  # empty strings count as unset
        for key in [k for k, (v, _) in level.items() if v is None]:
            del level[key]

    def pick(key: str) -> tuple[Any, str] | None:
        for level in levels:
            if key in level:
                return level[key]
        return None

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in SETTING_KEYS:
        found = pick(key)
        if found is not None:
            values[key], sources[key] = found

    provider: Provider | None = values.get("provider")  # a valid name, or None (read checks it)
    if provider is None:
        # The highest level that says where to connect decides the provider.
        provider = "openai"
        for level in levels:
            if "azure_endpoint" in level:
                provider = "azure"
                break
            if "base_url" in level:
                provider = "compatible"
                break
        sources["provider"] = "inferred"

    if provider == "azure":
        if not values.get("azure_endpoint"):
            raise ConfigError(
                "No Azure endpoint configured: set AZURE_OPENAI_ENDPOINT, or add "
                f'azure_endpoint = "https://<resource>.openai.azure.com" under [llm] in {path}.'
            )
        if not values.get("model") and values.get("deployment"):
            values["model"], sources["model"] = values["deployment"], sources["deployment"]
        if not values.get("deployment") and values.get("model"):
            values["deployment"], sources["deployment"] = values["model"], sources["model"]
        if not values.get("api_version"):
            values["api_version"], sources["api_version"] = DEFAULT_AZURE_API_VERSION, "default"

    if not values.get("model"):
        extra = " (or AZURE_OPENAI_DEPLOYMENT)" if provider == "azure" else ""
        raise ConfigError(
            f"No model configured: set EHR_MAGIC_MODEL{extra}, pass --model "
            f'(or %config EhrMagics.model = "..."), or add model = "..." under [llm] in {path}.'
        )

    if not values.get("api_key"):
        env_name = _KEY_ENV[provider]
        env_value = os.environ.get(env_name, "").strip()
        if env_value:
            values["api_key"], sources["api_key"] = env_value, f"env {env_name}"
        elif provider == "compatible":
            values["api_key"], sources["api_key"] = NO_KEY_PLACEHOLDER, "placeholder (no key needed)"
        elif provider == "azure":
            raise ConfigError(
                f"No API key for Azure OpenAI at {values['azure_endpoint']}: set AZURE_OPENAI_API_KEY, "
                f'or add api_key = "..." under [llm] in {path}.'
            )
        else:
            raise ConfigError(
                f'No OpenAI API key found: set OPENAI_API_KEY, or add api_key = "..." under [llm] in {path} '
                "(for a local OpenAI-compatible server, set OPENAI_BASE_URL instead)."
            )

    if provider == "compatible" and not values.get("base_url"):
        raise ConfigError(
            "Provider 'compatible' needs a server URL: set OPENAI_BASE_URL, or add "
            f'base_url = "http://localhost:8000/v1" under [llm] in {path}.'
        )

    defaults = {f.name: f.default for f in fields(LLMSettings)
                if f.name in ("temperature", "timeout", "max_retries", "stream")}
    for key, default in defaults.items():
        if key not in values:
            values[key], sources[key] = default, "default"

    return LLMSettings(
        provider=provider,
        model=values["model"],
        api_key=values["api_key"],
        base_url=values.get("base_url"),
        azure_endpoint=values.get("azure_endpoint"),
        api_version=values.get("api_version"),
        deployment=values.get("deployment"),
        temperature=None if values["temperature"] == "default" else values["temperature"],
        timeout=values["timeout"],
        max_retries=values["max_retries"],
        stream=values["stream"],
        context_window=values.get("context_window"),
        sources=sources,
    )


# --------------------------------------------------------------------------- display


def mask_key(key: str | None) -> str:
    """Show enough of a key to recognise it, never enough to use it."""
    if not key:
        return "(not set)"
    if key == NO_KEY_PLACEHOLDER:
        return "(none needed)"
    if len(key) <= 12:
        return "****"
    return f"{key[:3]}...{key[-4:]}"


def describe_settings(settings: LLMSettings) -> dict[str, Any]:
    """The settings as a plain dict for display (``%ehr config``, ``ehr-magic config``), key masked."""
    out: dict[str, Any] = {"endpoint": settings.endpoint}
    for key in SETTING_KEYS:
        value = getattr(settings, key)
        out[key] = mask_key(value) if key == "api_key" else value
    out["sources"] = dict(settings.sources)
    return out


# --------------------------------------------------------------------------- writing


def save_setting(key: str, value: Any, *, config_file: Path | None = None) -> Path:
    """Write ``key = value`` under ``[llm]`` in the config file (``None`` removes the key).

    The file is edited with tomlkit, so the user's comments, layout and other sections
    stay as they were; it is replaced atomically and kept private (0600), since it may
    hold an API key. Returns the path written.
    """
    path = config_file or config_path()
    _check_keys({key: value}, "for save_setting()")
    coerced = _coerce(key, value, f"for save_setting() (writing {path})")
    _read_toml(path)  # a file that does not parse is named, with what to do, before anything is written
    document = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    section = document.get(SECTION)
    if section is not None and not isinstance(section, dict):
        raise ConfigError(f"In {path}, 'llm' must be a table ([llm]) with one key per setting.")
    if coerced is not None:
        if section is None:
            document[SECTION] = tomlkit.table()
            section = document[SECTION]
        section[key] = coerced
    elif section is not None:
        section.pop(key, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_text(path, tomlkit.dumps(document), private=True)
    return path
