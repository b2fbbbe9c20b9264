"""The kernel side of the JupyterLab side panel "EHR assistant".

``%load_ext ehr_magic`` calls ``register_comm_target(ip, magics)``: the panel opens a
comm to the target ``ehr_magic.panel`` and speaks protocol v1 over it (requests with
ids, streamed progress events, one reply per request; see docs/panel.md). A kernel
without the target closes the comm at once, which the panel shows as "ehr_magic is
not loaded" with a button that runs ``%load_ext ehr_magic``.
"""

from __future__ import annotations

from typing import Any

from ehr_magic.panel.handler import PanelHandler
from ehr_magic.panel.protocol import TARGET, VERSION

__all__ = ["TARGET", "VERSION", "PanelHandler", "open_panel_comm", "register_comm_target",
           "unregister_comm_target"]


def register_comm_target(ip: Any, magics: Any) -> bool:
    """Register the panel's comm target on the shell's kernel; False without a kernel
    (a plain IPython terminal has no frontend to talk to)."""
    manager = _comm_manager(ip)
    if manager is None:
        return False

    def current() -> Any:  # after %reload_ext, open panels talk to the new EhrMagics
        state = getattr(ip, "_ehr_magic", None)
        return state[0] if state else magics

    manager.register_target(TARGET, lambda comm, msg: open_panel_comm(comm, msg, current))
    return True


def unregister_comm_target(ip: Any) -> None:
    manager = _comm_manager(ip)
    if manager is not None and TARGET in getattr(manager, "targets", {}):
        manager.unregister_target(TARGET, manager.targets[TARGET])


def open_panel_comm(comm: Any, msg: Any, magics: Any) -> PanelHandler:
    """A panel opened a comm: serve its messages and greet it with the protocol version.
    ``magics`` is the ``EhrMagics`` or a function returning the current one."""
    from ehr_magic.version import __version__
    from ehr_magic.panel import protocol

    handler = PanelHandler(magics, comm.send)

    def on_msg(message: Any) -> None:
        content = message.get("content") if isinstance(message, dict) else None
        handler.handle(content.get("data") if isinstance(content, dict) else None)

    comm.on_msg(on_msg)
    handler.send(protocol.hello(__version__))
    return handler


def _comm_manager(ip: Any) -> Any:
    kernel = getattr(ip, "kernel", None)
    return getattr(kernel, "comm_manager", None) if kernel is not None else None
