"""Where ehr_magic keeps user files: config, data (memory, audit log) and cache.

Every location can be moved with an environment variable, which is also how the
test suite keeps user files in a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "ehr-magic"


def _dir(env_var: str, default: str) -> Path:
    value = os.environ.get(env_var)
    path = Path(value).expanduser() if value else Path(default)
    return path


def config_dir() -> Path:
    """Directory of the user config file (``config.toml``)."""
    return _dir("EHR_MAGIC_CONFIG_DIR", platformdirs.user_config_dir(APP_NAME))


def data_dir() -> Path:
    """Directory of durable user data: memory store, audit log."""
    return _dir("EHR_MAGIC_DATA_DIR", platformdirs.user_data_dir(APP_NAME))


def cache_dir() -> Path:
    """Directory of re-creatable files: downloaded datasets, built demo databases."""
    return _dir("EHR_MAGIC_CACHE_DIR", platformdirs.user_cache_dir(APP_NAME))
