"""IPython integration: ``%load_ext ehr_magic`` registers ``%%ehr``/``%ehr``, the
post-run hook that accepts inserted cells, and binds ``ehr``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ehr_magic.errors import EhrMagicError

if TYPE_CHECKING:  # pragma: no cover
    from ehr_magic.magic.magics import EhrMagics


def load_ipython_extension(ip: Any) -> EhrMagics:
    """Register ``%%ehr``/``%ehr`` and the post-run hook; returns the ``EhrMagics``."""
    from ehr_magic.magic.hook import make_post_run_hook
    from ehr_magic.magic.magics import EhrMagics

    magics = EhrMagics(ip)
    ip.register_magics(magics)
    hook = make_post_run_hook(magics.session)
    ip.events.register("post_run_cell", hook)
    ip._ehr_magic = (magics, hook)  # kept for unload and for the side panel's comm
    # Inserted cells use polars as `pl`; make it available as in the assistant's runs.
    if "pl" not in ip.user_ns:
        import polars

        ip.user_ns["pl"] = polars
    return magics


def connect_at_load(magics: EhrMagics) -> None:
    """Connect the default database and say what it is (or how to connect one)."""
    try:
        magics._ready()
        print(magics.session.description)
    except EhrMagicError as exc:
        print(f"ehr-magic loaded; no database yet: {exc} Use %ehr connect PATH|demo|synthetic.")


def unload_ipython_extension(ip: Any) -> None:
    state = getattr(ip, "_ehr_magic", None)
    if state is None:
        return
    magics, hook = state
    try:
        ip.events.unregister("post_run_cell", hook)
    except ValueError:
        pass
    if magics.session.ehr is not None:
        magics.session.ehr.close()
    del ip._ehr_magic
