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
    # Drawn from the first report on: work that reports nothing (connecting to a database that needs
    # no drafting) leaves stderr untouched, not even the blank line a stopped display writes.
    bar: Progress | None = None
    task = None

    def update(phase: str, done: int, total: int) -> None:
        nonlocal bar, task
        if bar is None:
            bar = Progress(*columns, console=stderr, transient=True)
            bar.start()
            task = bar.add_task(title, total=None)
        assert task is not None
        bar.update(task, description=f"{title}: {phase}", completed=done, total=total or None)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()
