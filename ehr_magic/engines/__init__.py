"""Engines: where the data lives (DuckDB file, PostgreSQL, Spark Connect), behind one interface.

See ``ehr_magic.engines.base`` for the interface and the registry of URL schemes.
"""

from ehr_magic.engines.base import (
    ENGINES,
    QUERY_FAILURES,
    Engine,
    QueryError,
    engine_class,
    is_url,
    open_engine,
    output,
    publish,
    redact,
    register_engine,
)
from ehr_magic.engines.transpile import TranslationError, to_dialect

__all__ = ["ENGINES", "QUERY_FAILURES", "Engine", "QueryError", "TranslationError", "engine_class", "is_url",
           "open_engine", "output", "publish", "redact", "register_engine", "to_dialect"]
