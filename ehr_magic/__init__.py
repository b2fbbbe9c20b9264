"""ehr-magic: a notebook-native assistant for electronic health record analysis."""

from __future__ import annotations

from typing import Any

from ehr_magic.db import EHR, connect
from ehr_magic.version import __version__

__all__ = ["EHR", "connect", "__version__"]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the side panel (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "@ehr-magic/panel"}]


def load_ipython_extension(ip: Any) -> None:  # IPython's hook: ip is the InteractiveShell
    """``%load_ext ehr_magic``: the magic, and the side panel's comm over the same session."""
    from ehr_magic.magic import connect_at_load
    from ehr_magic.magic import load_ipython_extension as load_magic
    from ehr_magic.panel import register_comm_target

    magics = load_magic(ip)
    register_comm_target(ip, magics)
    connect_at_load(magics)


def unload_ipython_extension(ip: Any) -> None:
    from ehr_magic.magic import unload_ipython_extension as unload_magic
    from ehr_magic.panel import unregister_comm_target

    unregister_comm_target(ip)
    unload_magic(ip)
