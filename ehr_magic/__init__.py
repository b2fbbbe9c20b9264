"""ehr-magic: a notebook-native assistant for electronic health record analysis."""

from __future__ import annotations

from ehr_magic.data import EHR, connect
from ehr_magic.version import __version__

__all__ = ["EHR", "connect", "__version__"]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the side panel (for `jupyter labextension develop`)."""
    return [{"src": "labextension", "dest": "@ehr-magic/panel"}]


def load_ipython_extension(ip) -> None:  # noqa: ANN001 - IPython's hook signature
    """``%load_ext ehr_magic``."""
    from ehr_magic.magic import load_ipython_extension as load

    load(ip)


def unload_ipython_extension(ip) -> None:  # noqa: ANN001
    from ehr_magic.magic import unload_ipython_extension as unload

    unload(ip)
