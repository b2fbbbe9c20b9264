"""Abbreviations of hospital reporting-warehouse names: ``HSP_ENC`` is a hospital encounter,
``FLWSHT_MEAS`` a flowsheet measurement, ``ADM_DTTM`` an admission date/time.

The vocabulary is package data, ``vocabulary/warehouse_abbreviations.tsv`` (provenance,
license and version in its header): one abbreviation a line with its kind (a table word, a
column word or a type suffix) and its expansions, best first. The drafter reads table and
column names through it, and table choice meets a question's words with the names' meanings.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass

from ehr_magic.errors import EhrMagicError

_FILE = "warehouse_abbreviations.tsv"
_SEPARATOR = " | "
_KINDS = frozenset({"table-word", "column-word", "suffix"})


@dataclass(frozen=True)
class WarehouseAbbreviations:
    """Lower-case abbreviations and their expansions (lower case, best first)."""

    version: str
    expansions: dict[str, tuple[str, ...]]
    kinds: dict[str, str]

    def __len__(self) -> int:
        return len(self.expansions)

    @functools.cached_property
    def spelled(self) -> frozenset[str]:
        """Every word of every expansion: the spelled-out words of warehouse names (component, dispense)."""
        return frozenset(w for meanings in self.expansions.values() for m in meanings for w in m.split())

    def expand(self, word: str) -> tuple[str, ...]:
        """The expansions of ``word`` (any case), best first; () for a word that is not an abbreviation."""
        return self.expansions.get(word.lower(), ())

    def words(self, word: str) -> tuple[str, ...]:
        """The words of the best expansion: ``dttm`` -> ``('date', 'time')``; () when there is none."""
        found = self.expand(word)
        return tuple(found[0].split()) if found else ()


def parse(text: str, *, source: str) -> WarehouseAbbreviations:
    """The vocabulary in the packaged file's format; ``EhrMagicError`` names a bad line."""
    version = provenance = ""
    expansions: dict[str, tuple[str, ...]] = {}
    kinds: dict[str, str] = {}
    header_seen = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#"):
            label, _, value = line[1:].strip().partition(":")
            if label.strip().lower() == "version":
                version = value.strip()
            elif label.strip().lower() == "provenance":
                provenance = value.strip()
            continue
        if not line.strip():
            continue
        if not header_seen:  # the column names
            header_seen = True
            continue
        fields = line.split("\t")
        if len(fields) != 3 or not fields[0].strip() or fields[1] not in _KINDS or not fields[2].strip():
            raise EhrMagicError(f"{source}, line {number}: expected abbreviation, kind ({', '.join(sorted(_KINDS))}) "
                                "and expansions separated by tabs.")
        word = fields[0].strip().lower()
        if word in expansions:
            raise EhrMagicError(f"{source}, line {number}: {word!r} is listed twice; "
                                "merge its expansions into one line.")
        expansions[word] = tuple(e.strip().lower() for e in fields[2].split(_SEPARATOR) if e.strip())
        kinds[word] = fields[1]
    if not version or not provenance:
        raise EhrMagicError(f"{source} needs '# version:' and '# Provenance:' lines in its header.")
    return WarehouseAbbreviations(version, expansions, kinds)


@functools.cache
def warehouse_abbreviations() -> WarehouseAbbreviations:
    """The packaged vocabulary, read once per process."""
    resource = importlib.resources.files("ehr_magic.linking").joinpath("vocabulary").joinpath(_FILE)
    return parse(resource.read_text(encoding="utf-8"), source=f"ehr_magic/linking/vocabulary/{_FILE}")
