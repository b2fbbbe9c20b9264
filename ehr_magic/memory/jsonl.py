"""The JSONL exchange format of the memory store (documented in docs/memory.md).

One JSON object per line. ``question`` and ``code`` are required; every other field
is optional. Unknown fields are ignored, so newer files still import.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ehr_magic import files
from ehr_magic.errors import sentences
from ehr_magic.memory.entry import ORIGINS, MemoryEntry
from ehr_magic.memory.errors import JsonlFormatError, MemoryStoreError

EXPORTED_FIELDS: tuple[str, ...] = (
    "question", "code", "knowledge", "generated_code", "answer_preview", "schema",
    "dataset", "origin", "model", "created_at", "updated_at", "tags", "note",
)
_TEXT_FIELDS = ("knowledge", "answer_preview", "note")
_OPTIONAL_TEXT_FIELDS = ("generated_code", "schema", "dataset", "model", "created_at", "updated_at")


@dataclass
class JsonlRecord:
    """One parsed, validated line."""

    line: int
    question: str
    code: str
    knowledge: str = ""
    generated_code: str | None = None
    answer_preview: str = ""
    schema: str | None = None
    dataset: str | None = None
    origin: str | None = None
    model: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    tags: tuple[str, ...] = ()
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def entry_to_json(entry: MemoryEntry) -> str:
    data = entry.to_dict()
    return json.dumps({name: data[name] for name in EXPORTED_FIELDS}, ensure_ascii=False)


def write_jsonl(path: Path, entries: Iterable[MemoryEntry]) -> int:
    """Write ``entries`` to ``path`` atomically (a reader never sees half a file)."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise MemoryStoreError(f"Cannot export to {path}: the folder {folder} does not exist.")
    count = 0
    with files.atomic_write(path, private=True, newline="\n") as fh:  # entries may quote patients' values
        for entry in entries:
            fh.write(entry_to_json(entry) + "\n")
            count += 1
    return count


def read_jsonl(path: Path) -> list[JsonlRecord]:
    """Parse and validate every line; the first bad line raises ``JsonlFormatError``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MemoryStoreError(f"Cannot import {path}: no such file.") from None
    except UnicodeDecodeError as exc:
        raise JsonlFormatError(f"Cannot import {path}: it is not UTF-8 text, as it has an {exc.reason}.") from None
    except OSError as exc:
        raise MemoryStoreError(f"Cannot import {path}: {exc.strerror or exc}.") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            records.append(parse_line(line, number, path))
    return records


def parse_line(line: str, number: int, path: Path | str = "<jsonl>") -> JsonlRecord:
    where = f"{path}, line {number}"
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise JsonlFormatError(f"{where} is not valid JSON: {sentences(exc.msg)} Fix or remove that line.") from None
    if not isinstance(data, dict):
        raise JsonlFormatError(f"{where} is not a JSON object; each line must be one entry {{...}}.")
    for required in ("question", "code"):
        value = data.get(required)
        if not isinstance(value, str) or not value.strip():
            raise JsonlFormatError(f"{where} needs a non-empty string {required!r}.")
    fields: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise JsonlFormatError(f"{where}: {name!r} must be a string.")
        fields[name] = value or ""
    for name in _OPTIONAL_TEXT_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise JsonlFormatError(f"{where}: {name!r} must be a string or null.")
        fields[name] = value
    origin = data.get("origin")
    if origin is not None and origin not in ORIGINS:
        raise JsonlFormatError(f"{where}: origin {origin!r} is not one of {', '.join(ORIGINS)}.")
    tags = data.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise JsonlFormatError(f"{where}: 'tags' must be a list of strings.")
    known = set(EXPORTED_FIELDS)
    return JsonlRecord(
        line=number, question=data["question"], code=data["code"], origin=origin,
        tags=tuple(tags), extra={k: v for k, v in data.items() if k not in known}, **fields,
    )
