"""Knowledge to and from a database named by its path or URL: open it, then use the store.

The store (``ehr_magic.knowledge.store``) works on an open handle; these are the two steps
together, for front ends that hold only a path, and for a reload that keeps what an analyst
confirmed in the file it replaces.
"""

from __future__ import annotations

import os
from pathlib import Path

from ehr_magic import files
from ehr_magic.db.attach import Attachment, keep_imported
from ehr_magic.db.ehr import EHR, connect
from ehr_magic.engines import is_url
from ehr_magic.errors import EhrMagicError
from ehr_magic.knowledge import model as knowledge_files
from ehr_magic.knowledge.model import Knowledge
from ehr_magic.knowledge.store import Prepared, knowledge_of, prepare_import, store


def export_knowledge(target: str | os.PathLike[str], out: str | os.PathLike[str]) -> Knowledge:
    """Write the knowledge of ``target`` to the file ``out`` (replaced whole, never half written);
    a database without knowledge writes one drafted from its data now, as a template."""
    with connect(target) as ehr:
        knowledge = knowledge_or_template(ehr)
    files.write_text(Path(out).expanduser(), knowledge.to_yaml())
    return knowledge


def knowledge_or_template(ehr: EHR) -> Knowledge:
    """The knowledge ``ehr`` uses, else knowledge drafted from its data now (kept nowhere)."""
    if ehr.knowledge is not None:
        return knowledge_of(ehr)
    return ehr.draft_knowledge()


def import_knowledge(target: str | os.PathLike[str], source: str | os.PathLike[str]) -> Knowledge:
    """Check the knowledge file ``source`` against ``target`` and store it: in the database for
    one ehr-magic built, in the user's data folder for any other (never written to)."""
    with connect(target) as ehr:
        prepared = prepare_import(ehr, source)
        attachment = ehr.attachment
    store_prepared(target, prepared, attachment)
    return prepared.knowledge


def store_prepared(target: str | os.PathLike[str], prepared: Prepared, attachment: Attachment | None) -> None:
    """Store checked knowledge where ``target`` keeps it (see ``import_knowledge``)."""
    if attachment is not None:
        keep_imported(attachment, prepared.knowledge)
    else:
        store(target, prepared)


def stored_at(out: str | os.PathLike[str], schema: str) -> Knowledge | None:
    """The knowledge stored in the database file ``out`` for ``schema``, if there is one
    (what a re-load of the same folder keeps the confirmed statements of)."""
    if is_url(out) or not Path(out).expanduser().is_file():
        return None
    try:
        with connect(out) as ehr:
            if ehr.schema != schema or ehr.stored_knowledge is None:
                return None
            return knowledge_files.parse(ehr.stored_knowledge, source=str(out), expected_schema=schema)
    except EhrMagicError:
        return None  # an unreadable old file is replaced whole, as before
