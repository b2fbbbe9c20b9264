"""Progress bars for long CLI work, drawn with rich on stderr."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ehr_magic.sources.loading import Progress as ProgressCallback

stderr = Console(stderr=True)


@contextlib.contextmanager
def progress_bar(title: str, *, quiet: bool = False) -> Iterator[ProgressCallback | None]:
    """Yield a ``(phase, done, total)`` callback that drives one bar (None when quiet)."""
    if quiet:
        yield None
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=stderr, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def update(phase: str, done: int, total: int) -> None:
            bar.update(task, description=f"{title}: {phase}", completed=done, total=total or None)

        yield update
