"""Accept / Regenerate / Reject buttons under an answer (ipywidgets)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.display import display

if TYPE_CHECKING:  # pragma: no cover - magics imports this module
    from ehr_magic.magic.magics import EhrMagics


def review_buttons(magics: EhrMagics, token: str) -> None:
    """Show the review buttons for the inserted cell ``token``; no-op without ipywidgets."""
    try:
        import ipywidgets as widgets
    except ImportError:  # pragma: no cover - ipywidgets is a dependency
        return
    session = magics.session
    cell = session.cells.pending.get(token)
    if cell is None:
        return
    accept = widgets.Button(description="Accept", button_style="success", icon="check",
                            tooltip="Store this code in memory (running the inserted cell does the same)")
    regenerate = widgets.Button(description="Regenerate", icon="refresh", tooltip="Ask the model again")
    reject = widgets.Button(description="Reject", button_style="warning", icon="times",
                            tooltip="Keep this code out of memory")
    out = widgets.Output()

    def on_accept(_: Any) -> None:
        entry_id = session.cells.accept(token, cell.question, cell.code)
        with out:
            out.clear_output()
            print(f"Stored in memory as #{entry_id}." if entry_id else "Not stored (rejected, or no memory).")

    def on_reject(_: Any) -> None:
        session.cells.reject(token)
        with out:
            out.clear_output()
            print("Rejected: this code will not be stored in memory.")

    def on_regenerate(_: Any) -> None:
        with out:
            out.clear_output()
            magics.ipython.run_cell_magic("ehr", "--regenerate --quiet", cell.question)

    accept.on_click(on_accept)
    reject.on_click(on_reject)
    regenerate.on_click(on_regenerate)
    display(widgets.VBox([widgets.HBox([accept, regenerate, reject]), out]))
