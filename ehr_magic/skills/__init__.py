"""Clinical skills: verified, reusable clinical concepts and calculators over the ``ehr`` object.

    import ehr_magic.skills as skills
    skills.catalog()                     # every card (built-in EHR skills, calculators, user skills)
    skills.search("acute kidney injury") # best cards for a text
    sofa = skills.get("sofa")            # the callable; skills.sofa is the same function
    sofa(ehr, stay_ids=[30000153], as_of="2150-01-01 12:00:00")
    skills.calc.egfr_ckd_epi_2021(1.1, 70, "F")

EHR skills take the connected ``ehr`` and one of ``stay_ids`` / ``hadm_ids`` /
``subject_ids`` (none = everyone), and ``as_of`` (no data charted later is used), and
return a polars DataFrame keyed on ids. Calculators (``calc.*``) take plain values.
For generated code, ``namespace(ehr)`` gives ``skills`` (see ``ehr_magic.skills.bound``)
and ``prompt_section(question, schema)`` the lines that tell the model about the relevant ones.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills.cards import Card, Vector
from ehr_magic.skills.errors import SkillError
from ehr_magic.skills.registry import builtin, names_concept, rank, unknown

__all__ = ["Card", "SkillError", "Vector", "card", "catalog", "get", "namespace", "prompt_section", "search",
           "supports", "unsupported"]

PathLike = str | os.PathLike[str] | None
RELEVANT = 70.0  # search score a skill needs to be listed in the model prompt


def _user_cards(path: PathLike) -> list[Card]:
    from ehr_magic.skills import user

    return user.list_user_skills(path=path)


def supports(card: Card, schema: str | None) -> bool:
    """Whether the skill of ``card`` runs on a database of ``schema`` (None: any database).
    Calculators take plain values and skills that declare no schema run anywhere."""
    return schema is None or card.kind == "calculator" or not card.schemas or schema in card.schemas


def unsupported(card: Card, schema: str | None) -> SkillError:
    """The error for calling a skill on a schema it does not support."""
    return SkillError(f"{card.call_name} works on {' and '.join(card.schemas)} databases, not on this {schema} one, "
                      "so write the computation with ehr.sql (skills.search('...') lists the skills that fit here).")


def catalog(*, kind: str | None = None, schema: str | None = None, path: PathLike = None) -> list[Card]:
    """Every skill card: built-in EHR skills, calculators (``calc.*``) and saved user skills.

    ``kind`` keeps one kind ('ehr', 'calculator', 'user'); ``schema`` keeps the skills that
    support it; ``path`` is the user skill store (default: the user data folder).
    """
    cards = [s.card for s in builtin().values()] + _user_cards(path)
    if kind is not None:
        cards = [c for c in cards if c.kind == kind]
    return [c for c in cards if supports(c, schema)]


def get(name: str, *, version: int | None = None, path: PathLike = None) -> Callable[..., Any]:
    """The callable of skill ``name`` (a user skill's latest version unless ``version``)."""
    name = name.strip()
    if name.startswith("skills."):
        name = name[len("skills."):]
    skills = builtin()
    if name in skills and version is None:
        return skills[name].fn
    from ehr_magic.skills import user

    found = user.load_skill(name, version=version, path=path, missing_ok=True)
    if found is not None:
        return found
    raise unknown(name, list(skills) + [c.name for c in _user_cards(path)])


def card(name: str, *, version: int | None = None, path: PathLike = None) -> Card:
    """The card of skill ``name``."""
    name = name.strip().removeprefix("skills.")
    skills = builtin()
    if name in skills and version is None:
        return skills[name].card
    from ehr_magic.skills import user

    found = user.get_user_card(name, version=version, path=path)
    if found is not None:
        return found
    raise unknown(name, list(skills) + [c.name for c in _user_cards(path)])


def search(text: str, k: int = 5, *, schema: str | None = None, kind: str | None = None,
           path: PathLike = None) -> list[Card]:
    """The ``k`` cards that best fit ``text`` (fuzzy over name, title, keywords and purpose)."""
    return [c for c, _ in rank(catalog(kind=kind, schema=schema, path=path), text, k)]


def prompt_section(question: str, schema: str | None, k: int = 3, *, path: PathLike = None) -> str:
    """A few lines for the model prompt listing only the ``k`` skills most relevant to ``question``
    (EHR and user skills that support ``schema``); empty when none is relevant."""
    cards = [c for c in catalog(schema=schema, path=path) if c.kind != "calculator"]
    chosen = [c for c, s in rank(cards, question, k) if s >= RELEVANT and names_concept(c, question)]
    if not chosen:
        return ""
    lines = ["Verified clinical skills (call them instead of re-deriving these concepts; each returns a polars "
             "DataFrame keyed on ids; ids=None means every patient; as_of='YYYY-MM-DD HH:MM:SS' uses no data "
             "charted later):"]
    for c in chosen:
        lines.append(f"- {c.one_line()}")
        if c.output:
            out = c.output.strip()
            lines.append(f"  Returns: {out if len(out) <= 240 else out[:237] + '...'}")
    lines.append('print(skills.card("name")) shows a skill\'s output columns and limits; skills.search("text") '
                 "finds others; skills.calc.<name>(...) are plain calculators (e.g. egfr_ckd_epi_2021).")
    return "\n".join(lines)


def __getattr__(name: str) -> Any:
    """``ehr_magic.skills.sofa`` is ``get("sofa")`` and ``ehr_magic.skills.calc`` the calculators,
    so code written for the ``skills`` object of generated code also runs with this module."""
    if name == "calc":
        from ehr_magic.skills.bound import calculators

        return calculators()
    here = os.path.dirname(__file__)
    if name.startswith("_") or os.path.exists(os.path.join(here, f"{name}.py")) or os.path.isdir(
            os.path.join(here, name)):
        raise AttributeError(name)  # a submodule not imported yet: the import system loads it
    try:
        return get(name)
    except SkillError as exc:
        raise AttributeError(str(exc)) from None


def namespace(ehr: Database, *, path: PathLike = None) -> dict[str, Any]:
    """Names to put in the generated code's namespace: ``{"skills": Skills(ehr)}``."""
    from ehr_magic.skills.bound import Skills

    return {"skills": Skills(ehr, user_path=path)}
