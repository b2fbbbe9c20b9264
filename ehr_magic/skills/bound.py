"""What generated code sees: one ``skills`` object.

    skills.sofa(ehr, stay_ids=[...])         # any EHR skill (ehr first, like the library call)
    skills.calc.egfr_ckd_epi_2021(1.1, 70, "F")   # pure calculators
    skills.search("kidney injury")           # best matching cards
    print(skills.card("kdigo_aki"))          # a whole card: inputs, output columns, limits

The ``ehr`` argument may be left out (``skills.sofa(stay_ids=[...])``): the object
knows the connected EHR. It offers only the skills that support the EHR's schema (and
the schema-free calculators): on MIMIC-III or eICU, ``skills.sofa`` is an error that
says so, and ``names()``, ``dir()`` and ``search`` leave it out.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from ehr_magic.knowledge.handle import Database
from ehr_magic.skills.cards import Card


class _Calculators:
    """``skills.calc.<name>``: the pure calculators."""

    def __init__(self, functions: dict[str, Callable[..., Any]]) -> None:
        self._functions = functions

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self._functions[name]
        except KeyError:
            raise AttributeError(f"No calculator {name!r}; available: {', '.join(sorted(self._functions))}.") from None

    def __dir__(self) -> list[str]:
        return sorted(self._functions)

    def __repr__(self) -> str:
        return f"<calculators: {', '.join(sorted(self._functions))}>"


def calculators() -> _Calculators:
    from ehr_magic.skills.registry import builtin

    return _Calculators({n.split(".", 1)[1]: s.fn for n, s in builtin().items() if n.startswith("calc.")})


class Skills:
    """The clinical skills, bound to one EHR."""

    def __init__(self, ehr: Database, *, user_path: Any = None) -> None:
        self._ehr = ehr
        self._schema: str | None = getattr(ehr, "schema", None)
        self._user_path = user_path
        self.calc = calculators()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        from ehr_magic.skills import card, get, supports, unsupported
        from ehr_magic.skills.errors import SkillError

        try:
            fn = get(name, path=self._user_path)
            found = card(name, path=self._user_path)
        except SkillError as exc:
            raise AttributeError(str(exc)) from None
        if not supports(found, self._schema):
            raise AttributeError(str(unsupported(found, self._schema)))
        return self._bind(fn)

    def _bind(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        ehr = self._ehr

        @wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if not args or not (hasattr(args[0], "sql") and hasattr(args[0], "tables")):
                args = (ehr, *args)
            return fn(*args, **kwargs)

        return call

    def search(self, text: str, k: int = 5) -> list[Card]:
        from ehr_magic.skills import search

        return search(text, k, schema=self._schema, path=self._user_path)

    def card(self, name: str) -> Card:
        from ehr_magic.skills import card

        return card(name, path=self._user_path)

    def names(self) -> list[str]:
        from ehr_magic.skills import catalog

        return [c.name for c in catalog(schema=self._schema, path=self._user_path) if c.kind != "calculator"]

    def __dir__(self) -> list[str]:
        return sorted(set(self.names()) | {"calc", "search", "card", "names"})

    def __repr__(self) -> str:
        return (f"<skills: {', '.join(self.names())}; skills.calc.<calculator>; skills.search(text); "
                "print(skills.card(name))>")
