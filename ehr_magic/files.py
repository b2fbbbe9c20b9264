"""Files written whole or not at all.

Everything ehr-magic writes for a user (the config, knowledge files, memory exports, a
downloaded or built database, a calibration) goes through a temporary file beside its
target that is renamed over the target in one step (``os.replace``) only when writing
succeeded, and removed otherwise. A reader, or a crash half-way, never sees half a file.

- ``replacing(path)``: the temporary path, for writers that need a path (a database file);
- ``atomic_write(path)``: that temporary file opened for writing, synced to disk before the rename;
- ``write_text(path, text)``: a whole string.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ehr_magic.errors import EhrMagicError

TEMPORARY_SUFFIX = ".tmp"


def temporary_path(path: Path) -> Path:
    """A fresh hidden name beside ``path`` (``.NAME.PID.RANDOM.tmp``): no two writers share one."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMPORARY_SUFFIX}")


@contextlib.contextmanager
def replacing(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; renamed over ``path`` when the block ends
    without an error, removed when it raises. A missing folder is the user's to create:
    ``EhrMagicError`` says so."""
    target = Path(path)
    if not target.parent.is_dir():
        raise EhrMagicError(f"Folder {target.parent} does not exist; create it or choose another file.")
    temporary = temporary_path(target)
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str], *, binary: bool = False, private: bool = False,
                 newline: str | None = None) -> Iterator[IO[Any]]:
    """``path`` opened for writing (text in UTF-8, or ``binary``), replaced whole when the
    block ends. ``private``: readable by its owner only (0600) from the first byte, for a
    file that may hold a secret."""
    with replacing(path) as temporary:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
        descriptor = os.open(temporary, flags, 0o600 if private else 0o666)  # 0o666 less the umask, as open() does
        handle = (os.fdopen(descriptor, "wb") if binary
                  else os.fdopen(descriptor, "w", encoding="utf-8", newline=newline))
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


def write_text(path: str | os.PathLike[str], text: str, *, private: bool = False) -> None:
    """``text`` into ``path`` (UTF-8), replaced whole: never half written."""
    with atomic_write(path, private=private) as handle:
        handle.write(text)
